"""The one loop all four algorithms share, and the history it records.

    rollout, scores, problems = sample_batch(policy, task, n_prompts, group_size)  # sample, score
    batch = algorithm.prepare(rollout, scores)     # no grad: pi_ref, KL in the reward, advantages
    for epoch in range(epochs):                    # PPO/GRPO reuse the batch; REINFORCE: 1
        for idx in minibatches:
            loss = algorithm.loss(batch, idx)      # the line where the rungs differ
            loss.backward(); clip; optimizer.step()
            (the critic's own step, if there is a critic)
    # pi_old <- pi_theta: the next rollout is sampled from the updated policy
    at step 0, every eval_every steps and at the last step: greedy held-out accuracy

`train` runs it; `update` is one pass of it on one rollout. Training wall time excludes
evaluation, so ``seconds`` compares algorithms fairly. Its two extension points watch and change
nothing: ``callback`` sees each step (`StepInfo`), ``on_evaluate`` each evaluation (`Evaluation`).
"""

from __future__ import annotations

import copy
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .evaluation import evaluate
from .progress import progress_bar
from .rollout import sample_batch


class History:
    """Per-step metrics and periodic evaluations of one training run.

    ``steps``: one dict per RL step with the metrics training logs (TRL, verl) call
    ``reward``, ``reward_std``, ``kl``, ``entropy``, ``clip_ratio``, ``completion_length``,
    ``frac_reward_zero_std``, ``grad_norm`` (``value_loss`` with a critic), plus ``step``,
    ``samples`` (completions generated so far), ``samples_trained`` and ``seconds``.
    ``evals``: ``{"step", "samples", "seconds", "accuracy"}`` every ``eval_every`` steps.
    """

    def __init__(self, name: str = "", config: dict | None = None):
        self.name = name
        self.config = config or {}
        self.steps: list[dict] = []
        self.evals: list[dict] = []

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
        return (
            f"History({self.name!r}, steps={len(self.steps)}, "
            f"accuracy {self.initial_accuracy:.3f} -> {self.final_accuracy:.3f})"
        )


@dataclass
class StepInfo:
    """What ``train``'s ``callback`` sees after each step (and after that step's evaluation)."""

    step: int
    """The RL step just taken, from 1."""
    metrics: dict
    """The step's metrics, the dict ``history.steps[-1]`` holds (``reward``, ``kl``, ``grad_norm``, ...)."""
    rollout: object
    """The `Rollout` the update trained on (with dynamic sampling: the kept groups)."""
    scores: torch.Tensor
    """``[B, T]`` the task's per-token scores of that rollout, as sampled (before any KL penalty)."""
    problems: list
    """The problem of each row of the rollout (``group_size`` consecutive rows per problem)."""
    policy: torch.nn.Module
    """The policy after the update (the one the next rollout samples from)."""
    history: History
    """The run so far; ``history.evals[-1]["step"] == step`` when this step was evaluated."""

    @property
    def evaluated(self) -> bool:
        """Whether train() evaluated the policy after this step (every ``eval_every`` steps, and the last)."""
        return bool(self.history.evals) and self.history.evals[-1]["step"] == self.step


@dataclass
class Evaluation:
    """What ``train``'s ``on_evaluate`` sees after each evaluation: at step 0, every ``eval_every``
    steps and at the last step (the evaluations ``history.evals`` records, each with its answers)."""

    step: int
    """The RL step the policy has taken (0: the policy the run starts from)."""
    accuracy: float
    """Greedy held-out accuracy, ``history.evals[-1]["accuracy"]``."""
    correct: torch.Tensor
    """``[N]`` 0/1: whether the policy answered each held-out problem right."""
    completions: list
    """The N greedy completions (texts) that were checked."""
    problems: list
    """The N held-out problems, ``task.eval_problems()``, in that order."""
    policy: torch.nn.Module
    """The policy evaluated."""
    history: History
    """The run so far; ``history.evals[-1]`` is this evaluation's record."""


def finite(x: torch.Tensor, quantity: str) -> torch.Tensor:
    """``x`` unchanged, or a ``FloatingPointError`` naming ``quantity`` and its first bad value."""
    if not bool(torch.isfinite(x).all()):
        bad = x[~torch.isfinite(x)].flatten()[0].item()
        raise FloatingPointError(f"{quantity} is {bad}")
    return x


def minibatches(
    batch_size: int, n: int, generator: torch.Generator | None = None, shuffle: bool = True
) -> list[torch.Tensor]:
    """``n`` minibatches of row indices, a fresh shuffle of the batch each call (one: in order). With
    ``shuffle=False`` the rows in order, as verl splits its batch: a group's rows are consecutive
    (`sample_batch`), so each minibatch holds whole groups (when the group size divides it) and shares
    each of their prompts' passes."""
    if n > batch_size:
        raise ValueError(f"minibatches ({n}) exceeds the batch size ({batch_size})")
    perm = torch.randperm(batch_size, generator=generator) if n > 1 and shuffle else torch.arange(batch_size)
    return list(perm.chunk(n))


def _check(algorithm, rollout, scores):
    if algorithm.policy is None:
        raise RuntimeError(f"call {type(algorithm).__name__}.setup(policy, reference) before update()")
    if scores.shape != rollout.mask.shape:
        raise ValueError(f"scores must have the rollout's shape {tuple(rollout.mask.shape)}, got {tuple(scores.shape)}")
    k, n = getattr(algorithm.config, "gradient_accumulation_steps", 1), algorithm.config.minibatches
    smallest = min(map(len, torch.arange(rollout.batch_size).chunk(n)))  # the rows of the smallest minibatch
    if k > smallest:
        raise ValueError(f"gradient_accumulation_steps ({k}) exceeds the rows of a minibatch ({smallest})")
    if rollout.batch_size % algorithm.config.group_size:
        raise ValueError(
            f"batch of {rollout.batch_size} rows is not a multiple of group_size={algorithm.config.group_size}"
        )


def update(algorithm, rollout, scores: torch.Tensor) -> dict:
    """One update of the one loop on one rollout: prepare the batch (advantages), then
    ``epochs x minibatches`` optimizer steps on ``algorithm.loss``. Returns the step's metrics.

    With ``gradient_accumulation_steps`` k > 1 each optimizer step's rows are k micro-batches whose
    gradients add up before the step, each loss weighted by the micro-batch's share of the step's
    normaliser (``Algorithm.micro_batches``: tokens for a token mean, rows otherwise): the step's gradient
    is the one-batch gradient to float rounding, whatever the micro-batches' lengths; a stat is the
    same weighted sum of the micro-batches' (the loss exactly the step's)."""
    _check(algorithm, rollout, scores)
    Fn, cfg, policy, optimizer = algorithm.fn, algorithm.config, algorithm.policy, algorithm.optimizer
    batch = algorithm.prepare(rollout, scores)  # no grad: log pi_ref, KL in the reward, advantages
    finite(batch.advantages, "advantages")
    policy.train()
    sums, grad_norms = {}, []
    accumulate = getattr(cfg, "gradient_accumulation_steps", 1) > 1  # k micro-batches per optimizer step
    for _epoch in range(cfg.epochs):  # PPO/GRPO: several passes with pi_old fixed
        for idx in minibatches(rollout.batch_size, cfg.minibatches, algorithm.generator, getattr(cfg, "shuffle", True)):
            idx = idx.to(rollout.mask.device)
            stats = {}
            for j, (rows, w) in enumerate(
                algorithm.micro_batches(batch, idx) if accumulate else [(idx, 1.0)]
            ):  # base.py
                loss, micro = algorithm.loss(batch, rows)  # the line where the rungs differ
                finite(loss.detach(), "policy loss")
                if j == 0:  # after the first forward, as before accumulation: the step's peak memory unchanged
                    optimizer.zero_grad(set_to_none=True)
                (loss * w if w != 1.0 else loss).backward()  # w: its share of the step's normaliser
                for k, v in micro.items():
                    stats[k] = stats.get(k, 0.0) + w * float(v)
            grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
            finite(grad_norm.detach(), "policy gradient norm")
            optimizer.step()
            if algorithm.scheduler is not None:  # warmup_steps > 0
                algorithm.scheduler.step()
            grad_norms.append(grad_norm.detach())  # a tensor: read once, after the loop (no sync per step)
            if algorithm.critic is not None:  # the critic's own step, after the policy's
                stats["value_loss"] = algorithm.critic.step(
                    rollout.select(idx), batch.returns[idx], batch.mask[idx], batch.old_values[idx]
                )
            for k, v in stats.items():
                sums[k] = sums.get(k, 0.0) + float(v)
    policy.eval()  # pi_old <- pi_theta: the next rollout samples from the updated policy
    grad_norms = torch.stack(grad_norms).tolist()  # the norms as floats, in one read
    out = {k: v / len(grad_norms) for k, v in sums.items()}
    out.update(batch.stats)
    out["grad_norm"] = sum(grad_norms) / len(grad_norms)
    out["updates"] = len(grad_norms)
    out["completion_length"] = float(rollout.lengths.mean())
    out["truncated_frac"] = float(rollout.truncated.float().mean())
    if batch.ref_logp is not None:
        out["kl"] = float(Fn.masked_mean(Fn.kl_estimate(batch.old_logp, batch.ref_logp, "k3"), rollout.mask))
    return out


def collect(algorithm, sample):
    """One rollout for the update: ``algorithm.collect(sample)``, ``sample()`` once, or with
    GRPO's ``dynamic_sampling`` (DAPO) only informative groups, sampled until there are enough.
    Returns ``(rollout, scores, problems, generated)``, ``generated`` counting every completion."""
    return algorithm.collect(sample)


def _budget_left(step, n_samples, t_train, acc, steps, samples, seconds, target_accuracy) -> bool:
    return not (
        (steps is not None and step >= steps)
        or (samples is not None and n_samples >= samples)
        or (seconds is not None and t_train >= seconds)
        or (target_accuracy is not None and acc >= target_accuracy)
    )


def _resolve_budget(preset, algorithm, reward_kind, steps, seconds, samples, sequences_per_step, seed, eval_every):
    """The run's steps (the preset's when no budget is given), sequences per step, seed, eval period."""
    if reward_kind not in ("outcome", "process"):
        raise ValueError(f"reward_kind must be 'outcome' or 'process', got {reward_kind!r}")
    if steps is None and seconds is None and samples is None:
        steps = preset.steps
    seq_per_step, G = sequences_per_step or preset.sequences_per_step, algorithm.config.group_size
    if seq_per_step % G:
        raise ValueError(f"sequences_per_step={seq_per_step} is not a multiple of group_size={G}")
    return steps, seq_per_step, preset.seed if seed is None else seed, eval_every or preset.eval_every


def _check_start(task, reference, preset):
    """train() takes what it starts from: a task, a reference, a preset (its budget's defaults)."""
    missing = [n for n, v in (("task", task), ("reference", reference), ("preset", preset)) if v is None]
    if missing or isinstance(preset, str):
        what = ", ".join(missing) if missing else f"preset={preset!r} as a Preset"
        raise ValueError(
            f"train() takes the task, the reference it starts from and the preset: pass {what} "
            "(preset = grpo_edu.get_preset('cpu'), task = grpo_edu.make_task(preset), reference = "
            "grpo_edu.reference_policy(preset, task=task)), or call grpo_edu.train_from_preset(algorithm, "
            "preset='cpu', ...), which builds them"
        )


def train(
    algorithm,
    task=None,
    reference=None,
    policy=None,
    preset=None,
    steps: int | None = None,
    seconds: float | None = None,
    samples: int | None = None,
    sequences_per_step: int | None = None,
    seed: int | None = None,
    eval_every: int | None = None,
    reward_kind: str = "outcome",
    target_accuracy: float | None = None,
    progress: bool = True,
    name: str | None = None,
    callback=None,
    on_evaluate=None,
    share_prompts: bool = True,
) -> History:
    """Train ``policy`` (default: a copy of ``reference``) with ``algorithm`` on ``task``.

    ``reference`` is the policy the run starts from (and pi_ref of the KL penalty), ``preset``
    (a `Preset`) gives the defaults of the budget; train() takes them, it does not build them:
    ``grpo_edu.reference_policy(preset)`` builds (or loads) the SFT reference, and
    ``grpo_edu.train_from_preset`` builds what is not given and calls this.
    Budget: ``steps`` (default the preset's), or ``seconds`` of training wall time, or
    ``samples`` sampled completions, whichever ends first; ``target_accuracy`` stops early.
    ``samples`` counts every generated completion (with dynamic sampling, also the ones
    dropped); ``samples_trained`` counts those the update saw.
    Every algorithm sees ``sequences_per_step`` completions per step (default the preset's),
    as ``sequences_per_step / G`` prompts x G, G the algorithm's own ``config.group_size``, so
    a REINFORCE step (512 prompts x 1) and a GRPO step (64 prompts x 8) cost the same generation. ``seed`` defaults to the preset's. Same seed,
    same history on the same machine. (One function on purpose: it is the loop the course
    teaches, read top to bottom.) ``share_prompts=False``: every row of a group runs its own copy
    of its prompt (in generation and every teacher-forced pass; the same numbers, more compute).

    ``callback``: None, or a function called after each step (after its evaluation, if any) with
    a `StepInfo`: the step's metrics, the rollout, its scores and problems, the policy, the
    history so far. ``on_evaluate``: None, or a function called after each evaluation (step 0,
    every ``eval_every`` steps, the last step), before that step's callback, with an `Evaluation`:
    the accuracy and, per held-out problem, the answer and whether it was right. Both watch (log,
    stream metrics, summarise what the policy wrote); their time is not counted in ``seconds``.
    Returning changes nothing; raising stops the run.
    """

    _check_start(task, reference, preset)
    for hook, fn, sees in (("callback", callback, "StepInfo"), ("on_evaluate", on_evaluate, "Evaluation")):
        if fn is not None and not callable(fn):
            raise ValueError(f"{hook} must be None or a function of one {sees}, got {fn!r}")
    policy = policy if policy is not None else copy.deepcopy(reference)
    steps, seq_per_step, seed, eval_every = _resolve_budget(
        preset, algorithm, reward_kind, steps, seconds, samples, sequences_per_step, seed, eval_every
    )
    G = algorithm.config.group_size
    torch.manual_seed(seed)
    rng, device = np.random.default_rng(seed), next(policy.parameters()).device
    generator = torch.Generator(device=device).manual_seed(seed)
    algorithm.setup(policy, reference, generator=torch.Generator().manual_seed(seed + 1))
    hist = History(
        name or algorithm.name,
        {"algorithm": algorithm.name, **algorithm.config.to_dict(), "sequences_per_step": seq_per_step, "seed": seed},
    )

    def sample():  # the policy samples (or GRPO's sampler_dtype copy of it: a serving engine's)
        sampler = algorithm.sampling_policy()
        temperature = algorithm.config.temperature
        return sample_batch(
            sampler, task, seq_per_step // G, G, rng, generator, temperature, reward_kind, share_prompts
        )

    def evaluate_now(step, n_samples, t_train):  # greedy held-out accuracy, recorded, shown to on_evaluate
        acc, correct, completions = evaluate(policy, task, return_completions=True)
        hist.evals.append({"step": step, "samples": n_samples, "seconds": t_train, "accuracy": acc})
        if on_evaluate is not None:
            on_evaluate(Evaluation(step, acc, correct, completions, task.eval_problems(), policy, hist))
        return acc

    step, n_samples, n_trained, t_train = 0, 0, 0, 0.0
    acc = evaluate_now(0, 0, 0.0)
    total = steps if steps is not None else (math.ceil(samples / seq_per_step) if samples else None)
    bar = progress_bar(total=total, desc=hist.name, disable=not progress)
    while _budget_left(step, n_samples, t_train, acc, steps, samples, seconds, target_accuracy):
        step, t0 = step + 1, time.perf_counter()
        ro, scores, problems, generated = collect(algorithm, sample)  # sample + score (+ DAPO's refill)
        try:
            stats = update(algorithm, ro, scores)  # advantages, then epochs x minibatches of steps
        except FloatingPointError as exc:
            raise FloatingPointError(f"step {step}: {exc}") from exc
        if device.type == "cuda":
            torch.cuda.synchronize()
        t_train += time.perf_counter() - t0
        n_samples, n_trained, rewards = n_samples + generated, n_trained + ro.batch_size, scores.sum(dim=1)
        record = {
            "step": step,
            "samples": n_samples,
            "samples_trained": n_trained,
            "seconds": t_train,
            "reward": float(rewards.mean()),
            "reward_std": float(rewards.std()) if len(rewards) > 1 else 0.0,
        }
        hist.steps.append({**record, **{k: v for k, v in stats.items() if isinstance(v, (int, float))}})
        last = not _budget_left(step, n_samples, t_train, acc, steps, samples, seconds, target_accuracy)
        if step % eval_every == 0 or last:  # every eval_every steps, and the last step
            acc = evaluate_now(step, n_samples, t_train)
            bar.set_postfix(acc=f"{acc:.3f}")
        if callback is not None:  # a watcher: it sees the step, it does not change it
            callback(StepInfo(step, hist.steps[-1], ro, scores, problems, policy, hist))
        bar.update(1)
    bar.close()
    return hist
