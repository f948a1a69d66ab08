"""The one loop all four algorithms share, and the history it records.

    problems = task.sample(n_prompts)                        # envs: the arithmetic world
    rollout  = generate(policy, problems, group_size)        # grpo_edu.rollout
    scores   = task.token_scores(problems, rollout)          # sparse final answer (or dense)
    stats    = algorithm.update(rollout, scores)             # advantages + loss + optimizer
    every eval_every steps: greedy held-out accuracy

Training wall time excludes evaluation, so ``seconds`` compares algorithms fairly.
"""

from __future__ import annotations

import copy
import json
import math
import time
from pathlib import Path

import numpy as np
import torch

from .evaluation import evaluate
from .rollout import Rollout, generate

METRICS = (  # per-step names, as training logs (TRL, verl) call them; value_loss only with a critic
    "reward", "reward_std", "kl", "entropy", "clip_ratio", "completion_length",
    "frac_reward_zero_std", "grad_norm", "value_loss",
)


class History:
    """Per-step metrics and periodic evaluations of one training run."""

    def __init__(self, name: str = "", config: dict | None = None):
        self.name = name
        self.config = config or {}
        self.steps: list[dict] = []  # one dict per RL step
        self.evals: list[dict] = []  # {"step", "samples", "seconds", "accuracy"}

    def series(self, key: str) -> np.ndarray:
        """One metric over steps (NaN where a step did not record it)."""
        return np.array([s.get(key, math.nan) for s in self.steps], dtype=float)

    def eval_series(self, key: str = "accuracy") -> np.ndarray:
        return np.array([e[key] for e in self.evals], dtype=float)

    @property
    def final_accuracy(self) -> float:
        return self.evals[-1]["accuracy"] if self.evals else math.nan

    @property
    def initial_accuracy(self) -> float:
        return self.evals[0]["accuracy"] if self.evals else math.nan

    def first_reaching(self, accuracy: float, key: str = "seconds"):
        """``key`` ("seconds", "step" or "samples") at the first evaluation with accuracy >=
        the threshold, or None if never reached."""
        for e in self.evals:
            if e["accuracy"] >= accuracy:
                return e[key]
        return None

    def accuracy_at(self, value: float, key: str = "samples") -> float:
        """The last evaluated accuracy at or before ``key == value``."""
        acc = math.nan
        for e in self.evals:
            if e[key] <= value + 1e-9:
                acc = e["accuracy"]
        return acc

    def to_dict(self) -> dict:
        return {"name": self.name, "config": self.config, "steps": self.steps, "evals": self.evals}

    @classmethod
    def from_dict(cls, d: dict) -> "History":
        h = cls(d.get("name", ""), d.get("config", {}))
        h.steps, h.evals = list(d["steps"]), list(d["evals"])
        return h

    def save(self, path) -> None:
        Path(path).write_text(json.dumps(self.to_dict()))

    def __repr__(self):
        return (f"History({self.name!r}, steps={len(self.steps)}, "
                f"accuracy {self.initial_accuracy:.3f} -> {self.final_accuracy:.3f})")


def expand(problems: list, group_size: int) -> list:
    """Each problem repeated ``group_size`` times, consecutively (the rollout's row order)."""
    return [p for p in problems for _ in range(group_size)]


def collect(policy, task, algorithm, n_prompts: int, rng, generator, reward_kind="outcome",
            info: dict | None = None):
    """Sample a rollout and score it: ``(rollout, scores [B, T], problems [B])``.

    With ``dynamic_sampling`` (DAPO) groups whose rewards are all equal are dropped and more
    are sampled, up to ``max_resample`` extra rounds, until ``n_prompts`` groups carry signal.
    ``info["generated"]`` (if a dict is passed) receives the number of completions sampled,
    kept or not: the cost.
    """
    cfg = algorithm.config
    G = cfg.group_size
    dynamic = getattr(cfg, "dynamic_sampling", False)
    parts, kept_problems, have, rounds = [], [], 0, 0
    while True:
        problems = task.sample(n_prompts, rng)
        ro = generate(policy, task.encode_prompts(problems), group_size=G,
                      max_new_tokens=task.max_answer_length, temperature=cfg.temperature,
                      generator=generator, tokenizer=task.tokenizer)
        rep = expand(problems, G)
        scores = task.token_scores(rep, ro.completion_ids, ro.mask, kind=reward_kind).to(ro.mask.device)
        if info is not None:
            info["generated"] = info.get("generated", 0) + ro.batch_size
        if not dynamic:
            return ro, scores, rep
        keep = algorithm.keep_groups(scores.sum(dim=1))
        idx = keep.nonzero().squeeze(1)[: (n_prompts - have) * G]
        if len(idx):
            parts.append((ro.select(idx), scores[idx]))
            kept_problems += [rep[i] for i in idx.tolist()]
            have += len(idx) // G
        rounds += 1
        if have >= n_prompts or rounds > cfg.max_resample:
            break
    if not parts:  # nothing informative at all: fall back to the last (all-equal) batch
        return ro, scores, rep
    T = max(s.shape[1] for _, s in parts)
    ro = Rollout.concat([r for r, _ in parts])
    scores = torch.cat([torch.nn.functional.pad(s, (0, T - s.shape[1])) for _, s in parts])
    return ro, scores, kept_problems


def train(
    algorithm,
    task=None,
    reference=None,
    policy=None,
    preset="cpu",
    steps: int | None = None,
    seconds: float | None = None,
    samples: int | None = None,
    sequences_per_step: int | None = None,
    seed: int = 0,
    eval_every: int | None = None,
    reward_kind: str = "outcome",
    target_accuracy: float | None = None,
    progress: bool = True,
    name: str | None = None,
) -> History:
    """Train ``policy`` (default: a copy of the reference) with ``algorithm``.

    Budget: ``steps`` (default the preset's), or ``seconds`` of training wall time, or
    ``samples`` sampled completions, whichever ends first; ``target_accuracy`` stops early.
    ``samples`` counts every generated completion (with dynamic sampling, also the ones
    dropped); ``samples_trained`` counts those the update saw.
    Every algorithm sees ``sequences_per_step`` completions per step (the preset's
    prompts x group_size), so a REINFORCE step (512 prompts x 1) and a GRPO step (64
    prompts x 8) cost the same generation. Same seed, same history on the same machine.
    """
    from tqdm.auto import tqdm

    from .presets import get_preset, make_task
    from .sft import reference_policy

    if preset is not None and not hasattr(preset, "model"):
        preset = get_preset(preset)
    task = task or make_task(preset)
    if reference is None:
        reference = reference_policy(preset, task=task, progress=progress)
    if policy is None:
        policy = copy.deepcopy(reference)
    if reward_kind not in ("outcome", "process"):
        raise ValueError(f"reward_kind must be 'outcome' or 'process', got {reward_kind!r}")
    if steps is None and seconds is None and samples is None:
        steps = preset.steps
    seq_per_step = sequences_per_step or preset.sequences_per_step
    G = algorithm.config.group_size
    if seq_per_step % G:
        raise ValueError(f"sequences_per_step={seq_per_step} is not a multiple of group_size={G}")
    n_prompts = seq_per_step // G
    eval_every = eval_every or preset.eval_every

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    device = next(policy.parameters()).device
    generator = torch.Generator(device=device).manual_seed(seed)
    algorithm.setup(policy, reference, generator=torch.Generator().manual_seed(seed + 1))
    hist = History(name or algorithm.name, {"algorithm": algorithm.name, **algorithm.config.to_dict(),
                                            "sequences_per_step": seq_per_step, "seed": seed})
    n_samples, n_trained, t_train = 0, 0, 0.0

    def do_eval(step):
        acc = evaluate(policy, task)
        hist.evals.append({"step": step, "samples": n_samples, "seconds": t_train, "accuracy": acc})
        return acc

    acc = do_eval(0)
    total = steps if steps is not None else (math.ceil(samples / seq_per_step) if samples else None)
    bar = tqdm(total=total, desc=f"{hist.name}", disable=not progress, leave=False)
    step = 0
    while True:
        if steps is not None and step >= steps:
            break
        if samples is not None and n_samples >= samples:
            break
        if seconds is not None and t_train >= seconds:
            break
        if target_accuracy is not None and acc >= target_accuracy:
            break
        step += 1
        t0 = time.perf_counter()
        info = {}
        ro, scores, _ = collect(policy, task, algorithm, n_prompts, rng, generator, reward_kind, info)
        try:
            stats = algorithm.update(ro, scores)
        except FloatingPointError as exc:
            raise FloatingPointError(f"step {step}: {exc}") from exc
        if device.type == "cuda":
            torch.cuda.synchronize()
        t_train += time.perf_counter() - t0
        n_samples += info["generated"]
        n_trained += ro.batch_size
        rewards = scores.sum(dim=1)
        record = {"step": step, "samples": n_samples, "samples_trained": n_trained, "seconds": t_train,
                  "reward": float(rewards.mean()), "reward_std": float(rewards.std()) if len(rewards) > 1 else 0.0}
        record.update({k: v for k, v in stats.items() if isinstance(v, (int, float))})
        hist.steps.append(record)
        if step % eval_every == 0:
            acc = do_eval(step)
            bar.set_postfix(acc=f"{acc:.3f}")
        bar.update(1)
    if not hist.evals or hist.evals[-1]["step"] != step:
        do_eval(step)
    bar.close()
    return hist
