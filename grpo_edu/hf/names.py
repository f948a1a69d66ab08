"""TRL's names for what grpo_edu sets with two knobs, and the one translation between them.

TRL's ``loss_type`` names an objective and an aggregation at once ("dr_grpo": PPO's clip summed over
a constant; TRL's name for CISPO: its clipped weight, a token mean), and GSPO is a third knob
(``importance_sampling_level="sequence"``). grpo_edu keeps the two apart: ``policy_loss``, the
objective per token (a row of `grpo_edu.algorithms.grpo.POLICY_LOSSES`), and ``loss_type``, the
aggregation only (`grpo_edu.functional.AGGREGATIONS`). This module is the only place in grpo_edu
that knows TRL's names: `TRL_LOSS_TYPES` maps each to ours, `from_trl` translates a config's fields
as a user gives them (the command line and config files call it, so ``--loss_type dapo`` and
``importance_sampling_level = "sequence"`` keep working), and `to_trl` goes the other way for
`grpo_edu.hf.trl_config`. A new objective TRL also has is one row of `TRL_LOSS_TYPES`.
"""

from __future__ import annotations

from dataclasses import fields
from typing import NamedTuple


class TRLLoss(NamedTuple):
    """One TRL ``loss_type``, in grpo_edu's two knobs."""

    policy_loss: str
    """Our ``policy_loss``: the objective per token."""
    loss_type: str
    """Our ``loss_type``: the aggregation."""
    generation_batch: bool
    """TRL divides each minibatch by the generation batch's tokens / steps_per_generation (ours: by its own)."""
    cap: bool
    """TRL's ``epsilon_high`` is the cap on the weight itself, ``1 + eps_high`` of ours."""


TRL_LOSS_TYPES = {  # TRL's loss_type -> ours; the first row of a pair of ours is what trl_config writes
    "grpo": TRLLoss("clip", "sequence_mean", False, False),
    "bnpo": TRLLoss("clip", "token_mean", False, False),
    "dr_grpo": TRLLoss("clip", "constant", False, False),
    "dapo": TRLLoss("clip", "token_mean", True, False),
    "cispo": TRLLoss("cispo", "token_mean", True, True),
}
SEQUENCE_LEVEL = {"gspo": "clip"}
"""Our policy_loss that TRL writes as ``importance_sampling_level="sequence"`` on another's loss_type."""
TRL_ONLY_FIELDS = ("importance_sampling_level",)
"""TRL's config fields with no field of the same name in grpo_edu that `from_trl` translates."""


def from_trl(config_cls, values: dict) -> dict:
    """``values`` (field -> value, as a user gives them for ``config_cls``) with TRL's names made
    grpo_edu's: ``loss_type`` one of `TRL_LOSS_TYPES` becomes our ``loss_type`` (and ``policy_loss``
    where TRL's name carries an objective), ``importance_sampling_level`` "sequence" (GRPO's) becomes
    ``policy_loss="gspo"`` ("token" is the default). Our own names pass unchanged. An unknown name, or
    two settings that contradict, is a one-line ``ValueError`` naming the field."""
    where, out = config_cls.__name__, dict(values)
    ours = {f.name for f in fields(config_cls)}
    objective = None
    if "importance_sampling_level" in out:
        level = out.pop("importance_sampling_level")
        if "policy_loss" not in ours:
            raise ValueError(f"{where} has no importance_sampling_level (GRPO's, TRL's name for policy_loss='gspo')")
        if level not in ("token", "sequence"):
            raise ValueError(f"{where}.importance_sampling_level must be one of ['sequence', 'token'], got {level!r}")
        objective = "gspo" if level == "sequence" else None
    from ..functional import AGGREGATIONS

    name = out.get("loss_type")
    if name is not None and name not in AGGREGATIONS:
        usable = {n for n, row in TRL_LOSS_TYPES.items() if "policy_loss" in ours or row.policy_loss == "clip"}
        if name not in usable:
            raise ValueError(f"{where}.loss_type must be one of {sorted({*AGGREGATIONS, *usable})}, got {name!r}")
        row = TRL_LOSS_TYPES[name]
        out["loss_type"] = row.loss_type
        if row.policy_loss != "clip":
            if objective is not None:
                raise ValueError(
                    f"{where}.loss_type={name!r} with importance_sampling_level='sequence': no counterpart"
                )
            objective = row.policy_loss
    if objective is not None:
        if out.get("policy_loss", objective) != objective:
            raise ValueError(
                f"{where}.policy_loss={out['policy_loss']!r} contradicts TRL's setting of it ({objective!r})"
            )
        out["policy_loss"] = objective
    return out


def to_trl(config) -> tuple[str, TRLLoss, str]:
    """``(TRL loss_type, its row, importance_sampling_level)`` of a `GRPOConfig`'s ``policy_loss`` and
    ``loss_type``; None for the loss type when TRL has no name for the pair."""
    objective = SEQUENCE_LEVEL.get(config.policy_loss, config.policy_loss)
    level = "sequence" if config.policy_loss in SEQUENCE_LEVEL else "token"
    name = next((n for n, r in TRL_LOSS_TYPES.items() if (r.policy_loss, r.loss_type) == (objective, config.loss_type)), None)  # fmt: skip
    return name, TRL_LOSS_TYPES.get(name), level


GKD_KNOBS = {  # DistillConfig's field (and the teacher) -> (TRL's GKDConfig / GKDTrainer name, what corresponds)
    "teacher": ("teacher_model", "GKDTrainer's teacher; ours a policy with the student's tokenizer"),
    "samples": ("lmbda, seq_kd", "'student': lmbda=1 (every batch the student's own answers); 'teacher': lmbda=0, "
                "seq_kd=True (the teacher's sampled answers); TRL's 0 < lmbda < 1 mixes the two by batch, ours does not"),
    "objective": ("beta", "'reverse_kl': beta=1 (KL(student||teacher) per token, exact over the vocabulary); "
                  "'forward_kl': beta=0; TRL's 0 < beta < 1 (the generalized JSD) has no objective here; 'advantage' "
                  "(Thinking Machines: the sampled reverse KL as a per-token advantage in the policy-gradient loss) and "
                  "'nll' (SFT on the teacher's answers: TRL SFTTrainer on them) are not GKD losses"),
    "kl_coef": ("-", "scales objective='advantage' (Thinking Machines' kl_penalty_coef); GKD's loss has no coefficient"),
    "group_size": ("-", "GKD samples one answer per prompt: 1"),
    "eps_low": ("-", "the clip of objective='advantage' over epochs; GKD's loss has no ratio"),
    "eps_high": ("-", "as eps_low"),
    "temperature": ("temperature", "sampling temperature, also of the KL's softmax (TRL's default 0.9, ours 1.0)"),
    "loss_type": ("-", "GKD's reduction 'batchmean' with labels is a mean over the completion tokens: token_mean"),
    "max_length": ("-", "the constant of loss_type='constant'; TRL's max_new_tokens is the generation limit"),
    "entropy_coef": ("-", "no GKD counterpart"),
    "lr": ("learning_rate", "AdamW, weight decay 0"),
    "max_grad_norm": ("max_grad_norm", "global L2 gradient clipping"),
    "epochs": ("-", "GKD: one optimizer step per generated batch (epochs=1, minibatches=1)"),
    "minibatches": ("gradient_accumulation_steps", "GKD: one step per batch; ours several, as GRPO's default"),
    "warmup_steps": ("warmup_steps", "linear warmup (HF's from lr 0)"),
    "adam_betas": ("adam_beta1, adam_beta2", "AdamW betas"),
}  # fmt: skip
"""On-policy distillation (`grpo_edu.algorithms.distill`) in TRL's GKD trainer (``trl.experimental.gkd``): each
field of ``DistillConfig`` and the teacher, with the GKD setting that does the same, or "-" and why not."""
