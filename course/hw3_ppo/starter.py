"""Homework 3: PPO with a critic. Your name: ______________________

Implement the two functions below (equations (1)-(4) of README.md), then check them:

    python -m course.grade hw3 path/to/this_file.py      # from the repository root
    python path/to/this_file.py                          # the clip-range ablation

Both have the signature of their namesake in `grpo_edu.functional`, so the library's
PPO can run on your code: `grpo_edu.plug(...)` swaps them in.

Shapes: B completions, T completion tokens; ``mask`` [B, T] is 1 up to and including
EOS and 0 on padding (a contiguous prefix of ones per row; padding values are finite
garbage).
"""

from __future__ import annotations

import torch
from torch import Tensor

from grpo_edu import get_preset, make_algorithm, make_task, plug, reference_policy, train
from grpo_edu.figures.plots import plot_metrics

__all__ = ["gae", "clipped_surrogate_loss"]


def gae(rewards: Tensor, values: Tensor, mask: Tensor, gamma: float = 1.0, lam: float = 1.0) -> tuple[Tensor, Tensor]:
    """Equations (1)-(2): generalised advantage estimation and the critic's targets,

        delta_t = r_t + gamma * V_{t+1} - V_t          V after the last real token is 0
        A_t     = sum_{k>=0} (gamma*lam)^k delta_{t+k} = delta_t + gamma*lam*A_{t+1}
        R_t     = A_t + V_t

    Both outputs are *targets*: no gradient flows into rewards or values (detach them).

    Args:
        rewards: [B, T], r_t (the KL-penalised per-token reward; 0/1 at the last token).
        values:  [B, T], V(s_t) from the critic at sampling time.
        mask:    [B, T].
        gamma, lam: in [0, 1].
    Returns:
        ``(advantages [B, T], returns [B, T])``, both 0 on padding.
    """
    raise NotImplementedError("implement gae: see equations (1) and (2) in the handout")


def clipped_surrogate_loss(
    logp: Tensor, old_logp: Tensor, advantages: Tensor, eps_low: float = 0.2,
    eps_high: float | None = None, mask: Tensor | None = None,
) -> tuple[Tensor, dict]:  # fmt: skip
    """Equations (3)-(4): PPO's clipped surrogate, per token,

        rho_t = pi_theta(a_t) / pi_old(a_t) = exp(logp_t - old_logp_t)
        L_t   = -min(rho_t A_t, clip(rho_t, 1 - eps_low, 1 + eps_high) A_t)

    ``eps_high=None`` means eps_high = eps_low. ``old_logp`` and ``advantages`` are
    constants (no gradient into them).

    Args:
        logp:       [B, T], log pi_theta, requires grad.
        old_logp:   [B, T], log pi_old (the policy that sampled the batch).
        advantages: [B] (broadcast over T) or [B, T].
        eps_low, eps_high: the clip range below and above 1.
        mask:       [B, T] or None (None: every token counts in the statistics).
    Returns:
        ``(loss [B, T], stats)``, stats a dict of python floats over the masked tokens
        (0.0 for each when there is no token):
            "clip_low":   fraction with rho < 1 - eps_low  and A < 0
            "clip_high":  fraction with rho > 1 + eps_high and A > 0
            "clip_ratio": fraction with either
            "ratio_mean": mean of rho
    """
    raise NotImplementedError("implement clipped_surrogate_loss: see equations (3) and (4) in the handout")


# ------------------------------------------------------------------ your experiments


def clip_ablation(eps_values=(0.05, 0.2, 0.5, 1.0), steps: int = 150, sequences_per_step: int = 256,
                  epochs: int = 4, seeds=(0, 1)) -> dict:  # fmt: skip
    """Part C: PPO with your functions for each clip range ``eps`` and seed.

    More epochs over each batch (``epochs``) move pi_theta further from pi_old, so the
    clip matters more. Returns ``{f"eps={eps}": [History per seed]}``, the shape that
    grpo_edu.figures.plots.plot_metrics / plot_learning_curves take.
    """
    preset = get_preset("cpu")
    task = make_task(preset)
    reference = reference_policy(preset, task=task)
    runs = {}
    with plug(gae=gae, clipped_surrogate_loss=clipped_surrogate_loss):
        for eps in eps_values:
            name = f"eps={eps}"
            runs[name] = [train(make_algorithm("ppo", eps_low=eps, epochs=epochs, minibatches=2), task=task,
                                reference=reference, preset=preset, steps=steps,
                                sequences_per_step=sequences_per_step, seed=seed, name=name, progress=False)
                          for seed in seeds]  # fmt: skip
    return runs


if __name__ == "__main__":
    torch.set_num_threads(1)
    runs = clip_ablation()
    plot_metrics(runs, keys=("reward", "clip_ratio", "kl", "entropy"), smooth=5).savefig("hw3_clip_ablation.png")
    for name, hs in runs.items():
        for h in hs:
            print(
                f"{name} seed={h.config['seed']}: accuracy {h.initial_accuracy:.3f} -> {h.final_accuracy:.3f}, "
                f"mean clip_ratio {h.series('clip_ratio').mean():.3f}, final kl {h.steps[-1]['kl']:.4f}"
            )
    print("saved hw3_clip_ablation.png")
