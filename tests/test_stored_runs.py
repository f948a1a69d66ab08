"""Notebook 10's stored runs (`grpo_edu.studies.stored_runs`): a stored result is the call's own result
(stored, loaded and made whole, it equals the run it came from), it stands in for the call only when it is
what the call would compute from (the same preset and seed, reference config and weights, code, torch
and CPU kernel; not with ``live``, ``$GRPO_EDU_LIVE=1``, a seed shift, another reference, code or machine), the committed files are those of this code, and the
code hash covers every project file the calls run."""

import json
import os
import sys
from pathlib import Path

import pytest
import torch

from grpo_edu import ModelConfig, TinyGPT, get_preset, reference_policy
from grpo_edu.measure.compare import run_comparison
from grpo_edu.studies import credit_pays, distillation, policy_lag, regimes
from grpo_edu.studies import stored_runs as S
from grpo_edu.warmstart.presets import SEED_SHIFT_ENV
from grpo_edu.warmstart.reference import source_files

TINY = {  # each stored call, small: a step or two of 64 completions (a regime's from a 1-layer policy)
    "long_run": S.Call(regimes.run_long_run, {"seeds": (0, 1), "steps": 2}),
    "overoptimisation": S.Call(
        regimes.run_overoptimisation,
        {"seeds": (0,), "steps": 4, "betas": (0.0, 0.3), "sizes": (64, 128), "eval_every": 2},
    ),
    "long_run_entropy": S.Call(regimes.run_long_run_entropy, {"seeds": (0,), "steps": 3}),
    # the "preset" form: each builds (or loads from the cache) its references from the preset
    "race_spread": S.Call(
        run_comparison, {"seeds": 1, "steps": 1, "measure": False, "algorithms": ("grpo",)}, "preset", "spread"
    ),
    "policy_lag": S.Call(policy_lag.run, {"lags": (0, 2), "seeds": (0,), "steps": 1, "eval_every": 1}, "preset"),
    "distillation": S.Call(distillation.run, {"seeds": 1, "size": "tiny"}, "preset"),
    "credit_scratchpad": S.Call(credit_pays.scratchpad_reading, {"seeds": (0,), "size": "tiny"}, "preset"),
    "credit_junk": S.Call(credit_pays.junk_reading, {"seeds": (0,), "size": "tiny"}, "preset"),
    "credit_pairs": S.Call(
        credit_pays.run_pairs,
        {
            "pairs": {
                "spread": ("V*(s_0), exact prompt value", "V*(s_t), lam 0"),
                "junk": ("batch mean", "learned critic (PPO)"),
            },
            "seeds": (0,),
            "size": "tiny",
        },
        "preset",
    ),
    "thinking_blank": S.Call(regimes.thinking.run_causes, {"seeds": (0,), "steps": 2, "tiny": True}),
}
PRESET_FORM = [n for n, c in TINY.items() if c.form == "preset"]


def _tiny_ref():
    torch.manual_seed(0)
    return TinyGPT(ModelConfig(d_model=16, n_layers=1, n_heads=2, max_seq_len=22))  # 22: thinking_blank's task fits


@pytest.fixture
def tiny(monkeypatch):
    """The calls made small, the reference a tiny untrained policy, the cpu preset at 64 completions a step."""
    monkeypatch.delenv(SEED_SHIFT_ENV, raising=False)
    monkeypatch.delenv(S.LIVE_ENV, raising=False)
    monkeypatch.setattr(S, "CALLS", TINY)
    ref = _tiny_ref()
    monkeypatch.setattr(S, "reference_policy", lambda preset, progress=True: ref)
    return ref, get_preset("cpu", sequences_per_step=64)


def _comparable(name, result):
    """The result as text (a NaN of a tiny run equals itself there), the fits by their parameters, what a
    clock measured left out."""
    if name == "overoptimisation":
        fits = {n: (f.alpha, f.beta, f.rmse) for n, f in result["fits"].items()}
        result = {**{k: v for k, v in result.items() if k != "fits"}, "fits": fits}
    return json.dumps(S._encode(S.untimed(result)), sort_keys=True)


@pytest.mark.parametrize("name", [n for n in TINY if n not in PRESET_FORM] + ["policy_lag"])
def test_a_stored_result_loads_as_the_run_it_came_from(name, tiny, tmp_path):
    ref, preset = tiny
    live, how = S.get(name, ref, preset, live=True, progress=False)
    assert how == "live"
    S.store([name], preset, folder=tmp_path, progress=False)
    loaded, how = S.get(name, ref, preset, progress=False, folder=tmp_path)
    assert how == "stored"
    assert _comparable(name, loaded) == _comparable(name, live)
    if name == "overoptimisation":  # the fits and frontier are computed again from the stored runs: the control
        path = S.path_of(name, tmp_path)  # a penalised run's point moved in the file moves the loaded frontier
        rec = json.loads(path.read_text())
        assert "fits" not in rec["result"] and "frontier" not in rec["result"]
        runs = dict(rec["result"]["runs"]["__items__"])  # {size: {"__items__": [[beta, curves], ...]}}
        dict(runs[64]["__items__"])[0.3][0]["gold"][1] += 0.5
        path.write_text(json.dumps(rec))
        moved = S.load(name, tmp_path)["result"]
        assert moved["frontier"][64][0.3]["mean"] != live["frontier"][64][0.3]["mean"]


@pytest.mark.parametrize(
    "change", ["nothing", "live", "environment", "seed", "code", "kernel", "torch", "reference", "no file"]
)
def test_the_store_stands_in_only_for_the_same_computation(change, tiny, tmp_path, monkeypatch):
    """Unchanged, the call loads (its function is not called: the control); asked live, by the notebook's
    flag or ``$GRPO_EDU_LIVE``, on a shifted seed, after the code changed, on another CPU kernel or torch
    build, from another reference, or with nothing stored, it runs."""
    ref, preset = tiny
    S.store(["long_run"], preset, folder=tmp_path, progress=False)
    calls = []
    monkeypatch.setattr(
        S, "CALLS", {"long_run": S.Call(lambda *a, **k: calls.append(k) or {"ran": True}, TINY["long_run"].kwargs)}
    )
    live = change == "live"
    if change == "environment":
        monkeypatch.setenv(S.LIVE_ENV, "1")
    if change == "seed":
        monkeypatch.setenv(SEED_SHIFT_ENV, "3")
        preset = get_preset("cpu", sequences_per_step=64)
    if change == "code":
        real = S.code_fingerprint
        monkeypatch.setattr(S, "code_fingerprint", lambda patterns: real(patterns) + "-edited")
    if change in ("kernel", "torch"):
        real_machine = S.machine
        monkeypatch.setattr(S, "machine", lambda: {**real_machine(), change: "other"})
    if change == "reference":
        ref = _tiny_ref()
        with torch.no_grad():
            next(ref.parameters()).add_(1e-6)
    if change == "no file":
        (tmp_path / "long_run.json").unlink()
    result, how = S.get("long_run", ref, preset, live=live, progress=False, folder=tmp_path)
    if change == "nothing":
        assert how == "stored" and not calls and "curves" in result
    else:
        assert how == "live" and result == {"ran": True} and len(calls) == 1
    if change == "seed":  # the live call's seeds follow the shifted preset
        assert calls[0]["seeds"] == (3, 4)


def test_bad_input_is_one_line_before_any_work(tiny, monkeypatch):
    ref, preset = tiny
    with pytest.raises(ValueError, match="no stored call 'long_runs'"):
        S.get("long_runs", ref, preset)
    monkeypatch.setenv(S.LIVE_ENV, "yes")
    with pytest.raises(ValueError, match="GRPO_EDU_LIVE must be 0 or 1"):
        S.get("long_run", ref, preset)
    with pytest.raises(TypeError, match="not complex"):
        S._encode({"x": 1j})


def test_the_committed_stores_are_this_codes(monkeypatch):
    """Each stored result was computed by this code, on the cpu preset at seed 0 (in its call's world), with
    the call its notebook makes: after a change to what trains them (`SOURCES`), run
    ``python -m grpo_edu.studies.stored_runs --store`` (about 13 minutes on one thread) and commit the files."""
    monkeypatch.delenv(SEED_SHIFT_ENV, raising=False)
    base = get_preset("cpu")
    for name in S.CALLS:
        preset = S._preset_of(name, base)
        reference = S.reference_of(name, preset)
        here = S.provenance(preset, reference)
        assert S.path_of(name).exists(), f"{name}: not stored (python -m grpo_edu.studies.stored_runs --store)"
        rec = json.loads(S.path_of(name).read_text())
        assert rec["call"] == S._encode(S._call(name, preset)[1]), f"{name}: stored with another call"
        stored = rec["provenance"]
        for part in ("preset", "reference", "source"):
            assert stored[part] == here[part], (
                f"{name}: stored with another {part}; python -m grpo_edu.studies.stored_runs --store"
            )
        if stored["machine"] == here["machine"]:  # the machine that stored them: the same reference, so it loads
            assert stored["reference_weights"] == here["reference_weights"] and S.matches(name, preset, reference)
    # control: after an edit of the code the source comparison above fails for every stored call
    real = S.code_fingerprint
    monkeypatch.setattr(S, "code_fingerprint", lambda patterns: real(patterns) + "-edited")
    edited = S.provenance(base, reference_policy(base, progress=False))["source"]
    assert all(json.loads(S.path_of(n).read_text())["provenance"]["source"] != edited for n in S.CALLS)


def test_the_code_hash_covers_every_project_file_the_calls_run(tiny, project_files_run):
    """A file the stored calls run that `SOURCES` does not hash could change their results without staling
    the store."""
    ref, preset = tiny
    ran = project_files_run(lambda: [S.get(name, ref, preset, live=True, progress=False) for name in TINY])
    hashed = {str(f) for f in source_files(S.SOURCES)}
    for part in ("train.py", "long_run_entropy.py", "reward_model.py", "compare.py", "policy_lag.py"):  # control
        assert any(f.endswith(part) for f in ran), part
    ran.discard(str(Path(S.__file__).resolve()))  # the loader itself computes nothing stored
    assert ran <= hashed, f"the stored calls ran files the code hash does not cover: {sorted(ran - hashed)}"


def test_a_notebook_writes_the_call_and_gets_the_store(tiny, tmp_path, monkeypatch, capsys):
    """`run` with a stored call's function and arguments loads it; other arguments (another step count: the
    control) run the call."""
    ref, preset = tiny
    monkeypatch.setattr(S, "DATA", tmp_path)
    S.store(["long_run"], preset, progress=False)
    calls = []
    real = regimes.run_long_run

    def counted(*a, **k):
        calls.append(k)
        return real(*a, **k)

    monkeypatch.setattr(S, "CALLS", {"long_run": S.Call(counted, TINY["long_run"].kwargs)})
    stored = S.run(counted, ref, preset, seeds=(0, 1), steps=2, progress=False)
    assert not calls and stored == S.load("long_run")["result"]
    capsys.readouterr()
    S.run(counted, ref, preset, seeds=[0, 1], steps=3, progress=False)
    assert len(calls) == 1 and calls[0]["steps"] == 3
    assert "counted: trained here (not a stored call" in capsys.readouterr().out  # it says so too


def test_the_machine_is_the_kernel_aten_runs():
    """`machine` reads the kernel ATen runs: ``ATEN_CPU_CAPABILITY=default`` in a fresh process names another
    one wherever the native kernel is not the default (the control: the native one, in this process)."""
    import subprocess

    code = "from grpo_edu.studies import stored_runs as S; print(S.machine()['kernel'])"
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default"}
    forced = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    native = S.machine()["kernel"]
    assert forced.stdout.strip() == "DEFAULT"
    if native == "DEFAULT":
        pytest.skip("this CPU's native kernel is the default one: no other kernel to tell apart")
    assert native != forced.stdout.strip()


def test_a_stored_read_says_so(tiny, tmp_path, capsys):
    ref, preset = tiny
    S.store(["long_run"], preset, folder=tmp_path, progress=False)
    capsys.readouterr()
    S.get("long_run", ref, preset, progress=False, folder=tmp_path)
    assert "long_run: read from the store" in capsys.readouterr().out
    S.get("long_run", ref, preset, live=True, progress=False, folder=tmp_path)  # control: a live run says it trained
    out = capsys.readouterr().out
    assert "read from the store" not in out and "long_run: trained here (LIVE)" in out


def test_a_study_from_the_presets_reference_gets_its_store(tiny, tmp_path, monkeypatch):
    """`run_preset` with a stored call of the "preset" form loads it, in the call's world; in another world
    or with another step count (the controls) the call runs."""
    ref, preset = tiny
    monkeypatch.setattr(S, "DATA", tmp_path)
    calls = []

    def counted(preset, progress=True, **k):
        calls.append((preset.world, k))
        return {"world": preset.world, "steps": k["steps"]}

    monkeypatch.setattr(S, "CALLS", {"study": S.Call(counted, {"seeds": 1, "steps": 2}, "preset", "spread")})
    S.store(["study"], preset, progress=False)
    assert calls == [("spread", {"seeds": 1, "steps": 2})]  # stored in the call's world
    spread = S.with_world(preset, "spread")
    assert S.run_preset(counted, spread, seeds=1, steps=2, progress=False) == {"world": "spread", "steps": 2}
    assert len(calls) == 1  # read, not run
    S.run_preset(counted, preset, seeds=1, steps=2, progress=False)  # the default world: not this store
    S.run_preset(counted, spread, seeds=1, steps=3, progress=False)
    assert calls[1:] == [("default", {"seeds": 1, "steps": 2}), ("spread", {"seeds": 1, "steps": 3})]


def test_a_store_says_whether_its_code_differed_from_the_commit(monkeypatch):
    """``run.dirty``: git's status of the hashed files (a line: changed; none: clean; git failing: unknown)."""
    import subprocess

    seen = []

    def fake(status, code=0):
        def run(args, **kw):
            seen.append(args)
            return subprocess.CompletedProcess(args, code, stdout=status, stderr="")

        return run

    for status, code, want in ((" M envs/arithmetic.py\n", 0, True), ("", 0, False), ("", 128, None)):
        monkeypatch.setattr(S.subprocess, "run", fake(status, code))
        assert S._dirty() is want
    assert "status" in seen[0] and any(a.endswith("envs/arithmetic.py") for a in seen[0])  # the hashed files


def test_plain_makes_a_result_storable():
    """`plain` turns numpy and torch values into Python numbers and lists, keeping dicts and tuples: the
    encoder accepts the result (the control: it refuses the numpy array as it comes)."""
    import numpy as np

    from grpo_edu.measure.common import plain

    raw = {"a": np.float64(1.5), "b": (np.arange(2), torch.tensor([1.0, 2.0])), "c": [np.int64(3), "x"]}
    with pytest.raises(TypeError, match="not ndarray"):
        S._encode(raw)
    out = plain(raw)
    assert out == {"a": 1.5, "b": ([0, 1], [1.0, 2.0]), "c": [3, "x"]}
    assert type(out["a"]) is float and type(out["b"]) is tuple and type(out["c"][0]) is int
    assert S._decode(S._encode(out)) == out


def test_untimed_leaves_out_what_a_clock_measured():
    """Keys naming seconds or time go, and a call's own clocked keys (distillation's ``evals``: pairs of
    seconds and accuracy); the rest stays (the control: an accuracy that differs still differs)."""
    a = {"acc": 0.5, "seconds_per_step": 0.1, "runs": [{"acc_equal_time": 0.3, "evals": [(1.0, 0.5)], "n": 2}]}
    b = {"acc": 0.5, "seconds_per_step": 0.2, "runs": [{"acc_equal_time": 0.4, "evals": [(2.0, 0.5)], "n": 2}]}
    assert S.untimed(a, ("evals",)) == S.untimed(b, ("evals",)) == {"acc": 0.5, "runs": [{"n": 2}]}
    assert S.untimed(a) != S.untimed(b)  # evals kept without the call's clocked keys
    assert S.untimed({**a, "acc": 0.6}, ("evals",)) != S.untimed(b, ("evals",))
    assert "evals" in S.CALLS["distillation"].clocked
