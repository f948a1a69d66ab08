"""The compute-law study (grpo_edu.studies.compute_law): a run's fit recovers the law's parameters and its
prediction beats "it stays where it is" on an exact curve, the naive error by hand, the verdicts flip both
ways on synthetic fits, bad input, and its verdicts on a tiny run pinned in tests/regime_verdicts.json."""

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from grpo_edu import ModelConfig, TinyGPT, get_preset
from grpo_edu.measure.fits import compute_law
from grpo_edu.studies import compute_law as cl

PINS = Path(__file__).with_name("regime_verdicts.json")


def synthetic_run(a=0.8, b=1.5, c_mid=40_000.0, r0=0.1, n=21, noise=0.0, seed=0) -> dict:
    tokens = np.linspace(0.0, 200_000.0, n)
    r = np.r_[r0, compute_law(tokens[1:], r0, a, b, c_mid)]
    r[1:] += np.random.default_rng(seed).normal(0.0, noise, n - 1)
    return {"seed": seed, "step": list(range(n)), "tokens": tokens.tolist(), "pass_rate": r.tolist()}


def test_fit_run_recovers_the_law_and_predicts_the_rest():
    run = synthetic_run()
    full = cl.fit_run(run)
    assert full["a"] == pytest.approx(0.8, abs=1e-4) and full["b"] == pytest.approx(1.5, rel=1e-3)
    assert full["c_mid"] == pytest.approx(40_000.0, rel=1e-3) and full["r0"] == 0.1 and full["n"] == 20
    half = cl.fit_run(run, 0.5)  # tokens 10k..100k fitted (10 points), 110k..200k predicted
    assert half["n"] == 10 and half["error"] < 1e-4
    r = np.asarray(run["pass_rate"])
    naive = np.mean(r[8:11])  # the mean of the last 3 fitted: tokens 80k, 90k, 100k
    assert half["naive"] == pytest.approx(np.mean(np.abs(r[11:] - naive)), abs=1e-6) and half["naive"] > 0.03


def test_naive_error_by_hand():
    # a flat run, 0.1 +- 0.02 alternating: the naive level is the mean of the last 3 fitted (tokens 80k, 90k,
    # 100k: +, -, +), 0.1 + 0.02/3; the 10 later points, 5 at 0.08 and 5 at 0.12, miss it by 0.02667 and 0.01333
    run = synthetic_run()
    run["pass_rate"] = [0.1] + [0.1 + 0.02 * (-1) ** i for i in range(1, 21)]
    half = cl.fit_run(run, 0.5)
    assert half["naive"] == pytest.approx((5 * (0.02 + 0.02 / 3) + 5 * (0.02 - 0.02 / 3)) / 10, abs=1e-6)


def fits_of(da=(0.0, 0.0), rb=(1.0, 1.0), rm=(1.0, 1.0)) -> dict:
    base = [{"a": 0.7, "b": 1.5, "c_mid": 4e4}, {"a": 0.72, "b": 1.4, "c_mid": 5e4}]
    arm = [{"a": f["a"] + d, "b": f["b"] * x, "c_mid": f["c_mid"] * y} for f, d, x, y in zip(base, da, rb, rm)]
    return {"default": base, "knob": arm}


def verdicts(fits, gains=(0.5, 0.5)):
    preds = {"default": [{"error": 1 - g, "naive": 1.0} for g in gains]}
    knob = [c for c in cl.claims_of(fits, preds) if " moves " in c["claim"]]
    return {c["claim"].split(" moves ")[-1].split(" of ")[0]: c["verdict"] for c in knob}


def test_verdicts_flip_both_ways():
    v = verdicts(fits_of(da=(0.05, 0.03), rb=(1.5, 1.3), rm=(0.5, 0.7)))  # A up 0.03+, B up 30%+, C_mid down 30%+
    assert v["the ceiling A"] == v["the steepness B"] == v["the midpoint C_mid"] == "holds"
    v = verdicts(fits_of(da=(-0.05, -0.03)))  # A down on both seeds: the knob moves it (signed as its mean)
    assert v["the ceiling A"] == "holds" and v["the steepness B"] == v["the midpoint C_mid"] == "fails here"
    v = verdicts(fits_of(da=(0.005, -0.008), rb=(1.05, 0.95), rm=(1.09, 1.0)))  # all within the null
    assert set(v.values()) == {"fails here"}
    v = verdicts(fits_of(da=(0.05, -0.05), rb=(1.5, 1.05), rm=(1.15, 1.15)))  # seeds disagree, or in the band
    assert v["the ceiling A"] == v["the steepness B"] == v["the midpoint C_mid"] == "depends"


def test_prediction_verdict_flips_both_ways():
    fits = fits_of()
    claim = "fitted on the first part of a run, the law predicts the rest better than 'it stays where it is'"
    for gains, want in (((0.5, 0.2), "holds"), ((-0.1, -0.5), "fails here"), ((0.3, -0.3), "depends")):
        preds = {"default": [{"error": 1 - g, "naive": 1.0} for g in gains]}
        assert {c["claim"]: c["verdict"] for c in cl.claims_of(fits, preds)}[claim] == want


def test_bad_input_is_a_value_error():
    run = synthetic_run()
    with pytest.raises(ValueError, match="share must be in"):
        cl.fit_run(run, 0.0)
    with pytest.raises(ValueError, match="step-0 evaluation"):
        cl.fit_run({**run, "tokens": run["tokens"][1:], "pass_rate": run["pass_rate"][1:]})
    with pytest.raises(ValueError, match="must include 'default'"):
        cl.run_compute_law(None, "cpu", arms={"beta 0": {"beta": 0.0}}, progress=False)
    with pytest.raises(ValueError, match="steps / eval_every"):
        cl.run_compute_law(None, "cpu", steps=10, eval_every=2, progress=False)
    with pytest.raises(SystemExit):
        cl.main(["--arms", "default,no such knob"])


def test_every_arm_changes_one_knob_of_the_default():
    from grpo_edu.algorithms import GRPOConfig

    default = GRPOConfig()
    for arm, knobs in cl.ARMS.items():
        assert len(knobs) == (0 if arm == "default" else 1)
        for k, v in knobs.items():
            assert getattr(default, k) != v and getattr(GRPOConfig(**knobs), k) == v


def test_verdicts_are_pinned(tmp_path, monkeypatch):
    """The tiny run's verdicts, pinned beside the regimes' (``GRPO_EDU_PIN_VERDICTS=1`` re-pins)."""
    monkeypatch.setenv("GRPO_EDU_CACHE", str(tmp_path))
    torch.manual_seed(0)
    ref = TinyGPT(ModelConfig(d_model=16, n_layers=1, n_heads=2, max_seq_len=12))
    res = cl.run_compute_law(ref, get_preset("cpu", sequences_per_step=64), seeds=(0, 1), steps=10, eval_every=1,
                             progress=False)  # fmt: skip
    assert json.loads(json.dumps(res)) == res  # JSON-able, as stored
    assert all(math.isfinite(f["a"]) for fs in res["fits"].values() for f in fs)
    got = [[c["claim"], c["verdict"]] for c in res["claims"]]
    pins = json.loads(PINS.read_text())
    if os.environ.get("GRPO_EDU_PIN_VERDICTS"):
        pins["compute_law"] = got
        PINS.write_text(json.dumps(pins, indent=1, sort_keys=True) + "\n")
        pytest.skip(f"pinned {len(got)} verdicts of compute_law")
    assert "compute_law" in pins, "no pinned verdicts for compute_law: run with GRPO_EDU_PIN_VERDICTS=1"
    assert [c for c, _ in got] == [c for c, _ in pins["compute_law"]], "the claims changed (re-pin with the reason)"
    flips = [f"{c!r}: pinned [{p}], now [{v}]" for (c, v), (_, p) in zip(got, pins["compute_law"]) if v != p]
    assert not flips, "verdicts flipped:\n" + "\n".join(flips)


def _same_fit(stored: dict, refit: dict) -> bool:
    """The same keys, integers equal, floats within 1e-7 of each other relatively: the fit's grid and
    iterations sum in an order that another numpy or CPU may change in the 10th digit (numpy 2.4.6 moved
    c_mid 128746.331517 to 128746.331947), and the store keeps 6 decimals of numbers up to 1e5."""
    if stored.keys() != refit.keys():
        return False
    return all(
        math.isclose(v, refit[k], rel_tol=1e-7, abs_tol=1e-6) if isinstance(v, float) else v == refit[k]
        for k, v in stored.items()
    )


def test_the_stored_study_is_what_its_fits_say():
    """course/data/compute_law.json (``python -m grpo_edu.studies.compute_law``): its fits are those of its runs,
    its verdicts those of its fits, every knob on the same seeds as the default."""
    res = cl.load()
    assert set(res["fits"]) == set(cl.ARMS) and res["config"]["seeds"] == [r["seed"] for r in res["runs"]["default"]]
    for arm, runs in res["runs"].items():
        assert [r["seed"] for r in runs] == res["config"]["seeds"]
        assert _same_fit(res["fits"][arm][0], cl.fit_run(runs[0])), arm
        assert _same_fit(res["predictions"][arm][0], cl.fit_run(runs[0], res["config"]["fit_share"])), arm
        assert not _same_fit(res["fits"][arm][0], cl.fit_run(runs[1])), arm  # control: another seed's run differs
    assert res["claims"] == cl.claims_of(res["fits"], res["predictions"])
