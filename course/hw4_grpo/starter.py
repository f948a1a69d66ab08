"""Homework 4: GRPO. Your name: ______________________

Implement the three functions below (equations (1)-(5) of README.md), then check them:

    python -m course.grade hw4 path/to/this_file.py      # from the repository root
    python path/to/this_file.py                          # run the experiment, save the plot

All three have the signature of their namesake in `grpo_edu.functional`, so the
library's GRPO can run on your code: `grpo_edu.plug(...)` swaps them in.

Shapes: B = n_prompts x group_size completions, the G samples of one prompt in
consecutive rows; T completion tokens; ``mask`` [B, T] is 1 up to and including EOS and
0 on padding (where values are finite garbage).
"""

from __future__ import annotations

import torch
from torch import Tensor

from grpo_edu import get_preset, make_algorithm, make_task, plug, reference_policy, train
from grpo_edu.figures.plots import plot_metrics

__all__ = ["group_advantages", "kl_penalized_rewards", "aggregate_loss"]


def group_advantages(
    rewards: Tensor, group_size: int, scale: str = "group", eps: float = 1e-6,
    unbiased: bool = False, leave_one_out: bool = False,
) -> tuple[Tensor, dict]:  # fmt: skip
    """Equation (1): GRPO's group-relative advantage, one per completion. Rows
    g*G .. g*G + G-1 answer the same prompt g:

        A_i = (r_i - mean_g(r)) / (s + eps)

    s = std of the group for ``scale="group"``, std of the whole batch for ``"batch"``,
    and no division at all for ``"none"`` (Dr. GRPO: A_i = r_i - mean_g(r)).
    The std is the 1/G ("population") one; ``unbiased=True`` uses 1/(G-1) (1/B for the
    batch std becomes 1/(B-1); a single sample has std 0). A group whose rewards are all
    equal gets A = 0 exactly (never NaN, whatever eps): it carries no signal.
    ``leave_one_out=True`` (equation (1b), RLOO) centres each r_i on the mean of the *other*
    G-1 rewards instead of the group mean: r_i - mean_{j != i} r_j = G/(G-1) (r_i - mean_g r).

    Args:
        rewards:    [B], float (or integer) rewards r_i.
        group_size: G >= 1, divides B.
        scale:      "group" | "batch" | "none".
        eps:        >= 0.
        unbiased:   the std's correction.
        leave_one_out: centre on the mean of the others (RLOO) instead of the group mean.
    Returns:
        ``(advantages [B] float, stats)`` with stats
            "mean": [B // G] group means,  "std": [B // G] group stds (with ``unbiased``),
            "frac_zero_std": python float, the fraction of groups with all-equal rewards.
    """
    raise NotImplementedError("implement group_advantages: see equation (1) in the handout")


def kl_penalized_rewards(
    scores: Tensor, logp: Tensor, ref_logp: Tensor, mask: Tensor, beta: float, kind: str = "k1"
) -> tuple[Tensor, Tensor]:
    """Equation (2): the per-token reward with the KL penalty inside it,

        r_{i,t} = r_phi(q, a_{i,<=t}) - beta * k_{i,t}
        r_i     = sum_t r_{i,t} m_{i,t}

    with k the per-token KL estimate of ``kind`` (equation (2b)): "k1" = log(pi/pi_ref)
    (the derivation), "k2" = (log(pi/pi_ref))^2 / 2, "k3" = pi_ref/pi - 1 - log(pi_ref/pi).
    Rewards are data: no gradient may flow into logp or ref_logp (detach them).

    Args:
        scores:   [B, T] task scores r_phi (the 0/1 outcome sits on the last real token).
        logp:     [B, T] log pi_theta of the sampled tokens.
        ref_logp: [B, T] log pi_ref of the same tokens.
        mask:     [B, T].
        beta:     >= 0.
        kind:     "k1" | "k2" | "k3".
    Returns:
        ``(token_rewards [B, T] (0 on padding), sequence_rewards [B])``.
    """
    raise NotImplementedError("implement kl_penalized_rewards: see equation (2) in the handout")


def aggregate_loss(
    per_token_loss: Tensor, mask: Tensor, mode: str = "sequence_mean", max_length: int | None = None
) -> Tensor:
    """Equations (3)-(5): per-token losses -> one scalar, three ways (|o_i| = sum_t m_it):

        "sequence_mean"  (3):  1/B sum_i (1/|o_i|) sum_t L_it m_it     GRPO paper
        "token_mean"     (4):  sum_it L_it m_it / sum_i |o_i|         DAPO
        "constant"       (5):  sum_it L_it m_it / (B * max_length)     Dr. GRPO (max_length: T if None)

    A completion with no real token contributes 0 (clamp its |o_i| at 1) and still counts
    in the 1/B of "sequence_mean"; an all-padding batch gives 0 in every mode, not NaN.

    Args:
        per_token_loss: [B, T].
        mask:           [B, T].
        mode:           "sequence_mean" | "token_mean" | "constant".
        max_length:     the constant of "constant" (default T).
    Returns:
        a 0-dim tensor.
    """
    raise NotImplementedError("implement aggregate_loss: see equations (3)-(5) in the handout")


# ------------------------------------------------------------------ your experiments


def _plugs():
    return dict(group_advantages=group_advantages, kl_penalized_rewards=kl_penalized_rewards,
                aggregate_loss=aggregate_loss)  # fmt: skip


def experiment(knob: str = "scale_rewards", values=("group", "none"), steps: int = 150,
               sequences_per_step: int = 256, seeds=(0, 1, 2), **config) -> dict:  # fmt: skip
    """Part D: GRPO with your functions, one run per (value of ``knob``, seed).

    knob "scale_rewards" (values "group", "batch", "none") is the std-scaling experiment;
    knob "loss_type" (values "sequence_mean", "token_mean", "constant") the length-bias
    one. Extra ``config`` goes to GRPOConfig (e.g. beta=0.0). Returns
    ``{f"{knob}={value}": [History per seed]}``, the shape grpo_edu.figures.plots expects.
    """
    preset = get_preset("cpu")
    task = make_task(preset)
    reference = reference_policy(preset, task=task)
    runs = {}
    with plug(**_plugs()):
        for value in values:
            name = f"{knob}={value}"
            runs[name] = [train(make_algorithm("grpo", **{knob: value, **config}), task=task, reference=reference,
                                preset=preset, steps=steps, sequences_per_step=sequences_per_step, seed=seed,
                                name=name, progress=False) for seed in seeds]  # fmt: skip
    return runs


if __name__ == "__main__":
    torch.set_num_threads(1)
    runs = experiment("scale_rewards", ("group", "none"))
    fig = plot_metrics(runs, keys=("reward", "completion_length", "grad_norm", "frac_reward_zero_std"), smooth=5)
    fig.savefig("hw4_experiment.png")
    for name, hs in runs.items():
        accs = [h.final_accuracy for h in hs]
        print(f"{name}: final held-out accuracy {sum(accs) / len(accs):.3f} (seeds {accs})")
    print("saved hw4_experiment.png")
