"""The questions page (course/site/questions.md): every answer points at a number that is there.

The page answers the questions most asked in public GRPO trainers' issue trackers, each with
pointers of the form

    - **Measured:** `notebooks/04_grpo.ipynb`, section *4b. One step, token by token*: `<quote>`
    - **Measured:** [the measurements page](measurements.md), block *regimes*: `<quote>`

This test opens the notebook, finds the markdown heading (its leading "4b." may be renumbered),
and asserts that each quote occurs in the output of a code cell after that heading and before
the next heading of the same or a higher level (so it survives cells moving, not a re-run that
prints another number); for the measurements page, between its ``<!-- BEGIN name -->`` and
``<!-- END name -->`` markers. Whitespace is compared collapsed (columns, wrapped lines). It
also asserts that every question of issue 26's list has its section, that every number in a
section's prose (a decimal, or two digits or more) is one its quotes print (or a `GRPOConfig` default), that the code names
and config values the page writes exist, and that no notebook is linked that is not there.
Reads files only: no notebook is executed.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "course" / "site" / "questions.md"
MEASUREMENTS = ROOT / "course" / "site" / "measurements.md"

# issue 26's list: the label of each question's section -> the question
QUESTIONS = {
    "q-loss-zero": "the loss is 0 (or rises), yet the model learns",
    "q-advantages-sum-zero": "the advantages sum to zero, so where does the gradient come from",
    "q-ratio-one": "the ratio is always 1 and clip_ratio 0",
    "q-reward-std-zero": "reward_std is 0",
    "q-std-normaliser": "why divide by the std, and which normaliser (group / batch / none)",
    "q-kl-negative": "the KL is negative",
    "q-entropy": "entropy collapses, or explodes with clip-higher",
    "q-memory": "memory grows over training",
    "q-reward-hacking": "the reward gets hacked",
    "q-sampler-mismatch": "sampler and trainer log-probs disagree",
    "q-pass-at-k": "pass@k vs pass@1",
    "q-silent-bugs": "which silent bug: reward flat, clip_ratio 0, KL negative or 0, advantages huge (issue 35)",
    "q-stale-sampler": "the sampler is a few updates behind (asynchronous RL): what it costs, which correction (issue 49)",
}

_LABEL = re.compile(r"^\(([\w-]+)\)=\s*$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$")
_MEASURED = re.compile(r"^\s*-\s+\*\*Measured:\*\*\s+(.*)$")
_NB_SOURCE = re.compile(r"^`(?:notebooks/)?(\d\d_[\w-]+)\.ipynb`, \[?section \*(.+?)\*(?:\]\([^)\s]*\))?:\s*(.*)$")
_BLOCK_SOURCE = re.compile(r"^\[[^\]]*\]\(measurements\.md\), block \*([\w-]+)\*:\s*(.*)$")
_NUMBERING = re.compile(r"^\d+[a-z]?\.\s+")
_NUMBER = re.compile(r"(?<![\w.#/])\d+(?:[.,]\d+)*(?:e[-+]\d+)?(?!\w)")  # 0.5363, 103,040, 3.53e-03; not #2703, k3


def _ws(s: str) -> str:
    return " ".join(s.split())


@dataclasses.dataclass
class Pointer:
    label: str
    line: int
    notebook: str | None  # the notebook's stem, "04_grpo"; None for a measurements block
    where: str  # the section heading, or the block name
    quotes: list[str]

    def __str__(self) -> str:
        src = (
            f"notebook {self.notebook}, section '{self.where}'"
            if self.notebook
            else f"measurements block '{self.where}'"
        )
        return f"{QUESTIONS.get(self.label, self.label)!r} (questions.md:{self.line}): {src}"


@dataclasses.dataclass
class Section:
    label: str
    title: str
    prose: list[str]  # the lines that are not Measured pointers
    pointers: list[Pointer]


def parse_page(text: str) -> dict[str, Section]:
    sections: dict[str, Section] = {}
    label, current = None, None
    for n, line in enumerate(text.splitlines(), 1):
        m = _LABEL.match(line)
        if m:
            label = m.group(1)
            continue
        h = _HEADING.match(line)
        if h and len(h.group(1)) <= 2:
            current = None
            if label is not None and len(h.group(1)) == 2:
                current = sections[label] = Section(label, h.group(2), [], [])
            label = None
            continue
        if current is None:
            continue
        m = _MEASURED.match(line)
        if not m:
            current.prose.append(line)
            continue
        rest = m.group(1)
        nb, block = _NB_SOURCE.match(rest), _BLOCK_SOURCE.match(rest)
        if nb:
            notebook, where, tail = nb.groups()
        elif block:
            notebook, (where, tail) = None, block.groups()
        else:
            raise AssertionError(f"questions.md:{n}: a Measured pointer in neither form: {line!r}")
        quotes = re.findall(r"`([^`]+)`", tail)
        assert quotes, f"questions.md:{n}: a Measured pointer without a quoted output: {line!r}"
        current.pointers.append(Pointer(current.label, n, notebook, where, quotes))
    return sections


SECTIONS = parse_page(PAGE.read_text(encoding="utf-8")) if PAGE.is_file() else {}
POINTERS = [p for s in SECTIONS.values() for p in s.pointers]


# ------------------------------------------------------------------ reading the sources


def notebook_file(stem: str) -> Path | None:
    path = ROOT / "notebooks" / f"{stem}.ipynb"  # by its whole name: notebook 04 has three parts, 04_grpo*
    return path if path.is_file() else None


def _outputs(cell: dict) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if "text" in out:
            parts.append("".join(out["text"]))
        for mime in ("text/plain", "text/markdown"):
            if mime in out.get("data", {}):
                parts.append("".join(out["data"][mime]))
    return "\n".join(parts)


def _headings(cell: dict):
    in_fence = False
    for line in "".join(cell["source"]).splitlines():
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        m = None if in_fence else _HEADING.match(line)
        if m:
            yield len(m.group(1)), m.group(2)


def _same_heading(a: str, b: str) -> bool:
    return _ws(_NUMBERING.sub("", a)) == _ws(_NUMBERING.sub("", b))


def section_outputs(path: Path, heading: str) -> str | None:
    """The code cells' outputs from ``heading`` to the next heading of its level or higher."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    level, parts = None, []
    for cell in cells:
        if cell["cell_type"] == "markdown":
            for lev, text in _headings(cell):
                if level is None and _same_heading(text, heading):
                    level = lev
                elif level is not None and lev <= level:
                    return "\n".join(parts)
        elif cell["cell_type"] == "code" and level is not None:
            parts.append(_outputs(cell))
    return None if level is None else "\n".join(parts)


def block_text(name: str) -> str | None:
    if not MEASUREMENTS.is_file():
        return None
    m = re.search(
        rf"<!-- BEGIN {re.escape(name)} -->(.*?)<!-- END {re.escape(name)} -->", MEASUREMENTS.read_text(), re.S
    )
    return m.group(1) if m else None


def _moved_to(heading: str, stem: str) -> str:
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        if path.stem != stem and section_outputs(path, heading) is not None:
            return f" (a section of that name is in {path.name}: the notebook moved?)"
    return ""


# ------------------------------------------------------------------ the tests


def test_the_page_exists_and_has_every_question():
    assert PAGE.is_file(), f"{PAGE} is missing"
    missing = [f"{label}: {q}" for label, q in QUESTIONS.items() if label not in SECTIONS]
    assert not missing, "questions without a section (a '(label)=' line above a '## ' heading):\n" + "\n".join(missing)
    unknown = set(SECTIONS) - set(QUESTIONS)
    assert not unknown, f"sections not in the test's list of questions (add them there): {sorted(unknown)}"


@pytest.mark.parametrize("label", list(QUESTIONS))
def test_every_answer_has_a_measured_pointer(label):
    if label not in SECTIONS:
        pytest.fail(f"no section for the question {QUESTIONS[label]!r}")
    assert SECTIONS[label].pointers, f"the question {QUESTIONS[label]!r} has no '- **Measured:**' pointer"


@pytest.mark.parametrize("pointer", POINTERS, ids=[f"{p.label}-line{p.line}" for p in POINTERS])
def test_every_quote_is_printed_where_the_page_says(pointer):
    if pointer.notebook is None:
        text = block_text(pointer.where)
        assert text is not None, f"{pointer}: {MEASUREMENTS.name} has no block '{pointer.where}'"
    else:
        path = notebook_file(pointer.notebook)
        assert path is not None, f"{pointer}: there is no notebooks/{pointer.notebook}.ipynb"
        text = section_outputs(path, pointer.where)
        assert text is not None, f"{pointer}: {path.name} has no heading '{pointer.where}'" + _moved_to(
            pointer.where, pointer.notebook
        )
    haystack = _ws(text)
    missing = [q for q in pointer.quotes if _ws(q) not in haystack]
    assert not missing, f"{pointer}: not in its outputs: " + "; ".join(repr(q) for q in missing)


def _config_defaults() -> set[str]:
    from grpo_edu.algorithms import GRPOConfig

    return {repr(v) for v in dataclasses.asdict(GRPOConfig()).values() if isinstance(v, float)}


def _numbers_in_prose(text: str) -> list[str]:
    """Decimals, and integers of two digits or more, outside links and notebook names."""
    text = re.sub(r"\[[^\]]*\]\([^)]*\)", "", text)  # [owner/repo#123](https://...)
    text = re.sub(r"(?i)notebooks?(\s+|/)\d\d\w*(\.ipynb)?", "", text)  # notebook 05, notebooks/04_grpo.ipynb
    return [n for n in _NUMBER.findall(text) if "." in n or len(n) >= 2]


@pytest.mark.parametrize("label", list(SECTIONS))
def test_every_number_in_the_prose_is_a_printed_one(label):
    """A number in an answer's words is one its quotes print, or a GRPOConfig default: none typed in."""
    section = SECTIONS[label]
    printed = {n for p in section.pointers for q in p.quotes for n in _NUMBER.findall(q)}
    allowed = printed | _config_defaults()
    typed = [n for n in _numbers_in_prose("\n".join(section.prose)) if n not in allowed]
    assert not typed, f"{QUESTIONS[label]!r}: numbers in the prose that no quote of the section prints: {typed}"


def _literals(text: str) -> list[str]:
    return re.findall(r"(?<!`)`([^`\n]+)`(?!`)", text)


def test_code_names_notebooks_and_config_values_exist():
    for package in ("docutils", "sphinx"):  # site_ext, the site's link rule, is a Sphinx extension
        pytest.importorskip(package, reason='needs the [docs] extra: pip install -e ".[docs]"')
    from grpo_edu.algorithms import GRPOConfig

    if str(ROOT / "course" / "site") not in sys.path:
        sys.path.insert(0, str(ROOT / "course" / "site"))
    site_ext = importlib.import_module("site_ext")  # the site's own rule for what becomes a checked link

    text = PAGE.read_text(encoding="utf-8")  # the names anywhere; the config values in the prose only
    prose = "\n".join(line for s in SECTIONS.values() for line in s.prose)
    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    problems = []
    for lit in _literals(text):
        nb = site_ext._NOTEBOOK.match(lit)
        if nb and not (ROOT / "notebooks" / f"{nb.group(1)}.ipynb").is_file():
            problems.append(f"`{lit}`: no such notebook")
        name = site_ext._PYNAME.match(lit)
        if name:
            module = "grpo_edu.functional" if name.group(1) in ("Fn", "F") else name.group(1)
            if not site_ext.importable(module + name.group(2)):
                problems.append(f"`{lit}`: no such object")
    for lit in _literals(prose):
        kv = re.fullmatch(r"([a-z][a-z_]*)=(\S+)", lit)
        if kv and kv.group(1) in fields:
            try:
                GRPOConfig(**{kv.group(1): ast.literal_eval(kv.group(2))})
            except (ValueError, SyntaxError) as err:
                problems.append(f"`{lit}`: GRPOConfig refuses it ({err})")
        elif kv:
            problems.append(f"`{lit}`: {kv.group(1)} is not a GRPOConfig field")
    assert not problems, "\n".join(problems)
