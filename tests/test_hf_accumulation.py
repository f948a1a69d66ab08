"""TRL's GRPOTrainer under gradient accumulation, measured on the grid of tests/test_loss_scale.py: what TRL's
own training step accumulates over one optimizer step's micro-batches, against the one-batch gradient that
grpo_edu's accumulation gives (tests/test_loss_scale.py). Skipped without the [trl] extra.

TRL cuts a generation batch into ``steps_per_generation`` contiguous micro-batches of equal rows (its
``split_tensor_dict``), ``gradient_accumulation_steps`` k of them per optimizer step, and its loss is already
scaled for accumulation (the Trainer does not divide again). Measured here, on one batch of 24 completions of 1
to 5 tokens (micro-batches of unequal token counts), k in {2, 3} x steps per generation in {1, 2} optimizer steps (minibatches), the loss's gradient
with respect to each token's log-prob, to 1e-6:

- "grpo" (sequence_mean) and "dr_grpo" (constant) divide each micro-batch's loss by k: the one-batch gradient,
  because TRL's micro-batches hold equal rows;
- "bnpo" (token_mean) is a token mean per micro-batch divided by k: the wrong normalisation, equal to grpo_edu's
  1/k average and off the one-batch gradient by 3.2% to 19% of its norm here;
- "dapo" divides each micro-batch's token sum by the generation batch's tokens / (steps_per_generation / k): the
  one-batch token mean when one optimizer step takes the whole generation (minibatches = 1), and with several
  that gradient times the step's tokens over the average step's.

So `grpo_edu.hf.trl_config` maps token_mean with k > 1 to "dapo", and refuses it with minibatches > 1 unless
``approximate={"loss_type"}``.
"""

import os
from types import SimpleNamespace

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is ever downloaded
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import test_hf  # noqa: E402
from test_hf import _policy  # noqa: E402

from grpo_edu import functional as Fn  # noqa: E402
from grpo_edu import hf, rollout  # noqa: E402
from grpo_edu.algorithms import GRPO, Batch, GRPOConfig  # noqa: E402

trl, ref_dir = test_hf.trl, test_hf.ref_dir  # test_hf's fixtures: the [trl] skip, the exported pi_ref

B, T, G = 24, 5, 4
LENGTHS = torch.tensor([4, 1, 3, 2, 5, 4, 1, 1, 2, 5, 3, 1, 1, 1, 4, 2, 5, 3, 4, 1, 1, 2, 5, 1])
TRL_NAMES = {"sequence_mean": "grpo", "token_mean": "bnpo", "constant": "dr_grpo"}


def _batch():
    g = torch.Generator().manual_seed(0)
    mask = (torch.arange(T)[None] < LENGTHS[:, None]).float()
    old = -torch.rand(B, T, generator=g) * 2 * mask
    logp = (old + 0.3 * torch.randn(B, T, generator=g)) * mask  # ratios on both sides of the clip
    ref = (old + 0.3 * torch.randn(B, T, generator=g)) * mask
    rewards = (torch.rand(B, generator=g) < 0.5).float()
    adv, _ = Fn.group_advantages(rewards, G, eps=1e-4, unbiased=True)
    return logp, old, ref, adv, mask


def _config(loss_type, k, mb):
    return GRPOConfig(unbiased_std=True, beta=0.04, group_size=G, epochs=1, minibatches=mb, max_length=T,
                      loss_type=loss_type, gradient_accumulation_steps=k)  # fmt: skip


def _ours(cfg, monkeypatch, parts):
    """d/dlogp of sum_j w_j GRPO.loss(rows_j) (the library's loss), [B, T]."""
    logp, old, ref, adv, mask = _batch()
    logp = logp.clone().requires_grad_(True)
    monkeypatch.setattr(rollout, "sequence_logprobs", lambda p, ro, **k: (logp[ro.rows], torch.zeros(len(ro.rows), T, 17)))  # fmt: skip
    ro = SimpleNamespace(mask=mask, select=lambda rows: SimpleNamespace(rows=rows))
    batch = Batch(rollout=ro, scores=None, rewards=None, mask=mask, old_logp=old, ref_logp=ref, advantages=adv)
    algo = GRPO(cfg)
    for rows, w in parts:
        (algo.loss(batch, rows)[0] * w).backward()
    return logp.grad


def _trainer(cfg, ref_dir, task, approximate=()):
    import trl

    with hf.quiet():
        model, tok = hf.to_hf(_policy())
        model.config._name_or_path = str(ref_dir)
        args = hf.trl_config(cfg, sequences_per_step=B, max_completion_length=T, approximate=approximate)
        trainer = trl.GRPOTrainer(model=model, processing_class=tok, reward_funcs=hf.reward_fn(task),
                                  train_dataset=hf.task_dataset(task, 16, 0), args=args)  # fmt: skip
    trainer.model.train()
    return trainer


def _theirs(trainer):
    """TRL's own training_step on each micro-batch of the generation batch, as it splits it (contiguous slices,
    steps_per_generation of them), k per optimizer step: per optimizer step, the rows of its micro-batches
    and the accumulated d loss / d logp [B, T]."""
    logp, old, ref, adv, mask = _batch()
    logp = logp.clone().requires_grad_(True)
    args = trainer.args
    k, micro = args.gradient_accumulation_steps, args.steps_per_generation
    now = {}
    trainer._get_per_token_logps_and_entropies = lambda *a, **kw: (
        logp[now["rows"]],
        torch.zeros(len(now["rows"]), T),
        None,
    )
    trainer._prepare_inputs = lambda inputs: inputs  # the micro-batch as given (TRL's buffer is bypassed)
    trainer.current_gradient_accumulation_steps = k  # set by Trainer.train() per optimizer step
    chunks = list(torch.arange(B).tensor_split(micro))
    steps = []
    for s in range(micro // k):
        logp.grad = None
        window = chunks[s * k : (s + 1) * k]
        for rows in window:
            now["rows"] = rows
            inputs = {
                "prompt_ids": torch.ones(len(rows), 2, dtype=torch.long),
                "prompt_mask": torch.ones(len(rows), 2, dtype=torch.long),
                "completion_ids": torch.full((len(rows), T), 5),
                "completion_mask": mask[rows].long(),
                "advantages": adv[rows],
                "old_per_token_logps": old[rows],
                "ref_per_token_logps": ref[rows],
                "num_items_in_batch": mask.sum(),  # the generation batch's tokens (_generate_and_score_completions)
            }
            with hf.quiet():
                trainer.training_step(trainer.model, inputs, None)
        steps.append((window, logp.grad.clone()))
    return steps


def _gap(a, b):
    return float((a - b).norm() / b.norm())


@pytest.mark.parametrize("mb", [1, 2])
@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("loss_type", ["sequence_mean", "token_mean", "constant"])
def test_what_trl_accumulates(trl, ref_dir, task, monkeypatch, loss_type, k, mb):
    cfg = _config(loss_type, k, mb)
    trainer = _trainer(cfg, ref_dir, task, approximate={"loss_type"})
    trainer.loss_type = trainer.args.loss_type = TRL_NAMES[loss_type]  # TRL's own name for the aggregation
    assert trainer.args.steps_per_generation == mb * k and trainer.args.per_device_train_batch_size == B // (mb * k)
    assert trainer.loss_is_scaled_for_ga  # the Trainer does not divide TRL's loss by k again
    for window, theirs in _theirs(trainer):
        idx = torch.cat(window)
        one = _ours(cfg, monkeypatch, [(idx, 1.0)])
        parts = GRPO(cfg).micro_batches(Batch(None, None, None, _batch()[4], None, None), idx)
        assert all(torch.equal(rows, w) for (rows, _), w in zip(parts, window))  # the same micro-batches
        assert (_ours(cfg, monkeypatch, parts) - one).abs().max() <= 1e-6  # ours: the one-batch gradient
        if loss_type == "token_mean":  # TRL's bnpo: the 1/k average of the micro-batches' token means
            wrong = _ours(cfg, monkeypatch, [(rows, 1 / k) for rows in window])
            assert (theirs - wrong).abs().max() <= 1e-6
            assert _gap(theirs, one) > 0.01, _gap(theirs, one)  # measured: 0.032 to 0.19
        else:  # grpo, dr_grpo: equal rows per micro-batch, so 1/k is each one's share
            assert (theirs - one).abs().max() <= 1e-6


@pytest.mark.parametrize("mb", [1, 2])
@pytest.mark.parametrize("k", [2, 3])
def test_trl_dapo_is_the_one_batch_token_mean_in_one_step(trl, ref_dir, task, monkeypatch, k, mb):
    """What trl_config maps token_mean to when k > 1: TRL's "dapo", exact with one optimizer step per generation;
    with several, each step's gradient is the one-batch one times its tokens over the average step's."""
    cfg = _config("token_mean", k, mb)
    if mb > 1:
        with pytest.raises(hf.NoCounterpart, match="GRPOConfig.loss_type: TRL's 'dapo' with minibatches > 1"):
            hf.trl_config(cfg, sequences_per_step=B, max_completion_length=T)
    trainer = _trainer(cfg, ref_dir, task, approximate={"loss_type"})
    assert trainer.args.loss_type == "dapo"
    mask = _batch()[4]
    for window, theirs in _theirs(trainer):
        idx = torch.cat(window)
        one = _ours(cfg, monkeypatch, [(idx, 1.0)])
        scale = float(mask[idx].sum() / (mask.sum() / mb))
        assert (theirs - scale * one).abs().max() <= 1e-6
        assert scale == 1.0 if mb == 1 else abs(scale - 1) > 0.02  # 33 and 31 tokens against 32


def test_trl_config_maps_accumulation(trl):
    args = hf.trl_config(_config("sequence_mean", 3, 2), sequences_per_step=B, max_completion_length=T)
    assert (args.gradient_accumulation_steps, args.steps_per_generation, args.per_device_train_batch_size) == (3, 6, 4)
    assert args.loss_type == "grpo"
    assert hf.trl_config(_config("token_mean", 1, 2), sequences_per_step=B, max_completion_length=T).loss_type == "bnpo"
    assert hf.trl_config(_config("token_mean", 3, 1), sequences_per_step=B, max_completion_length=T).loss_type == "dapo"
    with pytest.raises(ValueError, match="multiple of minibatches x gradient_accumulation_steps"):
        hf.trl_config(_config("sequence_mean", 5, 1), sequences_per_step=B, max_completion_length=T)
    with pytest.raises(ValueError, match="gradient_accumulation_steps=2 contradicts the mapped value 3"):
        hf.trl_config(_config("sequence_mean", 3, 1), sequences_per_step=B, max_completion_length=T,
                      gradient_accumulation_steps=2)  # fmt: skip
