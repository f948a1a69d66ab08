"""Homework 2: baselines. Your name: ______________________

Implement the three functions below (equations (1)-(3) of README.md), then check them:

    python -m course.grade hw2 path/to/this_file.py      # from the repository root
    python path/to/this_file.py                          # train and measure with them

All three have the signatures of their namesakes in `grpo_edu.functional`
(`grpo_edu.plug` swaps them into the library); `baseline_advantages` is the line of
`grpo_edu.algorithms.baseline` that subtracts the baseline.

Shapes: B completions, T completion tokens; ``mask`` [B, T] is 1 up to and including
EOS and 0 on padding (where values are finite garbage).
"""

from __future__ import annotations

import torch
from torch import Tensor

from grpo_edu import get_preset, make_algorithm, make_task, plug, reference_policy, train
from grpo_edu.measure import gradient_variance

__all__ = ["masked_mean", "baseline_advantages", "value_loss"]


def masked_mean(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Equation (1): the mean over the real tokens only,

        masked_mean(x) = sum_t x_t m_t / sum_t m_t

    over ``dim`` (over all elements when ``dim`` is None). A slice with no real token is
    0/0 = NaN on purpose: there is no mean of nothing.

    Args:
        x:    [B, T] (any shape), finite.
        mask: same shape, float or bool.
        dim:  the dimension to reduce, or None.
    Returns:
        a 0-dim tensor (dim None) or x's shape without ``dim``.
    """
    raise NotImplementedError("implement masked_mean: see equation (1) in the handout")


def baseline_advantages(returns: Tensor, baseline, mask: Tensor) -> Tensor:
    """Equation (2): the advantage with a baseline,

        A_t = (G_t - b(s_t)) * m_t

    The baseline may depend on the state but never on the action, so the gradient stays
    unbiased. Both G and b are *data* here: no gradient may flow into either (the critic
    learns from its own loss, equation (3), not from the policy's).

    Args:
        returns:  [B, T], G_t (from discounted_returns).
        baseline: a python float or 0-dim tensor (one b for the batch: batch mean, running
                  mean), [B] (one per sequence), or [B, T] (a critic's V(s_t)).
        mask:     [B, T].
    Returns:
        [B, T] advantages, 0 on padding.
    """
    raise NotImplementedError("implement baseline_advantages: see equation (2) in the handout")


def value_loss(
    values: Tensor, returns: Tensor, mask: Tensor,
    old_values: Tensor | None = None, clip: float | None = None,
) -> Tensor:  # fmt: skip
    """Equation (3): the critic's regression loss, a scalar,

        L_V = 1/2 * masked_mean((V_phi(s_t) - R_t)^2)

    and, when ``clip`` is given (PPO's value clipping, used again in homework 3),

        V_clip = V_old + clamp(V - V_old, -clip, clip)
        L_V    = 1/2 * masked_mean(max((V - R)^2, (V_clip - R)^2))

    ``returns`` and ``old_values`` are targets (no gradient into them). With no real
    token at all the loss is 0, not NaN. ``clip`` without ``old_values`` is a ValueError.

    Args:
        values:     [B, T], V_phi(s_t), requires grad.
        returns:    [B, T], the regression target R_t (here G_t).
        mask:       [B, T].
        old_values: [B, T] or None, V at sampling time (for the clip).
        clip:       None, or the clip range >= 0.
    Returns:
        a 0-dim tensor.
    """
    raise NotImplementedError("implement value_loss: see equation (3) in the handout")


# ------------------------------------------------------------------ your experiments


def training_experiment(baseline: str = "critic", steps: int = 300, sequences_per_step: int = 128,
                        seed: int = 0):  # fmt: skip
    """Part D: REINFORCE with a baseline ("critic", "batch_mean" or "running_mean") on
    2-digit addition, with your three functions inside the library's loop."""
    preset = get_preset("cpu")
    task = make_task(preset)
    reference = reference_policy(preset, task=task)
    algorithm = make_algorithm("baseline", baseline=baseline)
    with plug(masked_mean=masked_mean, baseline_advantages=baseline_advantages, value_loss=value_loss):
        return train(algorithm, task=task, reference=reference, preset=preset, steps=steps,
                     sequences_per_step=sequences_per_step, seed=seed)  # fmt: skip


def variance_experiment(n_batches: int = 32, sequences: int = 256, seed: int = 0) -> dict:
    """Part E: the noise of each gradient estimator at the reference policy, measured by
    grpo_edu.measure.gradient_variance (raw G, batch mean, critic, optimal b*) over
    ``n_batches`` independent batches of ``sequences`` distinct problems."""
    preset = get_preset("cpu")
    task = make_task(preset)
    policy = reference_policy(preset, task=task)
    return gradient_variance(policy, task, estimators=("raw", "batch_mean", "critic", "optimal"),
                             n_batches=n_batches, prompts_per_batch=sequences, group_size=1, seed=seed)  # fmt: skip


if __name__ == "__main__":
    torch.set_num_threads(1)
    for kind in ("running_mean", "critic"):
        hist = training_experiment(kind)
        print(f"baseline={kind}: accuracy {hist.initial_accuracy:.3f} -> {hist.final_accuracy:.3f}")
    variance = variance_experiment()
    for name, stats in variance.items():
        if not name.startswith("_"):
            print(f"{name:>10s}: relative variance {stats['relative_variance']:.2f}, "
                  f"cosine to raw {stats['cosine_to_raw']:.2f}")  # fmt: skip
    print("critic explained variance:", variance["_meta"].get("critic_explained_variance"))
