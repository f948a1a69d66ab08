"""The four rungs of the ladder, each an `Algorithm` with the same two methods.

    algo = GRPO(GRPOConfig(beta=0.04))       # or Reinforce(), ReinforceBaseline(), PPO()
    algo.setup(policy, reference)
    batch = algo.prepare(rollout, scores)    # advantages (no grad)
    loss, stats = algo.loss(batch, idx)      # the objective on the rows idx (with grad)

`grpo_edu.train.update(algo, rollout, scores)` runs one update of the one loop with them.
Switch algorithm by switching this one object; `make_algorithm("grpo", lr=1e-4)` builds one
by name; ``make_algorithm("grpo", functions={"group_advantages": mine})`` one that calls your
function in place of the core's. Each file holds its rung whole, written one way: its flat config
(every field described in the string below it, its allowed range beside the fields), its advantage
(``prepare``) and its loss: reinforce.py the return, baseline.py ``G_t - b``, ppo.py GAE and the
clipped surrogate, grpo.py the group advantage and the objective of its row in policy_losses.py
(PPO's clip, GSPO, CISPO). Beside them: base.py (what the rungs share: the wiring, the range
checks, the replaced functions), critic.py (the critic V(s_t) and its step), grpo_extras.py,
sampler.py and off_policy.py (GRPO's extras, each used only when its knob is on: off_policy.py is a
sampler k updates behind and the corrections for it). Beside the ladder, in `BESIDE_THE_LADDER`:
distill.py, on-policy distillation (a teacher scores each token of the student's answer; no reward).
"""

from ..rollout import Batch
from .base import Algorithm
from .baseline import BaselineConfig, ReinforceBaseline
from .critic import Critic
from .distill import DistillConfig, OnPolicyDistillation
from .grpo import GRPO, GRPOConfig
from .ppo import PPO, PPOConfig
from .reinforce import Reinforce, ReinforceConfig

ALGORITHMS = {
    "reinforce": Reinforce,
    "baseline": ReinforceBaseline,
    "ppo": PPO,
    "grpo": GRPO,
}
BESIDE_THE_LADDER = {  # algorithms make_algorithm builds that are not rungs (compare, the command: the ladder only)
    "distill": OnPolicyDistillation,  # needs a teacher: make_algorithm("distill", teacher=model)
}


def make_algorithm(name: str, functions: dict | None = None, **config) -> Algorithm:
    """Build an algorithm by name with config overrides (``make_algorithm("grpo", beta=0)``), and
    ``functions`` of the functional core replaced for it alone (``functions={"gae": mine}``)."""
    table = {**ALGORITHMS, **BESIDE_THE_LADDER}
    if name not in table:
        raise ValueError(f"unknown algorithm {name!r}; choose one of {list(table)}")
    return table[name](functions=functions, **config)


__all__ = [
    "ALGORITHMS",
    "Algorithm",
    "BESIDE_THE_LADDER",
    "Batch",
    "BaselineConfig",
    "Critic",
    "DistillConfig",
    "GRPO",
    "GRPOConfig",
    "OnPolicyDistillation",
    "PPO",
    "PPOConfig",
    "Reinforce",
    "ReinforceBaseline",
    "ReinforceConfig",
    "make_algorithm",
]
