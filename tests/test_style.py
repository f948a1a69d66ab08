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


# The tree says which is which (DESIGN.md, "the ladder and the lab"): the ladder is what a learner
# reads, bottom up; the lab measures and serves it, importing the ladder, never the reverse.
LADDER_MODULES = {"__init__", "model", "tokenizer", "rollout", "evaluation", "train", "progress"}
LADDER_PACKAGES = {"functional", "algorithms"}  # every other subpackage of grpo_edu is the lab


def _temporary_alias(path: Path) -> bool:
    """TEMPORARY (issue 24): a module left at an old path while notebooks still import it, that makes
    the old name the new module (``sys.modules[__name__] = importlib.import_module(...)``). These go
    once every notebook imports the new paths; they are not modules of the tree."""
    return "sys.modules[__name__] = importlib.import_module(" in path.read_text()


def test_temporary_aliases_are_the_moved_modules():
    """While they last, an old path is the same module object as the new one (so an attribute read
    or a monkeypatch through the old name reaches the module that runs)."""
    import importlib
    import re

    for p in (ROOT / "grpo_edu").rglob("*.py"):
        if _temporary_alias(p):
            old = ".".join(p.relative_to(ROOT).with_suffix("").parts)
            new = re.search(r'import_module\("([\w.]+)"\)', p.read_text()).group(1)
            assert importlib.import_module(old) is importlib.import_module(new) and sys.modules[old].__name__ == new


def test_the_tree_shows_the_ladder_and_the_lab():
    """grpo_edu's top-level modules are the ladder's only (a lab module added at the top fails here),
    `functional/` and `algorithms/` are the ladder's subpackages, and the lab is the other subpackages."""
    pkg = ROOT / "grpo_edu"
    top = {p.stem for p in pkg.glob("*.py") if not _temporary_alias(p)}
    assert top == LADDER_MODULES, (
        f"not the ladder: {sorted(top - LADDER_MODULES)}; missing: {sorted(LADDER_MODULES - top)}"
    )
    lab = {p.parent.name for p in pkg.glob("*/__init__.py")} - LADDER_PACKAGES
    assert LADDER_PACKAGES <= {p.parent.name for p in pkg.glob("*/__init__.py")}
    assert {
        "warmstart",
        "measure",
        "studies",
        "command",
        "figures",
        "hf",
    } <= lab  # the lab's places, as DESIGN names them


def _is_ladder(module: str) -> bool:
    parts = module.split(".")
    return parts[0] == "grpo_edu" and (len(parts) == 1 or parts[1] in LADDER_MODULES | LADDER_PACKAGES)


def _import_graph(packages=("grpo_edu", "envs")) -> dict[str, set[str]]:
    """The modules of ``packages`` -> the modules of those packages they import (any level, lazy
    imports too). TEMPORARY aliases at old paths (`_temporary_alias`) are left out."""
    import ast

    mods = {}
    for p in (q for pkg in packages for q in (ROOT / pkg).rglob("*.py") if not _temporary_alias(q)):
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
    grpo_edu), then the ladder (the functional core, the rollout, the algorithms, the loop above
    them), then the lab (warm start, measurements, studies, the command, figures, demos, the
    TRL bridge), which imports the ladder, never the reverse."""
    graph = _import_graph()
    envs_up = sorted(
        f"{m} -> {e}" for m, es in graph.items() if m.split(".")[0] == "envs" for e in es if "envs" != e.split(".")[0]
    )
    assert envs_up == []  # envs imports nothing of grpo_edu
    assert any(e.startswith("envs") for e in graph["grpo_edu.warmstart.presets"])  # the graph sees grpo_edu -> envs
    # the ladder imports nothing of the lab; `grpo_edu/__init__.py` is the front door that re-exports
    # both (get_preset, reference_policy, train_from_preset, SFTConfig are the lab's warm start)
    ladder = [m for m in graph if _is_ladder(m) and m != "grpo_edu"]
    assert {"grpo_edu.train", "grpo_edu.functional", "grpo_edu.algorithms.grpo"} <= set(ladder)
    up = sorted(f"{m} -> {e}" for m in ladder for e in graph[m] if e.startswith("grpo_edu") and not _is_ladder(e))
    assert up == []
    lab_to_ladder = {e for m, es in graph.items() if m.startswith("grpo_edu.") and not _is_ladder(m) for e in es}
    assert "grpo_edu.train" in lab_to_ladder and "grpo_edu.rollout" in lab_to_ladder  # the graph sees lab -> ladder
    assert "grpo_edu.train" in graph and not any(e.startswith("grpo_edu.algorithms") for e in graph["grpo_edu.train"])
    for pkg in [m for m in graph if (ROOT / m.replace(".", "/") / "__init__.py").exists()]:
        graph[pkg] = {e for e in graph[pkg] if not e.startswith(pkg + ".")}  # re-exports point down
    assert _cycles(graph) == []
    assert not any(e.startswith("grpo_edu.train") for e in graph["grpo_edu.algorithms.base"])  # the loop is above
    # the loop takes the reference, it does not build it: below the warm start (presets, SFT, reference)
    assert not graph["grpo_edu.train"] & {
        "grpo_edu.warmstart.presets",
        "grpo_edu.warmstart.reference",
        "grpo_edu.warmstart.sft",
    }


# Imports the graph above cannot see: a module imported by a name computed at run time
# (importlib.import_module of a variable or an f-string), or a module-level __getattr__ that forwards
# attribute reads to other modules. The regimes once did both, which hid a figures <-> difficulty cycle.
HIDDEN_IMPORTS_ALLOWED = {
    "grpo_edu/hf/_common.py": "import_module of the optional third-party extras (trl, transformers), never of grpo_edu",
    "grpo_edu/hf/__init__.py": "PEP 562 __getattr__ building two classes from .export (a literal import, in the graph)",
}


def _hidden_imports(path: Path) -> list[str]:
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in ("import_module", "__import__"):
                found.append(f"line {node.lineno}: {name}(...)")
    for node in ast.parse(path.read_text()).body:  # module level only: a class's __getattr__ is not an import
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            found.append(f"line {node.lineno}: module-level __getattr__")
    return found


def test_every_import_is_visible_to_the_graph(tmp_path):
    hidden = {}
    for p in (ROOT / "grpo_edu").rglob("*.py"):
        rel = p.relative_to(ROOT).as_posix()
        if not _temporary_alias(p) and rel not in HIDDEN_IMPORTS_ALLOWED and _hidden_imports(p):
            hidden[rel] = _hidden_imports(p)
    assert hidden == {}, hidden
    # control: the check sees both forms
    sample = tmp_path / "sample.py"
    sample.write_text("import importlib\n\ndef __getattr__(n):\n    return importlib.import_module(f'x.{n}')\n")
    assert len(_hidden_imports(sample)) == 2


def test_each_regime_owns_its_runner_and_figure():
    """The regimes' table names functions, and each regime's runner and figure live in its own module."""
    from grpo_edu.studies import regimes

    for name, row in regimes.TABLE.items():
        module = f"grpo_edu.studies.regimes.{name}"
        assert row.run.__module__ == module and row.figure.__module__ == module, name
        assert callable(row.run) and callable(row.figure)
    assert regimes.runner("offset") is regimes.run_offset
    with pytest.raises(ValueError, match="unknown regime 'vibes'"):
        regimes.runner("vibes")
