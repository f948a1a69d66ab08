"""The four rungs of the ladder, each an `Algorithm` with the same two methods.

    algo = GRPO(GRPOConfig(beta=0.04))       # or Reinforce(), ReinforceBaseline(), PPO()
    algo.setup(policy, reference)
    batch = algo.prepare(rollout, scores)    # advantages (no grad)
    loss, stats = algo.loss(batch, idx)      # the objective on the rows idx (with grad)

`grpo_edu.train.update(algo, rollout, scores)` runs one update of the one loop with them.
Switch algorithm by switching this one object; `make_algorithm("grpo", lr=1e-4)` builds one
by name. Each file holds its rung whole, written one way: its flat config (every field
described in the string below it, its allowed range beside the fields), its advantage
(``prepare``) and its loss: reinforce.py the return, baseline.py ``G_t - b``,
ppo.py GAE and the clipped surrogate, grpo.py the group advantage and the clipped surrogate.
"""

from ..rollout import Batch
from .base import Algorithm
from .baseline import BaselineConfig, ReinforceBaseline
from .critic import Critic
from .grpo import GRPO, GRPOConfig
from .ppo import PPO, PPOConfig
from .reinforce import Reinforce, ReinforceConfig

ALGORITHMS = {
    "reinforce": Reinforce,
    "baseline": ReinforceBaseline,
    "ppo": PPO,
    "grpo": GRPO,
}


def make_algorithm(name: str, **config) -> Algorithm:
    """Build an algorithm by name with config overrides (``make_algorithm("grpo", beta=0)``)."""
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; choose one of {list(ALGORITHMS)}")
    return ALGORITHMS[name](**config)


__all__ = [
    "ALGORITHMS",
    "Algorithm",
    "Batch",
    "BaselineConfig",
    "Critic",
    "GRPO",
    "GRPOConfig",
    "PPO",
    "PPOConfig",
    "Reinforce",
    "ReinforceBaseline",
    "ReinforceConfig",
    "make_algorithm",
]
