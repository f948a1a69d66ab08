"""The course's checks of a notebook's claims (course/checks/), importable from this folder.

A notebook runs with notebooks/ as its working directory, where the package ``course`` (at the
repository root, not installed) cannot be imported; this module puts the root on the path, once.
"""

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[1])


def _registry():
    if ROOT not in sys.path:
        sys.path.append(ROOT)
    import course.checks

    return course.checks


def run_checks(notebook: str, namespace: dict) -> None:
    """Run every check of ``notebook`` on its namespace (`course.checks.run_checks`): it prints the checks
    that passed and raises on one that failed; nothing is returned, so the cell shows no numbers."""
    _registry().run_checks(notebook, namespace)


def seed_range(notebook: str, name: str, quantity: str | None = None, here: float | None = None):
    """(lowest, highest, how many) of a recorded quantity over five seeds, this run's ``here`` among them
    (`course.checks.seed_range`)."""
    return _registry().seed_range(notebook, name, quantity, here)
