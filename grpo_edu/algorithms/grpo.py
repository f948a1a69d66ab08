"""GRPO: PPO's clipped objective with the critic replaced by the group's mean reward.

For each prompt q, sample G completions a_1..a_G from pi_old and score them:

    r_i = R(q, a_i)                          [- beta sum_t log(pi_old/pi_ref): kl_placement="reward"]
    A_i = (r_i - mean(r_1..r_G)) / (std(r_1..r_G) + eps)      (scale_rewards="group")
    L   = agg_{i,t} -min(rho_{i,t} A_i, clip(rho_{i,t}, 1-eps_low, 1+eps_high) A_i)
          [+ beta * k3(pi_theta, pi_ref)                        (kl_placement="loss")]

then several epochs over the batch with pi_old fixed (the loop in ``train.py``), and
pi_old <- pi_theta. No value model: the G samples of the same prompt are each other's
baseline. ``prepare`` below is the advantage, ``loss`` the objective, each a few calls into
`grpo_edu.functional` with its equation beside it; the objective per token is a row of
`POLICY_LOSSES` (``policy_loss``, policy_losses.py). The other production extras are elsewhere, each called only when its knob is on:
a sampler apart (``sampler_dtype``) in sampler.py, or behind (``policy_lag``) in off_policy.py, DAPO's dynamic sampling in grpo_extras.py.
The knobs are named as TRL's GRPOConfig and verl name them (each field says which).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from ..functional import AGGREGATIONS, SAMPLER_IS_MODES
from ..rollout import Batch, Rollout, loss_mask, policy_logprobs, reference_logprobs
from .base import BOOL, Algorithm, validate
from .grpo_extras import dynamic_sampling, spurious_rewards
from .off_policy import CORRECTIONS, check_off_policy_knobs, m2po_objective, sampler_apart, sampler_old_logprobs
from .policy_losses import POLICY_LOSSES, UNIT, check_cov_knobs, logged_covariance


@dataclass
class GRPOConfig:
    # the group and its advantage
    group_size: int = 8
    """G, completions per prompt (TRL num_generations, verl rollout.n)."""
    scale_rewards: str = "group"
    """Divide by the std of the "group" | "batch" | "none" (Dr. GRPO) (TRL scale_rewards)."""
    unbiased_std: bool = False
    """Std with 1/(G-1) (torch.std, TRL) instead of the derivation's 1/G."""
    adv_eps: float = 1e-4
    """Eps in (r - mean) / (std + eps) (TRL: fixed 1e-4)."""
    leave_one_out: bool = False
    """RLOO: centre on the mean of the other G-1 (verl adv_estimator="rloo")."""
    # the clipped objective
    eps_low: float = 0.2
    """Clip range below (TRL epsilon, verl clip_ratio_low)."""
    eps_high: float | None = None
    """Clip above (TRL epsilon_high, verl clip_ratio_high); None: eps_low (CISPO: its cap, 4)."""
    policy_loss: str = "clip"
    """The objective per token, a key of POLICY_LOSSES: PPO's "clip", GSPO's, CISPO's, Cui et al.'s "clip_cov", "kl_cov" (verl policy_loss.loss_mode)."""
    clip_cov_ratio: float = 2e-4
    """Clip-Cov: the fraction of tokens whose gradient is dropped (verl policy_loss.clip_cov_ratio)."""
    clip_cov_lb: float = 1.0
    """Clip-Cov: a token is eligible when lb < (log pi - mean)(A - mean) (verl policy_loss.clip_cov_lb)."""
    clip_cov_ub: float = 5.0
    """Clip-Cov: ... and that product < ub (verl policy_loss.clip_cov_ub)."""
    kl_cov_ratio: float = 2e-4
    """KL-Cov: the fraction of tokens, largest covariance first, given the |log rho| penalty (verl policy_loss.kl_cov_ratio)."""
    ppo_kl_coef: float = 1.0
    """KL-Cov: the penalty's coefficient, ppo_kl_coef * |log pi - log pi_old| (verl policy_loss.ppo_kl_coef)."""
    # the KL to the reference
    beta: float = 0.04
    """KL coefficient (TRL beta, verl kl_loss_coef)."""
    kl_placement: str = "loss"
    """"loss": beta*k3 in the loss (GRPO paper; verl use_kl_loss) | "reward" | "none"."""
    kl_estimator: str | None = None
    """"k1" | "k2" | "k3"; None: k3 in the loss, k1 in the reward (verl kl_loss_type)."""
    # per-token losses -> one number
    loss_type: str = "token_mean"
    """How per-token losses become one number: "token_mean" | "sequence_mean" | "constant" (verl loss_agg_mode)."""
    max_length: int | None = None
    """The constant of loss_type="constant" (TRL max_completion_length); None: batch's T."""
    mask_truncated_completions: bool = False
    """Drop completions that hit max_new_tokens from the loss (TRL)."""
    entropy_coef: float = 0.0
    """Entropy bonus (verl entropy_coeff)."""
    # sampling
    temperature: float = 1.0
    """Sampling temperature, also of the training log-probs (TRL temperature)."""
    dynamic_sampling: bool = False
    """DAPO: drop groups whose rewards are all equal, sample more."""
    max_resample: int = 4
    """At most this many extra generation rounds for dynamic sampling."""
    # a sampler that is not the trainer (a serving engine): TRL use_vllm, verl's rollout correction
    sampler_dtype: str | None = None
    """None: the policy samples | "bfloat16" | "float16": a copy in that dtype."""
    vllm_importance_sampling_correction: bool = True
    """Weigh the loss by pi_old/pi_sampler (TRL, same name)."""
    vllm_importance_sampling_mode: str = "sequence_mask"
    """"token"|"sequence" x "truncate"|"mask" (TRL, same)."""
    vllm_importance_sampling_clip_max: float | None = 3.0
    """C_max (TRL, same; verl rollout_is_threshold)."""
    vllm_importance_sampling_clip_min: float | None = None
    """C_min (TRL, same); None: no lower bound."""
    # optimisation
    lr: float = 3e-4
    """AdamW learning rate (TRL learning_rate)."""
    max_grad_norm: float = 1.0
    """Global L2 gradient clipping (TRL max_grad_norm)."""
    epochs: int = 2
    """Passes over each batch with pi_old fixed (TRL num_iterations, verl ppo_epochs)."""
    minibatches: int = 2
    """Optimizer steps per pass (TRL steps_per_generation)."""
    shuffle: bool = True
    """Minibatches of shuffled rows, reshuffled each pass (TRL shuffles once, for every pass); False: verl's split, in order, the same each pass (whole groups when G divides a minibatch's rows)."""
    gradient_accumulation_steps: int = 1
    """Micro-batches per optimizer step, weighted so that they sum to the one-batch gradient (TRL, same)."""
    warmup_steps: int = 0
    """Linear learning-rate warmup, in optimizer updates (TRL warmup_steps)."""
    adam_betas: tuple = (0.9, 0.999)
    """AdamW betas (TRL adam_beta1, adam_beta2)."""
    # what RL changes (notebook 12): a reward that ignores correctness, one sign of the advantage
    reward_signal: str = "true"
    """"true": the task's | "random": Bernoulli(random_reward_p) (Shao et al. 2025) | "negated": 1 - correct."""
    random_reward_p: float = 0.5
    """P(reward 1) of reward_signal="random", whatever the answer (Shao et al. 2025: 0.5)."""
    advantage_sign: str = "both"
    """"both" | "negative": only A < 0 | "positive": only A > 0 (Zhu et al. 2025's NSR / PSR on the group's A)."""
    positive_weight: float = 1.0
    """lambda on A > 0; W-REINFORCE: 0.1 (Zhu et al. 2025)."""
    policy_lag: int = 0
    """k: rollouts sampled by the weights k optimizer updates before the learner's (asynchronous RL; TRL async max_staleness)."""
    off_policy_correction: str = "none"
    """How the loss treats the sampler's log-probs, a row of off_policy.CORRECTIONS: "none" | "ppo_clip" | "decoupled" | ...."""

    def __post_init__(self):  # the allowed range of each field, in the order above
        validate(
            self,
            group_size=dict(lo=2),  # G = 1: no baseline
            scale_rewards=dict(choices={"group", "batch", "none"}),
            unbiased_std=BOOL,
            adv_eps=dict(lo=0),
            leave_one_out=BOOL,
            eps_low=dict(lo=0, lo_open=True, hi=1),
            eps_high=dict(lo=0, lo_open=True, optional=True),
            policy_loss=dict(choices=set(POLICY_LOSSES)),
            beta=dict(lo=0),
            kl_placement=dict(choices={"reward", "loss", "none"}),
            kl_estimator=dict(choices={None, "k1", "k2", "k3"}),
            loss_type=dict(choices=set(AGGREGATIONS)),
            max_length=dict(lo=1, optional=True),
            mask_truncated_completions=BOOL,
            entropy_coef=dict(lo=0),
            temperature=dict(lo=0, lo_open=True),
            dynamic_sampling=BOOL,
            max_resample=dict(lo=0),
            sampler_dtype=dict(choices={None, "bfloat16", "float16"}),
            vllm_importance_sampling_correction=BOOL,
            vllm_importance_sampling_mode=dict(choices=set(SAMPLER_IS_MODES)),
            vllm_importance_sampling_clip_max=dict(lo=0, lo_open=True, optional=True),
            vllm_importance_sampling_clip_min=dict(lo=0, optional=True),
            lr=dict(lo=0, lo_open=True),
            max_grad_norm=dict(lo=0, lo_open=True),
            epochs=dict(lo=1),
            minibatches=dict(lo=1),
            shuffle=BOOL,
            gradient_accumulation_steps=dict(lo=1),
            warmup_steps=dict(lo=0),
            reward_signal=dict(choices={"true", "random", "negated"}),
            random_reward_p=dict(lo=0, hi=1),
            advantage_sign=dict(choices={"both", "negative", "positive"}),
            positive_weight=dict(lo=0),
            policy_lag=dict(lo=0),
            off_policy_correction=dict(choices=set(CORRECTIONS)),
        )
        own = POLICY_LOSSES[self.policy_loss].aggregation  # an objective whose definition includes its aggregation
        if own not in (None, self.loss_type):
            raise ValueError(f"GRPOConfig.loss_type must be {own!r} with policy_loss={self.policy_loss!r}, got {self.loss_type!r}")  # fmt: skip
        if self.reward_signal != "true" and self.beta > 0 and self.kl_placement == "reward":
            raise ValueError(
                f"GRPOConfig.reward_signal={self.reward_signal!r} needs the 0/1 outcome: kl_placement 'loss' or 'none'"
            )
        check_cov_knobs(self, clip_cov_ratio=UNIT, kl_cov_ratio=UNIT, clip_cov_lb={}, clip_cov_ub={}, ppo_kl_coef=dict(lo=0))  # fmt: skip
        check_off_policy_knobs(self)  # C_min < C_max; a truncation needs a bound (sampler.py); an integer lag

    @property
    def kl_kind(self) -> str:  # the KL estimator: kl_estimator, else k3 in the loss, k1 in the reward
        return self.kl_estimator or ("k3" if self.kl_placement == "loss" else "k1")

    def to_dict(self) -> dict:
        return asdict(self)


class GRPO(Algorithm):
    name = "grpo"
    Config = GRPOConfig

    def sampling_policy(self):  # the policy; with policy_lag its weights k updates ago, with sampler_dtype a cast copy
        return sampler_apart(self) if self.config.policy_lag or self.config.sampler_dtype is not None else self.policy

    def collect(self, sample):  # one rollout: sample() once, or DAPO's refill (grpo_extras.py)
        if self.config.dynamic_sampling:
            return dynamic_sampling(sample, self.config.group_size, self.config.max_resample)
        rollout, scores, problems = sample()
        return rollout, scores, problems, rollout.batch_size

    @torch.no_grad()
    def prepare(self, rollout: Rollout, scores: torch.Tensor) -> Batch:
        Fn, cfg, mask = self.fn, self.config, rollout.mask  # Fn: grpo_edu.functional, or this run's replacements
        old, w, stats = rollout.logprobs, None, {}  # log pi_old: the policy sampled the rollout
        if cfg.sampler_dtype is not None or cfg.policy_lag or cfg.off_policy_correction != "none":  # off_policy.py
            old, w, stats = sampler_old_logprobs(self, rollout)  # apart: pi_old / pi_sampler; behind: pi_prox, w
        ref_logp = reference_logprobs(self.reference, rollout, cfg.beta, cfg.kl_placement)  # log pi_ref, beta > 0
        if cfg.beta > 0 and cfg.kl_placement == "reward":  # r_i = sum_t (score_t - beta * KL_t)
            scores, rewards = Fn.kl_penalized_rewards(scores, old, ref_logp, mask, cfg.beta, kind=cfg.kl_kind)
        else:
            rewards = Fn.masked_sum(scores, mask, dim=1)  # r_i = R(q, a_i)
        if cfg.reward_signal != "true":  # a reward that ignores correctness: Bernoulli(p) | 1 - c_i
            rewards = spurious_rewards(rewards, cfg.reward_signal, cfg.random_reward_p, self.generator)
        adv, st = Fn.group_advantages(  # A_i = (r_i - mean(r_group)) / (std(r_group) + eps)
            rewards, cfg.group_size, scale=cfg.scale_rewards, eps=cfg.adv_eps, unbiased=cfg.unbiased_std,
            leave_one_out=cfg.leave_one_out)  # fmt: skip
        if cfg.advantage_sign != "both" or cfg.positive_weight != 1.0:  # A' = l+ max(A, 0) + l- min(A, 0)
            adv = Fn.signed_advantages(adv, cfg.advantage_sign, cfg.positive_weight)
        stats["frac_reward_zero_std"] = st["frac_zero_std"]
        stats["cov_logp_adv"] = logged_covariance(Fn, old, adv, mask)  # Cov(log pi_old, A): -Cov ~ the step's dH
        # adv is [B]: every token of a completion gets its completion's advantage
        return Batch(rollout, scores, rewards, mask=loss_mask(rollout, cfg.mask_truncated_completions), old_logp=old,
                     ref_logp=ref_logp, advantages=adv, stats=stats, is_weights=w)  # fmt: skip

    def loss(self, batch: Batch, idx: torch.Tensor):
        Fn, cfg, mask = self.fn, self.config, batch.mask[idx]
        logp, logits = policy_logprobs(self.policy, batch, idx)  # log pi_theta(a_t|s_t), with grad
        objective = POLICY_LOSSES[cfg.policy_loss]  # "clip": -min(rho A, clip(rho, 1-eps_low, 1+eps_high) A)
        eps_low, eps_high = objective.clip(cfg)
        per_token, clip_stats = getattr(Fn, objective.function)(logp, batch.old_logp[idx], batch.advantages[idx],
            eps_low=eps_low, eps_high=eps_high, mask=mask, **objective.knobs(cfg, self))  # fmt: skip
        if cfg.off_policy_correction == "m2po":  # M2PO (off_policy.py): the clip opened, extreme (log rho)^2 dropped
            per_token, clip_stats = m2po_objective(Fn, objective, logp, batch, idx, mask)
        if batch.is_weights is not None:  # a sampler apart (sampler.py) or behind (off_policy.py): w per token
            per_token = per_token * batch.is_weights[idx]
        if cfg.beta > 0 and cfg.kl_placement == "loss":  # + beta * k3(pi_theta, pi_ref), per token
            per_token = per_token + cfg.beta * Fn.kl_estimate(logp, batch.ref_logp[idx], cfg.kl_kind)
        loss, stats = Fn.regularized_loss(  # agg(L_t) - entropy_coef * H
            per_token, mask, cfg.loss_type, cfg.max_length, logits, batch.rollout.mask[idx], cfg.entropy_coef
        )
        return loss, {**stats, **clip_stats}
