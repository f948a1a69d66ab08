"""Notebook 06 needs the optional TRL bridge: without the extra it is skipped, with a reason.
The figures' embedded pixels are sanitized before nbval compares outputs (see pytest_configure)."""

import importlib.util
from pathlib import Path

collect_ignore = []
if importlib.util.find_spec("trl") is None:  # pip install -e ".[trl]" to run it
    collect_ignore.append("06_graduate_to_trl.ipynb")


def pytest_configure(config):
    # A figure's output holds its PNG twice (as image/png, which nbval skips, and inside the
    # <img alt="..."> of its text/html, which carries the alt text): unless told otherwise,
    # sanitize.cfg replaces the embedded pixels, so nbval compares the alt text, not the image.
    if getattr(config.option, "nbval_sanitize_with", "") is None:
        config.option.nbval_sanitize_with = str(Path(__file__).with_name("sanitize.cfg"))
