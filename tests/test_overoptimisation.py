"""regimes.run_overoptimisation on a tiny setup: the runs per r_phi size and beta, Gao's curve fitted
to the unpenalised runs, and the penalised runs' residuals against it."""

import numpy as np
import pytest
import torch

from grpo_edu import ModelConfig, TinyGPT, get_preset
from grpo_edu.measure.fits import GaoFit
from grpo_edu.studies import regimes


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    ref = TinyGPT(ModelConfig(d_model=16, n_layers=1, n_heads=2, max_seq_len=12))
    return ref, get_preset("cpu", sequences_per_step=64)


def test_overoptimisation_on_a_tiny_setup(tiny):
    ref, preset = tiny
    res = regimes.run_overoptimisation(
        ref, preset, seeds=(0,), steps=2, betas=(0.0, 0.3), sizes=(64,), eval_every=1, progress=False
    )
    assert set(res["reward_models"]) == {64} and set(res["runs"][64]) == {0.0, 0.3}
    for runs in res["runs"][64].values():
        c = runs[0]
        assert c["step"] == [0, 1, 2] and len(c["gold"]) == len(c["kl"]) == len(c["sampled_gold"]) == 3
        assert abs(c["kl"][0]) < 1e-5 and all(0 <= g <= 1 for g in c["sampled_gold"])
    # step 0 is the reference's samples of the monitor's fixed prompts and seed: the same sampled gold at every beta
    assert len({runs[0]["sampled_gold"][0] for runs in res["runs"][64].values()}) == 1
    fit, start = res["fits"][64], res["runs"][64][0.0][0]["gold"][0]
    assert isinstance(fit, GaoFit) and fit.start == start and fit.n == 2  # steps 1 and 2 of the one beta-0 run
    f = res["frontier"][64]
    assert set(f) == {0.3} and f[0.3]["n"] == 2
    run = res["runs"][64][0.3][0]
    residuals = [g - float(fit.predict([k])[0]) for k, g in zip(run["kl"][1:], run["gold"][1:], strict=True)]
    assert f[0.3]["mean"] == pytest.approx(sum(residuals) / 2)
    assert f[0.3]["max_abs"] == pytest.approx(max(abs(r) for r in residuals))


def test_overoptimisation_needs_the_unpenalised_runs(tiny):
    with pytest.raises(ValueError, match="betas must include 0"):
        regimes.run_overoptimisation(*tiny, betas=(0.3,), progress=False)


def _curve(kl, alpha, beta, start=0.5, lift=0.0):
    d = np.sqrt(np.array(kl))
    gold = start + d * (alpha - beta * np.log(np.where(d > 0, d, 1.0))) + lift * (d > 0)
    return {"kl": list(kl), "gold": list(gold)}


def test_gao_claims_by_hand():
    kl = [0.0, 0.25, 1.0, 4.0]  # d = 0, 0.5, 1, 2
    on = {"beta 0": [_curve(kl, 0.4, 0.3)] * 2, "beta 0.3 (loss)": [_curve([0.0, 0.1, 0.3], 0.4, 0.3)] * 2}
    peak, along = regimes.gao_claims(on)
    assert peak["verdict"] == "holds" and "beta +0.30" in peak["measurement"]  # fitted beta 0.3 > 0 on both seeds
    assert along["verdict"] == "holds" and "+0.000, +0.000" in along["measurement"]  # on the curve exactly
    above = {"beta 0": [_curve(kl, 0.4, -0.3)] * 2, "beta 1": [_curve([0.0, 0.1, 0.3], 0.4, -0.3, lift=0.2)] * 2}
    peak, along = regimes.gao_claims(above)
    assert peak["verdict"] == "fails here"  # beta -0.3: no peak
    assert along["verdict"] == "fails here" and "+0.200" in along["measurement"]  # 0.2 above: >= 0.10
    few = {"beta 0": [{"kl": [0.0, 1.0], "gold": [0.5, 0.6]}], "beta 1": [{"kl": [0.0, 1.0], "gold": [0.5, 0.6]}]}
    peak, along = regimes.gao_claims(few)
    assert peak["verdict"] == along["verdict"] == "depends" and "too few points" in peak["measurement"]
