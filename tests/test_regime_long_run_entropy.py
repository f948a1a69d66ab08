"""The long_run_entropy regime on a tiny policy: four runs per seed, each with its per-step covariance, entropy
change and accuracy; seven claims (the covariance's three, two per Cov method); its figure draws."""

import torch

from grpo_edu import ModelConfig, TinyGPT, get_preset
from grpo_edu.studies import regimes
from grpo_edu.studies.regimes import long_run_entropy


def test_long_run_entropy_on_a_tiny_setup(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_EDU_CACHE", str(tmp_path))
    torch.manual_seed(0)
    ref = TinyGPT(ModelConfig(d_model=16, n_layers=1, n_heads=2, max_seq_len=12))
    res = regimes.run_long_run_entropy(ref, get_preset("cpu", sequences_per_step=32), seeds=(0,), steps=4,
                                       progress=False)  # fmt: skip
    assert list(res["curves"]) == ["clip 0.2", "clip-higher 0.28", "Clip-Cov", "KL-Cov"]
    for runs in res["curves"].values():
        c = runs[0]
        assert len(c["covariance"]) == len(c["entropy_change"]) == len(c["entropy_before"]) == 4
        assert c["eval_step"][-1] == 4
    assert res["settings"]["Clip-Cov"] == {"policy_loss": "clip_cov", "clip_cov_ratio": long_run_entropy.CLIP_COV_RATIO}
    assert len(res["claims"]) == 7 and all(c["verdict"] in ("holds", "fails here", "depends") for c in res["claims"])
    regimes.plot_regime("long_run_entropy", res, tmp_path / "e.png")
    assert (tmp_path / "e.png").stat().st_size > 0
