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

    torch.set_num_threads(1)
    opt = config.option
    if getattr(opt, "nbval", False) or getattr(opt, "nbval_lax", False):
        if not getattr(opt, "nbval_sanitize_with", None):
            opt.nbval_sanitize_with = str(ROOT / "notebooks" / "sanitize.cfg")
        opt.nbval_current_env = True
