"""The token embedding's policy gradient split into its two uses, reading and writing (notebook 00, section 9).

With a tied output head (``W_out = E``) the row ``E_d`` of a token ``d`` is how the model reads
``d`` (the input embedding) and how it scores writing ``d`` (the logit ``z_{t,d} = E_d . h_t``), so

    grad_{E_d} L = read_d + write_d        read: through the input embedding, write: through the head

Untied, the write part is the head's own gradient and ``E`` receives only the read part.
"""

from __future__ import annotations

import copy

import torch

from ..rollout import sample_batch, sequence_logprobs


def read_write_gradients(policy, task, n: int, seed: int, tokens) -> dict[str, float]:
    """REINFORCE gradient of one batch, ``n`` prompts with one sampled answer each, split where
    ``E`` is used.

    The loss is ``-R log pi`` averaged over the completion tokens (notebook 01's REINFORCE loss,
    gamma = 1, R the outcome reward). To split a tied gradient, the head's use of ``E`` is
    replaced by a detached copy with the same values (the log-probs are checked to be the same):
    the copy's gradient is the write part, ``E``'s own gradient the read part. ``policy`` is not
    changed (the gradients are taken on a deep copy).

    Returns, on the rows ``tokens`` of the embedding (e.g. the ten digits):

    - ``read``, ``write``: the norms of the two parts;
    - ``write_share``: |write|^2 / |read + write|^2, the write part's share of what a tied row
      receives (0.0 untied: the rows receive no write part);
    - ``cosine``: cosine(read, write) over the rows' entries;
    - ``agree``: the share of those weights whose first AdamW step (it moves each weight by
      ``lr * -sign(grad)``) goes the way writing asks, ``sign(read + write) == sign(write)``
      (untied: 1.0, by construction);
    - ``emb_share``: ``E``'s share of the squared norm of the whole gradient.
    """
    if int(n) != n or n < 1:
        raise ValueError(f"n (prompts in the batch) must be a positive integer, got {n!r}")
    vocab = policy.trunk.tok_emb.weight.shape[0]
    tokens = list(tokens)
    if not tokens or not all(int(t) == t and 0 <= t < vocab for t in tokens):
        raise ValueError(f"tokens must be a non-empty list of token ids in [0, {vocab}), got {tokens!r}")
    device = policy.trunk.tok_emb.weight.device
    gen = torch.Generator(device=device).manual_seed(seed)
    ro, scores, _ = sample_batch(policy, task, int(n), 1, rng=seed, generator=gen)
    tied = policy.head is None
    policy = copy.deepcopy(policy).requires_grad_(True)  # a copy with gradients (a reference is frozen)
    E = policy.trunk.tok_emb.weight
    W_out = E.detach().clone().requires_grad_(True) if tied else policy.head.weight  # tied: a copy, same values
    logp = sequence_logprobs(lambda ids: policy.trunk(ids) @ W_out.T, ro)
    if not torch.allclose(logp, sequence_logprobs(policy, ro), atol=1e-5):
        raise RuntimeError("splitting the head off changed the log-probs: the model is not trunk @ W_out.T")
    R = scores.sum(1, keepdim=True)  # [B, 1]: the outcome reward, the return of every token (gamma = 1)
    loss = -(R * logp * ro.mask).sum() / ro.mask.sum()  # -R log pi, averaged over the completion tokens
    others = [p for p in policy.parameters() if p is not E and p is not W_out]
    read, write, *rest = (g.double() for g in torch.autograd.grad(loss, [E, W_out, *others]))
    e_grad = read + write if tied else read  # what the embedding matrix E receives
    total = (
        float(e_grad.pow(2).sum())
        + (0.0 if tied else float(write.pow(2).sum()))
        + sum(float(g.pow(2).sum()) for g in rest)
    )
    r, w = read[tokens], write[tokens]
    moved = torch.sign(r + w) if tied else torch.sign(w)  # AdamW's first step moves each weight by lr * sign(grad)
    return {
        "read": float(r.norm()),
        "write": float(w.norm()),
        "write_share": float(w.pow(2).sum() / (r + w).pow(2).sum()) if tied else 0.0,
        "cosine": float(torch.nn.functional.cosine_similarity(r.flatten(), w.flatten(), dim=0)),
        "agree": float((moved == torch.sign(w)).double().mean()),
        "emb_share": float(e_grad.pow(2).sum()) / total,
    }
