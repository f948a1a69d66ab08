"""REINFORCE: the policy gradient with the raw return, no baseline.

    grad J(theta) ~= (1/N) sum_i sum_t G_{i,t} grad log pi_theta(a_{i,t} | s_{i,t})
    G_t = sum_k gamma^k r_{t+k}

With the sparse final-answer reward and gamma = 1, G_t is the 0/1 reward of the whole
answer at every token: REINFORCE raises the log-probability of correct answers and leaves
wrong ones alone. The update (epochs x minibatches of ``loss.backward(); clip; step``) is
the one loop in ``grpo_edu/train.py``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from .. import functional as Fn
from .base import LOSS_TYPES, Algorithm, Batch, validate


@dataclass
class ReinforceConfig:
    gamma: float = 1.0  # discount of the return G_t (verl algorithm.gamma)
    group_size: int = 1  # completions per prompt (TRL num_generations); REINFORCE needs no group
    temperature: float = 1.0  # sampling temperature of the rollouts (TRL temperature)
    loss_type: str = "token_mean"  # how per-token losses become one number: "token_mean" | "sequence_mean" | "constant"
    max_length: int | None = None  # the constant of loss_type="constant" (default: the batch's T)
    entropy_coef: float = 0.0  # entropy bonus (verl entropy_coeff)
    lr: float = 3e-4  # AdamW learning rate (TRL learning_rate)
    max_grad_norm: float = 1.0  # global L2 gradient clipping (TRL max_grad_norm)
    epochs: int = 1  # passes over each batch: 1, the on-policy gradient (TRL num_iterations)
    minibatches: int = 1  # optimizer steps per pass (TRL steps_per_generation)
    warmup_steps: int = 0  # linear learning-rate warmup, in optimizer updates (TRL warmup_steps)
    adam_betas: tuple = (0.9, 0.999)  # AdamW betas (TRL adam_beta1, adam_beta2)

    def __post_init__(self):
        validate(self)

    def to_dict(self) -> dict:
        return asdict(self)


class Reinforce(Algorithm):
    name = "reinforce"
    Config = ReinforceConfig

    @torch.no_grad()
    def prepare(self, rollout, scores) -> Batch:
        mask = rollout.mask
        returns = Fn.discounted_returns(scores, mask, self.config.gamma)  # G_t = sum_k gamma^k r_{t+k}
        rewards = Fn.masked_sum(scores, mask, dim=1)
        return Batch(rollout, scores, rewards, mask, rollout.logprobs, None, advantages=returns)  # A_t = G_t

    def loss(self, batch: Batch, idx: torch.Tensor):
        cfg = self.config
        logp, logits = self.policy_logprobs(batch, idx)  # log pi_theta(a_t|s_t), with grad
        per_token = Fn.policy_gradient_loss(logp, batch.advantages[idx])  # -A_t log pi(a_t|s_t)
        loss = Fn.aggregate_loss(per_token, batch.mask[idx], LOSS_TYPES[cfg.loss_type], cfg.max_length)
        ent = self.entropy(logits, batch.rollout.mask[idx])
        if cfg.entropy_coef > 0:
            loss = loss - cfg.entropy_coef * ent
        return loss, {"loss": float(loss.detach()), "entropy": float(ent.detach())}
