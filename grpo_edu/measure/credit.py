"""Credit per token: what the critic's V(s_t) knows at each completion position, and where its
per-token advantage puts the blame for a wrong answer.

The course's critic values every completion state s_t (the prompt and the answer so far;
`rollout.completion_values`), and REINFORCE with a critic baseline and PPO use it at every token
(GAE with gamma = 1, lambda = 1: A_t = R - V(s_t) for an outcome reward R). Two measurements:

    EV_t = 1 - Var(R - V(s_t)) / Var(R)     over the answers still running at position t

EV_max = Var_q(p_q) / Var(R) bounds EV_0 (the state s_0 is the prompt alone) and every baseline
that sees only the prompt; it does not bound EV_t for t > 0, which is limited only by what the
written prefix reveals about R. And, for a wrong answer whose first wrong token w is known
(`first_wrong_position`: the arithmetic task writes one target token by token),

    share = |A_w| / sum_t |A_t|

the part of the answer's total |advantage| that falls on the token that made it wrong. GRPO's
advantage is one number per answer, the same on each of its L tokens: share 1/L.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .. import functional as Fn
from ..rollout import completion_values, sample_batch
from .common import rngs


def ev_by_position(values: torch.Tensor, rewards: torch.Tensor, mask: torch.Tensor) -> dict:
    """COMPUTED: ``{"ev": [T], "n": [T]}``, at each completion position t the explained variance
    ``1 - Var(R - V_t) / Var(R)`` over the rows still running there (``mask[:, t] = 1``), and how
    many rows that is. NaN where fewer than 2 rows run or their rewards do not vary.

    values: ``[B, T]`` V(s_t); rewards: ``[B]`` the outcome R (= G_t at every t: gamma = 1);
    mask: ``[B, T]``, 1 on completion tokens up to and including EOS."""
    if values.dim() != 2 or mask.shape != values.shape or rewards.shape != values.shape[:1]:
        raise ValueError(
            f"values and mask must be [B, T] and rewards [B], got {tuple(values.shape)}, {tuple(mask.shape)} "
            f"and {tuple(rewards.shape)}"
        )
    V, R, m = values.detach().double().cpu(), rewards.detach().double().cpu(), mask.detach().cpu() > 0
    T = V.shape[1]
    ev, n = np.full(T, math.nan), np.zeros(T, dtype=np.int64)
    for t in range(T):
        rows = m[:, t]
        n[t] = int(rows.sum())
        if n[t] < 2:
            continue
        r, v = R[rows], V[rows, t]
        var_r = float(r.var(unbiased=False))
        if var_r > 0:
            ev[t] = 1.0 - float((r - v).var(unbiased=False)) / var_r
    return {"ev": ev, "n": n}


def first_wrong_position(task, problems, completion_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """COMPUTED: ``[B]`` long, the position of the first completion token that differs from the
    target (the answer's digits as the task writes them, reversed by default, then ``<eos>``);
    -1 for a right answer. Defined for an `ArithmeticTask` without filler (one target token per
    position); a ValueError otherwise (a scratchpad's working has no fixed target)."""
    if not _per_token(task):
        raise ValueError(
            f"first_wrong_position needs one target token per position (an ArithmeticTask without filler), got {task!r}"
        )
    B, T = completion_ids.shape
    if mask.shape != (B, T) or len(problems) != B:
        raise ValueError(
            f"completion_ids and mask must be [B, T] with one problem per row, got {tuple(mask.shape)}, {len(problems)}"
        )
    y = torch.full((B, T), -1, dtype=torch.long)  # -1 never matches a token
    for i, p in enumerate(problems):
        t = task.target_ids(p)[:T]
        y[i, : len(t)] = torch.tensor(t, dtype=torch.long)
    ids, m = completion_ids.cpu(), mask.cpu() > 0
    wrong = (ids != y) & m  # a masked token that is not the target's
    first = torch.where(wrong.any(1), wrong.long().argmax(1), torch.full((B,), -1, dtype=torch.long))
    return first


@torch.no_grad()
def oracle_values(policy, task, rollout, problems, first_wrong: torch.Tensor | None = None) -> torch.Tensor:
    """COMPUTED: ``[B, T]`` the exact value of each completion state under ``policy`` at the
    rollout's temperature, V*(s_t) = P(R = 1 | s_t): 0 once a written token is wrong, else the
    probability that the policy writes the rest of the target, ``prod_{k >= t} pi(y_k | q, y_<k)``
    (one teacher-forced forward over prompt + target). What a critic that read the prefix
    perfectly would say: its EV_t is the ceiling of EV_t in this world. Needs one target token per
    position (`first_wrong_position`)."""
    if first_wrong is None:
        first_wrong = first_wrong_position(task, problems, rollout.completion_ids, rollout.mask)
    device = rollout.prompt_ids.device
    targets = [task.target_ids(p) for p in problems]
    B, T, K = rollout.batch_size, rollout.completion_ids.shape[1], max(len(t) for t in targets)
    y = torch.full((B, K), task.tokenizer.pad_id, dtype=torch.long)
    on = torch.zeros(B, K)
    for i, t in enumerate(targets):
        y[i, : len(t)], on[i, : len(t)] = torch.tensor(t, dtype=torch.long), 1.0
    P = rollout.prompt_length
    logits = policy(torch.cat([rollout.prompt_ids, y.to(device)], 1))[:, P - 1 : P - 1 + K].float().cpu()
    logp = Fn.token_logprobs(logits, y, temperature=rollout.temperature) * on
    rest = logp.flip(1).cumsum(1).flip(1)  # sum_{k >= t} log pi(y_k | ...)
    V = torch.zeros(B, T)
    w = first_wrong.cpu()
    n = min(T, K)
    pos = torch.arange(n)[None, :]
    correct_prefix = (w[:, None] < 0) | (pos <= w[:, None])
    V[:, :n] = rest[:, :n].exp() * on[:, :n] * correct_prefix
    return V * (rollout.mask.cpu() > 0)


def token_advantages(values: torch.Tensor, rewards: torch.Tensor, mask: torch.Tensor, lam: float = 1.0) -> torch.Tensor:
    """COMPUTED: ``[B, T]`` the critic's per-token advantage for an outcome reward ``R`` paid at the
    last masked token: GAE with gamma = 1 (`Fn.gae`); ``lam = 1`` gives ``A_t = R - V(s_t)`` (the
    critic baseline and the course's PPO), ``lam = 0`` the one-step ``V(s_{t+1}) - V(s_t)``."""
    m = mask.float()
    last = (m.cumsum(1) == m.sum(1, keepdim=True)) & (m > 0)  # the last masked position of each row
    scores = last.float() * rewards.float()[:, None]
    return Fn.gae(scores, values.float(), m, gamma=1.0, lam=lam)[0]


def credit_on_error(advantages: torch.Tensor, mask: torch.Tensor, first_wrong: torch.Tensor) -> dict:
    """COMPUTED, over the wrong answers (``first_wrong >= 0``) whose advantages are not all 0:

    - ``share``: the mean of ``|A_w| / sum_t |A_t|`` (w: the first wrong token; t over the answer's tokens);
    - ``before`` and ``after``: the same share on the tokens before w and after it;
    - ``flat``: the mean of 1/L, what GRPO's one advantage per answer puts on any one token;
    - ``n``: how many wrong answers count.

    advantages, mask: ``[B, T]``; first_wrong: ``[B]`` (`first_wrong_position`)."""
    A, m = advantages.detach().double().abs().cpu() * (mask.cpu() > 0), mask.cpu() > 0
    w = first_wrong.cpu()
    total = A.sum(1)
    rows = (w >= 0) & (total > 0)
    if not bool(rows.any()):
        return {"share": math.nan, "before": math.nan, "after": math.nan, "flat": math.nan, "n": 0}
    A, m, w, total = A[rows], m[rows], w[rows], total[rows]
    pos = torch.arange(A.shape[1])[None, :]
    on = A.gather(1, w[:, None]).squeeze(1) / total
    before = (A * (pos < w[:, None])).sum(1) / total
    after = (A * (pos > w[:, None])).sum(1) / total
    flat = 1.0 / m.sum(1).double()
    return {
        "share": float(on.mean()),
        "before": float(before.mean()),
        "after": float(after.mean()),
        "flat": float(flat.mean()),
        "n": int(rows.sum()),
    }


def problems_from_prompts(task, prompt_ids: torch.Tensor) -> list:
    """COMPUTED: the `Problem` of each row of ``prompt_ids`` (``[B, P]``, as `task.encode_prompts`
    writes them), read back from the tokens: what a critic that knows the task needs beside a rollout."""
    out = []
    for row in prompt_ids.tolist():
        text = task.tokenizer.decode(row)
        if text.startswith("<bos>"):
            text = text[len("<bos>") :]
        op = next((o for o in task.ops if o in text), None)
        if op is None or not text.endswith("="):
            raise ValueError(f"not a prompt of {task!r}: {text!r}")
        a, b = text[:-1].split(op)
        out.append(task.make_problem(int(a), int(b), op))
    return out


class ExactCritic:
    """A critic that knows the task: ``V*(s_t) = P(R = 1 | s_t)`` under the policy being trained
    (`oracle_values`, from the policy at the moment it is asked: pi_old at ``prepare``), in place of
    a learned `Critic`. ``prompt_only=True`` gives every token the first one's value, ``V*(s_0) = p_q``:
    the best predictor of R from the prompt (what EV_max measures; the variance-optimal baseline is
    another number, notebook 08 part 1, section 4). V* here is the policy's own value, computed exactly,
    not the optimal value. What a critic that read the prefix perfectly would
    buy, measured beside the learned one (``grpo_edu.studies.credit_pays``); the limit of
    VinePPO's Monte-Carlo values (Kazemnejad et al. 2024), exact here because each problem has one
    right answer. It does not learn: ``step`` does nothing and returns 0."""

    def __init__(self, task, policy, prompt_only: bool = False):
        if not _per_token(task):
            raise ValueError(
                f"ExactCritic needs one target token per position (no filler, no scratchpad), got {task!r}"
            )
        self.task, self.policy, self.prompt_only = task, policy, prompt_only

    @torch.no_grad()
    def values(self, rollout) -> torch.Tensor:
        V = oracle_values(self.policy, self.task, rollout, problems_from_prompts(self.task, rollout.prompt_ids.cpu()))
        V = V.to(device=rollout.mask.device, dtype=rollout.mask.dtype)
        return V[:, :1].expand_as(V) * rollout.mask if self.prompt_only else V

    def step(self, *args, **kwargs) -> float:
        return 0.0


def _per_token(task) -> bool:
    """Whether the task writes one target token per position (`first_wrong_position` applies)."""
    return hasattr(task, "target_ids") and not getattr(task, "filler", 0) and not hasattr(task, "scratchpad_kind")


@torch.no_grad()
def critic_by_position(policy, task, critic, n: int = 2048, seed: int = 0, batch: int = 512, lam: float = 1.0) -> dict:
    """MEASURED: ``n`` fresh answers of ``policy`` (one per training prompt, temperature 1) and the
    ``critic``'s (a `ValueModel`, e.g. from `fit_critic`) values of every completion state.

    Returns ``{"ev", "n"}`` of `ev_by_position`, ``"reward_mean"``, ``"lengths"`` (how many answers
    have each length). Where the task has one target token per position (`first_wrong_position`)
    also ``"oracle_ev"``: `ev_by_position` of `oracle_values` (what the prefix reveals), and
    ``"credit"`` and ``"oracle_credit"``: `credit_on_error` of each one's advantages (GAE, ``lam``),
    with GRPO's flat 1/L beside them."""
    device = next(policy.parameters()).device
    rng, gen = rngs(seed, device)
    per_token = _per_token(task)
    parts = []
    for i in range(0, n, batch):
        ro, scores, problems = sample_batch(policy, task, min(batch, n - i), 1, rng, gen)
        part = {"mask": ro.mask.cpu(), "R": scores.sum(1).cpu(), "V": completion_values(critic, ro).cpu()}
        if per_token:
            part["first"] = first_wrong_position(task, problems, ro.completion_ids, ro.mask)
            part["V*"] = oracle_values(policy, task, ro, problems, part["first"])
        parts.append(part)
    T = max(p["mask"].shape[1] for p in parts)

    def cat(key):
        return torch.cat([torch.nn.functional.pad(p[key], (0, T - p[key].shape[1])) for p in parts])

    values, mask, R = cat("V"), cat("mask"), torch.cat([p["R"] for p in parts])
    out = ev_by_position(values, R, mask)
    out |= {"reward_mean": float(R.mean()), "lengths": torch.bincount(mask.sum(1).long(), minlength=T + 1).tolist()}
    if per_token:
        first, oracle = torch.cat([p["first"] for p in parts]), cat("V*")
        out["oracle_ev"] = ev_by_position(oracle, R, mask)["ev"]
        out["credit"] = credit_on_error(token_advantages(values, R, mask, lam), mask, first)
        out["oracle_credit"] = credit_on_error(token_advantages(oracle, R, mask, lam), mask, first)
    return out
