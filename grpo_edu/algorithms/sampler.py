"""A sampler that is not the trainer, and the importance weight that corrects it.

Large-scale trainers sample with a serving engine (vLLM, SGLang) whose numbers differ slightly
from the trainer's: another dtype, other kernels. Here the sampler is a copy of the policy cast
to ``sampler_dtype`` (weights and compute in bfloat16, as an engine runs it). The rollout's
log-probs are then the sampler's, pi_old is recomputed by the trainer (a forward in fp32), and
each token's loss is weighed by ``w = pi_old / pi_sampler``, truncated or masked
(`grpo_edu.functional.sampler_importance_weights`; TRL ``vllm_importance_sampling_*``, verl's
rollout correction). GRPO's config holds the knobs; this file the two steps.
"""

from __future__ import annotations

import copy

import torch

from .. import functional as Fn
from ..rollout import Rollout, sequence_logprobs


def sampler_copy(policy, dtype: str | torch.dtype | None, cached=None):
    """``policy`` itself when ``dtype`` is None, else a frozen copy in that dtype ("bfloat16" or
    ``torch.bfloat16``: weights and compute, as a serving engine runs it) with the policy's
    current weights (``cached``, a copy made before, is refreshed rather than rebuilt)."""
    if dtype is None:
        return policy
    if cached is None or getattr(cached, "copy_of", None) != id(policy):
        dtype = dtype if isinstance(dtype, torch.dtype) else getattr(torch, dtype)
        cached = copy.deepcopy(policy).to(dtype).requires_grad_(False)
        cached.copy_of = id(policy)  # an int: a module attribute would register the policy inside
    cached.load_state_dict(policy.state_dict())  # cast to dtype
    return cached.eval()


@torch.no_grad()
def trainer_old_logprobs(policy, rollout: Rollout, config):
    """``(old_logp [B, T], weights [B, T] or None, stats)``: the rollout's own log-probs when the
    policy sampled (``config.sampler_dtype`` None); else the trainer's, with the weights of
    ``vllm_importance_sampling_mode`` (None with the correction off: measured, not applied)."""
    if config.sampler_dtype is None:
        return rollout.logprobs, None, {}
    old_logp = sequence_logprobs(policy, rollout)
    weights, stats = Fn.sampler_importance_weights(  # w = clip(pi_old / pi_sampler, C_min, C_max) or masked
        old_logp, rollout.logprobs, rollout.mask, config.vllm_importance_sampling_mode,
        config.vllm_importance_sampling_clip_max, config.vllm_importance_sampling_clip_min,
    )  # fmt: skip
    return old_logp, weights if config.vllm_importance_sampling_correction else None, stats


def check_sampler_knobs(config) -> None:
    """The cross-field rules of the sampler knobs (each alone is checked by `validate`)."""
    lo, hi, mode = (
        config.vllm_importance_sampling_clip_min,
        config.vllm_importance_sampling_clip_max,
        config.vllm_importance_sampling_mode,
    )
    where = f"{type(config).__name__}.vllm_importance_sampling"
    if lo is not None and hi is not None and not lo < hi:
        raise ValueError(f"{where}_clip_min must be < {where}_clip_max, got {lo} >= {hi}")
    if mode.endswith("truncate") and lo is None and hi is None:
        raise ValueError(f"{where}_clip_max (or _clip_min) must be set for mode {mode!r}, got None")
