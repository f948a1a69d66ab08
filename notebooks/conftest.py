"""Notebook 06 needs the optional TRL bridge: without the extra it is skipped, with a reason."""

import importlib.util

collect_ignore = []
if importlib.util.find_spec("trl") is None:  # pip install -e ".[trl]" to run it
    collect_ignore.append("06_graduate_to_trl.ipynb")
