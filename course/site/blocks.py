"""The measured blocks of the site's pages: which command prints each, rewrite one, check all.

A page of ``course/site/`` quotes a command's output between two markers::

    <!-- BEGIN name -->
    ```
    ...what the command printed...
    ```
    <!-- END name -->

``BLOCKS`` names every block, the page it lives on and the command(s) that print it (each shown
in the page above its block). ``python -m course.site.blocks update NAME`` runs the commands and
writes their output between the markers; ``check`` (run by ``tests/test_site_blocks.py``) checks
that every block is where the table says, once, under its command, that no other page (the
README included) carries markers, and that the knob map still is what ``format_knob_map``
prints. The notebook checks and the test timings (``nbcheck``, ``tests``) gather several runs
chosen by what changed, with their ``$ command`` lines: ``update`` prints their commands instead.

    python -m course.site.blocks list
    python -m course.site.blocks update sweep      # runs `grpo-edu sweep --preset cpu` (minutes)
    python -m course.site.blocks check
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SITE = Path(__file__).resolve().parent
ROOT = SITE.parents[1]
KNOB_MAP_COMMAND = 'python -c "from grpo_edu.hf import format_knob_map; print(format_knob_map())"'


@dataclass(frozen=True)
class Block:
    page: str  # a file of course/site/
    commands: tuple[str, ...]  # what prints it, as shown in the page above the block
    start: str | None = None  # keep the output from the first line matching this regex
    by_hand: bool = False  # gathered from several runs: `update` prints the commands instead


M, T = "measurements.md", "testing.md"
REGIMES = tuple(
    f"grpo-edu regimes --preset cpu --only {only}"
    for only in ("offset,reward_model,long_run,free_length", "difficulty", "thinking")
)
BLOCKS = {
    "reference": Block(M, ("GRPO_EDU_CACHE=$(mktemp -d) grpo-edu reference --preset cpu",)),
    "compare3": Block(M, ("grpo-edu compare --preset cpu --seeds 3 --steps 150",)),
    "compare1": Block(M, ("grpo-edu compare --preset cpu",)),
    "regimes": Block(M, REGIMES),
    "rlchanges": Block(M, ("grpo-edu regimes --preset cpu --only spurious_rewards,negative_samples --seeds 3",)),
    "razor": Block(M, ("grpo-edu regimes --preset cpu --only razor --seeds 3",)),
    "ablate": Block(M, ("grpo-edu ablate --preset cpu --seeds 3",)),
    "ablateproto": Block(M, ("grpo-edu ablate --preset cpu --seeds 3 --rows 'five slow settings'",)),
    "ablateshare": Block(M, ("grpo-edu ablate --preset cpu --seeds 6 --rows 'defaults,prompts not shared'",)),
    "gapablation": Block(M, ("python -m grpo_edu.studies.gap_ablation --seeds 3",), start=r"^held-out accuracy"),
    "creditpays": Block(M, ("python -m grpo_edu.studies.credit_pays --seeds 3",), start=r"^what a critic reads"),
    "refseeds": Block(M, ("python -m grpo_edu.studies.reference_seeds --shifts 0-7",), start=r"^spread world"),
    "sweep": Block(M, ("grpo-edu sweep --preset cpu",)),
    "variance": Block(M, ("grpo-edu variance --preset cpu",)),
    "bench": Block(M, ("grpo-edu bench --preset cpu --memory-sweep",)),
    "trlbench": Block(M, ("grpo-edu bench --trl",), start=r"^seconds per GRPO cycle"),
    "profile": Block(M, ("python -m grpo_edu.studies.speedrun --profile",)),
    "pipeline": Block(M, ("python -m grpo_edu.studies.pipeline_race",), start=r"^GRPO \(default config\)"),
    "speedrun": Block("speedrun.md", ("python -m grpo_edu.studies.speedrun --leaderboard",)),
    "gpucurve": Block(  # a CPU run of the gpu sizes takes hours: stopped early, then summarised
        M,
        (
            "python -m grpo_edu.studies.gpu_curve --device cpu --steps 100 --out runs/gpu-curve-cpu",
            "python -m grpo_edu.studies.gpu_curve --summarize --out runs/gpu-curve-cpu",
        ),
        by_hand=True,
    ),
    "gpucurveh200": Block(  # the same run on an H200 (a lent machine): its files are kept in tests/data
        M,
        (
            "python -m grpo_edu.studies.gpu_curve --steps 100 --out runs/gpu-curve",
            "python -m grpo_edu.studies.gpu_curve --summarize --out tests/data/gpu_curve_h200",
        ),
        by_hand=True,
    ),
    "comparegpu": Block(  # the four rungs on the gpu preset, on the same H200 (its output kept in tests/data)
        M, ("grpo-edu compare --preset gpu --steps 100 --out runs/compare-gpu",), by_hand=True
    ),
    "knobmap": Block("knobs.md", (KNOB_MAP_COMMAND,)),
    "nbcheck": Block(T, ("grpo-edu check-notebooks",), by_hand=True),
    "tests": Block(T, ('pip install -e ".[dev]" && pytest --nbval -n 2 --dist loadfile',), by_hand=True),
}
_MARKER = re.compile(r"^<!-- (?:BEGIN|END) (\w+) -->$", re.M)


def _span(text: str, name: str) -> tuple[int, int]:
    """(start, end) of the text between a block's markers; ValueError unless there is exactly one pair."""
    begin, end = f"<!-- BEGIN {name} -->\n", f"\n<!-- END {name} -->"
    if text.count(begin) != 1 or text.count(end) != 1:
        raise ValueError(f"block {name}: expected one BEGIN and one END marker")
    a, b = text.index(begin) + len(begin), text.index(end)
    if b < a:
        raise ValueError(f"block {name}: END before BEGIN")
    return a, b


def read(name: str) -> str:
    """The output quoted in block ``name`` (without the code fence)."""
    text = (SITE / BLOCKS[name].page).read_text()
    a, b = _span(text, name)
    body = text[a:b]
    if not (body.startswith("```\n") and body.endswith("\n```")):
        raise ValueError(f"block {name}: its body must be one ``` code block")
    return body[4:-4]


def write(name: str, output: str) -> None:
    """Replace block ``name``'s output by ``output``."""
    path = SITE / BLOCKS[name].page
    text = path.read_text()
    a, b = _span(text, name)
    path.write_text(text[:a] + "```\n" + output.rstrip("\n") + "\n```" + text[b:])


def run(name: str) -> str:
    """Run block ``name``'s commands in the repository root and return what the block should hold."""
    block = BLOCKS[name]
    if block.by_hand:
        raise ValueError(f"block {name} gathers several runs by hand: run {' / '.join(block.commands)} and paste")
    outs = []
    for cmd in block.commands:
        r = subprocess.run(["bash", "-c", cmd], cwd=ROOT, capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"{cmd} failed ({r.returncode}):\n{r.stderr[-2000:]}")
        outs.append(r.stdout.rstrip("\n"))
    lines = "\n".join(outs).splitlines()
    if block.start:
        first = next((i for i, line in enumerate(lines) if re.search(block.start, line)), None)
        if first is None:
            raise RuntimeError(f"block {name}: no line of the output matches {block.start!r}")
        lines = lines[first:]
    wrote = [i for i, line in enumerate(lines) if line.startswith("wrote the figures to")]
    lines = [line for i, line in enumerate(lines) if i not in wrote[:-1]]  # several runs: say it once
    text = "\n".join(lines)
    return re.sub(r"saved to \S*/(reference-\w+\.pt)", r"saved to $GRPO_EDU_CACHE/\1", text)


def _squash(s: str) -> str:
    return " ".join(s.split())


def check() -> list[str]:
    """Everything wrong with the blocks, as sentences (empty: all is well)."""
    problems = []
    pages = {p.name: p.read_text() for p in sorted(SITE.glob("*.md"))}
    for name, block in BLOCKS.items():
        text = pages.get(block.page, "")
        try:
            read(name)
        except (ValueError, FileNotFoundError) as e:
            problems.append(f"{block.page}: {e}")
            continue
        above = text[: text.index(f"<!-- BEGIN {name} -->")]
        above = above[above.rfind("\n#") :]  # the block's own section
        for cmd in block.commands:
            if _squash(cmd) not in _squash(above):
                problems.append(f"{block.page}: block {name} is not under its command `{cmd}`")
    for page, text in {**pages, "README.md": (ROOT / "README.md").read_text()}.items():
        for name in sorted(set(_MARKER.findall(text))):
            if name not in BLOCKS or BLOCKS[name].page != page:
                problems.append(f"{page}: marker {name} belongs to no block of this page")
    try:
        from grpo_edu.hf import format_knob_map

        if read("knobmap") != format_knob_map():
            problems.append("knobs.md: block knobmap is not what format_knob_map() prints: run update knobmap")
    except ValueError:
        pass  # reported above
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course.site.blocks", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="every block, its page and its commands")
    u = sub.add_parser("update", help="run a block's commands and write their output into its page")
    u.add_argument("names", nargs="+", choices=sorted(BLOCKS), metavar="NAME")
    sub.add_parser("check", help="check every block (what tests/test_site_blocks.py runs)")
    args = parser.parse_args(argv)
    if args.command == "list":
        for name, b in BLOCKS.items():
            print(f"{name:12s} {b.page:16s} {' ; '.join(b.commands)}{'  (by hand)' if b.by_hand else ''}")
        return 0
    if args.command == "update":
        for name in args.names:
            if BLOCKS[name].by_hand:
                print(f"{name}: gathered by hand from runs of {' / '.join(BLOCKS[name].commands)}", file=sys.stderr)
                return 2
            write(name, run(name))
            print(f"updated {name} in course/site/{BLOCKS[name].page}")
        return 0
    problems = check()
    print("\n".join(problems) or f"{len(BLOCKS)} blocks checked")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
