"""grpo_edu's GRPOConfig -> TRL's GRPOConfig, knob by knob, and what has no counterpart."""

from __future__ import annotations

import math
import os
import tempfile
from dataclasses import fields

from ..algorithms.policy_losses import POLICY_LOSSES
from ._common import _require, batch_of
from .names import TRL_LOSS_TYPES, to_trl


class NoCounterpart(ValueError):
    """A grpo_edu knob value that TRL cannot express."""


def _no(knob, msg):
    raise NoCounterpart(f"GRPOConfig.{knob}: {msg}")


def _kl(c, approx):
    if c.kl_placement == "none" or c.beta == 0:
        return {"beta": 0.0}
    if c.kl_placement == "reward":
        _no(
            "kl_placement",
            "'reward' (beta*log-ratio inside the per-token reward) has no TRL counterpart; "
            "TRL adds beta*k3 to the loss: use kl_placement='loss'",
        )
    if c.kl_kind != "k3":
        _no("kl_estimator", f"{c.kl_kind!r} in the loss has no TRL counterpart (TRL uses k3 only)")
    return {"beta": float(c.beta), "use_bias_correction_kl": False}


def _std(c, approx):
    if c.scale_rewards == "none" or c.unbiased_std or "unbiased_std" in approx:
        return {}
    _no(
        "unbiased_std",
        "False (the derivation's 1/G std) has no TRL counterpart: TRL divides by the 1/(G-1) "
        "std; set unbiased_std=True, or pass approximate={'unbiased_std'} to accept advantages "
        "sqrt(G/(G-1)) times smaller in TRL",
    )


def _adv_eps(c, approx):
    if c.scale_rewards == "none" or math.isclose(c.adv_eps, 1e-4) or "adv_eps" in approx:
        return {}
    _no("adv_eps", f"{c.adv_eps} has no TRL counterpart (TRL divides by std + 1e-4)")


def _loss(c, approx) -> dict:
    """TRL's loss_type, importance_sampling_level and epsilon_high of our policy_loss and loss_type (names.py)."""
    name, row, level = to_trl(c)
    if name is None:
        _no("loss_type", f"{c.loss_type!r} with policy_loss={c.policy_loss!r} has no TRL loss_type")
    if c.gradient_accumulation_steps > 1 and row.loss_type == "token_mean" and not row.generation_batch:
        # TRL's bnpo: a token mean per micro-batch, averaged; its dapo divides by the generation batch's tokens
        name = next(n for n, r in TRL_LOSS_TYPES.items() if r.generation_batch and r[:2] == row[:2])
        row = TRL_LOSS_TYPES[name]
    if row.generation_batch and c.minibatches > 1 and "loss_type" not in approx:
        _no(
            "loss_type",
            f"TRL's {name!r} with minibatches > 1 divides each minibatch by the generation batch's tokens / "
            "steps_per_generation, ours by its own tokens; pass approximate={'loss_type'} to accept",
        )
    if c.loss_type == "constant" and c.max_length is None and "max_length" not in approx:
        _no(
            "max_length",
            "None with loss_type='constant' divides by each batch's longest completion; TRL's "
            "dr_grpo divides by max_completion_length: set max_length",
        )
    _, eps_high = POLICY_LOSSES[c.policy_loss].clip(c)
    if row.cap:  # TRL's epsilon_high is the cap on the weight itself
        eps_high = 1.0 + eps_high
    high = None if eps_high is None else float(eps_high)
    return {"loss_type": name, "importance_sampling_level": level, "epsilon_high": high}


def _warmup(c, approx):
    if c.warmup_steps and "warmup_steps" not in approx:
        _no(
            "warmup_steps",
            f"{c.warmup_steps}: HF's warmup starts at lr 0 (ours at lr/w), one update "
            "behind ours; pass approximate={'warmup_steps'} to accept that",
        )
    return {
        "warmup_steps": c.warmup_steps,
        "lr_scheduler_type": "constant_with_warmup" if c.warmup_steps else "constant",
    }


def _entropy(c, approx):
    if c.entropy_coef and c.temperature != 1.0 and "entropy_coef" not in approx:
        _no(
            "entropy_coef", "with temperature != 1: TRL's entropy is that of logits/temperature, ours of the raw logits"
        )
    return {"entropy_coef": float(c.entropy_coef)}


def _leave_one_out(c, approx):
    if c.leave_one_out:
        _no("leave_one_out", "True (the RLOO baseline) has no GRPOTrainer counterpart (TRL has a separate RLOOTrainer)")
    return {}


def _sampler(c, approx):
    if c.sampler_dtype is None:
        return {}
    if "sampler_dtype" in approx:
        return {"use_vllm": True}
    _no(
        "sampler_dtype",
        f"{c.sampler_dtype!r} (the policy cast to it samples) has no GRPOTrainer counterpart: TRL's sampler "
        "apart from the trainer is a vLLM engine; pass approximate={'sampler_dtype'} for use_vllm=True",
    )


def _what_rl_changes(c, approx):  # notebook 12's knobs: TRL takes a reward function and no advantage filter
    for knob, default in (("reward_signal", "true"), ("advantage_sign", "both"), ("positive_weight", 1.0)):
        if getattr(c, knob) != default:
            _no(knob, f"{getattr(c, knob)!r} has no GRPOConfig counterpart (a reward function or a loss override)")
    return {}


def _off_policy(c, approx):  # a sampler k updates behind (algorithms/off_policy.py)
    if c.policy_lag > 0:
        _no(
            "policy_lag",
            f"{c.policy_lag}: GRPOTrainer samples with the trainer's weights; TRL's AsyncGRPOTrainer lets the "
            "lag vary up to max_staleness (weight syncs), where ours is fixed",
        )
    if c.off_policy_correction not in ("none", "ppo_clip"):  # with no lag both are GRPOTrainer's loss
        _no(
            "off_policy_correction",
            f"{c.off_policy_correction!r} with no lag has no GRPOTrainer counterpart; TRL weighs a sampler apart "
            "by vllm_importance_sampling_* ('tis' ~ token_truncate, 'decoupled'/'icepop' ~ token_mask)",
        )
    return {}


def _dynamic(c, approx):
    if c.dynamic_sampling:
        _no(
            "dynamic_sampling",
            "True (DAPO: drop groups whose rewards agree, sample more) has no GRPOTrainer counterpart",
        )
    return {}


_ROWS = [  # (ours, TRL, note, convert(config, approximate) -> TRL kwargs)
    ("group_size", "num_generations", "G samples per prompt", lambda c, a: {"num_generations": c.group_size}),
    (
        "epochs",
        "num_iterations",
        "mu; TRL reuses one shuffle of the batch for every pass, we reshuffle",
        lambda c, a: {"num_iterations": c.epochs},
    ),
    (
        "minibatches",
        "steps_per_generation",
        "optimizer steps per pass; TRL's steps_per_generation counts micro-batches: minibatches x "
        "gradient_accumulation_steps (per_device_train_batch_size = sequences_per_step / that / GPUs)",
        lambda c, a: {"steps_per_generation": c.minibatches * c.gradient_accumulation_steps},
    ),
    (
        "shuffle",
        "-",
        "TRL shuffles the batch's rows into minibatches; False (verl's in-order split) has no TRL counterpart",
        lambda c, a: (
            {}
            if c.shuffle
            else _no("shuffle", "False (minibatches in order, whole groups) has no TRL counterpart: TRL shuffles")
        ),
    ),
    (
        "gradient_accumulation_steps",
        "gradient_accumulation_steps",
        "micro-batches per optimizer step, each weighted by its share of the step's normaliser (tokens for "
        "token_mean, rows otherwise): the one-batch gradient. TRL divides each micro-batch's loss by k: the same "
        "for grpo and dr_grpo (equal rows); its bnpo is a token mean per micro-batch, averaged, so token_mean maps "
        "to dapo when k > 1 (the generation batch's tokens / (steps_per_generation / k): ours with minibatches=1)",
        lambda c, a: {"gradient_accumulation_steps": c.gradient_accumulation_steps},
    ),
    ("eps_low", "epsilon", "lower clip range", lambda c, a: {"epsilon": float(c.eps_low)}),
    (
        "eps_high",
        "epsilon_high",
        "upper clip range; None = eps_low; > eps_low is clip-higher (DAPO); where TRL's epsilon_high "
        "is the cap on the weight itself (names.TRL_LOSS_TYPES), mapped to 1 + eps_high",
        lambda c, a: {},  # with loss_type (_loss)
    ),
    (
        "policy_loss",
        "loss_type / importance_sampling_level",
        "the objective per token: 'clip' is TRL's default; 'gspo' is importance_sampling_level='sequence'; "
        "another is TRL's loss_type of the same name (names.TRL_LOSS_TYPES)",
        lambda c, a: {},  # with loss_type (_loss)
    ),
    *(
        (name, "-", note, lambda c, a: {})  # only with policy_loss 'clip_cov' / 'kl_cov', which TRL has not (_loss)
        for name, note in (
            ("clip_cov_ratio", "Clip-Cov (Cui et al. 2025): verl policy_loss.clip_cov_ratio; no TRL counterpart"),
            ("clip_cov_lb", "Clip-Cov: verl policy_loss.clip_cov_lb"),
            ("clip_cov_ub", "Clip-Cov: verl policy_loss.clip_cov_ub"),
            ("kl_cov_ratio", "KL-Cov (Cui et al. 2025): verl policy_loss.kl_cov_ratio; no TRL counterpart"),
            ("ppo_kl_coef", "KL-Cov: verl policy_loss.ppo_kl_coef"),
        )
    ),
    ("beta", "beta", "KL coefficient (with kl_placement='loss'; 0 loads no reference model in TRL)", lambda c, a: {}),
    (
        "kl_placement",
        "beta / use_bias_correction_kl=False",
        "'loss' only; 'none' -> beta 0; 'reward' has "
        "no counterpart. TRL multiplies its KL term by the ratio by default (bias correction): set off",
        _kl,
    ),
    ("kl_estimator", "-", "TRL's loss KL is k3 only (None or 'k3' map; k1, k2 do not)", lambda c, a: {}),
    (
        "scale_rewards",
        "scale_rewards",
        "'group' | 'batch' | 'none', same names",
        lambda c, a: {"scale_rewards": c.scale_rewards},
    ),
    ("unbiased_std", "-", "TRL's std is always 1/(G-1): True maps, False (1/G) does not", _std),
    ("adv_eps", "-", "TRL's eps in (r - mean)/(std + eps) is 1e-4, our default", _adv_eps),
    (
        "loss_type",
        "loss_type",
        "with policy_loss, TRL's loss_type (names.TRL_LOSS_TYPES): sequence_mean -> 'grpo'; token_mean -> 'bnpo' "
        "(mean over the minibatch's tokens; TRL's 'dapo' divides by the generation batch's tokens / "
        "steps_per_generation); constant -> 'dr_grpo'",
        _loss,
    ),
    (
        "max_length",
        "max_completion_length",
        "dr_grpo's constant; in TRL also the generation limit",
        lambda c, a: {} if c.max_length is None else {"max_completion_length": c.max_length},
    ),
    (
        "mask_truncated_completions",
        "mask_truncated_completions",
        "same",
        lambda c, a: {"mask_truncated_completions": c.mask_truncated_completions},
    ),
    (
        "temperature",
        "temperature",
        "sampling temperature, also applied to the training log-probs",
        lambda c, a: {"temperature": float(c.temperature)},
    ),
    ("entropy_coef", "entropy_coef", "mean token entropy bonus", _entropy),
    ("lr", "learning_rate", "AdamW, weight decay 0", lambda c, a: {"learning_rate": float(c.lr), "weight_decay": 0.0}),
    ("warmup_steps", "warmup_steps", "linear warmup then constant", _warmup),
    (
        "max_grad_norm",
        "max_grad_norm",
        "global L2 gradient clipping",
        lambda c, a: {"max_grad_norm": float(c.max_grad_norm)},
    ),
    (
        "adam_betas",
        "adam_beta1, adam_beta2",
        "AdamW betas",
        lambda c, a: {"adam_beta1": float(c.adam_betas[0]), "adam_beta2": float(c.adam_betas[1])},
    ),
    ("leave_one_out", "-", "RLOO baseline: TRL's RLOOTrainer, not GRPOTrainer", _leave_one_out),
    ("dynamic_sampling", "-", "DAPO dynamic sampling: no GRPOTrainer counterpart", _dynamic),
    ("max_resample", "-", "only used with dynamic_sampling", lambda c, a: {}),
    ("reward_signal", "-", "spurious rewards (Shao et al. 2025): in TRL, a reward function", _what_rl_changes),
    ("random_reward_p", "-", "only used with reward_signal='random'", lambda c, a: {}),
    ("advantage_sign", "-", "NSR / PSR (Zhu et al. 2025): no GRPOTrainer counterpart", lambda c, a: {}),
    ("positive_weight", "-", "W-REINFORCE's lambda (Zhu et al. 2025): no GRPOTrainer counterpart", lambda c, a: {}),
    (
        "sampler_dtype",
        "use_vllm",
        "None maps (use_vllm=False); a dtype samples from the policy cast to it, TRL from a vLLM engine",
        _sampler,
    ),
    *(
        (name, name, note, lambda c, a, name=name: {name: getattr(c, name)})
        for name, note in (
            ("vllm_importance_sampling_correction", "same; acts only with a sampler apart (sampler_dtype / use_vllm)"),
            ("vllm_importance_sampling_mode", "token_/sequence_ x truncate/mask, same names"),
            ("vllm_importance_sampling_clip_max", "C_max, same (the deprecated vllm_importance_sampling_cap)"),
            ("vllm_importance_sampling_clip_min", "C_min, same"),
        )
    ),
    (
        "policy_lag",
        "max_staleness (AsyncGRPOTrainer)",
        "rollouts sampled by the weights k optimizer updates behind, a fixed k; TRL's async trainer bounds a "
        "varying lag (AReaL max_head_offpolicyness, tinker max_steps_off_policy); GRPOTrainer: 0",
        _off_policy,
    ),
    (
        "off_policy_correction",
        "vllm_importance_sampling_mode",
        "how the loss treats the lagged sampler's log-probs: 'tis' is token_truncate, 'decoupled' (AReaL, "
        "behav_imp_weight_cap 5) and 'icepop' ([0.5, 5]) are token_mask, of pi_prox/pi_behav, the bounds "
        "vllm_importance_sampling_clip_max/min; 'none' and 'ppo_clip' with no lag are GRPOTrainer's; 'm2po' has none",
        lambda c, a: {},  # with policy_lag (_off_policy)
    ),
]
KNOB_MAP = tuple((ours, trl, note) for ours, trl, note, _ in _ROWS)
"""(grpo_edu GRPOConfig field, TRL GRPOConfig field(s), note), one row per field."""

NO_COUNTERPART = (
    ("grpo_edu", "kl_placement='reward'", "the derivation's KL inside the per-token reward"),
    ("grpo_edu", "kl_estimator='k1'/'k2' in the loss", "TRL's loss KL is k3"),
    ("grpo_edu", "unbiased_std=False", "the 1/G std of the derivation; TRL uses 1/(G-1)"),
    ("grpo_edu", "adv_eps != 1e-4", "TRL's eps is fixed"),
    ("grpo_edu", "dynamic_sampling=True", "DAPO's refill of all-equal groups"),
    ("grpo_edu", "leave_one_out=True", "the RLOO baseline (TRL: RLOOTrainer)"),
    ("grpo_edu", "max_length=None with loss_type='constant'", "per-batch constant"),
    ("grpo_edu", "warmup_steps > 0", "HF's linear warmup starts at lr 0, one update behind ours"),
    ("grpo_edu", "a fresh minibatch shuffle every epoch", "TRL shuffles a generation batch once for all mu"),
    (
        "grpo_edu",
        "pi_old = the sampler's log-probs",
        "TRL recomputes them with a forward pass when a batch feeds more than one optimizer step "
        "(gradient_accumulation_steps not a multiple of steps_per_generation x num_iterations)",
    ),
    ("grpo_edu", "rollout.prompt_sharing (on)", "each prompt run once for its G rows (same numbers, less compute)"),
    ("TRL", "use_bias_correction_kl=True (default)", "KL term times the ratio: a different KL gradient"),
    ("grpo_edu", "sampler_dtype='bfloat16'/'float16'", "the policy cast to it samples (TRL: a vLLM engine)"),
    ("grpo_edu", "policy_lag > 0", "a sampler a fixed k updates behind (TRL: AsyncGRPOTrainer, max_staleness)"),
    ("grpo_edu", "off_policy_correction='m2po'", "M2PO's second-moment mask"),
    ("grpo_edu", "policy_loss='clip_cov' / 'kl_cov'", "Clip-Cov, KL-Cov (Cui et al. 2025; verl loss_mode)"),
    *(
        ("TRL", f"loss_type={name!r} with minibatches > 1", "normalises by the whole generation batch's tokens")
        for name, row in TRL_LOSS_TYPES.items()
        if row.generation_batch
    ),
    ("TRL", "loss_type='bnpo' with gradient_accumulation_steps > 1", "a token mean per micro-batch, averaged"),
    ("TRL", "importance_sampling_level='sequence' with another objective's loss_type", "a sequence weight in it"),
    ("TRL", "loss_type sapo / luspo / vespo", "other surrogates"),
    ("TRL", "delta", "two-sided clipping of the ratio (INTELLECT-2)"),
    ("TRL", "top_entropy_quantile", "train only on high-entropy tokens"),
    ("TRL", "off_policy_mask_threshold", "drop off-policy negative sequences (DeepSeek-V3.2)"),
    ("TRL", "use_adaptive_entropy", "adaptive entropy coefficient"),
    ("TRL", "sync_ref_model", "TR-DPO: move the reference towards the policy"),
    ("TRL", "reward_weights, multi_objective_aggregation", "several reward functions"),
    ("TRL", "top_p, top_k, min_p, repetition_penalty", "sampling filters (rollout.generate has top_k)"),
    ("TRL", "use_vllm", "a serving engine (its importance-sampling knobs map: vllm_importance_sampling_*)"),
)
"""Settings one side has and the other cannot express: (side, setting, note)."""

_DEFAULTS = dict(bf16=False, fp16=False, report_to="none", save_strategy="no", disable_tqdm=True,
                 shuffle_dataset=True, logging_steps=1,
                 remove_unused_columns=False, dataloader_pin_memory=False)  # fmt: skip


_PARITY_CHOICES = {"use_bias_correction_kl", "weight_decay", "lr_scheduler_type"}
"""TRL settings with no grpo_edu knob that the map sets to match grpo_edu; trainer_kwargs may change them."""


def _trl_defaults(trl) -> dict:
    names = trl.GRPOConfig.__dataclass_fields__
    ckpt = "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"
    return {**_DEFAULTS, ckpt: False, "output_dir": os.path.join(tempfile.gettempdir(), "grpo-edu-trl")}


def trl_config(grpo_config, sequences_per_step: int | None = None, approximate=(), **trainer_kwargs):
    """Map a `grpo_edu.algorithms.GRPOConfig` to a ``trl.GRPOConfig``, knob by knob (`KNOB_MAP`).

    ``sequences_per_step`` completions per generation (prompts x group_size; None: the cpu preset's) on one process
    are split into ``minibatches`` optimizer steps of ``gradient_accumulation_steps`` micro-batches each. A knob
    value TRL cannot express raises `NoCounterpart` (a ValueError) naming the knob, unless its name is in ``approximate``
    (then the nearest TRL setting is used). ``trainer_kwargs`` set any other TRL field
    (``max_steps``, ``seed``, ``max_completion_length``, ...); one that contradicts a mapped
    knob raises, except the settings the map only chooses for parity (`_PARITY_CHOICES`:
    ``use_bias_correction_kl=False``, ``weight_decay=0``, a constant ``lr_scheduler_type``). A GRPOConfig field missing from `KNOB_MAP` raises too: nothing is dropped
    silently. Defaults for a small CPU run: fp32, no gradient checkpointing, no reporting,
    no checkpoints, output under the temp dir.
    """
    trl = _require("trl")
    from ..algorithms import GRPOConfig

    if not isinstance(grpo_config, GRPOConfig):
        raise ValueError(f"trl_config maps a grpo_edu GRPOConfig, got {type(grpo_config).__name__}")
    approximate, sequences_per_step = set(approximate), batch_of(sequences_per_step)
    known = {row[0] for row in _ROWS}
    for f in fields(grpo_config):
        if f.name not in known:
            raise ValueError(f"GRPOConfig.{f.name} has no row in grpo_edu.hf.KNOB_MAP: add one")
    mapped: dict = {}
    for _, _, _, convert in _ROWS:
        mapped.update(convert(grpo_config, approximate))
    if sequences_per_step % (grpo_config.minibatches * grpo_config.group_size):
        raise ValueError(f"sequences_per_step={sequences_per_step} must be a multiple of minibatches x group_size")
    micro = grpo_config.minibatches * grpo_config.gradient_accumulation_steps  # TRL's steps_per_generation
    if sequences_per_step % micro:
        raise ValueError(
            f"sequences_per_step={sequences_per_step} must be a multiple of minibatches x gradient_accumulation_steps"
        )
    mapped["per_device_train_batch_size"] = sequences_per_step // micro
    for key, value in trainer_kwargs.items():
        if key in mapped and mapped[key] != value and key not in _PARITY_CHOICES:
            raise ValueError(
                f"trl_config: {key}={value!r} contradicts the mapped value {mapped[key]!r}; "
                "change the grpo_edu knob instead"
            )
    if "max_completion_length" not in mapped and "max_completion_length" not in trainer_kwargs:
        raise ValueError(
            "trl_config needs max_completion_length (e.g. task.max_answer_length) or GRPOConfig.max_length"
        )
    kwargs = {**_trl_defaults(trl), **mapped, **trainer_kwargs}
    return trl.GRPOConfig(**kwargs)


def format_knob_map() -> str:
    """`KNOB_MAP` and `NO_COUNTERPART` as a text table."""
    w = max(len(r[0]) for r in KNOB_MAP)
    v = max(len(r[1]) for r in KNOB_MAP)
    lines = [f"{'grpo_edu':<{w}}  {'TRL':<{v}}  note"]
    lines += [f"{o:<{w}}  {t:<{v}}  {n}" for o, t, n in KNOB_MAP]
    lines += ["", "no counterpart on the other side:"]
    lines += [f"  {side:<8}  {what}: {note}" for side, what, note in NO_COUNTERPART]
    return "\n".join(lines)
