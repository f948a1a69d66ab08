"""What the course measures, one job per module; imports only go down (to the loop and the core).

    variance.py   gradient variance of each estimator, score norms, the optimal baseline b*
    memory.py     peak memory of one training step, measured and analytic; the memory sweep
    cost.py       passes and seconds of one step; generation speed with and without KV cache
    compare.py    the four rungs side by side (grpo-edu compare), and where each one wins
    bench.py      grpo-edu bench;  sweep.py: grpo-edu sweep;  study.py: grpo-edu variance
    ablation.py   grpo-edu ablate: why RL from one reference learns fast and from another slowly
    reports.py    the text tables and the figure files of all of the above

Everything public is importable from here: ``from grpo_edu import measure``,
``measure.gradient_variance(policy, task)``.
"""

from .ablation import ROWS, Variant, run_ablation
from .bench import run_bench
from .common import flat_grad, progress_bar, rngs, trainable
from .compare import ESTIMATOR_OF, LABELS, ORDER, TARGET, claims, own_variance, run_comparison, where_each_wins
from .cost import generation_speed, step_cost
from .memory import SWEEP, memory_sweep, peak_memory, step_memory
from .reports import (
    format_ablation,
    format_bench,
    format_claims,
    format_memory_sweep,
    format_sweep,
    format_table,
    format_variance_study,
    format_wins,
    write_report,
)
from .study import run_variance_study
from .sweep import best_learning_rates, run_sweep
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
    "ESTIMATORS", "ESTIMATOR_OF", "GROUP_ESTIMATORS", "LABELS", "ORDER", "ROWS", "SWEEP", "TARGET", "Variant",
    "best_learning_rates", "claims", "estimator_advantages", "fit_critic", "flat_grad", "format_ablation",
    "format_bench", "format_claims", "format_memory_sweep", "format_sweep", "format_table", "format_variance_study",
    "format_wins", "own_variance",
    "generation_speed", "gradient_variance", "memory_sweep", "optimal_baseline", "peak_memory", "progress_bar",
    "rngs", "run_ablation", "run_bench", "run_comparison", "run_sweep", "run_variance_study", "score_norms",
    "step_cost", "step_memory", "trainable", "variance_stats", "where_each_wins", "write_report",
]  # fmt: skip
