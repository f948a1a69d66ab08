"""The lab's studies: every job longer than a notebook cell, one module each, registered in `STUDIES`.

A study trains or measures on top of the ladder and `grpo_edu.measure` (imports go down) and returns
its numbers; a verb of the `grpo-edu` command (`grpo_edu.command`) or a notebook runs it, and the
command's reports print it. Where a new experiment goes: a measurement a notebook calls in a cell is
`grpo_edu.measure`; a job of minutes, with its own runner, is a study here; a claim tested where it
fails and where it holds, with verdicts, is a regime (`grpo_edu.studies.regimes`).
"""

from __future__ import annotations

STUDIES = {  # module -> what it measures (who runs it); tests/test_package_maps.py checks the table is whole
    "ablation": "which settings of the reference make RL fast or slow (grpo-edu ablate)",
    "bench": "generation speed, step time, passes and memory per algorithm (grpo-edu bench)",
    "compute_law": "ScaleRL's compute law per knob and seed: A, B, C_mid and the early fit's prediction (notebook 10 part 3)",
    "credit_pays": "where a critic's per-token credit pays, in three worlds (notebook 08 part 2)",
    "distillation": "on-policy distillation against SFT on a teacher's answers and GRPO, at equal tokens (issue 50)",
    "gap_ablation": "why PPO leads GRPO per sampled answer in the default world, one switch at a time",
    "gpu_curve": "the gpu preset's learning curve, kept (the measurements page)",
    "pipeline": "the two-process pipeline: a generator samples while the learner updates (grpo-edu train --pipeline async)",
    "pipeline_race": "wall time to 90%: the synchronous loop on 1 and 2 threads against the two-process pipeline",
    "policy_lag": "what a sampler k updates behind costs GRPO, and what each correction pays back (notebook 13)",
    "reference_seeds": "which lessons hang on one reference: short runs from references of other seeds",
    "regimes": "each claim of the derivation where it fails and where it holds (grpo-edu regimes)",
    "speedrun": "GRPO from the cached reference to 90% held-out accuracy, timed, and its leaderboard",
    "spread_ablation": "what holds PPO and GRPO back in the spread world, one switch at a time",
    "stored_runs": "the course's longest cells trained once and stored; read where stored for the setup, else trained",
    "step_profile": "where one GRPO step's time goes, against the least its arithmetic could take",
    "sweep": "learning rate x seed: is the comparison fair? (grpo-edu sweep)",
    "variance_study": "each estimator's gradient variance at several snapshots (grpo-edu variance)",
}
