"""Supervised warm start: the reference policy pi_ref that every RL run starts from.

Teacher-forced cross-entropy on ``prompt -> answer<eos>``, fresh problems every step,
stopped early as soon as greedy held-out accuracy reaches ``target_accuracy`` (50% in the
cpu preset, checked every 5 steps because accuracy rises steeply). The reference is a
half-trained model: RL with a verifier (the reward, which needs no labels) finishes the job.

How it is built was chosen by measurement (``grpo-edu ablate``, course/site/measurements.md "Why RL learned
slowly"): held-out accuracy of REINFORCE and GRPO after 60 RL steps, 3 seeds per row, each
from a reference built one way or another.
- Stop at 50%, not 30%: RL from a 30% reference is slower and more seed-dependent
  (the hundreds digit of 3-digit sums is what RL must still learn, and a 30% model has
  barely started on it).
- No gradient clipping, no weight decay, AdamW betas (0.9, 0.99): clipping the SFT gradient
  at 1.0 made the later RL markedly slower from an equally accurate reference.
- Not "SFT to convergence on 300 labelled problems" (what the first version did): such a
  reference memorises its labels, lands anywhere between 25% and 60% held-out depending on
  the seed, and RL (GRPO most of all) learns slowly from it.

`grpo_edu.warmstart.reference.reference_policy` builds (or loads from its cache) the reference of a
preset with `train_sft`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ..evaluation import evaluate


@dataclass
class SFTConfig:
    lr: float = 1e-3  # AdamW learning rate
    n_examples: int | None = None  # size of a fixed labelled set (None: fresh problems every step)
    batch_size: int = 256  # problems per step
    max_steps: int = 1000  # give up after this many steps
    target_accuracy: float = 0.5  # stop at this held-out accuracy (1.0 = train fully)
    target_metric: str = "greedy"  # "greedy" | "sampled" (temperature 1, as RL samples)
    eval_every: int = 5  # steps between evaluations: accuracy rises steeply, check often
    grad_clip: float | None = None  # global gradient-norm clip (None: off; measured: clipping slows RL later)
    adam_betas: tuple = (0.9, 0.99)  # AdamW (beta1, beta2)
    weight_decay: float = 0.0  # AdamW decoupled weight decay
    seed: int = 0
    # None: the whole task. An int k: demonstrations only of problems whose operands are both < k, and the
    # stopping rule's held-out problems likewise (a reference that knows the easy part of the world, as a
    # base model does; RL then runs on all of it: the "spread" world of `get_preset(world=...)`)
    operand_below: int | None = None
    whole_share: float = 0.0  # with operand_below: this share of each batch from the whole task, the rest below k

    def __post_init__(self):
        if not self.lr > 0:
            raise ValueError(f"SFTConfig.lr must be > 0, got {self.lr}")
        if self.n_examples is not None and int(self.n_examples) < 1:
            raise ValueError(f"SFTConfig.n_examples must be None or >= 1, got {self.n_examples}")
        for name in ("batch_size", "max_steps", "eval_every"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"SFTConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.target_metric not in ("greedy", "sampled"):
            raise ValueError(f"SFTConfig.target_metric must be 'greedy' or 'sampled', got {self.target_metric!r}")
        if not 0.0 < self.target_accuracy <= 1.0:
            raise ValueError(f"SFTConfig.target_accuracy must be in (0, 1], got {self.target_accuracy}")
        k = self.operand_below
        if k is not None and (isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1):
            raise ValueError(f"SFTConfig.operand_below must be None or an integer >= 1, got {k!r}")
        w = self.whole_share
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not 0.0 <= w <= 1.0:
            raise ValueError(f"SFTConfig.whole_share must be a number in [0, 1], got {w!r}")
        if w > 0 and k is None:
            raise ValueError("SFTConfig.whole_share acts only with operand_below (set both, or drop whole_share)")


def _below(problems, k: int) -> list:
    return [p for p in problems if p.a < k and p.b < k]


def sample_below(task, n: int, rng, k: int) -> list:
    """n training problems of ``task`` whose operands are both < k (rejection sampling from
    ``task.sample``; a ValueError when almost none are)."""
    out: list = []
    for _ in range(200):
        out += _below(task.sample(2 * (n - len(out)) + 8, rng), k)
        if len(out) >= n:
            return out[:n]
    raise ValueError(f"SFTConfig.operand_below={k}: (almost) no training problem of {task!r} has both operands < {k}")


def subset_eval_problems(task, k: int, min_samples: int = 1000) -> list:
    """The held-out problems with both operands < k, repeated up to ``min_samples`` rows (a
    sampled accuracy on a few hundred problems alone is noisy, +-0.03)."""
    sub = _below(task.eval_problems(), k)
    if not sub:
        raise ValueError(f"SFTConfig.operand_below={k}: no held-out problem of {task!r} has both operands < {k}")
    return sub * max(1, -(-min_samples // len(sub)))


def sft_batch(task, problems, device="cpu"):
    """``(input_ids [n, L], targets [n, L])`` for teacher forcing; targets are -100 on the
    prompt and on padding, so the loss is only on ``answer<eos>`` (the task's
    ``demonstration``: the answer, plus filler tokens for ``ArithmeticTask(filler=k)``)."""
    tok = task.tokenizer
    seqs = [tok.encode(p.prompt, add_bos=True) + tok.encode(task.demonstration(p), add_eos=True) for p in problems]
    P = task.prompt_length
    L = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), L), tok.pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
    targets = torch.full_like(ids, -100)
    for i, s in enumerate(seqs):
        targets[i, P - 1 : len(s) - 1] = ids[i, P : len(s)]
    return ids.to(device), targets.to(device)


def labelled_set(task, config: SFTConfig) -> list:
    """The SFT data when ``n_examples`` is set: that many training problems with their
    answers, drawn once (a label-scarce reference; measured slower for RL than the default
    early-stopped one, see the module docstring)."""
    rng = np.random.default_rng(10_000 + config.seed)
    if config.operand_below is not None:
        return sample_below(task, config.n_examples, rng, config.operand_below)
    return task.sample(config.n_examples, rng)


def train_sft(policy, task, config: SFTConfig | None = None, progress: bool = True) -> dict:
    """Supervised training until ``target_accuracy`` (or ``max_steps``). Returns a history
    ``{"step": [...], "accuracy": [...], "loss": [...], "seconds": float}``."""
    from ..progress import progress_bar as tqdm

    cfg = config or SFTConfig()
    device = next(policy.parameters()).device
    rng = np.random.default_rng(cfg.seed)
    pool = labelled_set(task, cfg) if cfg.n_examples is not None else None
    opt = torch.optim.AdamW(policy.parameters(), lr=cfg.lr, betas=tuple(cfg.adam_betas), weight_decay=cfg.weight_decay)
    hist = {"step": [], "accuracy": [], "loss": []}
    k = cfg.operand_below
    watched = None if k is None else subset_eval_problems(task, k, 1000 if cfg.target_metric == "sampled" else 1)
    t0 = time.perf_counter()
    # the bar counts to max_steps, but SFT stops as soon as held-out accuracy reaches the target
    target = cfg.target_accuracy
    metric = "held-out" if cfg.target_metric == "greedy" else "sampled held-out"
    metric += f" (operands < {k})" if k is not None else ""
    desc = f"SFT warm start (stops early at {target * 100:g}% {metric})" if target < 1 else "SFT warm start"
    bar = tqdm(range(1, cfg.max_steps + 1), total=cfg.max_steps, desc=desc, disable=not progress, leave=False)
    for step in bar:
        policy.train()
        if pool is None:
            if k is None:
                problems = task.sample(cfg.batch_size, rng)
            else:  # below the bound, and with whole_share some of the whole task too
                n_whole = round(cfg.whole_share * cfg.batch_size)
                problems = sample_below(task, cfg.batch_size - n_whole, rng, k) + task.sample(n_whole, rng)
        else:
            problems = [pool[i] for i in rng.integers(0, len(pool), cfg.batch_size)]
        ids, targets = sft_batch(task, problems, device)
        logits = policy(ids)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.grad_clip)
        opt.step()
        if step % cfg.eval_every == 0:
            acc = evaluate(policy, task)
            hist["step"].append(step)
            hist["accuracy"].append(acc)
            hist["loss"].append(float(loss.detach()))
            watch = acc
            if k is not None:  # greedy on the whole held-out split above; the rule watches the subset
                watch = evaluate(
                    policy, task, watched, temperature=float(cfg.target_metric == "sampled"), seed=cfg.seed
                )
                hist.setdefault("subset_accuracy", []).append(watch)
            elif cfg.target_metric == "sampled":
                watch = evaluate(policy, task, temperature=1.0, seed=cfg.seed)
                hist.setdefault("sampled_accuracy", []).append(watch)
            bar.set_postfix_str(f"acc {watch:.1%}" + (f" -> stop at {target * 100:g}%" if target < 1 else ""))
            if watch >= cfg.target_accuracy:
                break
    bar.close()
    policy.eval()
    hist["seconds"] = time.perf_counter() - t0
    return hist
