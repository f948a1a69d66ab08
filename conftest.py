"""Root conftest: one torch thread, and the nbval sanitize file from any folder.

nbval reads ``--nbval-sanitize-with`` from the command line; we add it here so that
``pytest --nbval`` works from the repository root and from ``notebooks/`` alike, and
pin the kernel to the current interpreter (``--nbval-current-env``).
"""

import os
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

ROOT = Path(__file__).resolve().parent


def pytest_load_initial_conftests(early_config, parser, args):  # pragma: no cover - plugin hook
    pass


def pytest_configure(config):
    import torch

    torch.set_num_threads(1)
    opt = config.option
    if getattr(opt, "nbval", False) or getattr(opt, "nbval_lax", False):
        if not getattr(opt, "sanitize_with", None):
            opt.sanitize_with = str(ROOT / "notebooks" / "sanitize.cfg")
        if hasattr(opt, "nbval_current_env"):
            opt.nbval_current_env = True
