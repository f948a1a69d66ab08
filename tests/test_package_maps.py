"""Every package map is whole: the module list in each grpo_edu package's ``__init__`` docstring names
every module of the package (and names no module that is not there), `grpo_edu.studies.STUDIES` lists
every study, and `grpo_edu.studies.regimes.TABLE` has a row for every regime module. A module added
without a line in its package's map, or a line left behind by a module moved away, fails here."""

import ast
import re
from pathlib import Path

import pytest
from test_style import _temporary_alias

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "grpo_edu"
PACKAGES = sorted(p.parent for p in PKG.rglob("__init__.py") if p.parent != PKG)
TABLES = {PKG / "studies": "STUDIES"}  # a package whose map is a table, checked below, not its docstring


def modules(package: Path) -> set[str]:
    """The modules of ``package``: its .py files and its subpackages (the name a map says), public
    ones only (a name starting with ``_`` is the package's own helper), TEMPORARY aliases left out."""
    files = {p.stem for p in package.glob("*.py") if p.name != "__init__.py" and not _temporary_alias(p)}
    subpackages = {p.parent.name for p in package.glob("*/__init__.py")}
    return {m for m in files | subpackages if not m.startswith("_")}


def named(doc: str, name: str) -> bool:
    """Whether a map names module ``name``: ``name.py``, ``name/``, `` `name` `` or a map line
    that starts with the bare name (``    offset        rewards (c, c+1) ...``)."""
    return bool(
        re.search(rf"(?<![\w/.]){re.escape(name)}(\.py\b|/)", doc)
        or re.search(rf"`{re.escape(name)}`", doc)
        or re.search(rf"^ {{2,}}{re.escape(name)} {{2,}}\S", doc, flags=re.M)
    )


def files_named(doc: str) -> set[str]:
    """The ``x.py`` a map names (a path such as ``tests/tools/x.py`` or ``grpo_edu/x.py`` is another folder's)."""
    return set(re.findall(r"(?<![\w/.])(\w+)\.py\b", doc))


def docstring(package: Path) -> str:
    return ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""


@pytest.mark.parametrize(
    "package", [p for p in PACKAGES if p not in TABLES], ids=lambda p: p.relative_to(PKG).as_posix()
)
def test_each_package_map_names_every_module_and_no_missing_one(package):
    doc = docstring(package)
    unnamed = sorted(m for m in modules(package) if not named(doc, m))
    assert unnamed == [], f"{package.relative_to(ROOT)}/__init__.py does not name {unnamed}"
    here = {p.stem for p in package.glob("*.py")} | {p.parent.name for p in package.glob("*/__init__.py")}
    gone = sorted(files_named(doc) - here)
    assert gone == [], f"{package.relative_to(ROOT)}/__init__.py names {gone}, which are not there"


def test_studies_table_lists_every_study():
    from grpo_edu import studies

    assert set(studies.STUDIES) == modules(PKG / "studies")
    assert all(isinstance(v, str) and v for v in studies.STUDIES.values())
    assert "STUDIES" in docstring(PKG / "studies")  # the docstring points to its map


STUDY_COMMANDS = [
    "compute_law",
    "credit_pays",
    "distillation",
    "gap_ablation",
    "gpu_curve",
    "pipeline_race",
    "policy_lag",
    "reference_seeds",
    "speedrun",
    "spread_ablation",
    "stored_runs",
]


@pytest.mark.parametrize("study", STUDY_COMMANDS)
def test_a_study_with_a_command_runs_as_a_module(study, capsys):
    """``python -m grpo_edu.studies.<x>`` (the commands the measurements page and the studies'
    docstrings give) runs its ``main``, which parses its flags: ``--help`` prints its usage, exit 0."""
    import importlib

    module = importlib.import_module(f"grpo_edu.studies.{study}")
    with pytest.raises(SystemExit) as exc:
        module.main(["--help"])
    assert exc.value.code in (0, None) and capsys.readouterr().out.startswith("usage: ")


def test_every_study_with_a_main_is_listed_above():
    with_main = sorted(m for m in modules(PKG / "studies") if '\nif __name__ == "__main__":' in _text(m))
    assert with_main == sorted(STUDY_COMMANDS)


def _text(module: str) -> str:
    path = PKG / "studies" / f"{module}.py"
    return path.read_text() if path.is_file() else ""


def test_regimes_table_has_a_row_for_every_regime_module():
    from grpo_edu.studies import regimes

    shared = {"common", "figures"}  # what the regimes share, named in the docstring, not regimes
    assert set(regimes.TABLE) == modules(PKG / "studies" / "regimes") - shared
    assert all(named(docstring(PKG / "studies" / "regimes"), m) for m in shared)


def test_the_check_sees_a_missing_and_a_stale_line(tmp_path):
    """The control: a package whose map misses one module and names one that is gone fails both ways."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('"""A package.\n\n    alpha.py   one\n    gamma.py   gone\n"""\n')
    for name in ("alpha", "beta", "_helper"):
        (pkg / f"{name}.py").write_text("")
    doc = docstring(pkg)
    assert modules(pkg) == {"alpha", "beta"}
    assert [m for m in sorted(modules(pkg)) if not named(doc, m)] == ["beta"]
    assert files_named(doc) - {"alpha", "beta", "_helper"} == {"gamma"}
    assert named("    offset        rewards", "offset") and named("uses `data` (the dataset)", "data")
    assert not named("see grpo_edu/train.py", "train") and not named("the reward_model regime", "reward_model")
