"""What a notebook cell measures, one job per module; imports only go down (to the warm start, the loop and the core).

    variance.py    gradient variance of each estimator, score norms, the optimal baseline b*; `fit_critic`
    difficulty.py  easy and hard prompts: p_q, Var(R) = E[p(1-p)] + Var(p), EV_max, pass@k (measure.difficulty)
    credit.py      the critic's value per token: EV_t by position, the credit on a wrong answer's first wrong token
    objectives.py  the objectives after DAPO against GRPO's: GSPO's gradient, a sampler apart (notebook 04 part 2)
    token_view.py  one batch token by token: advantage, ratio, clipped, entropy (plots draws it)
    tied_head.py   a tied embedding's gradient split into its reading and its writing (notebook 00)
    memory.py      peak memory of one training step, measured and analytic; the memory sweep
    cost.py        passes and seconds of one step
    compare.py     the four rungs side by side (grpo-edu compare, notebook 05), where each wins, the claims
    reports.py     the comparison's tables and claims as text
    verdicts.py    the one two-sided rule a claim's verdict comes from (compare and the regimes)
    fits.py        curves of the RL literature fitted by least squares (Cui et al.'s R(H), Gao et al.'s gold(d),
                   ScaleRL's sigmoid R(C) in compute)
    entropy_mechanism.py  one step's entropy change as -eta Cov(log pi, A) (Cui et al.); Clip-Cov's, KL-Cov's tokens
    common.py      what the measurements share: seeded generators, flat gradients, a progress bar, spreads

The longer jobs (bench, sweep, the variance study, the ablations, the regimes) are `grpo_edu.studies`,
and what the `grpo-edu` command prints and writes is `grpo_edu.command`, on top of this. The names
notebooks call most import from here (``measure.gradient_variance(policy, task)``); the rest from
their module (``grpo_edu.measure.fits.cui_fit``).
"""

from .common import flat_grad, progress_bar, rngs, trainable
from .compare import ESTIMATOR_OF, LABELS, ORDER, TARGET, claims, own_variance, run_comparison, where_each_wins
from .cost import step_cost
from .credit import credit_on_error, critic_by_position, ev_by_position, first_wrong_position, oracle_values
from .entropy_mechanism import clip_cov_tokens, kl_cov_tokens, predicted_entropy_change, token_covariance
from .memory import SWEEP, memory_sweep, peak_memory, step_memory
from .objectives import format_gspo_vs_grpo, format_sampler_mismatch, gspo_vs_grpo, sampler_mismatch
from .reports import format_claims, format_table, format_wins
from .token_view import TOKEN_VIEW, token_view_values
from .variance import (
    ESTIMATORS,
    GROUP_ESTIMATORS,
    estimator_advantages,
    fit_critic,
    gradient_variance,
    optimal_baseline,
    score_norms,
    variance_stats,
)

__all__ = [
    "ESTIMATORS", "ESTIMATOR_OF", "GROUP_ESTIMATORS", "LABELS", "ORDER", "SWEEP", "TARGET", "TOKEN_VIEW", "claims",
    "clip_cov_tokens", "credit_on_error", "critic_by_position", "estimator_advantages", "ev_by_position",
    "first_wrong_position", "fit_critic", "flat_grad", "format_claims", "format_gspo_vs_grpo",
    "format_sampler_mismatch", "format_table", "format_wins", "gradient_variance", "gspo_vs_grpo", "kl_cov_tokens",
    "memory_sweep", "sampler_mismatch", "optimal_baseline", "oracle_values", "own_variance", "peak_memory",
    "predicted_entropy_change", "progress_bar", "rngs", "run_comparison", "score_norms", "step_cost", "step_memory",
    "token_covariance", "token_view_values", "trainable", "variance_stats", "where_each_wins",
]  # fmt: skip
