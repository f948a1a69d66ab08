"""Every failing assert of a notebook, not only each cell's first (``pytest --nbval`` stops a cell there).

When a notebook fails at a held-out seed shift, rewording its claims needs every claim that failed and
its value. This executes the notebook once with each ``assert test, msg`` of its code cells rewritten
to a record, ``_record(cell, line, "test", lambda: test, lambda: msg)``, which keeps going, and returns
the failures: the code cell's index (nbval's ``Cell N``), the assert's line in the cell, its test as
source, and its message (or the error the test raised). The seed shift and kernel come from the
environment, as in `grpo-edu check-notebooks`:

    GRPO_EDU_SEED_SHIFT=8 ATEN_CPU_CAPABILITY=default \\
        python -m tests.tools.every_assert notebooks/08_easy_and_hard_prompts.ipynb

With ``--values`` it records every assert, passing or not, with the value of each side of its comparison
(each operand of ``a < b < c``, of every comparison joined by ``and``/``or``): what a bound is calibrated
from. One JSON line per assert; run it at each calibration shift and take the mean and standard deviation
of each assert's margin (``left - right``) over the shifts. The right side holds the bound, often scaled
(``x > 2 * y`` records ``x`` and ``2 * y``): a ratio of the two sides is the quantity over the bound, not
``x / y``, so compute the quantity the comment names from the operands before stating its range. At each shift:

    for k in 0 1 2 3 4; do GRPO_EDU_SEED_SHIFT=$k python -m tests.tools.every_assert --values \\
        notebooks/03_ppo.ipynb > values_$k.jsonl; done
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

_RECORDER = """
_EVERY_ASSERT = []
def _record(cell, line, test_source, test, message):
    try:
        ok, why = bool(test()), None
    except Exception as exc:  # a test that raises fails, and says why
        ok, why = False, repr(exc)
    if not ok:
        try:
            why = why or repr(message())
        except Exception as exc:
            why = repr(exc)
        _EVERY_ASSERT.append({"cell": cell, "line": line, "test": test_source, "message": why})
"""


def _thunk(expr: ast.expr) -> ast.Lambda:
    no_args = ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[])
    return ast.Lambda(args=no_args, body=expr)


_VALUES = """
_EVERY_VALUE = []
def _value(cell, line, test_source, operands, test):
    def num(f):
        try:
            v = f()
        except Exception as exc:
            return "error: " + repr(exc)[:100]
        try:
            return float(v)
        except Exception:
            return repr(v)[:100]
    try:
        ok = bool(test())
    except Exception:
        ok = False
    _EVERY_VALUE.append({"cell": cell, "line": line, "test": test_source, "ok": ok,
                         "operands": [num(f) for f in operands]})
"""


def _operands(test: ast.expr) -> list[ast.expr]:
    """The sides of each comparison in ``test`` (``a < b < c``: a, b, c; ``p and q``: p's, then q's)."""
    if isinstance(test, ast.Compare):
        return [test.left, *test.comparators]
    if isinstance(test, ast.BoolOp):
        return [o for v in test.values for o in _operands(v)]
    return [test]


class _AssertToRecord(ast.NodeTransformer):
    def __init__(self, cell: int, values: bool = False):
        self.cell, self.values = cell, values

    def visit_Assert(self, node: ast.Assert) -> ast.Expr:
        args = [ast.Constant(self.cell), ast.Constant(node.lineno), ast.Constant(ast.unparse(node.test))]
        if self.values:
            args += [ast.List([_thunk(o) for o in _operands(node.test)], ast.Load()), _thunk(node.test)]
            call = ast.Call(ast.Name("_value", ast.Load()), args, [])
        else:
            args += [_thunk(node.test), _thunk(node.msg or ast.Constant(None))]
            call = ast.Call(ast.Name("_record", ast.Load()), args, [])
        return ast.copy_location(ast.Expr(call), node)


def rewrite_cell(source: str, cell: int, values: bool = False) -> str:
    """``source`` with each assert a call to ``_record`` (``_value`` with ``values``), unchanged if it has
    none or is not plain Python."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # an IPython magic: such cells hold no asserts here
        return source
    if not any(isinstance(n, ast.Assert) for n in ast.walk(tree)):
        return source
    return ast.unparse(ast.fix_missing_locations(_AssertToRecord(cell, values).visit(tree)))


def _run(path, timeout: int, values: bool) -> list[dict]:
    import nbformat
    from nbclient import NotebookClient

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    for i, c in enumerate(code):
        c.source = rewrite_cell(c.source, i, values)
    name = "_EVERY_VALUE" if values else "_EVERY_ASSERT"
    out = nbformat.v4.new_code_cell(f"import json as _json; print(_json.dumps({name}))")
    nb.cells = [nbformat.v4.new_code_cell(_VALUES if values else _RECORDER), *nb.cells, out]
    NotebookClient(nb, timeout=timeout, resources={"metadata": {"path": str(path.parent)}}).execute()
    return json.loads("".join(o.get("text", "") for o in nb.cells[-1].outputs))


def every_failing_assert(path, timeout: int = 3600) -> list[dict]:
    """Execute the notebook at ``path`` (in its folder, a fresh kernel) and return its failing asserts."""
    return _run(path, timeout, values=False)


def every_assert_value(path, timeout: int = 3600) -> list[dict]:
    """Execute the notebook at ``path`` and return every assert (``cell``: the code cell's index, ``line``,
    ``test``, ``ok``) with ``operands``: each side of its comparisons, a float where it converts to one."""
    return _run(path, timeout, values=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    values = args[:1] == ["--values"]
    args = args[1:] if values else args
    if len(args) != 1 or not args[0].endswith(".ipynb"):
        raise SystemExit("usage: python -m tests.tools.every_assert [--values] NOTEBOOK.ipynb")
    if values:
        for v in every_assert_value(args[0]):
            print(json.dumps(v))
    else:
        for f in every_failing_assert(args[0]):
            print(f"Cell {f['cell']}, line {f['line']}: {f['test']}\n    {f['message'][:600]}")
