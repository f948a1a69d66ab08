"""What every algorithm shares: the update step of the one loop.

    batch = algorithm.prepare(rollout, scores)   # no grad: pi_old, pi_ref, V, advantages
    for epoch in range(epochs):                  # PPO/GRPO reuse the batch; REINFORCE: 1
        for mb in minibatches(batch):
            loss = algorithm.loss(batch, mb)     # the line where algorithms differ
            loss.backward(); clip; optimizer.step()
            (critic step, if there is a critic)
    # pi_old <- pi_theta: the next rollout is sampled from the updated policy

A subclass writes ``advantages(batch)`` and ``loss(batch, idx)``; everything else is here.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from .. import functional as Fn
from ..rollout import Rollout, completion_values, sequence_logprobs

LOSS_TYPES = {
    "sequence_mean": "sequence_mean",
    "grpo": "sequence_mean",
    "token_mean": "token_mean",
    "dapo": "token_mean",
    "bnpo": "token_mean",
    "constant": "constant",
    "dr_grpo": "constant",
}


def check_range(obj, name, lo=None, hi=None, lo_open=False, choices=None):
    """Raise ``ValueError`` naming ``type(obj).name`` when its value is out of range."""
    v = getattr(obj, name)
    where = f"{type(obj).__name__}.{name}"
    if choices is not None:
        if v not in choices:
            raise ValueError(f"{where} must be one of {sorted(map(str, choices))}, got {v!r}")
        return
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
        raise ValueError(f"{where} must be a number, got {v!r}")
    if lo is not None and (v <= lo if lo_open else v < lo):
        raise ValueError(f"{where} must be {'>' if lo_open else '>='} {lo}, got {v}")
    if hi is not None and v > hi:
        raise ValueError(f"{where} must be <= {hi}, got {v}")


@dataclass
class AlgorithmConfig:
    lr: float = 3e-4  # AdamW learning rate of the policy
    max_grad_norm: float = 1.0  # gradient clipping (global L2 norm)
    epochs: int = 1  # passes over each rollout batch (TRL num_iterations, verl ppo_epochs)
    minibatches: int = 1  # optimizer steps per epoch
    group_size: int = 1  # samples per prompt (TRL num_generations)
    beta: float = 0.0  # KL-to-reference coefficient
    kl_placement: str = "reward"  # "reward" (in r_t, verl use_kl_in_reward) | "loss" (TRL/verl use_kl_loss) | "none"
    kl_estimator: str | None = None  # "k1" | "k2" | "k3"; None: k1 in the reward, k3 in the loss
    loss_type: str = "token_mean"  # "sequence_mean"/"grpo" | "token_mean"/"dapo"/"bnpo" | "constant"/"dr_grpo"
    max_length: int | None = None  # constant of loss_type="constant" (default: the batch's T)
    entropy_coef: float = 0.0  # entropy bonus
    mask_truncated_completions: bool = False  # drop completions that hit max_new_tokens from the loss
    temperature: float = 1.0  # sampling temperature of the rollouts
    warmup_steps: int = 0  # linear learning-rate warmup over this many optimizer updates
    adam_betas: tuple = (0.9, 0.999)  # AdamW (beta1, beta2) (TRL adam_beta1, adam_beta2)

    def __post_init__(self):
        check_range(self, "lr", lo=0, lo_open=True)
        check_range(self, "max_grad_norm", lo=0, lo_open=True)
        for name in ("epochs", "minibatches", "group_size"):
            check_range(self, name, lo=1)
        check_range(self, "beta", lo=0)
        check_range(self, "entropy_coef", lo=0)
        check_range(self, "temperature", lo=0, lo_open=True)
        check_range(self, "warmup_steps", lo=0)
        check_range(self, "kl_placement", choices={"reward", "loss", "none"})
        check_range(self, "kl_estimator", choices={None, "k1", "k2", "k3"})
        check_range(self, "loss_type", choices=set(LOSS_TYPES))

    @property
    def kl_kind(self) -> str:
        if self.kl_estimator is not None:
            return self.kl_estimator
        return "k3" if self.kl_placement == "loss" else "k1"

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Batch:
    """One rollout batch with everything the loss needs, computed once without grad."""

    rollout: Rollout
    scores: torch.Tensor  # [B, T] per-token task scores r_phi(q, a_<=t)
    rewards: torch.Tensor  # [B] sequence reward used for the advantage
    mask: torch.Tensor  # [B, T] loss mask (completion mask, maybe minus truncated rows)
    old_logp: torch.Tensor  # [B, T] log pi_old (the sampling policy)
    ref_logp: torch.Tensor | None  # [B, T] log pi_ref, or None without a reference
    advantages: torch.Tensor | None = None  # [B] or [B, T]
    returns: torch.Tensor | None = None  # [B, T] value targets (critic)
    old_values: torch.Tensor | None = None  # [B, T] V(s_t) at sampling time (critic)
    stats: dict | None = None


def finite(x: torch.Tensor, quantity: str) -> torch.Tensor:
    if not bool(torch.isfinite(x).all()):
        bad = x[~torch.isfinite(x)].flatten()[0].item()
        raise FloatingPointError(f"{quantity} is {bad}")
    return x


class Algorithm:
    """Base class: one optimizer step routine shared by all algorithms."""

    name = "algorithm"
    uses_critic = False
    Config = AlgorithmConfig

    def __init__(self, config=None, **overrides):
        if config is None:
            config = self.Config(**overrides)
        elif overrides:
            config = type(config)(**{**asdict(config), **overrides})
        if not isinstance(config, AlgorithmConfig):
            raise ValueError(f"{type(self).__name__} needs a {self.Config.__name__}, got {type(config).__name__}")
        self.config = config
        self.policy = self.reference = self.critic = None
        self.optimizer = self.critic_optimizer = None

    # -- wiring -----------------------------------------------------------------------
    def setup(self, policy, reference=None, generator: torch.Generator | None = None):
        """Attach the policy (trained), the frozen reference and create the optimizers."""
        self.policy, self.reference = policy, reference
        for p in policy.parameters():
            p.requires_grad_(True)
        if reference is not None:
            reference.eval()
            for p in reference.parameters():
                p.requires_grad_(False)
        self.optimizer = torch.optim.AdamW(policy.parameters(), lr=self.config.lr,
                                           betas=tuple(self.config.adam_betas), weight_decay=0.0)
        w = self.config.warmup_steps
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda u: min(1.0, (u + 1) / w) if w > 0 else 1.0
        )
        self.generator = generator
        if self.uses_critic:
            self._setup_critic(policy)
        return self

    def _setup_critic(self, policy):
        from ..model import ValueModel

        self.critic = ValueModel.from_policy(policy) if self.config.critic_init == "policy" else ValueModel(policy.config).to(policy.device)
        self.critic_optimizer = torch.optim.AdamW(self.critic.parameters(), lr=self.config.critic_lr, weight_decay=0.0)

    # -- the pieces a subclass writes -----------------------------------------------------
    def advantages(self, batch: Batch) -> torch.Tensor:
        raise NotImplementedError

    def loss(self, batch: Batch, idx: torch.Tensor):
        """``(scalar loss, stats dict)`` on the rows ``idx`` of the batch (with grad)."""
        raise NotImplementedError

    # -- shared machinery ---------------------------------------------------------------
    @torch.no_grad()
    def prepare(self, rollout: Rollout, scores: torch.Tensor) -> Batch:
        cfg = self.config
        mask = rollout.mask
        if cfg.mask_truncated_completions:
            mask = mask * (~rollout.truncated).float()[:, None]
        old_logp = rollout.logprobs
        ref_logp = sequence_logprobs(self.reference, rollout) if self.reference is not None else None
        rewards = Fn.masked_sum(scores, rollout.mask, dim=1)
        if cfg.beta > 0 and cfg.kl_placement == "reward":
            if ref_logp is None:
                raise ValueError("beta > 0 with kl_placement='reward' needs a reference policy")
            if cfg.kl_kind == "k1":  # the derivation: r_t = r_phi(q, a_<=t) - beta log(pi/pi_ref)
                scores, rewards = Fn.kl_penalized_rewards(scores, old_logp, ref_logp, rollout.mask, cfg.beta)
            else:  # the same with another estimator of the per-token KL in place of k1
                kl = Fn.kl_estimate(old_logp, ref_logp, cfg.kl_kind) * rollout.mask
                scores = (scores - cfg.beta * kl) * rollout.mask
                rewards = Fn.masked_sum(scores, rollout.mask, dim=1)
        batch = Batch(rollout, scores, rewards, mask, old_logp, ref_logp)
        batch.stats = {}
        adv = self.advantages(batch)
        batch.advantages = finite(adv, "advantages")
        return batch

    def _aggregate(self, per_token, mask):
        return Fn.aggregate_loss(per_token, mask, LOSS_TYPES[self.config.loss_type], self.config.max_length)

    def _kl_loss_term(self, batch, idx, logp):
        """beta * KL estimate added to the per-token loss (kl_placement="loss")."""
        cfg = self.config
        if cfg.beta > 0 and cfg.kl_placement == "loss":
            if batch.ref_logp is None:
                raise ValueError("beta > 0 with kl_placement='loss' needs a reference policy")
            return cfg.beta * Fn.kl_estimate(logp, batch.ref_logp[idx], cfg.kl_kind)
        return 0.0

    def _clipped_loss(self, batch: Batch, idx: torch.Tensor):
        """PPO/GRPO policy loss on rows ``idx``: clipped surrogate (+ KL term) - entropy bonus."""
        cfg = self.config
        ro = batch.rollout.select(idx)
        logp, logits = sequence_logprobs(self.policy, ro, return_logits=True)
        mask = batch.mask[idx]
        per_token, st = Fn.clipped_surrogate_loss(
            logp, batch.old_logp[idx], batch.advantages[idx], cfg.eps_low, cfg.eps_high, mask=mask
        )
        per_token = per_token + self._kl_loss_term(batch, idx, logp)
        ent = Fn.masked_mean(Fn.entropy(logits), ro.mask)
        loss = self._aggregate(per_token, mask) - cfg.entropy_coef * ent
        return loss, {"loss": float(loss.detach()), "entropy": float(ent.detach()), **st}

    def minibatch_indices(self, B: int):
        n = self.config.minibatches
        if n > B:
            raise ValueError(f"minibatches ({n}) exceeds the batch size ({B})")
        perm = torch.randperm(B, generator=self.generator) if n > 1 else torch.arange(B)
        return [c for c in perm.chunk(n)]

    def update(self, rollout: Rollout, scores: torch.Tensor) -> dict:
        """One training step on a rollout: prepare, then epochs x minibatches of updates."""
        if self.policy is None:
            raise RuntimeError(f"call {type(self).__name__}.setup(policy, reference) before update()")
        if scores.shape != rollout.mask.shape:
            raise ValueError(f"scores must have the rollout's shape {tuple(rollout.mask.shape)}, got {tuple(scores.shape)}")
        if rollout.batch_size % self.config.group_size:
            raise ValueError(f"batch of {rollout.batch_size} rows is not a multiple of group_size={self.config.group_size}")
        batch = self.prepare(rollout, scores)
        self.policy.train()
        sums: dict[str, float] = {}
        n_updates = 0
        grad_norms = []
        device = rollout.mask.device
        for _ in range(self.config.epochs):
            for idx in self.minibatch_indices(rollout.batch_size):
                idx = idx.to(device)
                loss, st = self.loss(batch, idx)
                finite(loss.detach(), "policy loss")
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                gn = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.config.max_grad_norm)
                finite(gn.detach(), "policy gradient norm")
                self.optimizer.step()
                self.scheduler.step()
                grad_norms.append(float(gn))
                if self.critic is not None:
                    st.update(self.critic_step(batch, idx))
                for k, v in st.items():
                    sums[k] = sums.get(k, 0.0) + float(v)
                n_updates += 1
        self.policy.eval()
        out = {k: v / n_updates for k, v in sums.items()}
        out.update(batch.stats)
        out["grad_norm"] = sum(grad_norms) / len(grad_norms)
        out["updates"] = n_updates
        out.update(self.rollout_stats(batch))
        return out

    def critic_step(self, batch: Batch, idx) -> dict:
        """Regress V(s_t) on the returns (a separate backward pass, after the policy's)."""
        cfg = self.config
        values = completion_values(self.critic, batch.rollout.select(idx))
        old = batch.old_values[idx] if batch.old_values is not None else None
        vloss = Fn.value_loss(values, batch.returns[idx], batch.mask[idx], old, cfg.value_clip)
        finite(vloss.detach(), "value loss")
        self.critic.train()
        self.critic_optimizer.zero_grad(set_to_none=True)
        vloss.backward()
        torch.nn.utils.clip_grad_norm_(self.critic.parameters(), cfg.max_grad_norm)
        self.critic_optimizer.step()
        return {"value_loss": float(vloss.detach())}

    @torch.no_grad()
    def rollout_stats(self, batch: Batch) -> dict:
        r = batch.rollout
        stats = {
            "completion_length": float(r.lengths.mean()),
            "truncated_frac": float(r.truncated.float().mean()),
        }
        if batch.ref_logp is not None:
            stats["kl"] = float(Fn.masked_mean(Fn.kl_estimate(batch.old_logp, batch.ref_logp, "k3"), r.mask))
        return stats
