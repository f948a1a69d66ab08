"""The course's longest cells, trained once and stored.

The calls named in `CALLS` train for about 13 minutes together on one CPU thread: notebook 05's race in
both worlds, 08 part 2's critics of two references and its four arms, 09's section 4 runs (on the
blank-scratchpad task and the scratchpad task), 10's long runs (parts 1 and 2) and over-optimisation grid,
13's lags and 14's distillation study. ``python -m
grpo_edu.studies.stored_runs --store`` runs them on the cpu preset from their cached references and keeps
each result in ``data/stored_runs/NAME.json`` with what it was computed from (`provenance`): the
arguments, the preset (its seed and world too), the reference's config, a hash of the weights of the
reference the call is given (a study of the "preset" form is given none: the preset's own reference's),
a hash of the code that trains them (`SOURCES`, which holds the SFT's code too: another reference the
call trains or loads is that code's on that preset), torch's version and the CPU kernel; and the commit
and seconds it took.

`run` is what a notebook calls, with the regime call written out: it returns the stored result only when
every part of that provenance is this call's here (the inputs the result was computed from); otherwise it
runs the call. Either way it prints one line saying which (a call that is not one of `CALLS`, other
arguments for instance, says it is not stored, and runs). A seed shift (``$GRPO_EDU_SEED_SHIFT``),
another CPU kernel or torch build, another reference or other code all train; so do ``live=True`` (the
notebook's ``LIVE``) and ``$GRPO_EDU_LIVE=1`` (set by ``grpo-edu check-notebooks`` and
``python -m course.checks draw``). ``run_preset`` is the same for a study of the "preset" form.
``--check`` trains the calls again and says whether each equals the stored result, what a clock measured
aside (`untimed`, and each call's `Call.clocked` keys); ``--list`` says whether each matches this code and
machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

from ..measure.compare import run_comparison
from ..warmstart.presets import get_preset, make_task, resolve_preset, with_world
from ..warmstart.reference import code_fingerprint, reference_config, reference_policy, source_files, weights_hash
from . import credit_pays, distillation, policy_lag, regimes
from .regimes import thinking

DATA = Path(__file__).with_name("data") / "stored_runs"
LIVE_ENV = "GRPO_EDU_LIVE"  # "1": every call runs here, nothing is loaded


@dataclasses.dataclass(frozen=True)
class Call:
    """A stored call: ``fn`` with ``kwargs`` (seeds, a tuple, counted from the preset's seed). ``form``
    "reference": ``fn(reference, preset, progress=..., **kwargs)`` (a regime); "preset":
    ``fn(preset, progress=..., **kwargs)``, a study that builds (or loads from the cache) the references it
    starts from: the preset's own or another task's (the provenance then hashes the preset's reference, and
    the others follow from the hashed code, the preset, torch and the kernel). ``world``: the preset's world
    (`grpo_edu.get_preset`'s ``world``). ``reference``: builds the reference a call of the "reference" form
    starts from, ``reference(preset)`` (None: the preset's cached reference). ``clocked``: keys of the result
    that hold clock readings under another name than `untimed` knows (``--check`` leaves them out)."""

    fn: object
    kwargs: dict
    form: str = "reference"
    world: str = "default"
    reference: object = None
    clocked: tuple = ()


RACE = {"seeds": 1, "steps": 64, "measure": False}  # notebook 05's race, in each world
# name -> Call: the course's longest cells (notebooks 05, 08 part 2, 09, 10, 13 and 14)
CALLS = {
    "long_run": Call(regimes.run_long_run, {"seeds": (0, 1), "steps": 200}),
    "overoptimisation": Call(
        regimes.run_overoptimisation,
        {"seeds": (0,), "steps": 60, "betas": (0.0, 0.1, 0.3), "sizes": (8192, 16384, 32768), "eval_every": 5},
    ),
    "overoptimisation_unseen": Call(
        regimes.run_overoptimisation,
        {"seeds": (1,), "steps": 60, "betas": (0.0,), "sizes": (32768,), "eval_every": 5},
    ),
    "long_run_entropy": Call(regimes.run_long_run_entropy, {"seeds": (0,), "steps": 200}),
    # clocked: verdicts that read seconds to 90% (the race) or accuracies at equal wall time (distillation)
    "race_default": Call(run_comparison, RACE, form="preset", world="default", clocked=("claims",)),
    "race_spread": Call(run_comparison, RACE, form="preset", world="spread", clocked=("claims",)),
    "policy_lag": Call(
        policy_lag.run, {"lags": (0, 2, 8, 32), "seeds": (0,), "steps": 30, "eval_every": 5}, form="preset"
    ),
    "distillation": Call(distillation.run, {"seeds": 1}, form="preset", clocked=("evals", "claims")),
    "thinking_blank": Call(thinking.run_causes, {"seeds": (0,), "steps": 50}, reference=thinking.task_reference),
    "credit_scratchpad": Call(credit_pays.scratchpad_reading, {"seeds": (0,)}, form="preset"),
    "credit_junk": Call(credit_pays.junk_reading, {"seeds": (0,)}, form="preset"),
    "credit_pairs": Call(
        credit_pays.run_pairs,
        {
            "pairs": {
                "spread": ("V*(s_0), exact prompt value", "V*(s_t), lam 0"),
                "junk": ("batch mean", "learned critic (PPO)"),
            },
            "seeds": (0,),
        },
        form="preset",
    ),
}
# the project files whose code runs while a stored call trains (tests/test_stored_runs.py traces each call
# small and checks that every project file it runs is hashed here): a change to any of them stales the store
SOURCES = (
    "envs/*.py",
    "grpo_edu/*.py",
    "grpo_edu/algorithms/*.py",
    "grpo_edu/functional/*.py",
    "grpo_edu/warmstart/*.py",
    "grpo_edu/measure/*.py",
    "grpo_edu/demos/reward_model.py",
    "grpo_edu/studies/regimes/*.py",
    "grpo_edu/studies/policy_lag.py",
    "grpo_edu/studies/distillation.py",
    "grpo_edu/studies/credit_pays.py",
    "grpo_edu/studies/gap_ablation.py",
)


def _call(name: str, preset) -> tuple:
    """The regime function and its arguments for ``preset`` (seeds offset by the preset's seed)."""
    if name not in CALLS:
        raise ValueError(f"no stored call {name!r}; the calls are {', '.join(CALLS)}")
    call = CALLS[name]
    kw = dict(call.kwargs)
    if isinstance(kw.get("seeds"), tuple):  # seeds given as such (a count counts from the preset's seed itself)
        kw["seeds"] = tuple(preset.seed + s for s in kw["seeds"])
    return call.fn, kw


def machine() -> dict:
    """What rounds the arithmetic: torch's version and the CPU kernel ATen runs."""
    return {"torch": str(torch.__version__), "kernel": str(torch.backends.cpu.get_cpu_capability())}


def provenance(preset, reference) -> dict:
    """What a stored result must match to stand for a call on ``preset`` from ``reference``: the preset (its
    seed too), the reference's config and a hash of its weights, the hash of `SOURCES`, torch and the kernel."""
    preset = resolve_preset(preset)
    ref = reference_config(make_task(preset), preset.model, preset.sft, preset.device)
    out = {
        "preset": dataclasses.asdict(preset),
        "reference": {k: v for k, v in ref.items() if k != "runtime"},
        "reference_weights": weights_hash(reference),
        "source": code_fingerprint(SOURCES),
        "machine": machine(),
    }
    return json.loads(json.dumps(out, default=str))  # as a stored file reads it back


# -- JSON with the result's non-string keys (sizes, betas) and tuples kept --------------------------


def _encode(x):
    if isinstance(x, dict):
        if all(isinstance(k, str) for k in x):
            return {k: _encode(v) for k, v in x.items()}
        return {"__items__": [[_encode(k), _encode(v)] for k, v in x.items()]}
    if isinstance(x, tuple):
        return {"__tuple__": [_encode(v) for v in x]}
    if isinstance(x, list):
        return [_encode(v) for v in x]
    if isinstance(x, (bool, int, float, str)) or x is None:
        return x
    raise TypeError(f"a stored result holds numbers, strings, lists and dicts, not {type(x).__name__}")


def _decode(x):
    if isinstance(x, dict):
        if "__items__" in x:
            return {_decode(k): _decode(v) for k, v in x["__items__"]}
        if "__tuple__" in x:
            return tuple(_decode(v) for v in x["__tuple__"])
        return {k: _decode(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_decode(v) for v in x]
    return x


def _stored_part(name: str, result: dict) -> dict:
    """The part of ``result`` that is kept: all of it, less what is computed again on loading."""
    if CALLS[name].fn is regimes.run_overoptimisation:
        return {k: v for k, v in result.items() if k not in ("fits", "frontier")}
    return result


def _completed(name: str, kept: dict) -> dict:
    """A loaded result made whole: the over-optimisation's fits and frontier from its runs."""
    if CALLS[name].fn is regimes.run_overoptimisation:
        betas = list(next(iter(kept["runs"].values())))
        fits, frontier = regimes.reward_model.gao_frontier(kept["runs"], betas)
        return {**kept, "fits": fits, "frontier": frontier}
    return kept


def path_of(name: str, folder: Path | None = None) -> Path:
    return Path(folder or DATA) / f"{name}.json"


def _read(name: str, folder: Path | None = None) -> dict | None:
    """The stored file of ``name`` as written, or None."""
    p = path_of(name, folder)
    return json.loads(p.read_text()) if p.exists() else None


def _whole(name: str, rec: dict) -> dict:
    return {**rec, "result": _completed(name, _decode(rec["result"]))}


def load(name: str, folder: Path | None = None) -> dict:
    """The stored file of ``name``: {"call", "provenance", "run", "seconds", "result"} (result whole)."""
    rec = _read(name, folder)
    if rec is None:
        raise FileNotFoundError(f"{path_of(name, folder)}: not stored (python -m grpo_edu.studies.stored_runs --store)")
    return _whole(name, rec)


def live_requested() -> bool:
    """``$GRPO_EDU_LIVE`` is "1": every call runs here."""
    value = os.environ.get(LIVE_ENV, "")
    if value not in ("", "0", "1"):
        raise ValueError(f"${LIVE_ENV} must be 0 or 1, got {value!r}")
    return value == "1"


def matches(name: str, preset, reference, folder: Path | None = None) -> bool:
    """The stored result of ``name`` exists and was computed from this call's inputs on ``preset`` from ``reference``
    (its arguments and every part of `provenance` the same)."""
    return _matching(name, _read(name, folder), resolve_preset(preset), reference)


def _matching(name: str, rec: dict | None, preset, reference) -> bool:
    return (
        rec is not None
        and rec["call"] == _encode(_call(name, preset)[1])
        and rec["provenance"] == provenance(preset, reference)
    )


def get(name: str, reference, preset="cpu", live: bool = False, progress: bool = True, folder: Path | None = None):
    """The result of the call ``name`` on ``preset`` from ``reference``: the stored one when it `matches` and
    neither ``live`` nor ``$GRPO_EDU_LIVE=1`` asks for a run, else the call run here; one line says which. Returns ``(result, how)``, ``how`` "stored" or "live"."""
    preset = resolve_preset(preset)
    fn, kw = _call(name, preset)
    rec = None if live or live_requested() else _read(name, folder)
    if _matching(name, rec, preset, reference):
        rec = _whole(name, rec)
        print(f"{name}: read from the store ({rec['seconds']:.0f} s of training; LIVE = True trains it here)")
        return rec["result"], "stored"
    why = "LIVE" if live or live_requested() else "not stored for this code, reference, kernel and torch"
    print(f"{name}: trained here ({why})")
    return _invoke(name, reference, preset, progress), "live"


def _invoke(name: str, reference, preset, progress: bool):
    """Run the call ``name`` here."""
    fn, kw = _call(name, preset)
    if CALLS[name].form == "preset":
        return fn(preset, progress=progress, **kw)
    return fn(reference, preset, progress=progress, **kw)


def _preset_of(name: str, preset="cpu"):
    """``preset`` in the world of the call ``name``."""
    return with_world(resolve_preset(preset), CALLS[name].world)


def reference_of(name: str, preset, progress: bool = False):
    """The reference the call ``name`` starts from on ``preset`` (its `Call.reference`, else the preset's)."""
    build = CALLS[name].reference
    return build(preset) if build is not None else reference_policy(preset, progress=progress)


def run(fn, reference, preset="cpu", *, live: bool = False, progress: bool = True, **kwargs) -> dict:
    """``fn(reference, preset, progress=progress, **kwargs)``, or its stored result: a notebook writes the
    call itself, and gets the stored result when the call is one of `CALLS` (the same function and
    arguments, seeds counted from the preset's seed) and `get` would load it."""
    preset = resolve_preset(preset)
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in kwargs.items()}
    for name, call in CALLS.items():
        if call.fn is fn and call.form == "reference" and _call(name, preset)[1] == kwargs:
            return get(name, reference, preset, live=live, progress=progress)[0]
    print(f"{fn.__name__}: trained here (not a stored call: other arguments)")
    return fn(reference, preset, progress=progress, **kwargs)


def run_preset(fn, preset="cpu", *, live: bool = False, progress: bool = True, **kwargs) -> dict:
    """``fn(preset, progress=progress, **kwargs)`` (a study that builds its references from the preset), or its
    stored result: as `run`, for the calls of `CALLS` whose form is "preset" and whose world is the preset's."""
    preset = resolve_preset(preset)
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in kwargs.items()}
    for name, call in CALLS.items():
        if call.fn is fn and call.form == "preset" and call.world == preset.world and _call(name, preset)[1] == kwargs:
            reference = reference_policy(preset, progress=False)  # its weights are part of the provenance
            return get(name, reference, preset, live=live, progress=progress)[0]
    print(f"{fn.__name__}: trained here (not a stored call: other arguments or world)")
    return fn(preset, progress=progress, **kwargs)


def _text(x) -> str:
    return json.dumps(x, sort_keys=True)


def untimed(x, clocked=()):
    """``x`` without what a clock measured: a key naming seconds or time (``seconds_per_step``,
    ``acc_equal_time``) and the keys ``clocked`` (a call's `Call.clocked`). Two runs of one call that
    computes the same differ only there."""
    if isinstance(x, dict):
        return {
            k: untimed(v, clocked)
            for k, v in x.items()
            if not (isinstance(k, str) and ("seconds" in k or "time" in k or k in clocked))
        }
    if isinstance(x, (list, tuple)):
        return type(x)(untimed(v, clocked) for v in x)
    return x


def _commit() -> str:
    try:
        root = Path(__file__).resolve().parents[2]
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=10", "HEAD"], capture_output=True, text=True
        )
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def _dirty() -> bool | None:
    """Whether a file `SOURCES` hashes differs from the commit (None: no git here)."""
    try:
        root = Path(__file__).resolve().parents[2]
        files = [str(f.relative_to(root)) for f in source_files(SOURCES)]
        out = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", *files], capture_output=True, text=True
        )
        return bool(out.stdout.strip()) if out.returncode == 0 else None
    except (OSError, ValueError):
        return None


def store(names, preset="cpu", folder: Path | None = None, progress: bool = True, write: bool = True) -> dict:
    """Run each call on ``preset`` from its cached reference; write each result (``write``) and return
    {name: the record}."""
    out = {}
    for name in names:
        here = _preset_of(name, preset)
        reference = reference_of(name, here, progress)
        kw = _call(name, here)[1]
        t0 = time.perf_counter()
        result = _invoke(name, reference, here, progress)
        rec = {
            "call": _encode(kw),
            "provenance": provenance(here, reference),
            "run": {"threads": torch.get_num_threads(), "commit": _commit(), "dirty": _dirty()},
            "seconds": round(time.perf_counter() - t0, 1),
            "result": _encode(_stored_part(name, result)),
        }
        if write:
            path = path_of(name, folder)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps(rec, indent=None, separators=(",", ":")) + "\n")
            os.replace(tmp, path)
        out[name] = rec
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m grpo_edu.studies.stored_runs", description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="*", help=f"calls to run (default all: {', '.join(CALLS)})")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--store", action="store_true", help=f"run them and write {DATA.name}/NAME.json")
    what.add_argument("--check", action="store_true", help="run them and compare with the stored files")
    what.add_argument(
        "--list", action="store_true", help="say what is stored and whether it matches this code and machine"
    )
    args = p.parse_args(argv)
    names = args.names or list(CALLS)
    unknown = [n for n in names if n not in CALLS]
    if unknown:
        p.error(f"no stored call {', '.join(unknown)}; the calls are {', '.join(CALLS)}")
    preset = get_preset("cpu")
    if args.list:
        for n in names:
            if not path_of(n).exists():
                print(f"{n}: not stored")
                continue
            rec = load(n)
            here = _preset_of(n, preset)
            reference = reference_of(n, here)
            state = "matches this code and machine" if matches(n, here, reference) else "does not match: run --store"
            kernel, commit = rec["provenance"]["machine"]["kernel"], rec["run"]["commit"]
            commit += "+" if rec["run"].get("dirty") else ""  # + : its code differed from the commit
            print(f"{n}: {rec['seconds']} s on {kernel}, commit {commit}; {state}")
        return 0
    recs = store(names, preset, write=args.store)
    status = 0
    for n, rec in recs.items():
        if args.check:
            # as text: a NaN (an empty selection in a run) read back from the file is not equal to itself
            clocked = CALLS[n].clocked
            stored = json.loads(path_of(n).read_text())["result"] if path_of(n).exists() else None
            same = stored is not None and _text(untimed(stored, clocked)) == _text(untimed(rec["result"], clocked))
            status |= not same
            print(
                f"{n}: {rec['seconds']} s; {'equal to the stored result' if same else 'DIFFERS from the stored result'}"
            )
        else:
            print(f"{n}: {rec['seconds']} s; wrote {path_of(n)}")
    return status


if __name__ == "__main__":
    sys.exit(main())
