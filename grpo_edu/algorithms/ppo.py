"""PPO with a critic, as PPO for language models does it.

    r_t     = r_phi(q, a_<=t) - beta * log(pi_old / pi_ref)      KL penalty inside the reward
    delta_t = r_t + gamma V(s_{t+1}) - V(s_t);  A_t = sum_k (gamma lambda)^k delta_{t+k}   (GAE)
    L_clip  = -min(rho_t A_t, clip(rho_t, 1 - eps_low, 1 + eps_high) A_t),  rho_t = pi_theta / pi_old
    L_V     = 1/2 (V(s_t) - (A_t + V_old(s_t)))^2               (optionally clipped)

Several epochs of minibatches over each rollout (the loop in ``train.py``); the critic takes
its own optimizer step after the policy's (two backward passes, so only one graph is alive
at a time).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from ..functional import AGGREGATIONS
from ..rollout import Batch, loss_mask, policy_logprobs, reference_logprobs
from .base import BOOL, Algorithm, validate
from .critic import Critic


@dataclass
class PPOConfig:
    eps_low: float = 0.2
    """Clip range below (TRL epsilon, verl clip_ratio_low)."""
    eps_high: float | None = None
    """Clip range above (TRL epsilon_high, verl clip_ratio_high); None = eps_low."""
    gamma: float = 1.0
    """Discount (verl algorithm.gamma)."""
    lam: float = 1.0
    """GAE lambda; 1.0: Monte Carlo returns minus V (verl algorithm.lam)."""
    whiten_advantages: bool = True
    """Normalise A over the batch's tokens (TRL PPOTrainer whitens too)."""
    critic_lr: float = 1e-3
    """AdamW learning rate of the critic (verl critic.optim.lr)."""
    critic_init: str = "policy"
    """"policy": the critic starts from the policy's trunk | "random"."""
    value_clip: float | None = 0.2
    """Clip of the value update around V_old, None: off (verl cliprange_value)."""
    beta: float = 0.04
    """KL-to-reference coefficient (verl kl_ctrl.kl_coef)."""
    kl_placement: str = "reward"
    """"reward": in r_t (verl use_kl_in_reward) | "loss" (verl use_kl_loss) | "none"."""
    kl_estimator: str | None = None
    """"k1" | "k2" | "k3"; None: k1 in the reward, k3 in the loss (verl kl_penalty)."""
    group_size: int = 1
    """Completions per prompt (TRL num_generations); PPO needs no group."""
    temperature: float = 1.0
    """Sampling temperature of the rollouts (TRL temperature)."""
    loss_type: str = "token_mean"
    """How per-token losses become one number: "token_mean" | "sequence_mean" | "constant"."""
    max_length: int | None = None
    """The constant of loss_type="constant" (default: the batch's T)."""
    entropy_coef: float = 0.0
    """Entropy bonus (verl entropy_coeff)."""
    mask_truncated_completions: bool = False
    """Drop completions that hit max_new_tokens from the loss (TRL)."""
    lr: float = 3e-4
    """AdamW learning rate of the policy (TRL learning_rate)."""
    max_grad_norm: float = 1.0
    """Global L2 gradient clipping, policy and critic (TRL max_grad_norm)."""
    epochs: int = 2
    """Passes over each batch with pi_old fixed (verl ppo_epochs)."""
    minibatches: int = 2
    """Optimizer steps per pass (verl ppo_mini_batch_size = B / minibatches)."""
    gradient_accumulation_steps: int = 1
    """Micro-batches per optimizer step, weighted so that they sum to the one-batch gradient (TRL, same)."""
    warmup_steps: int = 0
    """Linear learning-rate warmup, in optimizer updates (TRL warmup_steps)."""
    adam_betas: tuple = (0.9, 0.999)
    """AdamW betas (TRL adam_beta1, adam_beta2)."""

    def __post_init__(self):  # the allowed range of each field, in the order above
        validate(
            self,
            eps_low=dict(lo=0, lo_open=True, hi=1),
            eps_high=dict(lo=0, lo_open=True, optional=True),
            gamma=dict(lo=0, hi=1),
            lam=dict(lo=0, hi=1),
            whiten_advantages=BOOL,
            critic_lr=dict(lo=0, lo_open=True),
            critic_init=dict(choices={"policy", "random"}),
            value_clip=dict(lo=0, lo_open=True, optional=True),
            beta=dict(lo=0),
            kl_placement=dict(choices={"reward", "loss", "none"}),
            kl_estimator=dict(choices={None, "k1", "k2", "k3"}),
            group_size=dict(lo=1),
            temperature=dict(lo=0, lo_open=True),
            loss_type=dict(choices=set(AGGREGATIONS)),
            max_length=dict(lo=1, optional=True),
            entropy_coef=dict(lo=0),
            mask_truncated_completions=BOOL,
            lr=dict(lo=0, lo_open=True),
            max_grad_norm=dict(lo=0, lo_open=True),
            epochs=dict(lo=1),
            minibatches=dict(lo=1),
            gradient_accumulation_steps=dict(lo=1),
            warmup_steps=dict(lo=0),
        )

    @property
    def kl_kind(self) -> str:  # the KL estimator: kl_estimator, else k1 in the reward, k3 in the loss
        return self.kl_estimator or ("k3" if self.kl_placement == "loss" else "k1")

    def to_dict(self) -> dict:
        return asdict(self)


class PPO(Algorithm):
    name = "ppo"
    Config = PPOConfig

    def make_critic(self, policy):
        cfg = self.config
        return Critic(policy, cfg.critic_lr, cfg.critic_init, cfg.max_grad_norm, cfg.value_clip, self.fn)

    @torch.no_grad()
    def prepare(self, rollout, scores) -> Batch:
        Fn = self.fn  # grpo_edu.functional, or the replacements this algorithm was given
        cfg, mask = self.config, rollout.mask
        trained = loss_mask(rollout, cfg.mask_truncated_completions)  # minus truncated rows, if asked
        ref_logp = reference_logprobs(self.reference, rollout, cfg.beta, cfg.kl_placement)  # log pi_ref, beta > 0
        if cfg.beta > 0 and cfg.kl_placement == "reward":  # r_t = score_t - beta * KL_t
            scores, rewards = Fn.kl_penalized_rewards(
                scores, rollout.logprobs, ref_logp, mask, cfg.beta, kind=cfg.kl_kind
            )
        else:
            rewards = Fn.masked_sum(scores, mask, dim=1)
        values = self.critic.values(rollout)  # V(s_t) before the update
        adv, returns = Fn.gae(scores, values, mask, cfg.gamma, cfg.lam)  # A_t by GAE; returns = A_t + V(s_t)
        if cfg.whiten_advantages:
            adv = Fn.masked_whiten(adv, trained if trained.sum() > 0 else mask)
        return Batch(
            rollout,
            scores,
            rewards,
            mask=trained,
            old_logp=rollout.logprobs,
            ref_logp=ref_logp,
            advantages=adv,
            returns=returns,
            old_values=values,
            stats={"value_mean": float(Fn.masked_mean(values, mask))},
        )

    def loss(self, batch: Batch, idx: torch.Tensor):
        Fn = self.fn  # grpo_edu.functional, or the replacements this algorithm was given
        cfg, mask = self.config, batch.mask[idx]
        logp, logits = policy_logprobs(self.policy, batch, idx)  # log pi_theta(a_t|s_t), with grad
        per_token, clip_stats = Fn.clipped_surrogate_loss(  # -min(rho A, clip(rho, 1-eps_low, 1+eps_high) A)
            logp, batch.old_logp[idx], batch.advantages[idx], cfg.eps_low, cfg.eps_high, mask=mask
        )
        if cfg.beta > 0 and cfg.kl_placement == "loss":  # + beta * KL_t in the loss instead of the reward
            per_token = per_token + cfg.beta * Fn.kl_estimate(logp, batch.ref_logp[idx], cfg.kl_kind)
        loss, stats = Fn.regularized_loss(  # agg(L_t) - entropy_coef * H
            per_token, mask, cfg.loss_type, cfg.max_length, logits, batch.rollout.mask[idx], cfg.entropy_coef
        )
        return loss, {**stats, **clip_stats}
