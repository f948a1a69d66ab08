"""The two-process pipeline: a generator samples the next batch while the learner trains on this one.

The loop of train.py, split in two processes (asynchronous GRPO, as PipelineRL, AReaL and TRL's
``AsyncGRPOTrainer`` run it, here on two CPU cores, one torch thread each):

    generator process (a child)                  learner process (the caller's)
    for b = 0, 1, 2, ...:                        evaluate at step 0
        wait until the weights' version >= b - K for step = 1, 2, ...:
        load the newest weights received             b, v, rollout = batches.get()   # b = step - 1
        rollout = sample + score (log-probs too)     lag = (step - 1) - v             # versions behind
        batches.put((b, v, rollout))                 update(algorithm, rollout)       # train.py's, corrected
                                                     publish the weights: version = step

K is ``max_staleness``, the bound of the lag in weight versions (one version per update, each update
``epochs x minibatches`` optimizer steps). TRL's ``AsyncGRPOTrainer`` calls its bound ``max_staleness`` too,
counted in weight syncs (one per ``weight_sync_steps`` optimizer steps, default 1), and drops an older sample
instead of waiting; tinker's cookbook ``AsyncConfig.max_steps_off_policy`` (training steps; an older group
is sampled again); NeMo RL ``max_trajectory_age_steps``. The generator waits for weights at most K
versions old before it samples batch b, so every batch's lag is at most K (the batch queue has K + 1 slots,
as many batches as it may sample ahead): K = 0 is the synchronous loop, step for step the same numbers as
`grpo_edu.train` (the generator waits for each update); K = 1 samples the next batch while the learner
trains on this one. The weights travel through shared memory, the batches through a queue, each with the
sampler's log-probs and the version that sampled it (`grpo_edu.studies._generator`: the child's side).

The learner treats a batch ``lag`` versions behind as GRPO's ``policy_lag`` ring treats a rollout that
many optimizer steps behind (`grpo_edu.algorithms.off_policy`): ``off_policy_correction`` picks the
log-probs the ratio is taken against (the sampler's, or the learner's own at the step's start) and the
weight per token. Each step records ``lag`` (versions) and ``staleness`` (optimizer steps) behind, the
learner's ``wait_seconds`` for the batch and the generator's ``generate_seconds`` on it.

The clock (``seconds``) is train()'s: the learner's wall time, evaluations excluded (while the learner
evaluates, the generator is held after its current batch; waiting for it counts). Starting the child
(``spawn``: a fresh interpreter that imports torch) is not on the clock, as train()'s imports are not; it
is recorded (``history.config["pipeline_start_seconds"]``). An exception or Ctrl-C in either process
stops both (`PipelineError` names the generator's); where the child cannot start, `train_pipeline` warns
in one line and runs the synchronous loop. With K > 0 a run is not repeatable: the lag depends on timing.
``spawn`` runs the calling script again in the child up to its ``if __name__ == "__main__":`` guard, which a
script that calls `train_pipeline` needs (a notebook, or ``grpo-edu train --pipeline async``, does not).
With ``off_policy_correction="ppo_clip"`` the ratio is taken against the log-probs that came with the batch,
the synchronous loop's own loss, and the learner runs no extra forward; "none" recomputes its own.

    python -m grpo_edu.studies.pipeline_race     # wall time to 90%: 1 thread, 2 threads, two processes
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
import warnings

import torch

from ..algorithms import GRPO
from ..algorithms.off_policy import CORRECTIONS
from ..evaluation import evaluate
from ..progress import progress_bar
from ..train import Evaluation, History, StepInfo, _budget_left, _check_start, _resolve_budget, train, update
from ._generator import CannotStart, Generator, PipelineError

__all__ = ["PIPELINES", "CannotStart", "Generator", "PipelineError", "check_pipeline", "train_pipeline"]
PIPELINES = ("sync", "async")  # grpo-edu train --pipeline: train.py's loop, or this file's two processes


def check_pipeline(algorithm, max_staleness, policy=None) -> None:
    """The pipeline's rules, one-line ValueErrors before any work: a lag bound K >= 0, GRPO (its
    ``off_policy_correction`` treats the lag), no simulated lag or cast sampler beside the real one, a CPU policy."""
    if not isinstance(max_staleness, int) or isinstance(max_staleness, bool) or max_staleness < 0:
        raise ValueError(f"max_staleness must be an integer >= 0 (weight versions the sampler may lag), got {max_staleness!r}")  # fmt: skip
    if not isinstance(algorithm, GRPO):
        raise ValueError(f"the two-process pipeline trains GRPO (its off_policy_correction treats the lag), got {algorithm.name!r}")  # fmt: skip
    cfg = algorithm.config
    if cfg.policy_lag:
        raise ValueError(f"policy_lag={cfg.policy_lag} simulates a lag in one process; the pipeline's lag is real (max_staleness): set policy_lag=0")  # fmt: skip
    if cfg.sampler_dtype is not None:
        raise ValueError(f"sampler_dtype={cfg.sampler_dtype!r} with the pipeline: one sampler apart at a time (drop it)")  # fmt: skip
    if policy is not None and next(policy.parameters()).device.type != "cpu":
        raise ValueError(f"the two-process pipeline runs on the CPU's cores; the policy is on {next(policy.parameters()).device}")  # fmt: skip


# ------------------------------------------------------------------ the learner


class _Behind:
    """The real lag, told to GRPO's off-policy path: off_policy.py takes a rollout ``policy_lag`` optimizer
    steps behind from ``algorithm._lagged.staleness`` (its ring, `LaggedSampler`). Here the learner sets
    the batch's own lag there before each update (and ``policy_lag`` to it, which turns the path on: the
    learner's log-probs recomputed as pi_prox, the correction's weight); a batch with no lag is GRPO's plain
    update, and so is a lagged one under a correction that reads only the sampler's log-probs (ppo_clip, m2po:
    the ring's path would recompute pi_prox for nothing). `restore` gives the algorithm its own config back."""

    def __init__(self, algorithm):
        self.algorithm, self.base, self.optimizer = algorithm, algorithm.config, algorithm.optimizer
        self.staleness, self.configs = 0, {0: algorithm.config}
        row = CORRECTIONS[self.base.off_policy_correction]
        self.needs_prox = row.proximal or row.weights is not None
        algorithm._lagged = self

    def set(self, updates_behind: int) -> None:
        self.staleness = updates_behind
        if not self.needs_prox:
            return
        if updates_behind not in self.configs:
            self.configs[updates_behind] = dataclasses.replace(self.base, policy_lag=updates_behind)
        self.algorithm.config = self.configs[updates_behind]

    def restore(self) -> None:
        self.algorithm.config = self.base
        if getattr(self.algorithm, "_lagged", None) is self:
            del self.algorithm._lagged


def train_pipeline(
    algorithm,
    task=None,
    reference=None,
    policy=None,
    preset=None,
    max_staleness: int = 1,
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
    threads: int = 1,
    start_method: str = "spawn",
) -> History:
    """`grpo_edu.train`'s run through two processes: the same arguments, the same `History` (each step
    also ``lag``, ``staleness``, ``wait_seconds``, ``generate_seconds``), ``max_staleness`` = K bounds
    the lag, ``threads`` torch threads in each process. Falls back to `grpo_edu.train` (a one-line
    `RuntimeWarning`) where the generator process cannot start. An error or Ctrl-C in the learner
    stops the generator and is raised as it is; the generator's is raised as `PipelineError`."""
    _check_start(task, reference, preset)
    check_pipeline(algorithm, max_staleness, policy if policy is not None else reference)
    for hook, fn in (("callback", callback), ("on_evaluate", on_evaluate)):
        if fn is not None and not callable(fn):
            raise ValueError(f"{hook} must be None or a function, got {fn!r}")
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise ValueError(f"threads must be an integer >= 1, got {threads!r}")
    policy = policy if policy is not None else copy.deepcopy(reference)
    budget = dict(steps=steps, seconds=seconds, samples=samples, sequences_per_step=sequences_per_step, seed=seed,
                  eval_every=eval_every, reward_kind=reward_kind, target_accuracy=target_accuracy)  # fmt: skip
    steps, seq_per_step, seed, eval_every = _resolve_budget(
        preset, algorithm, reward_kind, steps, seconds, samples, sequences_per_step, seed, eval_every
    )
    cfg, G = algorithm.config, algorithm.config.group_size
    job = dict(threads=threads, seed=seed, group_size=G, max_staleness=max_staleness, n_prompts=seq_per_step // G,
               temperature=cfg.temperature, reward_kind=reward_kind, share_prompts=share_prompts,
               dynamic_sampling=cfg.dynamic_sampling, max_resample=cfg.max_resample)  # fmt: skip
    threads_before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        try:
            gen = Generator(policy, task, job, start_method)
        except CannotStart as exc:
            warnings.warn(f"the two-process pipeline could not start ({exc}): training with the synchronous loop instead", RuntimeWarning, stacklevel=2)  # fmt: skip
            return train(algorithm, task, reference, policy, preset, progress=progress, name=name, callback=callback,
                         on_evaluate=on_evaluate, share_prompts=share_prompts, **budget)  # fmt: skip
        behind = None
        try:
            torch.manual_seed(seed)
            algorithm.setup(policy, reference, generator=torch.Generator().manual_seed(seed + 1))
            behind = _Behind(algorithm)
            return _learn(algorithm, task, policy, gen, behind, steps, seconds, samples, seq_per_step, seed,
                          eval_every, target_accuracy, progress, name, callback, on_evaluate)  # fmt: skip
        except BaseException as exc:
            exc.add_note(f"the pipeline's generator process (pid {gen.pid}) was stopped with the learner")
            raise
        finally:
            if behind is not None:
                behind.restore()
            gen.stop()
    finally:
        torch.set_num_threads(threads_before)


def _learn(algorithm, task, policy, gen, behind, steps, seconds, samples, seq_per_step, seed, eval_every,
           target_accuracy, progress, name, callback, on_evaluate) -> History:  # fmt: skip
    """The learner's loop: train()'s, with the batch taken from the generator and the weights published."""
    K = gen.max_staleness
    hist = History(
        name or f"{algorithm.name} pipeline",
        {"algorithm": algorithm.name, **algorithm.config.to_dict(), "sequences_per_step": seq_per_step,
         "seed": seed, "pipeline": "async", "max_staleness": K, "pipeline_start_seconds": gen.start_seconds},
    )  # fmt: skip

    def evaluate_now(step, n_samples, t_train):  # with the generator held (`Generator.hold`)
        try:
            acc, correct, completions = evaluate(policy, task, return_completions=True)
        finally:
            gen.release()
        hist.evals.append({"step": step, "samples": n_samples, "seconds": t_train, "accuracy": acc})
        if on_evaluate is not None:
            on_evaluate(Evaluation(step, acc, correct, completions, task.eval_problems(), policy, hist))
        return acc

    step, n_samples, n_trained, t_train, updates_at = 0, 0, 0, 0.0, [0]  # updates_at[v]: optimizer steps at version v
    gen.hold()
    acc = evaluate_now(0, 0, 0.0)
    total = steps if steps is not None else (math.ceil(samples / seq_per_step) if samples else None)
    bar = progress_bar(total=total, desc=hist.name, disable=not progress)
    while _budget_left(step, n_samples, t_train, acc, steps, samples, seconds, target_accuracy):
        step, t0 = step + 1, time.perf_counter()
        b, version, ro, scores, problems, generated, gen_s = gen.next_batch()
        waited = time.perf_counter() - t0
        assert b == step - 1, (b, step)  # the batches arrive in order, one per update
        lag = (step - 1) - version
        behind.set(
            updates_at[-1] - updates_at[version]
        )  # the correction sees the lag in optimizer steps, as the ring's
        try:
            stats = update(algorithm, ro, scores)
        except FloatingPointError as exc:
            raise FloatingPointError(f"step {step}: {exc}") from exc
        updates_at.append(updates_at[-1] + stats["updates"])
        gen.publish(policy, step)
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
        stats.update(lag=lag, staleness=behind.staleness, wait_seconds=waited, generate_seconds=gen_s)
        hist.steps.append({**record, **{k: v for k, v in stats.items() if isinstance(v, (int, float))}})
        last = not _budget_left(step, n_samples, t_train, acc, steps, samples, seconds, target_accuracy)
        if step % eval_every == 0 or last:  # off the clock, as train()'s; waiting for the generator's batch is on it
            t1 = time.perf_counter()
            gen.hold()
            t_train += time.perf_counter() - t1
            acc = evaluate_now(step, n_samples, t_train)
            bar.set_postfix(acc=f"{acc:.3f}")
        if callback is not None:
            callback(StepInfo(step, hist.steps[-1], ro, scores, problems, policy, hist))
        bar.update(1)
    bar.close()
    return hist
