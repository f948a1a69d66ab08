"""Measured: the objectives after DAPO against GRPO's, for a notebook cell to call.

- `gspo_vs_grpo`: GSPO's sequence-level ratio gives GRPO's gradient on-policy (the first
  epoch: every ratio is 1) up to the aggregation, and a different one once pi_theta has
  moved off pi_old (the later epochs of one batch): the cosine of the two gradients per epoch.
- `sampler_mismatch`: a sampler that is not the trainer (the policy cast to bfloat16, as a
  serving engine runs it) biases the policy gradient; the truncated / masked importance
  weights remove (most of) it. Computed *exactly*: every completion of a few prompts is
  enumerated (those above a probability floor), so the numbers are expectations, not noisy
  samples.

Both take a policy and a task and return a dict of python floats; `format_*` prints them.
"""

from __future__ import annotations

import copy
import math

import torch

from .. import functional as Fn
from ..algorithms import GRPOConfig
from ..algorithms.sampler import sampler_copy
from ..rollout import sample_batch, sequence_logprobs
from .common import flat_grad

__all__ = ["sampler_copy", "gspo_vs_grpo", "format_gspo_vs_grpo", "sampler_mismatch", "format_sampler_mismatch"]


def _cos(a, b) -> float:
    return float(torch.nn.functional.cosine_similarity(a, b, dim=0))


def gspo_vs_grpo(
    policy, task, n_prompts: int = 32, group_size: int = GRPOConfig.group_size, epochs: int = 4, lr: float = 3e-4,
    eps: float = 0.2, seed: int = 0,
) -> dict:  # fmt: skip
    """GRPO's and GSPO's policy gradients on one batch, epoch after epoch.

    One rollout from ``policy`` (a copy is trained; ``policy`` is left as it is), group
    advantages; then ``epochs`` full-batch AdamW steps on GRPO's loss (token ratios, clip
    ``eps``, "sequence_mean") with pi_old fixed. Before each step both gradients are taken
    at the same parameters: GRPO's token-level surrogate and GSPO's sequence-level one
    (the same clip ``eps``, so only the ratio's level differs), both aggregated by
    "sequence_mean"; and GRPO's under "token_mean" (the aggregation alone). Returns
    ``{"rows": [{epoch, cos_gspo_grpo, cos_token_mean, ratio_dev_token, ratio_dev_sequence,
    clip_grpo, clip_gspo}], ...}``: epoch 0 is on-policy (cos_gspo_grpo = 1 to rounding).
    """
    policy = copy.deepcopy(policy).train().requires_grad_(True)  # a copy: a reference may come frozen
    params = list(policy.parameters())
    ro, scores, _ = sample_batch(policy, task, n_prompts, group_size, seed, torch.Generator().manual_seed(seed))
    adv, st = Fn.group_advantages(Fn.masked_sum(scores, ro.mask, dim=1), group_size, eps=GRPOConfig.adv_eps)
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    rows = []
    for epoch in range(epochs):
        logp = sequence_logprobs(policy, ro)
        grpo, grpo_st = Fn.clipped_surrogate_loss(logp, ro.logprobs, adv, eps, mask=ro.mask)
        gspo, gspo_st = Fn.gspo_loss(logp, ro.logprobs, adv, ro.mask, eps, eps)
        loss = Fn.aggregate_loss(grpo, ro.mask, "sequence_mean")
        g_grpo = flat_grad(loss, params, retain_graph=True)
        g_gspo = flat_grad(Fn.aggregate_loss(gspo, ro.mask, "sequence_mean"), params, retain_graph=True)
        g_tok = flat_grad(Fn.aggregate_loss(grpo, ro.mask, "token_mean"), params, retain_graph=True)
        with torch.no_grad():
            lr_tok = (logp - ro.logprobs) * ro.mask
            rows.append(
                {
                    "epoch": epoch,
                    "cos_gspo_grpo": _cos(g_gspo, g_grpo),
                    "cos_token_mean": _cos(g_tok, g_grpo),
                    "ratio_dev_token": float(Fn.masked_mean(lr_tok.exp().sub(1).abs(), ro.mask)),
                    "ratio_dev_sequence": float(
                        Fn.sequence_log_ratio(logp, ro.logprobs, ro.mask).exp().sub(1).abs().mean()
                    ),
                    "clip_grpo": grpo_st["clip_ratio"],
                    "clip_gspo": gspo_st["clip_ratio"],
                }
            )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return {"rows": rows, "n_prompts": n_prompts, "group_size": group_size, "lr": lr, "eps": eps,
            "frac_reward_zero_std": st["frac_zero_std"]}  # fmt: skip


def format_gspo_vs_grpo(r: dict) -> str:
    lines = [
        f"one batch ({r['n_prompts']} prompts x G={r['group_size']}), AdamW lr {r['lr']:g} on GRPO's loss, clip eps {r['eps']:g}",
        "epoch  cos(GSPO, GRPO)  cos(GRPO token_mean, sequence_mean)  mean|rho-1| token  mean|s-1| sequence  clip GRPO  clip GSPO",
    ]
    for row in r["rows"]:
        lines.append(
            f"{row['epoch']:>5}  {row['cos_gspo_grpo']:>15.4f}  {row['cos_token_mean']:>35.4f}  "
            f"{row['ratio_dev_token']:>16.4f}  {row['ratio_dev_sequence']:>18.4f}  {row['clip_grpo']:>9.4f}  {row['clip_gspo']:>9.4f}"
        )
    return "\n".join(lines)


# ------------------------------------------------------------------ the sampler mismatch


@torch.no_grad()
def _enumerate(policy, sampler, prompt_ids, max_new_tokens, floor, eos_id=2, pad_id=0):
    """Every completion of each prompt whose probability under the trainer or the sampler is
    above ``floor`` (a tree search, one token deeper per pass). Returns ``(rows, completions
    [N, T], mask [N, T])`` with rows the prompt index of each completion."""
    live = [(i, []) for i in range(prompt_ids.shape[0])]  # (prompt, prefix)
    lp_t = torch.zeros(len(live))
    lp_s = torch.zeros(len(live))
    done = []
    for _ in range(max_new_tokens):
        if not live:
            break
        ids = torch.stack([torch.cat([prompt_ids[i], torch.tensor(pre, dtype=torch.long)]) for i, pre in live])
        nt = torch.log_softmax(policy(ids)[:, -1].float(), -1) + lp_t[:, None]
        ns = torch.log_softmax(sampler(ids)[:, -1].float(), -1) + lp_s[:, None]
        keep = (torch.maximum(nt, ns) > math.log(floor)).nonzero().tolist()
        new, new_t, new_s = [], [], []
        for row, tok in keep:
            i, pre = live[row]
            if tok == eos_id or len(pre) + 1 == max_new_tokens:
                done.append((i, pre + [tok]))
            else:
                new.append((i, pre + [tok]))
                new_t.append(nt[row, tok])
                new_s.append(ns[row, tok])
        live = new
        lp_t, lp_s = torch.tensor(new_t), torch.tensor(new_s)
    T = max(len(c) for _, c in done)
    comp = torch.full((len(done), T), pad_id, dtype=torch.long)
    mask = torch.zeros(len(done), T)
    for n, (_, c) in enumerate(done):
        comp[n, : len(c)] = torch.tensor(c)
        mask[n, : len(c)] = 1.0
    return torch.tensor([i for i, _ in done]), comp, mask


def _logprobs(model, prompt_ids, completions, mask):
    ids = torch.cat([prompt_ids, completions], dim=1)
    P = prompt_ids.shape[1]
    logits = model(ids)[:, P - 1 : -1].float()
    return Fn.token_logprobs(logits, completions) * mask


def sampler_mismatch(
    policy, task, n_prompts: int = 8, dtype=torch.bfloat16, caps=(2.0, 1.005), floor: float = 1e-5,
    seed: int = 0,
) -> dict:  # fmt: skip
    """The bias a sampler that differs from the trainer puts into the policy gradient, exactly.

    The trainer is ``policy`` (fp32); the sampler is `sampler_copy` (``dtype``). For each of
    ``n_prompts`` prompts, every completion y above probability ``floor`` is enumerated, and
    with R(y) the outcome reward, J = E_trainer[R] and A(y) = R(y) - J, the expectations

        exact (on-policy):   g*        = E_{y~trainer}[ A grad log pi(y) ]   (= grad J)
        no correction:       g_naive   = E_{y~sampler}[ A grad log pi(y) ]
        corrected:           g_w       = E_{y~sampler}[ A sum_t w_t grad log pi(y_t) ]

    for the weights w of `sampler_importance_weights`: the plain weight (no cap; token and
    sequence level) and the four modes at each C_max in ``caps`` (2.0, like TRL's default
    3.0, does not bind on a bfloat16 mismatch; a tight one shows what truncating and masking
    cost). Returns the mismatch (mean |log pi_sampler - log pi_trainer| per token under the
    sampler, and its max), the probability mass the enumeration covers under each model (a
    check of the floor), the accuracy J, and for every estimator ||g - g*|| / ||g*||,
    cos(g, g*) and the fraction of tokens (sequences) whose weight is clipped or masked.
    """
    policy = copy.deepcopy(policy).float().eval().requires_grad_(True)  # a copy: a reference may come frozen
    sampler = sampler_copy(policy, dtype)
    params = [p for p in policy.parameters() if p.requires_grad]
    problems = task.sample(n_prompts, seed)
    prompts = task.encode_prompts(problems)
    rows, comp, mask = _enumerate(policy, sampler, prompts, task.max_answer_length, floor)
    P = prompts[rows]
    with torch.no_grad():
        lp_s = _logprobs(sampler, P, comp, mask).double()
    lp_t = _logprobs(policy, P, comp, mask)  # with grad
    seq_t, seq_s = lp_t.detach().double().sum(-1), lp_s.sum(-1)
    p_t, p_s = seq_t.exp(), seq_s.exp()
    R = Fn.masked_sum(task.token_scores([problems[i] for i in rows.tolist()], comp, mask), mask, dim=1).double()
    J = torch.zeros(n_prompts, dtype=torch.float64).index_add_(0, rows, p_t * R)
    A = R - J[rows]

    def grad(weights):  # the gradient of sum_y sum_t weights[y, t] log pi(y_t), weights constant
        return flat_grad((weights.float() * lp_t).sum() / n_prompts, params, retain_graph=True).double()

    per_seq = lambda c: c[:, None].expand_as(mask) * mask  # noqa: E731
    g_star = grad(per_seq(p_t * A))
    old, samp = lp_t.detach(), lp_s.float()
    estimators = {"no correction": (per_seq(p_s * A), 0.0)}
    settings = [("token_truncate", math.inf), ("sequence_truncate", math.inf)]
    settings += [(mode, c) for c in caps for mode in Fn.SAMPLER_IS_MODES]
    for mode, c in settings:
        w, st = Fn.sampler_importance_weights(old, samp, mask, mode, clip_max=c)
        name = f"{mode.split('_')[0]}, no cap" if c == math.inf else f"{mode} C={c:g}"
        estimators[name] = (per_seq(p_s * A) * w.double(), st["is_clipped_frac"])
    out = {}
    for name, (weights, clipped) in estimators.items():
        g = grad(weights)
        cos = float(torch.dot(g, g_star) / (g.norm() * g_star.norm()))
        out[name] = {"rel_error": float((g - g_star).norm() / g_star.norm()), "cos": cos, "clipped_frac": clipped}
    m = mask.bool()
    diff = (lp_s - lp_t.detach().double()).abs()
    per_prompt_s = torch.zeros(n_prompts, dtype=torch.float64).index_add_(0, rows, p_s)
    tok_weight = (p_s[:, None] * mask.double())[m]
    return {
        "dtype": str(dtype).replace("torch.", ""),
        "n_prompts": n_prompts,
        "completions": int(comp.shape[0]),
        "mass_trainer": float(torch.zeros(n_prompts, dtype=torch.float64).index_add_(0, rows, p_t).mean()),
        "mass_sampler": float(per_prompt_s.mean()),
        "accuracy": float(J.mean()),
        "logp_diff_mean": float((diff[m] * tok_weight).sum() / tok_weight.sum()),
        "logp_diff_max": float(diff[m].max()),
        "estimators": out,
        "caps": tuple(caps),
    }


def format_sampler_mismatch(r: dict) -> str:
    lines = [
        f"sampler: the policy in {r['dtype']}; trainer: fp32. {r['n_prompts']} prompts, {r['completions']} completions "
        f"enumerated (mass covered: trainer {r['mass_trainer']:.4f}, sampler {r['mass_sampler']:.4f}); accuracy {r['accuracy']:.4f}",
        f"|log pi_sampler - log pi_trainer| per token: mean {r['logp_diff_mean']:.2e} (under the sampler), max {r['logp_diff_max']:.2e}",
        f"{'estimator (y ~ sampler)':<28}  ||g - g*|| / ||g*||  cos(g, g*)  clipped/masked",
    ]
    for name, e in r["estimators"].items():
        lines.append(f"{name:<28}  {e['rel_error']:>19.2e}  {e['cos']:>10.6f}  {e['clipped_frac']:>14.4f}")
    return "\n".join(lines)
