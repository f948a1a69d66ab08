"""Each notebook says how long it takes to read, the number is its words at the course's pace, and
no notebook asks for more than one sitting (about 40 minutes).

The pace: 110 words a minute, counting the words of every cell's source, prose and code alike (a
learner reads the code too). A stated time may round to 5 minutes."""

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
WORDS_PER_MINUTE = 110
LONGEST = 40  # minutes: one sitting
SLACK = 5  # minutes: a stated time may round to a multiple of 5


def reading(path: Path) -> tuple[float, int | None]:
    """(minutes at the course's pace, the minutes the notebook states or None)."""
    cells = json.loads(path.read_text())["cells"]
    words = sum(len("".join(c["source"]).split()) for c in cells)
    stated = re.search(r"Reading time about (\d+) minutes", " ".join("".join(c["source"]) for c in cells))
    return words / WORDS_PER_MINUTE, int(stated.group(1)) if stated else None


def test_reading_counts_words_by_hand(tmp_path):
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["Reading time about 5 minutes; a b c\n"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": "x = 1"},
    ]
    path = tmp_path / "00_x.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    # 8 words of prose ("Reading", "time", "about", "5", "minutes;", "a", "b", "c") and 3 of code
    assert reading(path) == (11 / WORDS_PER_MINUTE, 5)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_reading_time_is_stated_and_true(path):
    minutes, stated = reading(path)
    assert stated is not None, f"{path.name}: no 'Reading time about N minutes' in its cells"
    assert abs(stated - minutes) <= SLACK, (
        f"{path.name} says {stated} minutes; its words read in {minutes:.0f} at {WORDS_PER_MINUTE} a minute"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_one_sitting(path):
    minutes, _ = reading(path)
    assert minutes <= LONGEST + SLACK / 2, f"{path.name} reads in {minutes:.0f} minutes: split it (at most {LONGEST})"
