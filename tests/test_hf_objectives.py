"""Loss and gradient parity of the objectives after DAPO with TRL 1.16's own
``GRPOTrainer._compute_loss`` (GSPO: importance_sampling_level="sequence"; CISPO:
loss_type="cispo"; the sampler correction: vllm_importance_sampling_*), on the batch of
tests/test_hf.py, to 1e-6. Skipped without the [trl] extra."""

import pytest
import test_hf
import torch
from test_hf import B, G, T, _batch, _policy, _trainer

from grpo_edu import functional as Fn
from grpo_edu import hf
from grpo_edu.algorithms import GRPOConfig

trl, ref_dir = test_hf.trl, test_hf.ref_dir  # test_hf's fixtures: the [trl] skip, the exported pi_ref
AGGREGATION = {"grpo": "sequence_mean", "bnpo": "token_mean", "dr_grpo": "constant", "cispo": "token_mean"}


def _cfg(loss_type="grpo", beta=0.0, **kw):
    """A GRPOConfig that `hf.trl_config` maps to TRL's ``loss_type`` (one minibatch, one epoch)."""
    fields = dict(unbiased_std=True, loss_type=loss_type, beta=beta, max_length=T, group_size=G, epochs=1,
                  minibatches=1, **kw)  # fmt: skip
    return GRPOConfig(**hf.from_trl(GRPOConfig, fields))  # TRL's loss names, through the bridge


def _ours_through_grpo(cfg, monkeypatch, is_weights=None):
    """GRPO.loss on test_hf's batch (the library's code path), and d loss / d logp."""
    from grpo_edu import rollout
    from grpo_edu.algorithms import GRPO, Batch

    logp, old, ref, adv, mask = _batch()
    logp = logp.clone().requires_grad_(True)
    monkeypatch.setattr(rollout, "sequence_logprobs", lambda *a, **k: (logp, torch.zeros(B, T, 17)))
    ro = type("R", (), {"mask": mask, "select": lambda self, idx: self})()
    batch = Batch(ro, None, None, mask, old, ref, adv, is_weights=is_weights)
    loss, _ = GRPO(cfg).loss(batch, torch.arange(B))
    return loss.detach(), torch.autograd.grad(loss, logp)[0]


def _their_loss(trainer, **extra):
    """TRL's _compute_loss on the batch of test_hf._batch (the model forward stubbed), and d loss / d logp."""
    logp, old, ref, adv, mask = _batch()
    logp = logp.clone().requires_grad_(True)
    trainer._get_per_token_logps_and_entropies = lambda *a, **k: (logp, torch.zeros(B, T), None)
    inputs = {
        "prompt_ids": torch.ones(B, 2, dtype=torch.long),
        "prompt_mask": torch.ones(B, 2, dtype=torch.long),
        "completion_ids": torch.full((B, T), 5),
        "completion_mask": mask.long(),
        "advantages": adv,
        "old_per_token_logps": old,
        "ref_per_token_logps": ref,
        "num_items_in_batch": mask.sum(),
        **extra,
    }
    loss = trainer._compute_loss(trainer.model, inputs)
    return loss.detach(), torch.autograd.grad(loss, logp)[0]


def _our_loss(surrogate, aggregation, beta=0.0, weights=None):
    """grpo_edu.functional's pieces: surrogate(logp, old, adv, mask) [* weights] + beta k3, aggregated."""
    logp, old, ref, adv, mask = _batch()
    logp = logp.clone().requires_grad_(True)
    per_token = surrogate(logp, old, adv, mask)
    if weights is not None:
        per_token = per_token * weights
    if beta:
        per_token = per_token + beta * Fn.kl_estimate(logp, ref, "k3")
    loss = Fn.aggregate_loss(per_token, mask, aggregation, max_length=T)
    return loss.detach(), torch.autograd.grad(loss, logp)[0]


def _agree(ours, theirs):
    assert abs(float(ours[0] - theirs[0])) <= 1e-6
    assert (ours[1] - theirs[1]).abs().max() <= 1e-6
    assert ours[1].abs().max() > 1e-3  # a gradient to compare


@pytest.mark.parametrize("beta", [0.0, 0.04], ids=["beta0", "beta0.04"])
@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dr_grpo"])
def test_gspo_parity_with_trl(trl, ref_dir, task, monkeypatch, loss_type, beta):
    eps_low, eps_high = 0.05, 0.08  # the sequence ratios of this batch lie within 1 +- 0.2
    cfg = _cfg(loss_type, beta, importance_sampling_level="sequence", eps_low=eps_low, eps_high=eps_high)
    trainer = _trainer(cfg, ref_dir, task)  # the map: importance_sampling_level="sequence", epsilon, epsilon_high
    assert trainer.importance_sampling_level == "sequence" and trainer.epsilon_high == eps_high
    theirs = _their_loss(trainer)
    ours = _our_loss(lambda *a: Fn.gspo_loss(*a, eps_low=eps_low, eps_high=eps_high)[0], AGGREGATION[loss_type], beta)
    _agree(ours, theirs)
    _agree(_ours_through_grpo(cfg, monkeypatch), theirs)
    logp, old, _, adv, mask = _batch()
    clip = Fn.gspo_loss(logp, old, adv, mask, eps_low, eps_high)[1]["clip_ratio"]
    assert 0.1 < clip < 0.9  # both sides of the sequence clip are exercised


@pytest.mark.parametrize("beta", [0.0, 0.04], ids=["beta0", "beta0.04"])
@pytest.mark.parametrize("eps_high", [0.28, 4.0], ids=["cap1.28", "cap5"])
def test_cispo_parity_with_trl(trl, ref_dir, task, monkeypatch, eps_high, beta):
    """TRL's epsilon_high is CISPO's cap on the ratio itself: the map sends 1 + our eps_high."""
    cfg = _cfg("cispo", beta, eps_high=eps_high)
    trainer = _trainer(cfg, ref_dir, task)
    assert trainer.loss_type == "cispo" and trainer.epsilon_high == pytest.approx(1.0 + eps_high)
    theirs = _their_loss(trainer)
    ours = _our_loss(lambda lp, old, adv, m: Fn.cispo_loss(lp, old, adv, eps_high, mask=m)[0], "token_mean", beta)
    _agree(ours, theirs)
    _agree(_ours_through_grpo(cfg, monkeypatch), theirs)
    logp, old, _, adv, mask = _batch()
    clip = Fn.cispo_loss(logp, old, adv, eps_high, mask=mask)[1]["clip_ratio"]
    assert (0.1 < clip < 0.9) if eps_high < 1 else clip == 0.0


def test_cispo_with_several_minibatches_is_refused_by_the_map(trl):
    with pytest.raises(ValueError, match=r"GRPOConfig\.loss_type"):
        hf.trl_config(GRPOConfig(unbiased_std=True, policy_loss="cispo", minibatches=2), max_completion_length=4)
    with pytest.raises(ValueError, match=r"GRPOConfig\.sampler_dtype"):
        hf.trl_config(GRPOConfig(unbiased_std=True, sampler_dtype="bfloat16"), max_completion_length=4)
    a = hf.trl_config(
        GRPOConfig(
            unbiased_std=True, vllm_importance_sampling_mode="token_truncate", vllm_importance_sampling_clip_max=2.0
        ),
        max_completion_length=4,
    )
    assert (a.vllm_importance_sampling_mode, a.vllm_importance_sampling_clip_max, a.use_vllm) == (
        "token_truncate",
        2.0,
        False,
    )


def _is_weights(mode, clip_max, clip_min):
    """A sampler whose log-probs differ from pi_old by 0.3 * noise: weights on both sides of the bounds."""
    _, old, _, _, mask = _batch()
    sampler = old + 0.3 * torch.randn(B, T, generator=torch.Generator().manual_seed(7)) * mask
    return Fn.sampler_importance_weights(old, sampler, mask, mode, clip_max, clip_min)


@pytest.mark.parametrize("mode", Fn.SAMPLER_IS_MODES)
@pytest.mark.parametrize("loss_type", ["grpo", "bnpo"])
def test_sampler_correction_in_the_loss_parity_with_trl(trl, ref_dir, task, monkeypatch, mode, loss_type):
    """TRL multiplies the per-token surrogate by the importance_sampling_ratio input (before the
    KL term is added): the same loss and gradient as grpo_edu's weights times its surrogate."""
    w, stats = _is_weights(mode, *((1.2, 0.8) if mode.startswith("token") else (1.6, 0.6)))
    assert 0 < stats["is_clipped_frac"] < 1
    cfg = _cfg(loss_type, 0.04)
    trainer = _trainer(cfg, ref_dir, task)
    trainer.use_vllm = trainer.vllm_importance_sampling_correction = True  # no vLLM here: the loss's branch only
    theirs = _their_loss(trainer, importance_sampling_ratio=w[:, :1] if mode.startswith("sequence") else w)
    ours = _our_loss(lambda *a: Fn.clipped_surrogate_loss(*a[:3], 0.2)[0], AGGREGATION[loss_type], 0.04, w)
    _agree(ours, theirs)
    _agree(_ours_through_grpo(cfg, monkeypatch, is_weights=w), theirs)


@pytest.mark.parametrize(
    "mode, clip_max, clip_min",
    [
        ("token_truncate", 1.1, None),
        ("token_mask", 1.1, 0.9),
        ("sequence_truncate", 1.2, 0.8),
        ("sequence_mask", 1.3, None),
    ],
)
def test_sampler_weights_parity_with_trl_scoring(trl, ref_dir, task, mode, clip_max, clip_min):
    """TRL's _generate_and_score_completions with a sampler's log-probs (as a serving engine
    returns them): it recomputes pi_old with the trainer's model and builds
    importance_sampling_ratio; grpo_edu's sampler_importance_weights on the same two gives it."""
    from dataclasses import replace

    from grpo_edu import generate
    from grpo_edu.algorithms.sampler import trainer_old_logprobs

    cfg = _cfg(
        vllm_importance_sampling_mode=mode,
        vllm_importance_sampling_clip_max=clip_max,
        vllm_importance_sampling_clip_min=clip_min,
    )
    trainer = _trainer(cfg, ref_dir, task)  # the map sends the vllm_importance_sampling_* knobs as they are
    trainer.use_vllm = trainer.vllm_importance_sampling_correction = True
    trainer._last_loaded_step = trainer.state.global_step  # no engine to sync weights to
    problems = [p for p in task.sample(B // G, 3) for _ in range(G)]
    ro = generate(
        _policy(),
        task.encode_prompts(problems),
        max_new_tokens=task.max_answer_length,
        generator=torch.Generator().manual_seed(1),
        tokenizer=task.tokenizer,
    )
    noise = 0.1 * torch.randn(ro.mask.shape, generator=torch.Generator().manual_seed(2))
    sampler = (ro.logprobs + noise) * ro.mask  # a sampler slightly off the trainer
    lengths = [int(n) for n in ro.lengths]
    completions = [row[:n].tolist() for row, n in zip(ro.completion_ids, lengths)]
    tok = task.tokenizer
    trainer.rollout_func = lambda prompts, _: {
        "prompt_ids": [tok.encode(p.prompt, add_bos=True) for p in problems],
        "completion_ids": completions,
        "logprobs": [row[:n].tolist() for row, n in zip(sampler, lengths)],
    }
    with hf.quiet():
        out = trainer._generate_and_score_completions([{"prompt": "<bos>" + p.prompt} for p in problems])
    n = out["completion_mask"].shape[1]
    mask = out["completion_mask"].float()
    assert (out["old_per_token_logps"] - ro.logprobs[:, :n]).mul(mask).abs().max() <= 1e-5  # TRL's pi_old = ours
    w, stats = Fn.sampler_importance_weights(out["old_per_token_logps"], sampler[:, :n], mask, mode, clip_max, clip_min)
    theirs = out["importance_sampling_ratio"].expand(B, n)
    assert (w - theirs).abs().max() <= 1e-6
    assert 0 < stats["is_clipped_frac"] < 1  # the bounds act on some tokens / sequences, not all
    # GRPO's own step with a sampler apart: pi_old recomputed by the trainer (TinyGPT), the same weights
    policy = _policy()
    old, w_grpo, _ = trainer_old_logprobs(policy, replace(ro, logprobs=sampler), replace(cfg, sampler_dtype="bfloat16"))
    assert (w_grpo[:, :n] - theirs).mul(mask).abs().max() <= 1e-5
