"""The layers of grpo_edu's import graph: each module's layer is one above the highest module it imports
(a module that imports nothing of grpo_edu or envs is layer 0), so every import points to a lower layer.

    python tests/tools/import_layers.py           # each layer's modules, ladder and lab apart
    python tests/tools/import_layers.py --rooms   # the rooms' own layers (envs, the ladder, each lab folder),
                                                  # and which module layers each room holds

The graph is tests/test_style.py's `_import_graph` (every import, lazy ones too), without the front door
``grpo_edu/__init__.py``, which re-exports both the ladder and the lab. tests/test_lab_rooms.py checks
the order of the lab's rooms.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for test_style
from test_style import ROOT, _import_graph, _is_ladder  # noqa: E402

LAB_ROOMS = ("warmstart", "measure", "demos", "figures", "hf", "studies", "command")  # bottom up


def graph() -> dict[str, set[str]]:
    """The import graph without the front door (a package's ``__init__`` sits above the modules it
    re-exports: importing the package runs it)."""
    g = _import_graph()
    g.pop("grpo_edu", None)
    return {m: {e for e in es if e != "grpo_edu"} for m, es in g.items()}


def layers(g: dict[str, set[str]], back: list | None = None) -> dict[str, int]:
    """module -> its layer. An arrow that closes a cycle (tests/test_style.py finds none among modules; the
    rooms had one, studies <-> command) is left out of the layering and added to ``back``."""
    out: dict[str, int] = {}
    on: set[str] = set()

    def layer(m):
        if m not in out:
            on.add(m)
            below = []
            for e in sorted(g.get(m, ())):
                if e in on:
                    back is not None and back.append((m, e))
                elif e in g:
                    below.append(layer(e))
            on.discard(m)
            out[m] = 1 + max(below, default=-1)
        return out[m]

    for m in sorted(g):
        layer(m)
    return out


def room(module: str) -> str:
    """``envs``, the ladder's file or folder (``train``, ``algorithms``), or the lab's folder (``measure``)."""
    parts = module.split(".")
    if parts[0] == "envs":
        return "envs"
    return ("ladder " if _is_ladder(module) else "lab ") + parts[1]


def rooms_graph(g: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph of rooms: envs, the ladder (one room: a learner reads it bottom up) and each lab folder."""

    def name(m):
        r = room(m)
        return "ladder" if r.startswith("ladder") else r.removeprefix("lab ")

    out: dict[str, set[str]] = {}
    for m, es in g.items():
        out.setdefault(name(m), set()).update(name(e) for e in es if name(e) != name(m))
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    g = graph()
    lay = layers(g)
    shown = {m: k for m, k in lay.items() if g[m] or not (ROOT / m.replace(".", "/") / "__init__.py").exists()}
    if "--rooms" in argv:  # an empty package's __init__ (a folder) is no layer of its own
        rg, back = rooms_graph(g), []
        rl = layers(rg, back)
        for k in range(max(rl.values()) + 1):
            here = sorted(r for r in rl if rl[r] == k)
            print(
                f"{k:2d}  " + "  ".join(f"{r} (imports {', '.join(sorted(rg[r])) or 'nothing of ours'})" for r in here)
            )
        for a, b in back:
            why = sorted(
                f"{m} -> {e}" for m, es in g.items() for e in es if (room(m), room(e)) == (f"lab {a}", f"lab {b}")
            )
            print(f"    an arrow back up: {a} -> {b} ({'; '.join(why)})")
        print()
        spans: dict[str, list[int]] = {}
        for m, k in shown.items():
            spans.setdefault(room(m), []).append(k)
        for r, ks in sorted(spans.items(), key=lambda kv: (min(kv[1]), max(kv[1]), kv[0])):
            print(f"{r:<24} {len(ks):3d} modules, layers {min(ks)}-{max(ks)}")
        ladder = [k for m, k in shown.items() if _is_ladder(m)]
        lab = [k for m, k in shown.items() if m.startswith("grpo_edu.") and not _is_ladder(m)]
        print(f"ladder: {len(ladder)} modules on layers {min(ladder)}-{max(ladder)}; lab: {len(lab)} modules on "
              f"layers {min(lab)}-{max(lab)}; {sum(len(es) for es in g.values())} imports")  # fmt: skip
        return 0
    for k in range(max(shown.values()) + 1):
        here = sorted(m for m in shown if shown[m] == k)
        ladder = [m.removeprefix("grpo_edu.") for m in here if _is_ladder(m) or m.startswith("envs")]
        lab = [m.removeprefix("grpo_edu.") for m in here if not (_is_ladder(m) or m.startswith("envs"))]
        print(f"{k:2d}  ladder: {' '.join(ladder) or '-'}")
        print(f"    lab:    {' '.join(lab) or '-'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
