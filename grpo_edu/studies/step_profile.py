"""Where one GRPO step's time goes, and the least time its arithmetic could take on this core.

`profile_step` runs the steps of `grpo_edu.train`'s loop on the preset (the default GRPO config
unless told), timing each phase: the sampling (the problems, the generation, the scoring), the
preparation (the reference's log-probs and the advantages), the update's forward, backward and
optimizer step for each of its ``epochs x minibatches``, and the periodic evaluation, with the
FLOPs each phase computes (counted from the model's shapes, `grpo_edu.model.forward_flops`) and
the number of ATen operations it dispatches. `matmul_peak` measures what one core does on the
step's own matrix shapes; the step's FLOPs at that peak are its physical limit here: the rest is
small kernels, memory traffic and Python. ``python -m grpo_edu.studies.speedrun --profile`` prints it.

Times are the process's CPU seconds (``time.process_time``): with one torch thread, the wall time
of an idle machine, and much less sensitive than the wall clock to other work on a shared one.
"""

from __future__ import annotations

import copy
import statistics
import time
from contextlib import contextmanager

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..algorithms import make_algorithm
from ..evaluation import evaluate
from ..model import forward_flops
from ..rollout import expand, generate, policy_logprobs, reference_logprobs
from ..train import finite, minibatches
from ..warmstart.presets import get_preset, make_task, resolve_preset, setup_torch
from ..warmstart.reference import reference_policy


class FlopCounter:
    """The forward and backward FLOPs of every call of the models it watches, from their shapes: a
    forward pre-hook reads the ids ``[B, T]`` and the cache's length (`forward_flops`); a call made
    with grad enabled is differentiated, and its backward costs twice its forward (for each product,
    one for the input's gradient and one for the weights'). ``close()`` removes the hooks."""

    def __init__(self, *models):
        self.forward, self.backward = 0, 0
        self._handles = [m.register_forward_pre_hook(self._count, with_kwargs=True) for m in models]

    def _count(self, module, args, kwargs):
        idx = args[0] if args else kwargs["idx"]
        cache = args[1] if len(args) > 1 else kwargs.get("cache")
        past, last = (0 if cache is None else cache.length), (args[2] if len(args) > 2 else kwargs.get("last"))
        f = forward_flops(module.config, idx.shape[0], idx.shape[1], past, last)
        self.forward += f
        if torch.is_grad_enabled():
            self.backward += 2 * f

    @property
    def total(self) -> int:
        return self.forward + self.backward

    def close(self):
        for h in self._handles:
            h.remove()


class _OpCount(TorchDispatchMode):
    """Counts the ATen operations dispatched (forward and backward) while active."""

    def __init__(self):
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.n += 1
        return func(*args, **(kwargs or {}))


class _Phases:
    """CPU seconds, FLOPs and (when counting) ATen operations of each named phase, summed."""

    def __init__(self, counter: FlopCounter | None = None, ops: _OpCount | None = None):
        self.seconds: dict[str, float] = {}
        self.flops: dict[str, int] = {}
        self.ops: dict[str, int] = {}
        self.counter, self.op_count = counter, ops
        self._claimed = counter.backward if counter else 0

    @contextmanager
    def __call__(self, name):
        f0, n0 = (self.counter.forward if self.counter else 0), (self.op_count.n if self.op_count else 0)
        t0 = time.process_time()
        yield
        self.seconds[name] = self.seconds.get(name, 0.0) + time.process_time() - t0
        if self.counter:  # a forward's FLOPs where it runs; the backward's (counted at its forward) in backward()
            backward = self.counter.backward - self._claimed if name == BACKWARD else 0
            self._claimed += backward
            self.flops[name] = self.flops.get(name, 0) + self.counter.forward - f0 + backward
        if self.op_count:
            self.ops[name] = self.ops.get(name, 0) + self.op_count.n - n0


PHASES = (
    "sample problems, encode prompts",
    "generate (sample completions)",
    "score",
    "prepare: reference log-probs, advantages",
    "update: forward + loss",
    "update: backward",
    "update: clip + optimizer step",
)
BACKWARD = PHASES[5]


def timed_step(algo, task, n_prompts: int, rng, generator, phase: _Phases) -> None:
    """One step of `grpo_edu.train`'s loop, each phase under ``phase``: the calls of ``train()``'s
    ``sample_batch``, ``collect`` and ``update`` in their order, so the same seeds give the same
    parameters (tests/test_speedrun.py checks it). The default GRPO path (no dynamic sampling, no
    critic, no scheduler: `profile_step` refuses configs that use them)."""
    cfg, policy, opt = algo.config, algo.policy, algo.optimizer
    with phase(PHASES[0]):
        problems = task.sample(n_prompts, rng)
        prompts = task.encode_prompts(problems)
    with phase(PHASES[1]):
        ro = generate(
            algo.sampling_policy(), prompts, group_size=cfg.group_size, max_new_tokens=task.max_answer_length,
            temperature=cfg.temperature, generator=generator, tokenizer=task.tokenizer,
        )  # fmt: skip
    with phase(PHASES[2]):
        scores = task.token_scores(expand(problems, cfg.group_size), ro.completion_ids, ro.mask, kind="outcome")
    with phase(PHASES[3]):
        batch = algo.prepare(ro, scores)
        finite(batch.advantages, "advantages")
    policy.train()
    for _epoch in range(cfg.epochs):
        for idx in minibatches(ro.batch_size, cfg.minibatches, algo.generator):
            with phase(PHASES[4]):
                loss, stats = algo.loss(batch, idx)
                finite(loss.detach(), "policy loss")
            with phase(PHASES[5]):
                opt.zero_grad(set_to_none=True)
                loss.backward()
            with phase(PHASES[6]):
                grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
                finite(grad_norm.detach(), "policy gradient norm")
                opt.step()
                [float(v) for v in (grad_norm, *stats.values())]  # the step's log, as update() reads it
    policy.eval()
    return ro, batch


def matmul_peak(d_model: int, mlp_ratio: int, rows: int = 1024, repeats: int = 15) -> tuple[float, tuple]:
    """The best GFLOP/s of ``torch.mm`` over the model's own products at ``rows`` positions: the
    forward's ``[rows, d] @ [d, 3d | d | m d]``, ``[rows, m d] @ [m d, d]`` and the backward's
    weight gradients ``[d | m d, rows] @ [rows, m d | d]``. Returns ``(GFLOP/s, (m, k, n))``."""
    d, h = d_model, mlp_ratio * d_model
    shapes = [(rows, d, 3 * d), (rows, d, d), (rows, d, h), (rows, h, d), (d, rows, h), (h, rows, d)]
    best = (0.0, shapes[0])
    for m, k, n in shapes:
        a, b = torch.randn(m, k), torch.randn(k, n)
        fastest = float("inf")
        for _ in range(repeats):
            t0 = time.process_time()
            for _ in range(10):
                torch.mm(a, b)
            fastest = min(fastest, (time.process_time() - t0) / 10)
        best = max(best, (2 * m * k * n / fastest / 1e9, (m, k, n)))
    return best


def profile_step(preset="cpu", steps: int = 10, warmup: int = 3, seed: int = 0, config: dict | None = None) -> dict:
    """Profile ``steps`` GRPO steps (after ``warmup`` untimed ones) from the preset's cached reference.

    Returns ``{"phases": {name: {"seconds", "flops", "ops"}} per step, "step": CPU seconds of a whole
    step (median), "evaluation": {"seconds", "flops", "ops"} of one held-out evaluation, "eval_every",
    "peak": (GFLOP/s, shape), "op_seconds": the CPU time of one trivial ATen op, ...}``. The op counts
    come from one more step run under a dispatch counter (whose time is not counted)."""
    preset = resolve_preset(preset) if not isinstance(preset, str) else get_preset(preset)
    setup_torch(preset, seed)
    task = make_task(preset)
    reference = reference_policy(preset, task=task, progress=False)
    policy = copy.deepcopy(reference)
    algo = make_algorithm("grpo", **(config or {}))
    cfg = algo.config
    if cfg.dynamic_sampling or cfg.warmup_steps or cfg.sampler_dtype is not None or cfg.gradient_accumulation_steps > 1:
        raise ValueError(
            "profile_step times the default path: no dynamic_sampling, warmup_steps, sampler_dtype or "
            "gradient_accumulation_steps"
        )
    algo.setup(policy, reference, generator=torch.Generator().manual_seed(seed + 1))
    rng, generator = np.random.default_rng(seed), torch.Generator().manual_seed(seed)
    n_prompts = preset.prompts(cfg.group_size)
    for _ in range(warmup):
        timed_step(algo, task, n_prompts, rng, generator, _Phases())
    counter = FlopCounter(policy, reference)
    per_step, totals = [], []
    parts = {"reference": [], "policy": []}  # two phases' main part, timed again apart on the same batch
    for _ in range(steps):
        phase = _Phases(counter)
        t0 = time.process_time()
        ro, batch = timed_step(algo, task, n_prompts, rng, generator, phase)
        totals.append(time.process_time() - t0)
        per_step.append(phase)
        t0 = time.process_time()
        with torch.no_grad():
            reference_logprobs(reference, ro, cfg.beta, cfg.kl_placement)
        parts["reference"].append(time.process_time() - t0)
        idx = minibatches(ro.batch_size, cfg.minibatches, torch.Generator().manual_seed(0))[0]
        t0 = time.process_time()
        policy_logprobs(policy, batch, idx)
        parts["policy"].append((time.process_time() - t0) * cfg.epochs * cfg.minibatches)
    with _OpCount() as ops:
        counted = _Phases(ops=ops)
        timed_step(algo, task, n_prompts, rng, generator, counted)
        n0 = ops.n
        evaluate(policy, task)
        eval_ops = ops.n - n0
    eval_seconds, f0 = [], counter.forward
    for _ in range(3):
        t0 = time.process_time()
        evaluate(policy, task)
        eval_seconds.append(time.process_time() - t0)
    eval_flops = (counter.forward - f0) // 3
    counter.close()
    phases = {
        name: {
            "seconds": statistics.median(p.seconds[name] for p in per_step),
            "flops": per_step[0].flops[name],
            "ops": counted.ops[name],
        }
        for name in PHASES
    }
    loop = statistics.median(t - sum(p.seconds.values()) for t, p in zip(totals, per_step, strict=True))
    a, b = torch.ones(1), torch.ones(1)
    t0 = time.process_time()
    for _ in range(2000):
        torch.add(a, b)
    op_seconds = (time.process_time() - t0) / 2000
    return {
        "preset": preset.name,
        "config": dict(config or {}),
        "sequences": preset.sequences_per_step,
        "group_size": cfg.group_size,
        "updates": cfg.epochs * cfg.minibatches,
        "phases": phases,
        "parts": {k: statistics.median(v) for k, v in parts.items()},
        "step": sum(p["seconds"] for p in phases.values()) + loop,  # the phases' medians and the loop's
        "evaluation": {"seconds": statistics.median(eval_seconds), "flops": eval_flops, "ops": eval_ops},
        "eval_problems": len(task.eval_problems()),
        "eval_every": preset.eval_every,
        "peak": matmul_peak(preset.model.d_model, preset.model.mlp_ratio),
        "op_seconds": op_seconds,
        "steps": steps,
        "threads": torch.get_num_threads(),
        "kernel": torch.backends.cpu.get_cpu_capability(),
    }


def format_profile(r: dict) -> str:
    """The profile as a table: each phase's CPU ms per step and share, GFLOP, achieved GFLOP/s, the
    ms its FLOPs take at the measured peak, and its ATen operations; then the step's limit."""
    step, (peak, shape) = r["step"], r["peak"]
    ev, every = r["evaluation"], r["eval_every"]
    lines = [
        f"one GRPO step, preset {r['preset']}: {r['sequences']} completions ({r['sequences'] // r['group_size']} "
        f"prompts x {r['group_size']}), {r['updates']} updates;",
        f"{r['threads']} thread(s), ATen kernel {r['kernel']}; CPU ms, each phase's median over {r['steps']} steps",
        f"{'phase':44s} {'ms':>7s} {'share':>6s} {'GFLOP':>6s} {'GFLOP/s':>8s} {'ms at peak':>10s} {'ops':>6s}",
    ]
    rows = [(n, p["seconds"], p["flops"], p["ops"]) for n, p in r["phases"].items()]
    rows.append(
        (f"evaluation ({r['eval_problems']} problems) / {every} steps", ev["seconds"] / every, ev["flops"] / every,
         round(ev["ops"] / every))
    )  # fmt: skip
    total = step + ev["seconds"] / every
    of_which = {PHASES[3]: ("reference", "the reference's forward*"), PHASES[4]: ("policy", "the policy's forward*")}
    for name, sec, flops, ops in rows:
        rate = f"{flops / sec / 1e9:8.1f}" if flops else f"{'':8s}"
        lines.append(
            f"{name:44s} {1e3 * sec:7.2f} {sec / total:6.1%} {flops / 1e9:6.3f} {rate} {1e3 * flops / peak / 1e9:10.2f} {ops:6d}"
        )
        if name in of_which:  # timed again apart, on the same batch
            key, label = of_which[name]
            part = r["parts"][key]
            lines.append(f"{'  of which ' + label:44s} {1e3 * part:7.2f} {part / total:6.1%}")
    flops, ops = sum(f for _, _, f, _ in rows), sum(o for *_, o in rows)
    other = total - sum(s for _, s, _, _ in rows)
    lines.append(f"{'the loop around the phases':44s} {1e3 * other:7.2f} {other / total:6.1%}")
    lines.append(f"{'step, evaluation included':44s} {1e3 * total:7.2f} {1:6.1%} {flops / 1e9:6.3f} "
                 f"{flops / total / 1e9:8.1f} {1e3 * flops / peak / 1e9:10.2f} {ops:6d}")  # fmt: skip
    lines.append("* timed again apart, on the same batch: the rest of the phase is the loss's arithmetic")
    lines.append(
        f"peak of torch.mm on the step's shapes: {peak:.1f} GFLOP/s at {shape[0]}x{shape[1]} @ {shape[1]}x{shape[2]}; "
        f"the step's FLOPs"
    )
    lines.append(f"at that peak take {1e3 * flops / peak / 1e9:.1f} ms, {flops / peak / 1e9 / total:.0%} of the step")
    lines.append(
        f"{ops} ATen operations a step, at {1e6 * r['op_seconds']:.1f} us for the cheapest (a 1-element add): "
        f"{1e3 * ops * r['op_seconds']:.1f} ms of dispatch at least"
    )
    return "\n".join(lines)
