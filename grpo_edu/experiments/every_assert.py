"""Every failing assert of a notebook, not only each cell's first (``pytest --nbval`` stops a cell there).

When a notebook fails at a held-out seed shift, rewording its claims needs every claim that failed and
its value. This executes the notebook once with each ``assert test, msg`` of its code cells rewritten
to a record, ``_record(cell, line, "test", lambda: test, lambda: msg)``, which keeps going, and returns
the failures: the code cell's index (nbval's ``Cell N``), the assert's line in the cell, its test as
source, and its message (or the error the test raised). The seed shift and kernel come from the
environment, as in `grpo-edu check-notebooks`:

    GRPO_EDU_SEED_SHIFT=8 ATEN_CPU_CAPABILITY=default \\
        python -m grpo_edu.experiments.every_assert notebooks/08_easy_and_hard_prompts.ipynb
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


class _AssertToRecord(ast.NodeTransformer):
    def __init__(self, cell: int):
        self.cell = cell

    def visit_Assert(self, node: ast.Assert) -> ast.Expr:
        args = [ast.Constant(self.cell), ast.Constant(node.lineno), ast.Constant(ast.unparse(node.test))]
        args += [_thunk(node.test), _thunk(node.msg or ast.Constant(None))]
        return ast.copy_location(ast.Expr(ast.Call(ast.Name("_record", ast.Load()), args, [])), node)


def rewrite_cell(source: str, cell: int) -> str:
    """``source`` with each assert a call to ``_record`` (unchanged if it has none or is not plain Python)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # an IPython magic: such cells hold no asserts here
        return source
    if not any(isinstance(n, ast.Assert) for n in ast.walk(tree)):
        return source
    return ast.unparse(ast.fix_missing_locations(_AssertToRecord(cell).visit(tree)))


def every_failing_assert(path, timeout: int = 3600) -> list[dict]:
    """Execute the notebook at ``path`` (in its folder, a fresh kernel) and return its failing asserts."""
    import nbformat
    from nbclient import NotebookClient

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    for i, c in enumerate(code):
        c.source = rewrite_cell(c.source, i)
    out = nbformat.v4.new_code_cell("import json as _json; print(_json.dumps(_EVERY_ASSERT))")
    nb.cells = [nbformat.v4.new_code_cell(_RECORDER), *nb.cells, out]
    NotebookClient(nb, timeout=timeout, resources={"metadata": {"path": str(path.parent)}}).execute()
    return json.loads("".join(o.get("text", "") for o in nb.cells[-1].outputs))


if __name__ == "__main__":
    if len(sys.argv) != 2 or not sys.argv[1].endswith(".ipynb"):
        raise SystemExit("usage: python -m grpo_edu.experiments.every_assert NOTEBOOK.ipynb")
    for f in every_failing_assert(sys.argv[1]):
        print(f"Cell {f['cell']}, line {f['line']}: {f['test']}\n    {f['message'][:600]}")
