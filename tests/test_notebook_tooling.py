"""The notebooks speak to learners: what the test runner needs lives in cell metadata, not in the code.

nbval reads the cell tag ``nbval-ignore-output`` (a reader never sees it) as it reads a first line
``# NBVAL_IGNORE_OUTPUT``; the first test checks that the installed nbval honours the tag, on a
notebook whose stored output differs from what its cell prints."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
TOOLING = ("NBVAL_", "PYTEST_VALIDATE", "# fmt: skip", "# fmt: off", "# noqa")


def _notebook(path: Path, tags: list[str]) -> None:
    cell = {
        "cell_type": "code",
        "execution_count": 1,
        "metadata": {"tags": tags},
        "outputs": [{"name": "stdout", "output_type": "stream", "text": ["2\n"]}],  # the cell prints 1
        "source": "print(1)",
    }
    meta = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    path.write_text(json.dumps({"cells": [cell], "metadata": meta, "nbformat": 4, "nbformat_minor": 5}))


@pytest.mark.parametrize("tags, passes", [(["nbval-ignore-output"], True), ([], False)])
def test_nbval_honours_the_ignore_tag(tmp_path, tags, passes):
    _notebook(tmp_path / "nb.ipynb", tags)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--nbval", "--nbval-current-env", "-q", "nb.ipynb"]
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert (r.returncode == 0) == passes, r.stdout + r.stderr


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_test_runner_tooling_in_the_code(path):
    cells = json.loads(path.read_text())["cells"]
    found = [
        (i, line.strip())
        for i, cell in enumerate(cells)
        if cell["cell_type"] == "code"
        for line in "".join(cell["source"]).splitlines()
        if any(marker in line for marker in TOOLING)
    ]
    assert not found, f"{path.name}: cell (index, line) {found}: use cell metadata (tags), or let ruff format it"
