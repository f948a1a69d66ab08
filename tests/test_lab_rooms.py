"""The lab is laid out like the ladder: its rooms stand in one order, bottom up, and every import
between two rooms points down (tests/tools/import_layers.py --rooms prints the layers):

    warmstart   presets, SFT, the cached reference, checkpoints, a kept run's folder
    measure     what a notebook cell measures           demos   side worlds      hf   the TRL bridge
    figures     figures only
    studies     the longer jobs (STUDIES) and the regimes (regimes.TABLE)
    command     the `grpo-edu` command: parse, config files, print

No room imports a room above it (gpu_curve once imported the command's run folder writer; the writer
is warmstart's now, below both). The ladder's algorithms import neither the loop nor the progress bar,
and no lab module reaches the progress bar through train.py."""

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "tools"))

import import_layers  # noqa: E402
from test_style import LADDER_PACKAGES, _is_ladder  # noqa: E402

ORDER = import_layers.LAB_ROOMS  # bottom up


def _rank(module: str) -> int | None:
    """The room's place in ORDER (None: the ladder or envs, below every room)."""
    parts = module.split(".")
    if parts[0] != "grpo_edu" or _is_ladder(module):
        return None
    return ORDER.index(parts[1])


def arrows_up(graph) -> list[str]:
    return sorted(
        f"{m} -> {e}"
        for m, es in graph.items()
        for e in es
        if _rank(m) is not None and _rank(e) is not None and _rank(e) > _rank(m)
    )


def test_every_lab_folder_is_a_room_in_the_order():
    lab = {p.parent.name for p in (ROOT / "grpo_edu").glob("*/__init__.py")} - LADDER_PACKAGES
    assert lab == set(ORDER)


def test_no_room_imports_a_room_above_it():
    graph = import_layers.graph()
    assert arrows_up(graph) == []
    back = []
    import_layers.layers(import_layers.rooms_graph(graph), back)
    assert back == []  # the rooms' graph has no cycle either


def test_the_check_sees_an_arrow_up():
    """The control: the arrow of the layout before (a study importing the command's run folder)."""
    graph = {"grpo_edu.studies.gpu_curve": {"grpo_edu.command.run_dir", "grpo_edu.warmstart.presets"},
             "grpo_edu.command.cli": {"grpo_edu.studies.gpu_curve"}}  # fmt: skip
    assert arrows_up(graph) == ["grpo_edu.studies.gpu_curve -> grpo_edu.command.run_dir"]
    back = []
    rooms = import_layers.rooms_graph({**graph, "grpo_edu.command.run_dir": set(), "grpo_edu.warmstart.presets": set()})
    import_layers.layers(rooms, back)
    assert back == [("studies", "command")] or back == [("command", "studies")]


def test_the_progress_bar_is_below_the_loop_and_the_algorithms_import_no_lab():
    graph = import_layers.graph()
    algorithms = [m for m in graph if m.startswith("grpo_edu.algorithms")]
    assert algorithms and not any(
        e in ("grpo_edu.train", "grpo_edu.progress") or not (_is_ladder(e) or e.startswith("envs"))
        for m in algorithms
        for e in graph[m]
    )
    assert graph["grpo_edu.progress"] == set() and "grpo_edu.progress" in graph["grpo_edu.train"]
    through_train = []
    for p in (ROOT / "grpo_edu").rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("train"):
                if any(a.name == "progress_bar" for a in node.names):
                    through_train.append(p.relative_to(ROOT).as_posix())
    assert through_train == []


def test_fit_critic_is_the_labs():
    import grpo_edu.algorithms as algorithms
    from grpo_edu import measure

    assert measure.fit_critic.__module__ == "grpo_edu.measure.variance" and not hasattr(algorithms, "fit_critic")
