"""What every algorithm shares: the update step of the one loop.

    batch = algorithm.prepare(rollout, scores)   # no grad: pi_ref, KL in the reward, advantages
    for epoch in range(epochs):                  # PPO/GRPO reuse the batch; REINFORCE: 1
        for mb in minibatches(batch):
            loss = algorithm.loss(batch, mb)     # the line where algorithms differ
            loss.backward(); clip; optimizer.step()
            (critic step, if there is a critic)
    # pi_old <- pi_theta: the next rollout is sampled from the updated policy

A subclass writes ``advantages(batch) -> Estimate`` and ``loss(batch, idx)`` (and, if it
has one, ``make_critic``); everything else is here.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import torch

from .. import functional as Fn
from ..rollout import Rollout, sequence_logprobs

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
    share_prompts: bool = True  # run each prompt once for its G rows (sampling, teacher forcing); same math

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
        check_range(self, "share_prompts", choices={True, False})
        b = self.adam_betas
        if not (
            isinstance(b, (tuple, list)) and len(b) == 2 and all(isinstance(x, (int, float)) and 0 <= x < 1 for x in b)
        ):
            raise ValueError(f"{type(self).__name__}.adam_betas must be a pair of numbers in [0, 1), got {b!r}")

    @property
    def kl_kind(self) -> str:
        if self.kl_estimator is not None:
            return self.kl_estimator
        return "k3" if self.kl_placement == "loss" else "k1"

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Estimate:
    """What ``advantages`` returns: the advantages and, with a critic, its targets."""

    advantages: torch.Tensor  # [B] or [B, T]
    returns: torch.Tensor | None = None  # [B, T] value targets (critic)
    old_values: torch.Tensor | None = None  # [B, T] V(s_t) at sampling time (critic)
    stats: dict = field(default_factory=dict)  # numbers for the training log


@dataclass
class Batch:
    """One rollout batch with everything the loss needs, computed once without grad."""

    rollout: Rollout
    scores: torch.Tensor  # [B, T] per-token rewards (task scores, minus beta * KL in the reward)
    rewards: torch.Tensor  # [B] sequence reward used for the advantage
    mask: torch.Tensor  # [B, T] loss mask (completion mask, maybe minus truncated rows)
    old_logp: torch.Tensor  # [B, T] log pi_old (the sampling policy)
    ref_logp: torch.Tensor | None  # [B, T] log pi_ref, or None without a reference
    advantages: torch.Tensor | None = None  # [B] or [B, T], from Estimate
    returns: torch.Tensor | None = None
    old_values: torch.Tensor | None = None
    stats: dict = field(default_factory=dict)


def finite(x: torch.Tensor, quantity: str) -> torch.Tensor:
    if not bool(torch.isfinite(x).all()):
        bad = x[~torch.isfinite(x)].flatten()[0].item()
        raise FloatingPointError(f"{quantity} is {bad}")
    return x


class Algorithm:
    """Base class: the optimizer step routine shared by all algorithms."""

    name = "algorithm"
    Config = AlgorithmConfig

    def __init__(self, config=None, **overrides):
        if config is None:
            config = self.Config(**overrides)
        elif overrides:
            config = type(config)(**{**asdict(config), **overrides})
        if not isinstance(config, self.Config):
            raise ValueError(f"{type(self).__name__} needs a {self.Config.__name__}, got {type(config).__name__}")
        self.config = config
        self.policy = self.reference = self.critic = self.optimizer = None

    # -- wiring -----------------------------------------------------------------------
    def setup(self, policy, reference=None, generator: torch.Generator | None = None):
        """Attach the policy (trained), the frozen reference, the optimizer and the critic."""
        self.policy, self.reference = policy, reference
        for p in policy.parameters():
            p.requires_grad_(True)
        if reference is not None:
            reference.eval()
            for p in reference.parameters():
                p.requires_grad_(False)
        cfg = self.config
        self.optimizer = torch.optim.AdamW(
            policy.parameters(), lr=cfg.lr, betas=tuple(cfg.adam_betas), weight_decay=0.0
        )
        w = cfg.warmup_steps
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda u: min(1.0, (u + 1) / w) if w > 0 else 1.0
        )
        self.generator = generator
        self.critic = self.make_critic(policy)
        return self

    def make_critic(self, policy):
        """The critic (a `Critic`) of algorithms that learn one; None for the others."""
        return None

    def collect(self, sample):
        """One rollout for the update: ``sample()`` -> (rollout, scores, problems). Returns
        ``(rollout, scores, problems, generated)``; GRPO's dynamic sampling overrides this."""
        rollout, scores, problems = sample()
        return rollout, scores, problems, rollout.batch_size

    # -- the pieces a subclass writes -----------------------------------------------------
    def advantages(self, batch: Batch) -> Estimate:
        raise NotImplementedError

    def loss(self, batch: Batch, idx: torch.Tensor):
        """``(scalar loss, stats dict)`` on the rows ``idx`` of the batch (with grad)."""
        raise NotImplementedError

    # -- shared machinery ---------------------------------------------------------------
    @torch.no_grad()
    def prepare(self, rollout: Rollout, scores: torch.Tensor) -> Batch:
        """pi_ref's log-probs, the KL penalty in the reward (if placed there), advantages."""
        cfg = self.config
        mask = rollout.mask
        if cfg.mask_truncated_completions:
            mask = mask * (~rollout.truncated).float()[:, None]
        uses_reference = self.reference is not None and cfg.beta > 0 and cfg.kl_placement != "none"
        ref_logp = self.logprobs(self.reference, rollout) if uses_reference else None  # pi_ref costs a forward
        if cfg.beta > 0 and cfg.kl_placement == "reward":
            if ref_logp is None:
                raise ValueError("beta > 0 with kl_placement='reward' needs a reference policy")
            kind = {} if cfg.kl_kind == "k1" else {"kind": cfg.kl_kind}  # a homework version may lack `kind`
            scores, rewards = Fn.kl_penalized_rewards(
                scores, rollout.logprobs, ref_logp, rollout.mask, cfg.beta, **kind
            )
        else:
            rewards = Fn.masked_sum(scores, rollout.mask, dim=1)
        batch = Batch(rollout, scores, rewards, mask, rollout.logprobs, ref_logp)
        est = self.advantages(batch)
        batch.advantages = finite(est.advantages, "advantages")
        batch.returns, batch.old_values, batch.stats = est.returns, est.old_values, dict(est.stats)
        return batch

    def logprobs(self, model, rollout: Rollout, **kw):
        """``sequence_logprobs`` under this config's ``share_prompts`` (each prompt run once)."""
        return sequence_logprobs(model, rollout, share_prompts=self.config.share_prompts, **kw)

    def policy_logprobs(self, batch: Batch, idx: torch.Tensor):
        """``(log pi_theta(a_t|s_t) [b, T], logits [b, T, V])`` of the rows ``idx``, with grad."""
        return self.logprobs(self.policy, batch.rollout.select(idx), return_logits=True)

    def finish_loss(self, per_token, batch: Batch, idx, logp, logits, stats: dict | None = None):
        """Per-token policy loss -> scalar: + beta * KL (kl_placement="loss"), aggregated
        over tokens by ``loss_type``, - entropy bonus. Returns ``(loss, stats)``."""
        cfg = self.config
        if cfg.beta > 0 and cfg.kl_placement == "loss":
            if batch.ref_logp is None:
                raise ValueError("beta > 0 with kl_placement='loss' needs a reference policy")
            per_token = per_token + cfg.beta * Fn.kl_estimate(logp, batch.ref_logp[idx], cfg.kl_kind)
        with torch.set_grad_enabled(cfg.entropy_coef > 0 and torch.is_grad_enabled()):  # logged only, unless a bonus
            ent = Fn.masked_mean(Fn.entropy(logits), batch.rollout.mask[idx])
        agg = Fn.aggregate_loss(per_token, batch.mask[idx], LOSS_TYPES[cfg.loss_type], cfg.max_length)
        loss = agg - cfg.entropy_coef * ent if cfg.entropy_coef > 0 else agg
        return loss, {"loss": float(loss.detach()), "entropy": float(ent.detach()), **(stats or {})}

    def minibatch_indices(self, B: int):
        n = self.config.minibatches
        if n > B:
            raise ValueError(f"minibatches ({n}) exceeds the batch size ({B})")
        perm = torch.randperm(B, generator=self.generator) if n > 1 else torch.arange(B)
        return list(perm.chunk(n))

    def _check(self, rollout, scores):
        if self.policy is None:
            raise RuntimeError(f"call {type(self).__name__}.setup(policy, reference) before update()")
        if scores.shape != rollout.mask.shape:
            raise ValueError(
                f"scores must have the rollout's shape {tuple(rollout.mask.shape)}, got {tuple(scores.shape)}"
            )
        if rollout.batch_size % self.config.group_size:
            raise ValueError(
                f"batch of {rollout.batch_size} rows is not a multiple of group_size={self.config.group_size}"
            )

    def _step(self, loss) -> float:
        """backward, clip the gradient norm, AdamW step; returns the norm before clipping."""
        finite(loss.detach(), "policy loss")
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.config.max_grad_norm)
        finite(gn.detach(), "policy gradient norm")
        self.optimizer.step()
        self.scheduler.step()
        return float(gn)

    def update(self, rollout: Rollout, scores: torch.Tensor) -> dict:
        """One training step on a rollout: prepare, then epochs x minibatches of updates."""
        self._check(rollout, scores)
        batch = self.prepare(rollout, scores)
        self.policy.train()
        sums: dict[str, float] = {}
        grad_norms = []
        for _ in range(self.config.epochs):
            for idx in self.minibatch_indices(rollout.batch_size):
                idx = idx.to(rollout.mask.device)
                loss, st = self.loss(batch, idx)
                grad_norms.append(self._step(loss))
                if self.critic is not None:  # the critic's own step, after the policy's
                    st["value_loss"] = self.critic.step(
                        batch.rollout.select(idx), batch.returns[idx], batch.mask[idx], batch.old_values[idx]
                    )
                for k, v in st.items():
                    sums[k] = sums.get(k, 0.0) + float(v)
        self.policy.eval()
        out = {k: v / len(grad_norms) for k, v in sums.items()}
        out.update(batch.stats)
        out["grad_norm"] = sum(grad_norms) / len(grad_norms)
        out["updates"] = len(grad_norms)
        out.update(self.rollout_stats(batch))
        return out

    @torch.no_grad()
    def rollout_stats(self, batch: Batch) -> dict:
        r = batch.rollout
        stats = {"completion_length": float(r.lengths.mean()), "truncated_frac": float(r.truncated.float().mean())}
        if batch.ref_logp is not None:
            stats["kl"] = float(Fn.masked_mean(Fn.kl_estimate(batch.old_logp, batch.ref_logp, "k3"), r.mask))
        return stats
