"""The `grpo-edu` command and the longer jobs of its verbs, built on `grpo_edu.measure` (imports go down):

    cli.py              the grpo-edu command: its verbs, their flags, one function a verb
    bench.py            grpo-edu bench: generation speed, step time, passes, memory per algorithm
    sweep.py            grpo-edu sweep: learning rate x seed, is the comparison fair?
    variance_study.py   grpo-edu variance: each estimator's gradient variance at several snapshots
    ablation.py         grpo-edu ablate: which settings of the reference make RL fast or slow
    regimes/            grpo-edu regimes: where each idea of the derivation pays, one module a regime
    check_notebooks.py  grpo-edu check-notebooks: nbval under seed shifts and CPU kernels
    reports.py          their text tables, and the files grpo-edu compare writes

`grpo_edu.measure` holds the measurements the notebooks of the ladder call (gradient variance,
memory, cost, the side-by-side and its claims); this package holds the longer jobs built on
them, which a verb runs (and notebook 07, the regimes).
"""

from .ablation import ROWS, Variant, run_ablation
from .bench import generation_speed, run_bench
from .check_notebooks import check_notebooks, format_check
from .reports import (
    format_ablation,
    format_bench,
    format_memory_sweep,
    format_sweep,
    format_variance_study,
    write_report,
)
from .sweep import best_learning_rates, run_sweep
from .variance_study import run_variance_study

__all__ = [
    "ROWS", "Variant", "best_learning_rates", "check_notebooks", "format_ablation", "format_bench", "format_check",
    "format_memory_sweep", "format_sweep", "format_variance_study", "generation_speed", "run_ablation", "run_bench",
    "run_sweep", "run_variance_study", "write_report",
]  # fmt: skip
