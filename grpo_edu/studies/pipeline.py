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
``epochs x minibatches`` optimizer steps): TRL's ``AsyncGRPOTrainer`` calls it ``max_staleness``, tinker
``sampling_steps_ahead``, NeMo RL ``max_trajectory_age_steps``. The generator waits for weights at most K
versions old before it samples, so the batch queue (``K + 1`` slots) never holds a batch sampled by
older weights, and every batch's lag is at most K: K = 0 is the synchronous loop, step for step the same
numbers as `grpo_edu.train` (the generator waits for each update); K = 1 samples the next batch while the
learner trains on this one. The weights travel through shared memory (one buffer per tensor of the
state_dict, written by the learner under a lock with the version number); the batches through a queue
(numpy arrays, pickled), each with the sampler's log-probs and the version that sampled it.

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

    python -m grpo_edu.studies.pipeline_race     # wall time to 90%: 1 thread, 2 threads, two processes
"""

from __future__ import annotations

import copy
import dataclasses
import math
import multiprocessing
import os
import queue
import time
import traceback
import warnings

import numpy as np
import torch

from ..algorithms import GRPO
from ..algorithms.grpo_extras import dynamic_sampling
from ..evaluation import evaluate
from ..progress import progress_bar
from ..rollout import Rollout, sample_batch
from ..train import Evaluation, History, StepInfo, _budget_left, _check_start, _resolve_budget, train, update

PIPELINES = ("sync", "async")  # grpo-edu train --pipeline: train.py's loop, or this file's two processes
POLL = 0.05  # seconds between looks at the other process while waiting for it


class PipelineError(RuntimeError):
    """The generator process failed (or died): one line naming its error; ``child_traceback`` holds its traceback."""

    def __init__(self, message: str, child_traceback: str = ""):
        super().__init__(message)
        self.child_traceback = child_traceback


class CannotStart(RuntimeError):
    """The generator process could not start (the caller falls back to the synchronous loop)."""


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


# ------------------------------------------------------------------ the wire: a batch as numpy arrays


def _pack(rollout: Rollout, scores: torch.Tensor) -> dict:
    out = {f.name: getattr(rollout, f.name) for f in dataclasses.fields(Rollout)}
    out = {k: v.cpu().numpy() if isinstance(v, torch.Tensor) else v for k, v in out.items()}
    return {**out, "_scores": scores.cpu().numpy()}


def _unpack(payload: dict) -> tuple[Rollout, torch.Tensor]:
    d = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in payload.items()}
    scores = d.pop("_scores")
    return Rollout(**d), scores


# ------------------------------------------------------------------ the generator process


def _generator(model, task, job: dict, shared: dict, version, weights, published, sampling, batches, messages, stop):
    """The child's loop (module level: ``spawn`` finds it by name). ``weights``: the lock under which the
    learner writes ``shared`` and ``version``, then releases ``published``; ``sampling``: held while sampling
    (the learner takes it to evaluate); ``stop``: a shared flag. Locks and semaphores only, each waited on
    with a timeout: a condition's notify waits for its waiters, and would wait forever for a dead one."""
    b = -1
    try:
        torch.set_num_threads(job["threads"])
        parent = multiprocessing.parent_process()
        model.eval().requires_grad_(False)
        params = model.state_dict()
        rng, gen = np.random.default_rng(job["seed"]), torch.Generator().manual_seed(job["seed"])
        G, K, mine = job["group_size"], job["max_staleness"], -1

        def sample():  # train.py's sample(): the same seeds, so K = 0 draws train()'s numbers
            return sample_batch(model, task, job["n_prompts"], G, rng, gen, job["temperature"], job["reward_kind"],
                                job["share_prompts"])  # fmt: skip

        def orphaned():  # the learner is gone (killed): this process ends too
            return parent is not None and not parent.is_alive()

        def hold(lock) -> bool:  # the lock, or False once the learner is gone (it may have died holding it)
            while not lock.acquire(timeout=POLL):
                if orphaned():
                    return False
            return True

        messages.put(("ready", os.getpid()))
        b = 0
        while not stop.value:
            while version.value < b - K and not stop.value:  # at most K versions behind the learner
                published.acquire(timeout=POLL)
                if orphaned():
                    return
            if stop.value or not hold(weights):
                break
            try:
                if version.value > mine:  # the newest weights the learner published
                    with torch.no_grad():
                        for k, v in shared.items():
                            params[k].copy_(v)
                    mine = version.value
            finally:
                weights.release()
            if stop.value or not hold(sampling):
                break
            try:
                t0 = time.perf_counter()
                if job["dynamic_sampling"]:
                    ro, scores, problems, generated = dynamic_sampling(sample, G, job["max_resample"])
                else:
                    (ro, scores, problems), generated = sample(), job["n_prompts"] * G
            finally:
                sampling.release()
            item = (b, mine, _pack(ro, scores), problems, generated, time.perf_counter() - t0)
            while not stop.value:
                try:
                    batches.put(item, timeout=POLL)
                    break
                except queue.Full:
                    if orphaned():
                        return
            b += 1
    except KeyboardInterrupt:
        messages.put(("error", b, "KeyboardInterrupt (interrupted)", ""))
    except BaseException as exc:  # noqa: BLE001 - every failure is reported to the learner, which raises it
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        where = f"{os.path.basename(frame.filename)}:{frame.lineno}"
        messages.put(("error", b, f"{type(exc).__name__}: {' '.join(str(exc).split())} ({where})", traceback.format_exc()))  # fmt: skip
    finally:
        batches.cancel_join_thread()  # exit without waiting for the learner to read what is left


class Generator:
    """The learner's handle on the generator process: start it, take its batches, publish weights to it,
    hold it while evaluating, stop it (always: `stop` leaves no child behind)."""

    def __init__(self, policy, task, job: dict, start_method: str = "spawn", start_timeout: float = 120.0):
        ctx = torch.multiprocessing.get_context(start_method)
        self.shared = {k: v.detach().clone().share_memory_() for k, v in policy.state_dict().items()}
        self.version = ctx.Value("q", 0, lock=False)  # read and written under self.weights
        self.weights, self.published, self.sampling = ctx.Lock(), ctx.Semaphore(0), ctx.Lock()
        self.stop_flag = ctx.Value("i", 0, lock=False)
        self.max_staleness = job["max_staleness"]
        self.batches, self.messages = ctx.Queue(maxsize=self.max_staleness + 1), ctx.Queue()
        model = copy.deepcopy(policy).cpu()
        args = (model, task, job, self.shared, self.version, self.weights, self.published, self.sampling,
                self.batches, self.messages, self.stop_flag)  # fmt: skip
        self.process = ctx.Process(target=_generator, args=args, name="grpo-edu generator", daemon=True)
        t0 = time.perf_counter()
        try:
            self.process.start()
        except Exception as exc:  # no fork/spawn here, no shared memory, an argument that does not pickle
            raise CannotStart(f"{type(exc).__name__}: {' '.join(str(exc).split())}") from exc
        try:
            self._wait_ready(start_timeout)
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.perf_counter() - t0

    @property
    def pid(self):
        return self.process.pid

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            try:
                msg = self.messages.get(timeout=POLL)
            except queue.Empty:
                if not self.process.is_alive():
                    code = self.process.exitcode  # < 0: killed by a signal (Ctrl-C too): not a failure to start
                    raise (CannotStart if code > 0 else PipelineError)(
                        f"the generator process exited with code {code} before it was ready"
                    ) from None
                continue
            if msg[0] == "ready":
                return
            raise (PipelineError if msg[2].startswith("KeyboardInterrupt") else CannotStart)(
                f"the generator process failed as it started: {msg[2]}"
            )
        raise CannotStart(f"the generator process was not ready after {timeout:.0f} s")

    def check(self) -> None:
        """Raise `PipelineError` if the generator reported an error or is gone."""
        try:
            msg = self.messages.get_nowait()
        except queue.Empty:
            msg = None
        if msg is not None and msg[0] == "error":
            _, b, text, tb = msg
            raise PipelineError(f"the generator process failed at batch {b}: {text}; the learner stopped too", tb)
        if not self.process.is_alive():
            raise PipelineError(f"the generator process (pid {self.pid}) died (exit code {self.process.exitcode}); the learner stopped too")  # fmt: skip

    def _acquire(self, lock) -> None:
        while not lock.acquire(timeout=POLL):
            self.check()

    def next_batch(self):
        """``(b, version, rollout, scores, problems, generated, generate_seconds)`` of the next batch."""
        while True:
            try:
                b, v, payload, problems, generated, gen_s = self.batches.get(timeout=POLL)
                break
            except queue.Empty:
                self.check()
        ro, scores = _unpack(payload)
        return b, v, ro, scores, problems, generated, gen_s

    def publish(self, policy, version: int) -> None:
        """The learner's weights after ``version`` updates, copied into the shared buffers."""
        self._acquire(self.weights)
        try:
            with torch.no_grad():
                for k, v in policy.state_dict().items():
                    self.shared[k].copy_(v)
            self.version.value = version
        finally:
            self.weights.release()
        self.published.release()  # wakes the generator if it waits for this version

    def hold(self):
        """Take the sampling lock (the generator finishes its batch and waits); `release` gives it back."""
        self._acquire(self.sampling)

    def release(self):
        self.sampling.release()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the child and wait for it (terminate, then kill, if it does not exit by itself)."""
        self.stop_flag.value = 1
        deadline = time.perf_counter() + timeout
        while self.process.is_alive() and time.perf_counter() < deadline:
            try:  # drain the queue: a child blocked on a full queue exits
                self.batches.get(timeout=POLL)
            except (queue.Empty, OSError, EOFError):
                pass
        for end in (self.process.terminate, self.process.kill):
            if not self.process.is_alive():
                break
            end()
            self.process.join(1.0)
        self.process.join(1.0)
        for q in (self.batches, self.messages):
            q.cancel_join_thread()
            q.close()


# ------------------------------------------------------------------ the learner


class _Behind:
    """The real lag, told to GRPO's off-policy path: off_policy.py takes a rollout ``policy_lag`` optimizer
    steps behind from ``algorithm._lagged.staleness`` (its ring, `LaggedSampler`). Here the learner sets
    the batch's own lag there before each update (and ``policy_lag`` to it, which turns the path on: the
    learner's log-probs recomputed as pi_prox, the correction's weight); a batch with no lag is GRPO's plain
    update. `restore` gives the algorithm its own config back."""

    def __init__(self, algorithm):
        self.algorithm, self.base, self.optimizer = algorithm, algorithm.config, algorithm.optimizer
        self.staleness, self.configs = 0, {0: algorithm.config}
        algorithm._lagged = self

    def set(self, updates_behind: int) -> None:
        if updates_behind not in self.configs:
            self.configs[updates_behind] = dataclasses.replace(self.base, policy_lag=updates_behind)
        self.staleness, self.algorithm.config = updates_behind, self.configs[updates_behind]

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
