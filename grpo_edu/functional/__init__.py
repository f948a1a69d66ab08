"""The functional core: one pure function per equation, tensors in and tensors out.

No ``.backward()``, and no state: REINFORCE, baseline, PPO and GRPO are assembled from these
pieces. The core is split by concern, one page of equations per module:

    reductions.py   masked sums and means, whitening; the three ways to aggregate per-token losses
    advantages.py   returns, GAE, ``G_t - b``, GRPO's group advantage, one sign of the advantage
    logprobs.py     log-probs of the chosen tokens, entropy, the KL estimators, the KL-penalised reward
    losses.py       REINFORCE's loss, PPO's clipped surrogate, the value loss, the end of every rung's loss
    objectives.py   the objectives after DAPO: GSPO, CISPO, the importance weight of a sampler apart
    off_policy.py   the corrections for a sampler k updates behind: AReaL's decoupled weight, IcePop, M2PO
    distillation.py on-policy distillation's per-token advantage: minus the sampled reverse KL to a teacher
    covariance.py   Cov(log pi, A) over the batch's tokens; Clip-Cov and KL-Cov (Cui et al. 2025)

and ``from grpo_edu import functional as Fn; Fn.<name>`` reaches every one of them. Notation and
shapes (as in the notebooks):

- ``B`` completions (rows), ``T`` completion length, ``V`` vocabulary size.
  ``B = n_prompts * group_size``; the samples of one prompt are consecutive rows.
- per-token tensors are ``[B, T]``, per-sequence tensors ``[B]``, logits ``[B, T, V]``.
- ``mask`` ``[B, T]`` (float or bool) is 1 on completion tokens up to and including
  EOS and 0 on padding. Values on padding must be finite (they are multiplied by 0).
- ``logp = log pi_theta(a_t | s_t)``, ``old_logp`` under pi_old (the sampler),
  ``ref_logp`` under pi_ref (the frozen SFT model).

Bad input (wrong shapes, unknown option strings, out-of-range numbers) raises a
``ValueError`` that names the argument and what was expected.

A run that uses other functions says so: ``make_algorithm("grpo", functions={"group_advantages":
mine})`` gives that algorithm (and the loop's update, which logs through it) ``mine``, and no one
else. The one exception, on purpose, is the homework's convenience ``grpo_edu.plug(name=fn)``: for
the duration of its ``with`` block, and only then, the attribute ``name`` of this package and of the
module that defines it is ``fn``, so every caller that looks the name up when it calls (the
algorithms, these functions calling each other, ``Fn.name(...)`` in a notebook) runs ``fn``; the
block restores the originals on exit, also when it raises. While the block runs the swap is seen
by the whole process (plug from one thread at a time); a name bound before the block by
``from grpo_edu.functional import name`` keeps the original. Outside a plug block nothing here
changes.
"""

from __future__ import annotations

from .advantages import (
    baseline_advantages,
    discounted_returns,
    gae,
    group_advantages,
    running_mean,
    signed_advantages,
)
from .covariance import clip_cov_loss, clip_cov_tokens, covariance_terms, kl_cov_loss, kl_cov_tokens, token_covariance
from .distillation import distillation_advantages
from .logprobs import entropy, exact_kl, kl_estimate, kl_penalized_rewards, token_logprobs
from .losses import clipped_surrogate_loss, policy_gradient_loss, regularized_loss, value_loss
from .objectives import SAMPLER_IS_MODES as SAMPLER_IS_MODES  # the modes of sampler_importance_weights
from .objectives import cispo_loss, gspo_loss, sampler_importance_weights, sequence_log_ratio
from .off_policy import decoupled_weights, icepop_weights, m2po_mask
from .reductions import AGGREGATIONS as AGGREGATIONS  # the modes of aggregate_loss: every loss_type
from .reductions import aggregate_loss, masked_mean, masked_normalize, masked_sum, masked_whiten

__all__ = [
    "masked_sum", "masked_mean", "masked_normalize", "masked_whiten",
    "discounted_returns", "gae", "baseline_advantages", "running_mean", "group_advantages",
    "token_logprobs", "entropy", "kl_estimate", "exact_kl", "kl_penalized_rewards",
    "policy_gradient_loss", "clipped_surrogate_loss", "value_loss", "aggregate_loss", "regularized_loss",
    "sequence_log_ratio", "gspo_loss", "cispo_loss", "sampler_importance_weights",
    "signed_advantages", "decoupled_weights", "icepop_weights", "m2po_mask", "distillation_advantages",
    "covariance_terms", "token_covariance", "clip_cov_tokens", "kl_cov_tokens", "clip_cov_loss", "kl_cov_loss",
]  # fmt: skip
"""Every function of the core (the names `grpo_edu.plug` and ``functions=`` may replace)."""
