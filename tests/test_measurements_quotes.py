"""The measurements page's prose quotes notebooks' committed outputs, and each quote is there.

Outside its blocks (which `tests/test_site_blocks.py` ties to their commands), the page
(course/site/measurements.md) states some results of the notebooks' committed runs. Each such
number is quoted from the output, in the form

    `notebooks/05_side_by_side.ipynb` prints `The fastest to 90% at k = 1 is GRPO (default world) ...`

and this test asserts that every quote occurs in the outputs (streams and Markdown) of that
notebook's code cells, whitespace collapsed (columns, wrapped lines), so that a re-executed
notebook that prints another number fails here until the page follows. Reads files only.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "course" / "site" / "measurements.md"
POINTER = re.compile(r"`notebooks/(\d\d_[\w-]+)\.ipynb` prints `([^`]+)`")


def _ws(s: str) -> str:
    return " ".join(s.split())


def _outputs(stem: str) -> str:
    cells = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text())["cells"]
    out = []
    for cell in cells:
        for o in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
            if o.get("output_type") == "stream":
                out.append("".join(o["text"]))
            for kind in ("text/markdown", "text/plain"):
                out.append("".join(o.get("data", {}).get(kind, "")))
    return _ws("\n".join(out))


def _pointers(text: str) -> list[tuple[str, str]]:
    return [(m.group(1), _ws(m.group(2))) for m in POINTER.finditer(_ws(text))]


POINTERS = _pointers(PAGE.read_text())


def test_the_page_quotes_notebooks():
    assert len(POINTERS) >= 20, POINTERS  # the page's quotes of notebooks 05, 07, 08, 09 and 10 (not an empty match)
    stems = {"05_side_by_side", "07_where_each_idea_pays", "08_easy_and_hard_prompts", "09_thinking_that_pays"}
    assert {stem for stem, _ in POINTERS} >= stems | {"10_long_runs_and_overoptimisation"}


@pytest.mark.parametrize(("stem", "quote"), POINTERS, ids=[f"{s}: {q[:40]}" for s, q in POINTERS])
def test_each_quote_is_in_the_notebooks_output(stem, quote):
    assert (ROOT / "notebooks" / f"{stem}.ipynb").exists(), f"no notebook {stem}"
    assert quote in _outputs(stem), f"{stem} does not print {quote!r}"


def test_a_quote_the_notebook_does_not_print_is_caught():
    """The control: a pointer whose number the notebook does not print fails the match."""
    ((stem, quote),) = _pointers("`notebooks/05_side_by_side.ipynb` prints `The fastest to 90% at k = 1 is PPO`")
    assert stem == "05_side_by_side" and quote not in _outputs(stem)
