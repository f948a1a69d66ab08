"""The policy-lag regime's claims (grpo_edu/studies/regimes/policy_lag.py) on synthetic study results: each
number by hand, and each verdict shown flipping both ways by changing one run's curve."""

import pytest

from grpo_edu.studies.regimes import policy_lag as reg

LAGS = (0, 8, 32, 256)


def _res(curves: dict, seeds=(0, 1)) -> dict:
    """Rows of a `policy_lag.run` result: every (lag, correction) gets the default curve unless ``curves``
    gives its own; lag 0 only "none" and "m2po" (the others are "none"'s run there)."""
    rows = []
    for seed in seeds:
        for lag in LAGS:
            for c in ("none", "m2po") if lag == 0 else reg.ORDER:
                acc = curves.get((lag, c), curves.get("default"))
                acc = acc[seed] if isinstance(acc[0], list) else acc
                rows.append({"lag": lag, "correction": c, "seed": seed, "start": acc[0], "final": acc[-1],
                             "updates": [0, 40, 80, 120], "accuracy": list(acc)})  # fmt: skip
    return {"preset": "cpu", "steps": 30, "updates_per_step": 4, "rows": rows}


GOOD = [0.5, 0.8, 0.92, 0.95]  # reaches 90% at 80 updates; mean 0.7925
SLOW = [0.5, 0.6, 0.7, 0.85]  # never reaches; mean 0.6625
FALL = [0.5, 0.45, 0.4, 0.3]  # ends below its start; mean 0.4125


def _verdicts(res):
    return {c["claim"]: c["verdict"] for c in reg.claims(res)}


def _one(res, start):
    return next(c for c in reg.claims(res) if c["claim"].startswith(start))


def _has(res, part):
    return next(c for c in reg.claims(res) if part in c["claim"])


def test_reach_mean_and_breaking_lag_by_hand():
    row = {"updates": [0, 40, 80, 120], "accuracy": GOOD}
    assert reg.reach(row) == 80 and reg.reach(row, 0.96) is None and reg.reach(row, 0.5) == 0
    assert reg.mean_accuracy(row) == pytest.approx(0.7925)
    res = _res({"default": GOOD, (32, "none"): SLOW, (256, "none"): SLOW, (256, "decoupled"): SLOW})
    assert reg.breaking_lag(res, "none", 0) == 32
    assert reg.breaking_lag(res, "decoupled", 0) == 256
    assert reg.breaking_lag(res, "icepop", 1) is None  # reaches at every lag
    assert reg.breaking_lag(res, "tis", 0) is None and reg.breaking_lag(res, "ppo_clip", 0) is None
    assert reg.breaks(res)["none"] == [32, 32]
    # short of 90% beyond one evaluation's noise: best reading below 0.9 - 2 sqrt(0.9 * 0.1 / 500) = 0.87317
    assert reg.margin() == pytest.approx(0.026833, abs=1e-6)
    assert not reg.short({"accuracy": [0.5, 0.88]}) and reg.short({"accuracy": [0.5, 0.87]})
    near = _res({"default": GOOD, (32, "none"): [0.5, 0.8, 0.88, 0.85]})  # best 0.88: within the noise, not short
    assert reg.breaking_lag(near, "none", 0) is None


def test_pipelinerl_holds_then_fails_when_the_small_lag_slows_learning():
    on = _res({"default": GOOD})  # tis at lag 8 the same curve as lag 0: effect 0 > -0.02 on both seeds
    assert _one(on, "PipelineRL")["verdict"] == "holds"
    assert "tis at lag 8 0.792 [0.792, 0.792] vs lag 0 0.792 [0.792, 0.792]" in _one(on, "PipelineRL")["measurement"]
    slow = _res({"default": GOOD, (8, "tis"): SLOW})  # 0.6625 - 0.7925 = -0.13 <= -0.05 on both
    assert _one(slow, "PipelineRL")["verdict"] == "fails here"
    assert _has(slow, "ignoring a small lag")["verdict"] == "holds"  # none's run is not PipelineRL's
    mixed = _res({"default": GOOD, (8, "tis"): [SLOW, GOOD]})  # one seed each way
    assert _one(mixed, "PipelineRL")["verdict"] == "depends"
    ignored = _res({"default": GOOD, (8, "none"): SLOW})
    assert _has(ignored, "ignoring a small lag")["verdict"] == "fails here"
    assert _one(ignored, "PipelineRL")["verdict"] == "holds"
    assert "final accuracy: lag 8 0.850 [0.850, 0.850]" in _has(ignored, "ignoring a small lag")["measurement"]


def test_m2po_standard_grpo_degrades_both_ways():
    name = "M2PO: standard GRPO"
    assert _one(_res({"default": GOOD}), name)["verdict"] == "fails here"  # the same curve: 0 <= 0
    assert _one(_res({"default": GOOD, (256, "ppo_clip"): SLOW}), name)["verdict"] == "holds"
    longer = _res({"default": GOOD})
    longer["steps"] = 100  # 400 updates: the sampler 256 behind for the last 144
    assert "(here the last 144 of 400 updates)" in _one(longer, name)["claim"]
    assert "(here none of the 120 updates)" in _one(_res({"default": GOOD}), name)["claim"]


def test_areal_both_ways():
    res = _res({"default": GOOD, (32, "ppo_clip"): SLOW, (256, "ppo_clip"): SLOW})
    v = _verdicts(res)
    assert v["AReaL: PPO's clip measured against the sampler degrades with the sampler 32 updates behind"] == "holds"
    for lag in (32, 256):  # decoupled level with lag 0, whatever ppo_clip and none do
        assert v[
            f"AReaL: with the decoupled objective, data {lag} updates stale costs less than 0.02 of mean held-out "
            "accuracy over the run against on-policy"
        ] == ("holds")
    flip = _res({"default": GOOD, (32, "decoupled"): SLOW, (256, "decoupled"): SLOW})  # decoupled the slow one
    v = _verdicts(flip)
    assert v["AReaL: PPO's clip measured against the sampler degrades with the sampler 32 updates behind"] == (
        "fails here"
    )
    assert v[
        "AReaL: with the decoupled objective, data 256 updates stale costs less than 0.02 of mean held-out "
        "accuracy over the run against on-policy"
    ] == ("fails here")  # 0.6625 - 0.7925 = -0.13 <= -0.05


def test_m2po_icepop_tis_both_ways():
    ok = _res({"default": GOOD, (256, "none"): SLOW})
    m2po = "M2PO: with data 256 updates stale"
    assert _one(ok, m2po)["verdict"] == "holds"
    assert _has(ok, "IcePop's two-sided mask, made for two engines' mismatch")["verdict"] == "holds"
    assert _has(ok, "truncated IS, made for two engines' mismatch")["verdict"] == "holds"
    bad = _res({"default": GOOD, (256, "m2po"): SLOW, (256, "icepop"): SLOW, (256, "tis"): SLOW})
    assert _one(bad, m2po)["verdict"] == "fails here"  # curve means 0.6625 - 0.7925 = -0.13
    assert _has(bad, "truncated IS, made for two engines' mismatch")["verdict"] == "fails here"


def test_a_correction_moves_the_break_by_grid_steps():
    res = _res({"default": GOOD, (32, "none"): SLOW, (256, "none"): SLOW, (256, "decoupled"): SLOW,
                (32, "ppo_clip"): SLOW})  # fmt: skip
    c = _has(res, "decoupled moves up")
    assert c["verdict"] == "holds"  # none breaks at 32 (index 2), decoupled at 256 (index 3)
    assert "decoupled 256, 256 vs none 32, 32" in c["measurement"]
    assert _has(res, "icepop moves up")["verdict"] == "holds"  # never: index 4
    assert "icepop never, never" in _has(res, "icepop moves up")["measurement"]
    assert _has(res, "ppo_clip moves up")["verdict"] == "fails here"  # the same lag 32
    assert [x["verdict"] for x in reg.claims(_res({"default": SLOW}))][-5:] == ["fails here"] * 5  # all break at 0


def test_a_missing_run_reads_depends():
    res = _res({"default": GOOD})
    res["rows"] = [r for r in res["rows"] if not (r["lag"] == 256 and r["correction"] == "m2po")]
    assert _one(res, "M2PO: with data")["verdict"] == "depends"


def test_the_figure_is_the_studys():
    from grpo_edu.figures.plotstyle import alt_text

    fig = reg.figure(_res({"default": GOOD}))
    assert "one line per correction (none, ppo_clip, decoupled, icepop, tis, m2po)" in alt_text(fig)
