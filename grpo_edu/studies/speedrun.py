"""The speedrun: GRPO from the cached reference to 90% held-out greedy accuracy, as fast as it goes.

(draft: the profile first)
"""

from __future__ import annotations

import copy
import statistics
import time
from contextlib import contextmanager

import numpy as np
import torch

from ..algorithms import make_algorithm
from ..evaluation import evaluate
from ..model import forward_flops
from ..rollout import expand, generate, policy_logprobs, reference_logprobs
from ..train import finite, minibatches
from ..warmstart.presets import get_preset, make_task, setup_torch
from ..warmstart.reference import reference_policy


class FlopCounter:
    """Counts the forward and backward FLOPs of every call of the models it watches, from their
    shapes (`grpo_edu.model.forward_flops`): a forward hook reads the ids ``[B, T]`` and the cache's
    length; a call with grad enabled will be differentiated, and its backward costs twice its
    forward (a gradient for the input and one for the weights of each product)."""

    def __init__(self, *models):
        self.forward = 0
        self.backward = 0
        self._handles = [m.register_forward_pre_hook(self._hook, with_kwargs=True) for m in models]

    def _hook(self, module, args, kwargs):
        idx = args[0] if args else kwargs["idx"]
        cache = args[1] if len(args) > 1 else kwargs.get("cache")
        f = forward_flops(module.config, idx.shape[0], idx.shape[1], 0 if cache is None else cache.length)
        self.forward += f
        if torch.is_grad_enabled():
            self.backward += 2 * f

    def close(self):
        for h in self._handles:
            h.remove()


class _Clock:
    def __init__(self):
        self.seconds: dict[str, list[float]] = {}
        self.flops: dict[str, int] = {}
        self.counter = None

    @contextmanager
    def phase(self, name):
        f0 = (self.counter.forward + self.counter.backward) if self.counter else 0
        t0 = time.perf_counter()
        yield
        self.seconds.setdefault(name, []).append(time.perf_counter() - t0)
        if self.counter:
            self.flops[name] = self.flops.get(name, 0) + self.counter.forward + self.counter.backward - f0


def _timed_step(algo, task, n_prompts, rng, generator, clock: _Clock):
    """One step of `grpo_edu.train`'s loop (sample, score, prepare, epochs x minibatches of
    loss, backward, clip, step), each phase on ``clock``. The same calls in the same order as
    ``train()``: the same seed gives the same parameters (tests/test_speedrun.py)."""
    cfg, policy, opt = algo.config, algo.policy, algo.optimizer
    G = cfg.group_size
    with clock.phase("sample problems, encode"):
        problems = task.sample(n_prompts, rng)
        prompts = task.encode_prompts(problems)
    with clock.phase("generate"):
        ro = generate(
            algo.sampling_policy(),
            prompts,
            group_size=G,
            max_new_tokens=task.max_answer_length,
            temperature=cfg.temperature,
            generator=generator,
            tokenizer=task.tokenizer,
        )
    with clock.phase("score"):
        scores = task.token_scores(expand(problems, G), ro.completion_ids, ro.mask, kind="outcome")
    with clock.phase("prepare: reference log-probs, advantages"):
        batch = algo.prepare(ro, scores)
        finite(batch.advantages, "advantages")
    policy.train()
    for _epoch in range(cfg.epochs):
        for idx in minibatches(ro.batch_size, cfg.minibatches, algo.generator):
            with clock.phase("update: forward + loss"):
                loss, stats = algo.loss(batch, idx)
                finite(loss.detach(), "policy loss")
            with clock.phase("update: backward"):
                opt.zero_grad(set_to_none=True)
                loss.backward()
            with clock.phase("update: clip + optimizer"):
                grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
                finite(grad_norm.detach(), "policy gradient norm")
                opt.step()
            with clock.phase("update: stats"):
                float(grad_norm)
                for v in stats.values():
                    float(v)
    policy.eval()
    return ro, batch


def matmul_peak(shapes, repeats: int = 20) -> dict:
    """GFLOP/s of ``torch.mm`` at each ``(m, k, n)``: the best of ``repeats`` timings each."""
    out = {}
    for m, k, n in shapes:
        a, b = torch.randn(m, k), torch.randn(k, n)
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(10):
                torch.mm(a, b)
            best = min(best, (time.perf_counter() - t0) / 10)
        out[(m, k, n)] = 2 * m * k * n / best / 1e9
    return out


def profile_step(preset="cpu", steps: int = 20, warmup: int = 3, seed: int = 0):
    preset = get_preset(preset) if isinstance(preset, str) else preset
    setup_torch(preset, seed)
    task = make_task(preset)
    reference = reference_policy(preset, task=task, progress=False)
    policy = copy.deepcopy(reference)
    algo = make_algorithm("grpo")
    algo.setup(policy, reference, generator=torch.Generator().manual_seed(seed + 1))
    rng, generator = np.random.default_rng(seed), torch.Generator().manual_seed(seed)
    n_prompts = preset.sequences_per_step // algo.config.group_size
    clock = _Clock()
    for _ in range(warmup):
        _timed_step(algo, task, n_prompts, rng, generator, _Clock())
    clock.counter = FlopCounter(policy, reference)
    ref_times, fwd_times, eval_times, step_times = [], [], [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        ro, batch = _timed_step(algo, task, n_prompts, rng, generator, clock)
        step_times.append(time.perf_counter() - t0)
        # the parts of a phase, timed apart on the same batch (outside the step's clock)
        t0 = time.perf_counter()
        with torch.no_grad():
            reference_logprobs(reference, ro, algo.config.beta, algo.config.kl_placement)
        ref_times.append(time.perf_counter() - t0)
        idx = torch.arange(ro.batch_size // algo.config.minibatches)
        t0 = time.perf_counter()
        policy_logprobs(policy, batch, idx)
        fwd_times.append(time.perf_counter() - t0)
    f0 = clock.counter.forward
    for _ in range(3):
        t0 = time.perf_counter()
        evaluate(policy, task)
        eval_times.append(time.perf_counter() - t0)
    eval_flops = (clock.counter.forward - f0) // 3
    clock.counter.close()
    med = {k: statistics.median(v) * len(v) / steps for k, v in clock.seconds.items()}
    return dict(
        phases=med,
        flops={k: v / steps for k, v in clock.flops.items()},
        step=statistics.median(step_times),
        reference=statistics.median(ref_times),
        policy_forward=statistics.median(fwd_times),
        evaluation=statistics.median(eval_times),
        eval_flops=eval_flops,
        eval_every=preset.eval_every,
    )


if __name__ == "__main__":
    r = profile_step()
    total = r["step"]
    for k, v in r["phases"].items():
        print(f"{k:45s} {1000 * v:8.2f} ms {v / total:6.1%}  {r['flops'].get(k, 0) / 1e9:.3f} GFLOP")
    print(f"step {1000 * total:.2f} ms; reference fwd {1000 * r['reference']:.2f}; policy fwd (1 mb) {1000 * r['policy_forward']:.2f}")
    print(f"evaluation {1000 * r['evaluation']:.2f} ms, {r['eval_flops'] / 1e9:.3f} GFLOP")
    sh = [(1024, 64, 256), (1024, 256, 64), (1024, 64, 192), (448, 64, 192), (512, 64, 192), (512, 512, 512)]
    for s, g in matmul_peak(sh).items():
        print(s, f"{g:.1f} GFLOP/s")
