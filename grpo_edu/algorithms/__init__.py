"""The four rungs of the ladder, each an `Algorithm` with the same interface.

    algo = GRPO(GRPOConfig(beta=0.04))       # or Reinforce(), ReinforceBaseline(), PPO()
    algo.setup(policy, reference)
    stats = algo.update(rollout, scores)

Switch algorithm by switching this one object; `make_algorithm("grpo", lr=1e-4)` builds
one by name. Each file owns the line where its rung differs: reinforce.py the return,
baseline.py ``G_t - b``, ppo.py the clipped surrogate and GAE, grpo.py the group advantage.
"""

from .base import Algorithm, AlgorithmConfig, Batch, Estimate
from .baseline import BaselineConfig, ReinforceBaseline
from .critic import Critic, CriticConfig, fit_critic
from .grpo import GRPO, GRPOConfig
from .ppo import PPO, ClipConfig, PPOConfig
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
    "AlgorithmConfig",
    "Batch",
    "BaselineConfig",
    "ClipConfig",
    "Critic",
    "CriticConfig",
    "Estimate",
    "GRPO",
    "GRPOConfig",
    "PPO",
    "PPOConfig",
    "Reinforce",
    "ReinforceBaseline",
    "ReinforceConfig",
    "fit_critic",
    "make_algorithm",
]
