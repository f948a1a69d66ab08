"""What the course measures, one job per module; imports only go down (to the loop and the core).

    variance.py   gradient variance of each estimator, score norms, the optimal baseline b*
    difficulty.py easy and hard prompts: p_q, Var(R) = E[p(1-p)] + Var(p), EV_max, pass@k (measure.difficulty)
    memory.py     peak memory of one training step, measured and analytic; the memory sweep
    cost.py       passes and seconds of one step
    credit.py     the critic's value per token: EV_t by position, the credit on a wrong answer's first wrong token
    compare.py    the four rungs side by side (grpo-edu compare), where each wins, the claims
    reports.py    the comparison's tables and claims as text
    token_view.py one batch token by token: advantage, ratio, clipped, entropy (plots draws it)

The longer jobs only a verb runs (bench and generation speed, sweep, the variance study, the
ablation, the notebook check, the files `grpo-edu compare` writes) are in `grpo_edu.studies` and `grpo_edu.command`,
on top of this. All public names import from here: ``measure.gradient_variance(policy, task)``.
"""

from .common import flat_grad, progress_bar, rngs, trainable
from .compare import ESTIMATOR_OF, LABELS, ORDER, TARGET, claims, own_variance, run_comparison, where_each_wins
from .cost import step_cost
from .credit import credit_on_error, critic_by_position, ev_by_position, first_wrong_position, oracle_values
from .memory import SWEEP, memory_sweep, peak_memory, step_memory
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
    "credit_on_error", "critic_by_position", "estimator_advantages", "ev_by_position", "first_wrong_position",
    "fit_critic", "flat_grad", "format_claims", "format_table", "format_wins", "gradient_variance", "memory_sweep",
    "optimal_baseline", "oracle_values", "own_variance", "peak_memory", "progress_bar", "rngs",
    "run_comparison", "score_norms", "step_cost", "step_memory", "token_view_values", "trainable", "variance_stats",
    "where_each_wins",
]  # fmt: skip
