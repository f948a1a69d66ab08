"""Root conftest: one torch thread, and nbval's sanitize file and kernel from any folder.

`pytest --nbval` works from the repository root or from `notebooks/`: this file points
nbval at `notebooks/sanitize.cfg` (times, memory addresses, progress bars) and at the
current environment's kernel, so the notebooks run with the interpreter that runs pytest.
"""

import os
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

ROOT = Path(__file__).resolve().parent


def pytest_configure(config):
    import torch

    _CONFIG[:] = [config]
    torch.set_num_threads(1)
    opt = config.option
    if getattr(opt, "nbval", False) or getattr(opt, "nbval_lax", False):
        if not getattr(opt, "nbval_sanitize_with", None):
            opt.nbval_sanitize_with = str(ROOT / "notebooks" / "sanitize.cfg")
        opt.nbval_current_env = True


# CI (.ci/run) runs the suite with only the [dev] extra, then again, with every extra installed, the tests
# that skipped for want of one: with $GRPO_EDU_SKIPPED_FOR_EXTRA set to a file, the run writes there the
# node id of each such skip (a notebook's or a module's whole file, when the skip is the file's), one a line.
SKIPPED_FOR_EXTRA = "GRPO_EDU_SKIPPED_FOR_EXTRA"
_EXTRA_REASON = ("extra", "[trl]", "[docs]")


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # (path, line, "Skipped: reason")
        return str(longrepr[2])
    return str(longrepr)


def _note_extra_skip(config, report) -> None:
    path = os.environ.get(SKIPPED_FOR_EXTRA)
    if not path or not report.skipped or hasattr(config, "workerinput"):  # xdist: the controller writes
        return
    if not any(word in _skip_reason(report) for word in _EXTRA_REASON):
        return
    nodeid = report.nodeid
    if ".ipynb" in nodeid or not nodeid.count("::"):  # a notebook runs whole, in order
        nodeid = nodeid.split("::")[0]
    with open(path, "a") as f:
        f.write(nodeid + "\n")


def pytest_runtest_logreport(report):
    if report.when in ("setup", "call"):
        _note_extra_skip(_CONFIG[0], report)


def pytest_collectreport(report):
    _note_extra_skip(_CONFIG[0], report)


_CONFIG = []
