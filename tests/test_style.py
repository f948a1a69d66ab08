"""The tree is linted and formatted: `ruff check` and `ruff format --check` pass on the
library, the environments, the tests, the course, the notebooks (ruff reads .ipynb) and the README's code blocks."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PATHS = ["grpo_edu", "envs", "tests", "course", "notebooks", "conftest.py", "README.md"]  # ruff formats its code blocks


def _ruff(*args):
    exe = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(exe).exists() and not shutil.which(exe):
        pytest.skip("ruff is not installed (pip install -e '.[dev]')")
    return subprocess.run([exe, *args, *PATHS], cwd=ROOT, capture_output=True, text=True)


def test_ruff_check():
    r = _ruff("check")
    assert r.returncode == 0, r.stdout + r.stderr


def test_ruff_format():
    r = _ruff("format", "--check")
    assert r.returncode == 0, r.stdout + r.stderr


def _import_graph(packages=("grpo_edu", "envs")) -> dict[str, set[str]]:
    """The modules of ``packages`` -> the modules of those packages they import (any level, lazy
    imports too)."""
    import ast

    mods = {}
    for p in (q for pkg in packages for q in (ROOT / pkg).rglob("*.py")):
        parts = p.relative_to(ROOT).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p

    def known(name):
        while name not in mods and "." in name:
            name = name.rsplit(".", 1)[0]
        return name

    graph = {}
    for name, p in mods.items():
        here = name if p.name == "__init__.py" else name.rsplit(".", 1)[0]
        edges = set()
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = here.split(".")[: len(here.split(".")) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                if target.split(".")[0] in packages:
                    edges |= {known(f"{target}.{a.name}") for a in node.names}
            elif isinstance(node, ast.Import):
                edges |= {known(a.name) for a in node.names if a.name.split(".")[0] in packages}
        graph[name] = {e for e in edges if e != name}
    return graph


def _cycles(graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_imports_go_one_way():
    """No import cycle among the modules of grpo_edu and envs (a package's __init__ re-exporting
    its own submodules excepted): the environments at the bottom (they import nothing of
    grpo_edu), then the functional core, the loop above the algorithms, measurement,
    experiments and the CLI on top."""
    graph = _import_graph()
    envs_up = sorted(
        f"{m} -> {e}" for m, es in graph.items() if m.split(".")[0] == "envs" for e in es if "envs" != e.split(".")[0]
    )
    assert envs_up == []  # envs imports nothing of grpo_edu
    assert any(e.startswith("envs") for e in graph["grpo_edu.presets"])  # the graph sees grpo_edu -> envs
    assert "grpo_edu.train" in graph and not any(e.startswith("grpo_edu.algorithms") for e in graph["grpo_edu.train"])
    for pkg in [m for m in graph if (ROOT / m.replace(".", "/") / "__init__.py").exists()]:
        graph[pkg] = {e for e in graph[pkg] if not e.startswith(pkg + ".")}  # re-exports point down
    assert _cycles(graph) == []
    assert not any(e.startswith("grpo_edu.train") for e in graph["grpo_edu.algorithms.base"])  # the loop is above
    # the loop takes the reference, it does not build it: below the warm start (presets, SFT, reference)
    assert not graph["grpo_edu.train"] & {"grpo_edu.presets", "grpo_edu.reference", "grpo_edu.sft"}
