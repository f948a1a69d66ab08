"""The held-out runs homework 5's grader diagnoses: ``data/runs.json``.

    python -m course.hw5_diagnosis.make_data          # writes course/hw5_diagnosis/data/runs.json

Skeleton: the runs are written once grpo_edu.demos.silent_bugs exists.
"""

from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "runs.json"


def load_runs(path=DATA) -> dict:
    """``{"meta": {...}, "runs": [{"label", "reference", "seed", "history"}, ...]}`` (no runs yet: empty)."""
    path = Path(path)
    if not path.is_file():
        return {"meta": {"names": ["healthy"], "classes": [], "signatures": {}}, "runs": []}
    return json.loads(path.read_text())


def known_names(data: dict) -> tuple[str, ...]:
    """Every answer ``diagnose`` may give: "healthy" and each bug the library can inject."""
    try:
        from grpo_edu.demos.silent_bugs import BUG_NAMES
    except ImportError:
        return tuple(data["meta"]["names"])
    return tuple(BUG_NAMES)


def run_id(run: dict) -> str:
    """A graded run's test id: its class, reference and RL seed."""
    return f"{run['label']}|{run['reference_id']}|seed{run['seed']}"
