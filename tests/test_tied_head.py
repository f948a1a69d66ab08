"""grpo_edu.measure.tied_head: the read and write parts of the embedding's gradient (notebook 00, section 9).

The expected values are identities: untied, the embedding receives no write part (share 0, every
weight moves as writing asks); tied, the two parts add up to the gradient a plain backward pass
puts on E (|r + w|^2 = |r|^2 + |w|^2 + 2 |r| |w| cos).
"""

import copy
import math

import pytest
import torch

from envs import ArithmeticTask
from grpo_edu.measure.tied_head import read_write_gradients
from grpo_edu.model import ModelConfig, TinyGPT
from grpo_edu.rollout import sample_batch, sequence_logprobs

DIGITS = list(range(3, 13))  # ten rows of the 17-token vocabulary


class OddFirstTokenTask(ArithmeticTask):
    """R = 1 when the first answer token has an odd id: a random tiny policy is right about half the time."""

    def token_scores(self, problems, completion_ids, mask, kind="outcome"):
        scores = torch.zeros(completion_ids.shape)
        last = mask.sum(1).long() - 1
        scores[torch.arange(len(problems)), last] = (completion_ids[:, 0] % 2).float()
        return scores


def tiny(tied):
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=17, d_model=16, n_layers=1, n_heads=2, max_seq_len=12, tie_embeddings=tied)
    return TinyGPT(cfg).eval().requires_grad_(False)


TASK = OddFirstTokenTask(eval_size=20)


def test_untied_rows_receive_no_write_part():
    g = read_write_gradients(tiny(False), TASK, n=32, seed=1, tokens=DIGITS)
    assert g["write_share"] == 0.0
    assert g["agree"] == 1.0  # sign(write) == sign(write) on every weight
    assert g["read"] > 0 and g["write"] > 0 and 0 < g["emb_share"] < 1


def test_tied_parts_add_up_to_the_plain_gradient():
    policy = tiny(True)
    before = [p.clone() for p in policy.parameters()]
    g = read_write_gradients(policy, TASK, n=32, seed=1, tokens=DIGITS)
    # the plain backward pass on the same batch (same seed, same sampling)
    gen = torch.Generator().manual_seed(1)
    ro, scores, _ = sample_batch(policy, TASK, 32, 1, rng=1, generator=gen)
    plain = copy.deepcopy(policy).requires_grad_(True)
    logp = sequence_logprobs(plain, ro)
    loss = -(scores.sum(1, keepdim=True) * logp * ro.mask).sum() / ro.mask.sum()
    (e_grad,) = torch.autograd.grad(loss, [plain.trunk.tok_emb.weight])
    total_sq = float(e_grad[DIGITS].double().pow(2).sum())
    r, w, cos = g["read"], g["write"], g["cosine"]
    assert r * r + w * w + 2 * r * w * cos == pytest.approx(total_sq, rel=1e-6)
    assert g["write_share"] == pytest.approx(w * w / total_sq, rel=1e-6)
    assert 0 < g["agree"] < 1 and math.isfinite(g["emb_share"])
    assert all(torch.equal(a, b) for a, b in zip(before, policy.parameters())), "the policy is not changed"
    assert all(p.grad is None for p in policy.parameters())


@pytest.mark.parametrize(
    "kw, says",
    [
        (dict(n=0), "n .prompts in the batch. must be a positive integer"),
        (dict(n=2.5), "positive integer"),
        (dict(tokens=[]), "non-empty list of token ids in \\[0, 17\\)"),
        (dict(tokens=[3, 17]), "token ids in \\[0, 17\\)"),
    ],
)
def test_bad_input_is_named(kw, says):
    args = dict(n=4, seed=0, tokens=DIGITS) | kw
    with pytest.raises(ValueError, match=says):
        read_write_gradients(tiny(True), TASK, **args)
