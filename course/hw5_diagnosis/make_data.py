"""The held-out runs homework 5's grader diagnoses: ``data/runs.json``.

    python -m course.hw5_diagnosis.make_data          # about 5 minutes on one thread

Each run is ``grpo_edu.demos.silent_bugs.run_bugged`` (GRPO, its default budget: the one
``practice_runs`` and the notebook use) for one class ("healthy" or a bug of `GRADED`), from a
reference and an RL seed that neither the notebook nor the practice set shows: the course's SFT
reference of the notebook's world ("spread") with two new RL seeds, and a second SFT reference
of that world (SFT seed 1) with two more. Every class gets the same runs (a balanced set).

What is stored is what ``diagnose`` may read, the metrics: each History's ``steps`` and ``evals``
without the machine-dependent ``seconds``, floats to 7 significant digits, only the metric keys
every run logs; its name and config (which record the bug) are dropped. The label of each run is
stored beside it, for the grader. The meta records the source (a hash of silent_bugs.py), each bug's
signature in words and as rules (`grpo_edu.demos.silent_bugs.SIGNATURES`, which
tests/test_hw5_data.py holds on every graded run), and the lines ``--evidence`` prints (the handout
quotes them). The file is written once and committed: grading reads it, so it takes seconds and gives
the same score on every machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "runs.json"

# (reference id, its description, world, SFT seed, RL seeds): the notebook's world ("spread": prompts that
# differ in difficulty, as in LLM training), never the notebook's or practice_runs' RL seeds, and a second
# SFT reference besides the course's.
REFERENCES = (
    ("spread-sft0", "the spread world's SFT reference (SFT seed 0, the notebook's)", "spread", 0, (1001, 1002)),
    ("spread-sft1", "another SFT reference of the spread world (SFT seed 1)", "spread", 1, (1003, 1004)),
)
# Bugs left out of the graded set, and why (measured on practice runs: README.md, Part A).
EXCLUDED: dict[str, str] = {
    "loss_over_padding": "its only move is the level of the logged entropy (and grad_norm), which differs "
    "as much between references as the bug moves it: no single run shows it without its healthy twin",
}
SIGNIFICANT = 7  # digits kept of each float (an exact 0 stays 0; 1e-14 stays 1e-14)
DROPPED = ("seconds",)  # wall time: machine-dependent, not a training metric


def graded_classes() -> tuple[str, ...]:
    from grpo_edu.demos.silent_bugs import BUG_NAMES

    return tuple(n for n in BUG_NAMES if n not in EXCLUDED)


def _round(v):
    if isinstance(v, float):
        return float(f"{v:.{SIGNIFICANT}g}")
    return v


def metrics_only(history, keys) -> dict:
    """``history`` as the grader stores it: its metrics (``keys`` of each step), no name, no config."""
    steps = [{k: _round(s[k]) for k in keys} for s in history.steps]
    evals = [{k: _round(v) for k, v in e.items() if k not in DROPPED} for e in history.evals]
    return {"name": "", "config": {}, "steps": steps, "evals": evals}


def reference_preset(world: str, sft_seed: int):
    """The cpu preset with the RL base seed 0 and SFT seed ``sft_seed`` in ``world``, whatever
    $GRPO_EDU_SEED_SHIFT says (the stored runs do not move with it)."""
    from grpo_edu import get_preset
    from grpo_edu.warmstart.presets import with_world

    preset = get_preset("cpu")
    preset = replace(preset, seed=0, sft=replace(preset.sft, seed=sft_seed))
    return with_world(preset, world) if world != "default" else preset


def make(progress: bool = True) -> dict:
    """Train every (class, reference, RL seed) run; returns the data ``load_runs`` reads."""
    import torch

    from grpo_edu import make_task, reference_policy
    from grpo_edu.demos import silent_bugs
    from grpo_edu.demos.silent_bugs import BUGS, SIGNATURES, run_bugged
    from grpo_edu.train import progress_bar

    torch.set_num_threads(1)
    classes = graded_classes()
    jobs = [(ref, seed) for ref in REFERENCES for seed in ref[4]]
    bar = progress_bar(total=len(jobs) * len(classes), desc="hw5 runs", disable=not progress)
    raw = []
    for (ref_id, description, world, sft_seed, _), seed in jobs:
        preset = reference_preset(world, sft_seed)
        task = make_task(preset)
        reference = reference_policy(preset, task=task, progress=False)
        for label in classes:
            h = run_bugged(label, reference, preset, task=task, seed=seed)
            raw.append((label, ref_id, description, seed, h))
            bar.update(1)
    bar.close()
    keys = set.intersection(*(set(h.steps[0]) for *_, h in raw)) - set(DROPPED)
    keys = [k for k in raw[0][4].steps[0] if k in keys]  # the library's order
    meta = {
        "made_by": "python -m course.hw5_diagnosis.make_data",
        "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "silent_bugs_sha256": hashlib.sha256(Path(silent_bugs.__file__).read_bytes()).hexdigest()[:16],
        "names": ["healthy", *BUGS],
        "classes": list(classes),
        "excluded": EXCLUDED,
        "references": {r[0]: r[1] for r in REFERENCES},
        "signatures": {name: bug.signature for name, bug in BUGS.items()},
        "signature_rules": {name: [sig.rule() for sig in sigs] for name, sigs in SIGNATURES.items()},
        "evidence": evidence(),
    }
    runs = [{"label": label, "reference_id": ref_id, "reference": description, "seed": seed,
             "history": metrics_only(h, keys)} for label, ref_id, description, seed, h in raw]  # fmt: skip
    return {"meta": meta, "runs": runs}


def write(data: dict, path=DATA) -> None:
    """One run per line (a readable diff when the data is remade)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ",\n".join(json.dumps(r, separators=(",", ":")) for r in data["runs"])
    path.write_text(f'{{"meta": {json.dumps(data["meta"], indent=1)},\n"runs": [\n{lines}\n]}}\n')


def load_runs(path=DATA) -> dict:
    """``{"meta": {...}, "runs": [{"label", "reference_id", "reference", "seed", "history"}, ...]}``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: write it with python -m course.hw5_diagnosis.make_data")
    return json.loads(path.read_text())


def known_names() -> tuple[str, ...]:
    """Every answer ``diagnose`` may give: "healthy" and each bug the library can inject (graded or not)."""
    from grpo_edu.demos.silent_bugs import BUG_NAMES

    return tuple(BUG_NAMES)


def run_id(run: dict) -> str:
    """A graded run's test id: its class, reference and RL seed."""
    return f"{run['label']}|{run['reference_id']}|seed{run['seed']}"


def evidence(seed: int = 0) -> list[str]:
    """Why `EXCLUDED`'s loss_over_padding is not graded: the step-1 entropy (and the mean grad_norm)
    of the healthy run and the bugged run from the same reference, for three references."""
    import torch

    from grpo_edu import make_task, reference_policy
    from grpo_edu.demos.silent_bugs import run_bugged

    torch.set_num_threads(1)
    lines = []
    for world, sft_seed in (("default", 0), ("spread", 0), ("spread", 1)):
        preset = reference_preset(world, sft_seed)
        task = make_task(preset)
        reference = reference_policy(preset, task=task, progress=False)
        row = []
        for label in ("healthy", "loss_over_padding"):
            h = run_bugged(label, reference, preset, task=task, seed=seed)
            grad = sum(h.series("grad_norm")) / len(h.steps)
            row.append(f"{label} entropy at step 1 {h.steps[0]['entropy']:.3f}, mean grad_norm {grad:.2f}")
        lines.append(f"{world} world, SFT seed {sft_seed}, RL seed {seed}: " + "; ".join(row))
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course.hw5_diagnosis.make_data", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--out", default=str(DATA), help=f"where to write (default {DATA})")
    parser.add_argument("--evidence", action="store_true", help="print why loss_over_padding is not graded, and stop")
    a = parser.parse_args(argv)
    if a.evidence:
        print("\n".join(evidence()))
        return 0
    t0 = time.perf_counter()
    data = make()
    write(data, a.out)
    print(f"wrote {len(data['runs'])} runs ({len(data['meta']['classes'])} classes) to {a.out} "
          f"in {time.perf_counter() - t0:.0f} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
