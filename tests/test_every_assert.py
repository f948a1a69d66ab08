"""tests.tools.every_assert: every failing assert of a notebook, where nbval reports a cell's first."""

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from tests.tools.every_assert import every_assert_value, every_failing_assert, rewrite_cell

CELLS = [
    "%matplotlib inline\nx = 1",
    'y = 2\nassert x == 2, "not two"\nassert y == x, (x, y)\nassert x == 1',  # two fail, one holds
    "print('markdown between')",
    "assert 1 / 0 > 0",  # a test that raises fails too
]


def _notebook(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in CELLS])
    path = tmp_path / "claims.ipynb"
    nbformat.write(nb, path)
    return path


def test_plain_execution_stops_at_a_cells_first_failing_assert(tmp_path):
    # the control: what nbval (and nbclient) see is the first failure only
    nb = nbformat.read(_notebook(tmp_path), as_version=4)
    with pytest.raises(CellExecutionError, match="not two"):
        NotebookClient(nb, timeout=60).execute()


def test_every_failing_assert_is_recorded_with_its_cell_line_and_message(tmp_path):
    found = every_failing_assert(_notebook(tmp_path), timeout=60)
    assert [(f["cell"], f["line"], f["test"]) for f in found] == [
        (1, 2, "x == 2"),
        (1, 3, "y == x"),
        (3, 1, "1 / 0 > 0"),
    ]
    assert found[0]["message"] == "'not two'" and found[1]["message"] == "(1, 2)"
    assert "ZeroDivisionError" in found[2]["message"]


def test_a_cell_without_asserts_or_with_a_magic_is_left_as_written():
    assert rewrite_cell(CELLS[0], 0) == CELLS[0] and rewrite_cell(CELLS[2], 2) == CELLS[2]


def test_values_records_every_assert_with_each_side_of_its_comparisons(tmp_path):
    cells = ["x = 1.5\nassert 1 < x < 2\nassert x > 3 and x < 4, 'fails'", "assert isinstance(x, float)"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in cells])
    nbformat.write(nb, tmp_path / "bounds.ipynb")
    found = every_assert_value(tmp_path / "bounds.ipynb", timeout=60)
    assert [(v["cell"], v["line"], v["ok"]) for v in found] == [(0, 2, True), (0, 3, False), (1, 1, True)]
    assert found[0]["operands"] == [1.0, 1.5, 2.0] and found[1]["operands"] == [1.5, 3.0, 1.5, 4.0]
    assert found[2]["operands"] == [1.0]  # not a comparison: the test's own value
