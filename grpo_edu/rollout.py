"""Batched sampling from the policy, and the log-probs of a sampled batch.

``sample_batch`` is the first two lines of the one loop (sample problems, generate, score):
the training loop, the measurements and the notebooks all draw their batches with it.

``generate`` samples ``group_size`` completions for each prompt (the samples of one prompt
are consecutive rows) with a KV cache and an explicit ``torch.Generator``, and returns a
`Rollout`. ``sequence_logprobs`` recomputes the per-token log-probs of a rollout under any
model by teacher forcing (one forward pass over prompt + completion): for the model that
sampled it they equal the sampling log-probs, which is what lets PPO and GRPO form the
ratio pi_theta / pi_old.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, fields

import torch
import torch.nn as nn

from . import functional as Fn
from .model import gather_rows

# Each prompt once: the G rows of a group share their prompt, so generation and teacher forcing
# run each distinct prompt once and hand its KV cache to its rows (the same numbers to float
# rounding, tests/test_rollout.py). A plain parameter: ``generate(..., share_prompts=False)`` (and
# ``sample_batch``, ``train``) samples a rollout whose rows each run their own prompt, as TRL does,
# and the rollout carries that choice to every teacher-forced pass over it (``Rollout.share_prompts``:
# the reference's, the update's, the critic's).
SHARE_PROMPTS = True  # DEPRECATED with `prompt_sharing`: kept until the last callers pass the parameter


@contextlib.contextmanager
def prompt_sharing(enabled: bool):
    """DEPRECATED: pass ``share_prompts=False`` to ``generate``/``sample_batch``/``train`` (or set a
    rollout's ``share_prompts``) instead. ``with prompt_sharing(False):`` turns the sharing off
    everywhere until the block ends."""
    global SHARE_PROMPTS
    if not isinstance(enabled, bool):
        raise ValueError(f"prompt_sharing takes True or False, got {enabled!r}")
    saved, SHARE_PROMPTS = SHARE_PROMPTS, enabled
    try:
        yield
    finally:
        SHARE_PROMPTS = saved


def _check_share(share_prompts) -> bool:
    if not isinstance(share_prompts, bool):
        raise ValueError(f"share_prompts must be True or False, got {share_prompts!r}")
    return share_prompts and SHARE_PROMPTS


@dataclass
class Rollout:
    """A batch of sampled completions. ``B = n_prompts * group_size``; ``P`` prompt tokens,
    ``T`` completion tokens (the longest completion of the batch)."""

    prompt_ids: torch.Tensor  # [B, P] long, the same prompt repeated group_size times
    completion_ids: torch.Tensor  # [B, T] long, pad after EOS
    mask: torch.Tensor  # [B, T] float, 1 on completion tokens up to and including EOS
    logprobs: torch.Tensor  # [B, T] float, log pi_old(a_t | s_t) at sampling time, 0 off-mask
    group_ids: torch.Tensor  # [B] long, which prompt each row belongs to
    truncated: torch.Tensor  # [B] bool, True when no EOS within max_new_tokens
    texts: list  # [B] decoded completions (up to EOS, specials dropped)
    group_size: int = 1
    temperature: float = 1.0
    share_prompts: bool = True  # teacher forcing runs each distinct prompt once for its rows (generate's choice)

    @property
    def input_ids(self) -> torch.Tensor:
        """Prompt and completion side by side, ``[B, P + T]``."""
        return torch.cat([self.prompt_ids, self.completion_ids], dim=1)

    @property
    def batch_size(self) -> int:
        return self.completion_ids.shape[0]

    @property
    def prompt_length(self) -> int:
        return self.prompt_ids.shape[1]

    @property
    def lengths(self) -> torch.Tensor:
        """Completion lengths (tokens incl. EOS), ``[B]``."""
        return self.mask.sum(dim=1)

    def select(self, index: torch.Tensor) -> "Rollout":
        """The rows ``index`` (a LongTensor or bool mask) as a new Rollout."""
        if index.dtype == torch.bool:
            index = index.nonzero().squeeze(1)
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, torch.Tensor):
                out[f.name] = v[index.to(v.device)]
            elif isinstance(v, list):
                out[f.name] = [v[i] for i in index.tolist()]
            else:
                out[f.name] = v
        return Rollout(**out)

    @staticmethod
    def concat(rollouts: list["Rollout"]) -> "Rollout":
        """Stack rollouts row-wise (padding completions to the longest)."""
        if not rollouts:
            raise ValueError("Rollout.concat needs at least one rollout")
        T = max(r.completion_ids.shape[1] for r in rollouts)

        def pad(x, value):
            return nn.functional.pad(x, (0, T - x.shape[1]), value=value)

        offset, gids = 0, []
        for r in rollouts:
            gids.append(r.group_ids + offset)
            offset += int(r.group_ids.max()) + 1 if r.batch_size else 0
        return Rollout(
            prompt_ids=torch.cat([r.prompt_ids for r in rollouts]),
            completion_ids=torch.cat([pad(r.completion_ids, 0) for r in rollouts]),
            mask=torch.cat([pad(r.mask, 0.0) for r in rollouts]),
            logprobs=torch.cat([pad(r.logprobs, 0.0) for r in rollouts]),
            group_ids=torch.cat(gids),
            truncated=torch.cat([r.truncated for r in rollouts]),
            texts=[t for r in rollouts for t in r.texts],
            group_size=rollouts[0].group_size,
            temperature=rollouts[0].temperature,
            share_prompts=all(r.share_prompts for r in rollouts),
        )


def _check_generate_args(model, prompt_ids, group_size, max_new_tokens, temperature, top_k):
    if prompt_ids.dim() != 2 or prompt_ids.shape[0] == 0:
        raise ValueError(f"prompt_ids must be a non-empty [n, P] tensor, got {tuple(prompt_ids.shape)}")
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be None or >= 1, got {top_k}")
    ctx = getattr(getattr(model, "config", None), "max_seq_len", None)
    P = prompt_ids.shape[1]
    if ctx is not None and P + max_new_tokens > ctx:
        raise ValueError(
            f"prompt ({P} tokens) + max_new_tokens ({max_new_tokens}) exceeds the model's context max_seq_len={ctx}"
        )


def _next_token(logits, greedy: bool, top_k, generator):
    """a_t ~ softmax(top_k(logits)) (or argmax); logits already divided by the temperature."""
    if greedy:
        return logits.argmax(dim=-1)
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator).squeeze(1)


@torch.no_grad()
def generate(
    model: nn.Module,
    prompt_ids: torch.Tensor,
    group_size: int = 1,
    max_new_tokens: int = 4,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
    eos_id: int = 2,
    pad_id: int = 0,
    tokenizer=None,
    share_prompts: bool = True,
) -> Rollout:
    """Sample ``group_size`` completions per prompt, batched.

    prompt_ids: ``[n, P]`` long, all prompts of the same length (the arithmetic task pads
    operands with zeros so they are). Each row is repeated ``group_size`` times,
    consecutively. ``temperature=0`` decodes greedily. At each step:

        logits = model(prefix)[:, -1] / temperature ;  a_t ~ softmax(top_k(logits))

    The recorded ``logprobs`` are ``log softmax(logits / temperature)[a_t]`` (before top-k
    filtering), the same quantity ``sequence_logprobs`` recomputes by teacher forcing.
    With ``use_cache=False`` the whole prefix is recomputed each step (the slow way, kept
    to show what the KV cache buys; the tokens are the same). With the cache and
    ``group_size > 1`` each prompt is run once and its cache is shared by its G rows
    (``share_prompts=False`` runs every row's prompt, the same numbers G times, and the rollout
    records it: its teacher-forced passes run every row's prompt too).
    """
    _check_generate_args(model, prompt_ids, group_size, max_new_tokens, temperature, top_k)
    share = _check_share(share_prompts)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    prompts = prompt_ids.to(device).repeat_interleave(group_size, dim=0)
    B, greedy = prompts.shape[0], temperature == 0
    scale = 1.0 if greedy else temperature
    cache = model.new_cache().reserve(prompts.shape[1] + max_new_tokens) if use_cache else None
    seq, step_input = prompts, prompts
    tokens, logps, alive = [], [], []
    done = torch.zeros(B, dtype=torch.bool, device=device)
    with torch.inference_mode():  # no autograd bookkeeping (no_grad still counts versions); outputs built after it
        for step in range(max_new_tokens):
            if step == 0 and use_cache and share and group_size > 1:  # each prompt once; its G rows share its cache
                rows = torch.arange(prompt_ids.shape[0], device=device).repeat_interleave(group_size)
                logits = model(prompt_ids.to(device), cache, last=1)[:, -1].index_select(0, rows)
                cache.select_rows(rows)
            else:
                logits = model(step_input, cache, last=1) if use_cache else model(seq)
                logits = logits[:, -1]
            logits = logits.float() / scale
            nxt = _next_token(logits, greedy, top_k, generator)
            nxt = torch.where(done, torch.full_like(nxt, pad_id), nxt)
            alive.append((~done).float())
            logps.append(torch.log_softmax(logits, dim=-1).gather(1, nxt[:, None]).squeeze(1) * (~done).float())
            tokens.append(nxt)
            done = done | (nxt == eos_id)
            step_input = nxt[:, None]
            if not use_cache:  # the whole prefix, recomputed next step
                seq = torch.cat([seq, step_input], dim=1)
            if bool(done.all()):
                break
    model.train(was_training)
    completion = torch.stack(tokens, dim=1)
    texts = decode_rows(tokenizer, completion) if tokenizer is not None else [""] * B
    return Rollout(
        prompt_ids=prompts,
        completion_ids=completion,
        mask=torch.stack(alive, dim=1),
        logprobs=torch.stack(logps, dim=1),
        group_ids=torch.arange(B, device=device) // group_size,
        truncated=~done,
        texts=texts,
        group_size=group_size,
        temperature=scale,
        share_prompts=share,
    )


def decode_rows(tokenizer, ids: torch.Tensor) -> list:
    """``[tokenizer.decode(row) for row in ids.tolist()]`` for ``[B, T]`` ids, each distinct row decoded
    once: short completions repeat (the G of a group often agree, and more as the policy learns the
    answers), so there are fewer decodes than rows. The same texts."""
    texts, seen = [], {}
    for row in ids.tolist():
        key = tuple(row)
        text = seen.get(key)
        if text is None:
            text = seen[key] = tokenizer.decode(row)
        texts.append(text)
    return texts


def shared_prompts(rollout: Rollout):
    """``(unique prompts [n, P], inverse [B])`` when the rollout's rows repeat prompts
    (``group_size > 1``: the G completions of a group share theirs) often enough to pay, at
    least two rows per distinct prompt; else None (one row per prompt: nothing to share)."""
    if rollout.group_size < 2 or rollout.batch_size < 2:
        return None
    prompts, inverse = unique_rows(rollout.prompt_ids)
    return (prompts, inverse) if 2 * prompts.shape[0] <= rollout.batch_size else None


def unique_rows(ids: torch.Tensor):
    """``torch.unique(ids, dim=0, return_inverse=True)`` for token ids ``[B, P]``: the distinct rows
    in lexicographic order and each row's index among them, the same tensors, about 20x faster: each
    row is read as one integer in base ``max + 1`` (the first token the most significant digit, so
    the integers sort as the rows do) and the integers are made unique."""
    B, P = ids.shape
    base = int(ids.max()) + 1 if ids.numel() else 1
    if ids.min() < 0 or P * (base - 1).bit_length() > 62:  # would overflow int64: the general path
        return torch.unique(ids, dim=0, return_inverse=True)
    key = (ids * base ** torch.arange(P - 1, -1, -1, device=ids.device)).sum(dim=1)
    keys, inverse = torch.unique(key, return_inverse=True)
    return ids.new_empty(keys.shape[0], P).index_copy_(0, inverse, ids), inverse


def teacher_forced(model: nn.Module, rollout: Rollout, share_prompts: bool | None = None) -> torch.Tensor:
    """``model``'s output at positions ``P - 1 .. P + T - 2``, ``[B, T, ...]``: the
    positions that predict (or value the state before) each completion token; for the
    policy, the logits that predict completion token ``t`` sit at position ``P - 1 + t``.

    The plain way is one forward over ``prompt + completion`` for every row. When rows
    share a prompt (GRPO: G completions per prompt) each distinct prompt is run once and
    its keys and values are handed to its rows' completions through a KV cache: the same
    numbers up to float rounding, and the gradient flows back through the shared prompt
    (``tests/test_rollout.py`` checks both); it skips ``(G - 1) / G x P / (P + T)`` of the
    positions, more than half with the cpu preset's P = 7, T = 4, G = 8. ``share_prompts``: None
    as the rollout was sampled (``rollout.share_prompts``); False: every row its own prompt.
    """
    P, T = rollout.prompt_length, rollout.completion_ids.shape[1]
    share = _check_share(rollout.share_prompts if share_prompts is None else share_prompts)
    shared = shared_prompts(rollout) if share and hasattr(model, "new_cache") else None
    if shared is None:
        return model(rollout.input_ids)[:, P - 1 : -1]
    prompts, inverse = shared
    cache = model.new_cache()
    first = gather_rows(model(prompts, cache, last=1), inverse)  # predicts completion token 0
    if T == 1:
        return first
    rest = model(rollout.completion_ids[:, :-1], cache.select_rows(inverse))  # tokens 1..T-1
    return torch.cat([first, rest], dim=1)


def sequence_logprobs(
    model: nn.Module, rollout: Rollout, temperature: float | None = None, return_logits=False, share_prompts=None
):
    """``log pi(a_t | s_t)`` of each completion token under ``model``, ``[B, T]`` (0 off-mask).

    Differentiable when called with grad enabled. ``temperature`` defaults to the one the
    rollout was sampled at, so for the sampling model this equals ``rollout.logprobs``.
    """
    t = rollout.temperature if temperature is None else temperature
    logits = teacher_forced(model, rollout, share_prompts)
    logp = Fn.token_logprobs(logits, rollout.completion_ids, temperature=t) * rollout.mask
    return (logp, logits) if return_logits else logp


def completion_values(critic: nn.Module, rollout: Rollout, share_prompts: bool | None = None) -> torch.Tensor:
    """``V(s_t)`` for each completion step, ``[B, T]``: the state before token ``t`` is the
    prefix ending at position ``P - 1 + t``."""
    return teacher_forced(critic, rollout, share_prompts) * rollout.mask


# -- what a rung's prepare and loss read off a rollout ------------------------------------------


@dataclass
class Batch:
    """One rollout batch with everything the loss needs, computed once without grad."""

    rollout: Rollout
    scores: torch.Tensor  # [B, T] per-token rewards (task scores, minus beta * KL in the reward)
    rewards: torch.Tensor  # [B] sequence reward used for the advantage
    mask: torch.Tensor  # [B, T] loss mask (completion mask, maybe minus truncated rows)
    old_logp: torch.Tensor  # [B, T] log pi_old (the sampling policy)
    ref_logp: torch.Tensor | None  # [B, T] log pi_ref, or None without a reference
    advantages: torch.Tensor | None = None  # [B] or [B, T]
    returns: torch.Tensor | None = None  # [B, T] value targets (critic)
    old_values: torch.Tensor | None = None  # [B, T] V(s_t) at sampling time (critic)
    stats: dict = field(default_factory=dict)  # numbers for the training log
    is_weights: torch.Tensor | None = None  # [B, T] GRPO: w = pi_old / pi_sampler, a sampler apart (sampler.py)


def loss_mask(rollout: Rollout, mask_truncated: bool = False) -> torch.Tensor:
    """The completion mask, minus the truncated rows with ``mask_truncated`` (TRL's
    ``mask_truncated_completions``)."""
    return rollout.mask * (~rollout.truncated).float()[:, None] if mask_truncated else rollout.mask


def reference_logprobs(reference: nn.Module | None, rollout: Rollout, beta: float, kl_placement: str):
    """``log pi_ref(a_t|s_t)`` [B, T] when the KL penalty is on (``beta > 0``, ``kl_placement``
    not "none"; it costs a forward), else None."""
    if beta <= 0 or kl_placement == "none":
        return None
    if reference is None:
        raise ValueError(f"beta > 0 with kl_placement={kl_placement!r} needs a reference policy")
    if torch.is_grad_enabled():
        return sequence_logprobs(reference, rollout)
    with torch.inference_mode():  # no autograd bookkeeping at all; the clone, after it, is an ordinary tensor
        logp = sequence_logprobs(reference, rollout)
    return logp.clone()


def policy_logprobs(policy: nn.Module, batch: Batch, idx: torch.Tensor):
    """``(log pi_theta(a_t|s_t) [b, T], logits [b, T, V])`` of the rows ``idx``, with grad."""
    return sequence_logprobs(policy, batch.rollout.select(idx), return_logits=True)


def expand(problems: list, group_size: int) -> list:
    """Each problem repeated ``group_size`` times, consecutively (the rollout's row order)."""
    return [p for p in problems for _ in range(group_size)]


def sample_batch(
    policy,
    task,
    n_prompts: int,
    group_size: int = 1,
    rng=0,
    generator=None,
    temperature: float = 1.0,
    reward_kind: str = "outcome",
    share_prompts: bool = True,
):
    """Sample ``n_prompts`` training problems, ``group_size`` completions each, and score them.

        problems = task.sample(n_prompts, rng)
        rollout  = generate(policy, prompts, group_size, temperature)     # B = n_prompts x G rows
        scores   = task.token_scores(problems, rollout, reward_kind)     # [B, T], sparse outcome

    ``rng``: a numpy Generator (advanced in place) or an int seed; ``generator``: the torch
    Generator of the sampling. Returns ``(rollout, scores [B, T], problems [B])`` with each
    problem repeated ``group_size`` times like the rollout's rows. ``share_prompts=False``: every
    row runs its own prompt, here and in every teacher-forced pass over the rollout (`generate`).
    """
    if reward_kind not in ("outcome", "process"):
        raise ValueError(f"reward_kind must be 'outcome' or 'process', got {reward_kind!r}")
    problems = task.sample(n_prompts, rng)
    ro = generate(
        policy,
        task.encode_prompts(problems),
        group_size=group_size,
        max_new_tokens=task.max_answer_length,
        temperature=temperature,
        generator=generator,
        tokenizer=task.tokenizer,
        share_prompts=share_prompts,
    )
    rows = expand(problems, group_size)
    scores = task.token_scores(rows, ro.completion_ids, ro.mask, kind=reward_kind).to(ro.mask.device)
    return ro, scores, rows
