"""Homework 1: REINFORCE. Your name: ______________________

Implement the two functions below (equations (1) and (2) of README.md), then check them:

    python -m course.grade hw1 path/to/this_file.py      # from the repository root
    python path/to/this_file.py                          # train with your functions

Both have the signature of their namesake in `grpo_edu.functional`, so the library's
training loops can run on your code: `grpo_edu.plug(...)` swaps them in.

Shapes: B rows (episodes or completions), T time steps (tokens). ``mask`` is 1 on real
steps (up to and including EOS) and 0 on padding; values on padding are finite garbage.
"""

from __future__ import annotations

import torch
from torch import Tensor

from grpo_edu import get_preset, make_algorithm, make_task, plug, reference_policy, train
from grpo_edu.demos.maze_pg import train_maze

__all__ = ["discounted_returns", "policy_gradient_loss"]


def discounted_returns(rewards: Tensor, mask: Tensor, gamma: float) -> Tensor:
    """Equation (1): the reward-to-go of every step,

        G_t = sum_{k >= 0} gamma^k r_{t+k} m_{t+k}  =  r_t m_t + gamma G_{t+1},   G_T = 0

    Rewards on padding (m = 0) count as 0, and the output is 0 on padding.

    Args:
        rewards: [B, T] float, r_t.
        mask:    [B, T] float or bool, m_t.
        gamma:   discount in [0, 1].
    Returns:
        [B, T], G_t (same dtype as rewards).

    Example: rewards [[0, 0, 1]], mask all 1, gamma 0.5  ->  [[0.25, 0.5, 1.0]].
    """
    raise NotImplementedError("implement discounted_returns: see equation (1) in the handout")


def policy_gradient_loss(logp: Tensor, advantages: Tensor) -> Tensor:
    """Equation (2): the REINFORCE per-token loss

        L_t = -A_t * log pi_theta(a_t | s_t)

    whose gradient is -A_t grad log pi(a_t | s_t). The advantage is a *constant weight*:
    no gradient may flow into it (detach it).

    Args:
        logp:       [B, T], log pi_theta(a_t | s_t), requires grad.
        advantages: [B] (one per sequence, the same for all its tokens) or [B, T].
    Returns:
        [B, T] per-token losses (the caller masks and averages them).
    """
    raise NotImplementedError("implement policy_gradient_loss: see equation (2) in the handout")


# ------------------------------------------------------------------ your experiments


def maze_experiment(gamma: float = 0.95, steps: int = 150, seed: int = 0) -> dict:
    """Part C: tabular REINFORCE on the maze, with your two functions inside the loop."""
    with plug(discounted_returns=discounted_returns, policy_gradient_loss=policy_gradient_loss):
        return train_maze(gamma=gamma, steps=steps, seed=seed, progress=False)


def arithmetic_experiment(steps: int = 300, sequences_per_step: int = 128, seed: int = 0):
    """Part D: REINFORCE on 2-digit addition, with your two functions inside the loop."""
    preset = get_preset("cpu")
    task = make_task(preset)
    reference = reference_policy(preset, task=task)  # the SFT warm start (~30% accuracy)
    with plug(discounted_returns=discounted_returns, policy_gradient_loss=policy_gradient_loss):
        return train(make_algorithm("reinforce"), task=task, reference=reference, preset=preset,
                     steps=steps, sequences_per_step=sequences_per_step, seed=seed)  # fmt: skip


if __name__ == "__main__":
    torch.set_num_threads(1)
    for gamma in (1.0, 0.95):
        h = maze_experiment(gamma=gamma)
        print(f"maze gamma={gamma}: success {h['success'][-1]:.2f}, mean length "
              f"{h['length'][0]:.1f} -> {h['length'][-1]:.1f} (shortest {h['shortest']})")  # fmt: skip
    hist = arithmetic_experiment()
    print(f"arithmetic: held-out accuracy {hist.initial_accuracy:.3f} -> {hist.final_accuracy:.3f}")
