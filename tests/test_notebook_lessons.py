"""A notebook's lesson is free of the machinery that checks it (issue 45; DESIGN.md, "Claims that survive
other machines and other readers").

A converted notebook's claims are checked by the registry in course/checks/, run from one check cell
at the notebook's end (or one per section): a code cell tagged ``remove-cell`` (the website leaves it
out), whose first line is a comment saying a learner may skip it, and which calls
``run_checks("<notebook>", globals())``. Its lesson cells, every other cell with its outputs, never
say how a claim is checked: no "seed shift", "held-out draw", "calibrated", "printed, not asserted",
"at this seed", "kernel", "control", and no ``assert`` (``held-out accuracy``, the accuracy on the
problems RL never trains on, is a lesson's word and stays).

``NOT_CONVERTED`` lists the notebooks whose lessons still hold such words: converting one removes it
from the list, and the list may only shrink (a listed notebook without the words fails, so that it is
moved to the converted ones).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from course.checks import CONVERTED

ROOT = Path(__file__).resolve().parents[1]

NOTEBOOKS = {p.stem: p for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))}
NOT_CONVERTED: set[str] = set()
CHECK_WORDS = {  # name -> pattern (case-insensitive)
    "seed shift": r"seed[ _-]?shifts?",
    "held-out draw": r"held[ -]out (?:draws?|shifts?|runs?|seeds?|kernels?)|held out from",
    "calibrated": r"calibrat",
    "printed, not asserted": r"not asserted|printed,? not",
    "at this seed": r"at this seed",
    "kernel": r"\bkernels?\b",
    "control": r"\bcontrols?\b",
    "assert": r"\bassert",
    "the checks' settings": r"ATEN_CPU_CAPABILITY|GRPO_EDU_SEED_SHIFT",
}
TAG = "remove-cell"
CALL = re.compile(r"""^run_checks\("(?P<nb>[^"]+)", globals\(\)\)$""", re.M)


def _text(cell: dict) -> str:
    """A cell's source and, for a code cell, what it shows: streams, Markdown and plain-text outputs."""
    parts = ["".join(cell["source"])]
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append("".join(out["text"]))
        for kind in ("text/markdown", "text/plain"):
            parts.append("".join(out.get("data", {}).get(kind, "")))
    return "\n".join(parts)


def is_check_cell(cell: dict) -> bool:
    return cell["cell_type"] == "code" and bool(CALL.search("".join(cell["source"])))


def check_words(cells: list[dict]) -> list[tuple[int, str, str]]:
    """(cell index, the word's name, the matched text) for each word of checking in a lesson cell."""
    found = []
    for i, cell in enumerate(cells):
        if is_check_cell(cell):
            continue
        for name, pattern in CHECK_WORDS.items():
            found += [(i, name, m.group(0)) for m in re.finditer(pattern, _text(cell), re.I)]
    return found


def _cells(stem: str) -> list[dict]:
    return json.loads(NOTEBOOKS[stem].read_text())["cells"]


def test_every_notebook_is_converted_or_listed():
    assert set(CONVERTED) | NOT_CONVERTED == set(NOTEBOOKS), set(NOTEBOOKS) ^ (set(CONVERTED) | NOT_CONVERTED)
    assert not set(CONVERTED) & NOT_CONVERTED
    assert not NOT_CONVERTED, f"every notebook's checks live apart now: convert {sorted(NOT_CONVERTED)}"


@pytest.mark.parametrize("stem", CONVERTED)
def test_no_word_of_checking_in_a_lesson_cell(stem):
    found = check_words(_cells(stem))
    assert not found, f"{stem}: (cell, word, text) {found}: say it in course/checks/, not in the lesson"


@pytest.mark.parametrize("stem", CONVERTED)
def test_a_converted_notebook_ends_in_its_check_cells(stem):
    cells = _cells(stem)
    checks = [i for i, c in enumerate(cells) if is_check_cell(c)]
    assert checks, f"{stem}: no check cell (a code cell calling run_checks({stem!r}, globals()))"
    code = [i for i, c in enumerate(cells) if c["cell_type"] == "code"]
    assert code[-1] == checks[-1], f"{stem}: the last code cell is not a check cell"
    for i in checks:
        cell, source = cells[i], "".join(cells[i]["source"])
        assert CALL.search(source)["nb"] == stem, f"{stem} cell {i} runs another notebook's checks"
        assert cell["metadata"].get("tags") == [TAG], f"{stem} cell {i}: tag it {TAG!r} only (the site hides it)"
        first = source.splitlines()[0]
        assert first.startswith("#") and "skip" in first, f"{stem} cell {i}: its first line says it is skippable"
        kinds = {o.get("output_type") for o in cell["outputs"]}
        assert kinds <= {"stream"}, f"{stem} cell {i} shows {kinds}: only the printed names (the same on every machine)"


def test_the_scan_finds_a_planted_word_and_spares_the_lesson_words():
    """Control: a word of checking planted in a lesson cell is found; one in the check cell, and the
    lesson's own "held-out accuracy", are not."""
    lesson = {"cell_type": "markdown", "metadata": {}, "source": ["REINFORCE ends ahead at every seed shift."]}
    accuracy = {"cell_type": "markdown", "metadata": {}, "source": ["the greedy held-out accuracy rises"]}
    out = {"name": "stdout", "output_type": "stream", "text": ["bound calibrated on 5 seeds\n"]}
    printed = {"cell_type": "code", "metadata": {}, "outputs": [out], "source": ["print(x)"]}
    check = {"cell_type": "code", "metadata": {"tags": [TAG]}, "outputs": [], "source": [
        "# Checks: skip (calibrated on seed shifts 0-4; control: ...)\n", 'run_checks("x", globals())']}  # fmt: skip
    found = check_words([lesson, accuracy, printed, check])
    assert [(i, name) for i, name, _ in found] == [(0, "seed shift"), (2, "calibrated")]


@pytest.mark.parametrize("stem", CONVERTED)
def test_the_website_leaves_the_check_cells_out(stem, tmp_path):
    """myst-nb, the site's notebook reader, drops a cell tagged ``remove-cell``: a build of the notebook
    with the site's reader settings shows the lesson and not the check cell (needs the [docs] extra)."""
    pytest.importorskip("myst_nb", reason='needs the [docs] extra (pip install -e ".[docs]")')
    from sphinx.cmd.build import build_main

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "conf.py").write_text(
        'extensions = ["myst_nb"]\nnb_execution_mode = "off"\nmyst_enable_extensions = ["dollarmath", "amsmath"]\n'
        'root_doc = "nb"\nexclude_patterns = ["_build"]\nsuppress_warnings = ["toc.not_included"]\n'
    )
    notebook = json.loads(NOTEBOOKS[stem].read_text())
    (tmp_path / "src" / "nb.ipynb").write_text(json.dumps(notebook))
    for cell in notebook["cells"]:  # control: the same notebook with its tags dropped shows the check cell
        cell["metadata"].pop("tags", None)
    (tmp_path / "src" / "untagged.ipynb").write_text(json.dumps(notebook))
    status = build_main(["-b", "html", "-q", str(tmp_path / "src"), str(tmp_path / "html")])
    html, untagged = ((tmp_path / "html" / f"{n}.html").read_text() for n in ("nb", "untagged"))
    assert status == 0 and "Learning goals" in html
    assert "run_checks" not in html and "run_checks" in untagged
