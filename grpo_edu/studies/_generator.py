"""The generator process of the two-process pipeline (`grpo_edu.studies.pipeline`) and the learner's handle
on it: start it, take its batches, publish weights to it, hold it while evaluating, stop it.

    the weights     shared memory, one buffer per tensor of the state_dict, written by the learner under the
                    ``weights`` lock with the version number, then a ``published`` semaphore released
    the batches     a queue of K + 1 slots, each batch numpy arrays (pickled: no file descriptor per tensor),
                    with the sampler's log-probs, the version that sampled it and the generator's seconds on it
    the errors      a queue of messages: "ready", or the child's error in one line (and its traceback)

Every wait on the other process has a timeout and looks at the other side when it expires: the learner
raises `PipelineError` when the child reported an error or is gone; the child exits when the learner is
gone (killed outright, it ran no cleanup). Locks and semaphores only: a condition's notify waits for its
waiters, and would wait forever for one killed in its wait.
"""

from __future__ import annotations

import copy
import dataclasses
import multiprocessing
import os
import queue
import time
import traceback

import numpy as np
import torch

from ..algorithms.grpo_extras import dynamic_sampling
from ..rollout import Rollout, sample_batch

POLL = 0.05  # seconds between looks at the other process while waiting for it


class PipelineError(RuntimeError):
    """The generator process failed (or died): one line naming its error; ``child_traceback`` holds its traceback."""

    def __init__(self, message: str, child_traceback: str = ""):
        super().__init__(message)
        self.child_traceback = child_traceback


class CannotStart(RuntimeError):
    """The generator process could not start (the caller falls back to the synchronous loop)."""


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


def generator_loop(
    model, task, job: dict, shared: dict, version, weights, published, sampling, batches, messages, stop
):
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
        self.process = ctx.Process(target=generator_loop, args=args, name="grpo-edu generator", daemon=True)
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
