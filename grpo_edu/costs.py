"""What one training step costs: peak memory (measured and analytic), passes and seconds.

    step_memory("ppo"), memory_sweep  peak memory of one training step, measured and analytic
    step_cost("grpo")                 forward/backward passes and seconds of one step

Each docstring says which numbers are MEASURED (run the code, read a counter) and which
are COMPUTED (a formula from parameter counts).
"""

from __future__ import annotations

import contextlib
import copy
import gc
import os
import statistics
import sys
import time

import numpy as np
import torch

from . import functional as Fn
from .diagnostics import _rngs, _sample, _tqdm, _trainable  # noqa: F401
from .model import ModelConfig, TinyGPT
from .rollout import completion_values
from .train import collect

SWEEP = (  # (model, sequences per step): from activations dominating to parameters dominating
    (ModelConfig(d_model=64, n_layers=2, n_heads=4, max_seq_len=12), 512),
    (ModelConfig(d_model=256, n_layers=4, n_heads=4, max_seq_len=12), 64),
    (ModelConfig(d_model=512, n_layers=8, n_heads=8, max_seq_len=12), 16),
)


# ----------------------------------------------------------------------- memory


def peak_memory(*phases, device="cpu") -> tuple[list[int], str]:
    """MEASURED: peak bytes allocated above the level at the start, during each phase.

    ``phases``: callables run in order; a phase's peak includes what earlier ones left.
    CUDA: ``torch.cuda.reset_peak_memory_stats`` + ``max_memory_allocated`` per phase.
    CPU: ``torch.profiler(profile_memory=True)``; the running sum of the ``[memory]`` events
    (+nbytes alloc, -nbytes free) in time order, its maximum inside each phase's
    ``record_function`` span. The profiler misses frees of tensors allocated before it
    started: free those first. Without that profiler API: peak RSS (``_rss_peaks``).
    """
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        base, peaks = torch.cuda.memory_allocated(device), []
        for fn in phases:
            torch.cuda.reset_peak_memory_stats(device)
            fn()
            torch.cuda.synchronize(device)
            peaks.append(torch.cuda.max_memory_allocated(device) - base)
        return peaks, "torch.cuda.max_memory_allocated"
    from torch.profiler import ProfilerActivity, profile, record_function

    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        for i, fn in enumerate(phases):
            with record_function(f"grpo_edu_phase{i}"):
                fn()
    try:
        events = prof.profiler.kineto_results.events()
    except AttributeError:  # the profiler API moved: re-run the phases under the RSS high-water mark
        return _rss_peaks(phases), "peak RSS (/proc/self/status VmHWM; coarse)"
    spans = {e.name(): (e.start_ns(), e.end_ns()) for e in events if e.name().startswith("grpo_edu_phase")}
    mem = sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]")
    t, level = np.array([m[0] for m in mem], dtype=np.int64), np.cumsum([m[1] for m in mem], dtype=np.int64)
    peaks = []
    for i in range(len(phases)):
        start, end = spans[f"grpo_edu_phase{i}"]
        a, b = np.searchsorted(t, start), np.searchsorted(t, end, "right")
        peaks.append(max([int(level[a - 1]) if a else 0] + level[a:b].tolist()))
    return peaks, "torch.profiler profile_memory (running sum of [memory] events)"


@contextlib.contextmanager
def _quiet_stderr():
    """The profiler's C++ side prints 'profiler_start/stop' lines straight to file
    descriptor 2 (they would show up in notebooks); point fd 2 at /dev/null meanwhile."""
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no real fd 2 (some embedded interpreters): nothing to silence
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _rss_peaks(phases) -> list[int]:
    """Fallback, MEASURED: VmHWM (peak resident set) growth per phase, reset via clear_refs.
    Coarse: includes allocator slack and pages torch did not hand back to the OS."""
    def status(key):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key))

    base, peaks = status("VmRSS:"), []
    for fn in phases:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset the high-water mark to the current RSS
        fn()
        peaks.append(status("VmHWM:") - base)
    return peaks


def _storage_bytes(tensors) -> int:
    seen = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
            for t in tensors if isinstance(t, torch.Tensor) and t.numel()}
    return sum(seen.values())


def _param_bytes(model) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters()) if model is not None else 0


def _state_tensors(algo):
    """Weights, grads and optimizer states of every model the algorithm holds."""
    for model, opt in ((algo.policy, algo.optimizer), (algo.critic, algo.critic_optimizer), (algo.reference, None)):
        for p in model.parameters() if model is not None else ():
            yield from (p, p.grad)
        for state in opt.state.values() if opt is not None else ():
            yield from state.values()


def _activation_bytes(algo, ro, scores) -> dict:
    """MEASURED with saved_tensors_hooks: bytes autograd saves for backward in the loss
    forward of one minibatch (policy; critic), unique storages, parameters excluded."""
    batch = algo.prepare(ro, scores)
    idx = algo.minibatch_indices(ro.batch_size)[0].to(ro.mask.device)
    params = {p.untyped_storage().data_ptr() for m in (algo.policy, algo.critic, algo.reference)
              if m is not None for p in m.parameters()}

    def saved(fn):
        seen = {}

        def pack(t):
            if t.untyped_storage().data_ptr() not in params:
                seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            fn()
        return sum(seen.values())

    out = {"policy": saved(lambda: algo.loss(batch, idx)), "critic": 0}
    if algo.critic is not None:
        old = batch.old_values[idx] if batch.old_values is not None else None
        out["critic"] = saved(lambda: Fn.value_loss(completion_values(algo.critic, ro.select(idx)), batch.returns[idx],
                                                    batch.mask[idx], old, getattr(algo.config, "value_clip", None)))
    return out


def _setup(algorithm, policy, with_reference, seed):
    """An algorithm set up on ``policy``; the reference (a copy) only if it uses one (beta > 0)."""
    from .algorithms import make_algorithm

    algo = make_algorithm(algorithm) if isinstance(algorithm, str) else algorithm
    if with_reference is None:
        with_reference = algo.config.beta > 0 and algo.config.kl_placement != "none"
    reference = copy.deepcopy(policy) if with_reference else None
    return algo.setup(policy, reference, generator=torch.Generator().manual_seed(seed))


def _preset_and_task(preset):
    from .presets import get_preset, make_task

    preset = get_preset(preset) if isinstance(preset, str) else preset
    return preset, make_task(preset)


def step_memory(algorithm_name, model_config=None, preset="cpu", batch_size=512, include_rollout=True,
                device=None, seed=0, with_reference=None) -> dict:
    """Peak memory of one full training step (rollout, then ``algorithm.update``), fp32.

    A RANDOM-init policy of ``model_config`` (default: the preset's; memory does not depend
    on training), synthetic prompts of the preset's task, the algorithm's default config,
    ``batch_size`` sequences. The reference is held only by algorithms that use it (beta > 0:
    PPO, GRPO) unless ``with_reference`` says. One warm-up step (Adam m, v exist), then:

    MEASURED: "measured_peak_step" (during update(), rollout excluded) and
    "measured_peak_with_rollout" (None without ``include_rollout``) = "persistent" (bytes
    of the live weights, grads, Adam states of every model, counted) + ``peak_memory``.
    breakdown["activations"]: saved_tensors_hooks bytes of the largest graph alive at once
    (policy or critic loss of one minibatch: the critic's backward runs after the policy's,
    so they never coexist), parameters excluded; both in "activations_by_model".
    COMPUTED, with P parameters of 4 bytes: policy_params = policy_grads = 4P,
    optimizer_state = 8P (Adam m + v), reference_params = 4P, critic_* alike (0 if absent);
    "analytic_total" = the breakdown's sum. An estimate: backward frees activations while
    it allocates grads (lower), temporaries such as logits are not saved (higher).
    """
    preset, task = _preset_and_task(preset)
    cfg = ModelConfig(**model_config) if isinstance(model_config, dict) else (model_config or preset.model)
    device = torch.device(device or preset.device)
    torch.manual_seed(seed)
    policy = TinyGPT(cfg).to(device)
    algo = _setup(algorithm_name, policy, with_reference, seed)
    G = algo.config.group_size
    if batch_size % G:
        raise ValueError(f"batch_size={batch_size} is not a multiple of group_size={G}")
    rng, gen = _rngs(seed, device)

    def rollout():  # (rollout, scores) of batch_size sequences, as train() samples them
        return collect(policy, task, algo, batch_size // G, rng, gen)[:2]

    algo.update(*rollout())  # warm-up: the optimizers' states now exist
    acts = _activation_bytes(algo, *rollout())
    held = {} if include_rollout else {"batch": rollout()}
    for opt in (algo.optimizer, algo.critic_optimizer):
        if opt is not None:  # update() drops them too, before its first backward
            opt.zero_grad(set_to_none=True)
    gc.collect()
    persistent = _storage_bytes(_state_tensors(algo)) + _storage_bytes(held.get("batch", ()))
    phases = [lambda: held.update(batch=rollout())] if include_rollout else []
    peaks, method = peak_memory(*phases, lambda: algo.update(*held.pop("batch")), device=device)
    pb, rb, cb = _param_bytes(policy), _param_bytes(algo.reference), _param_bytes(algo.critic)
    breakdown = {"policy_params": pb, "policy_grads": pb, "optimizer_state": 2 * pb, "reference_params": rb,
                 "critic_params": cb, "critic_grads": cb, "critic_optimizer_state": 2 * cb,
                 "activations": max(acts.values())}
    return {"algorithm": algo.name, "device": str(device), "batch_size": batch_size, "model": cfg.to_dict(),
            "params": sum(p.numel() for p in policy.parameters()), "measured_peak_step": persistent + peaks[-1],
            "measured_peak_with_rollout": persistent + max(peaks) if include_rollout else None,
            "persistent": persistent, "breakdown": breakdown, "analytic_total": sum(breakdown.values()),
            "activations_by_model": acts, "method": method + " + counted persistent tensors"}


def memory_sweep(algorithms=("ppo", "grpo"), model_configs=None, batch_sizes=None, preset="cpu",
                 device=None, seed=0, progress=True) -> list[dict]:
    """``step_memory`` (rollout excluded) over (model, batch) pairs, zipped (default ``SWEEP``).

    One row per pair: "<algorithm>_measured" (MEASURED), "<algorithm>_analytic" (COMPUTED),
    "<algorithm>_activations", and "ratio_measured" / "ratio_analytic" = first algorithm /
    second. PPO/GRPO grows from ~1 (activations dominate) towards 36P/20P = 1.8 (parameters).
    """
    model_configs = model_configs or [m for m, _ in SWEEP]
    batch_sizes = batch_sizes or [b for _, b in SWEEP][: len(model_configs)]
    if len(batch_sizes) != len(model_configs):
        raise ValueError(f"need one batch size per model config, got {len(batch_sizes)} for {len(model_configs)}")
    rows = []
    for cfg, bs in _tqdm(list(zip(model_configs, batch_sizes, strict=True)), progress, "memory sweep"):
        row = {}
        for name in algorithms:
            m = step_memory(name, cfg, preset=preset, batch_size=bs, include_rollout=False, device=device, seed=seed)
            row.update(d_model=m["model"]["d_model"], n_layers=m["model"]["n_layers"], params=m["params"],
                       batch_size=bs)
            row.update({f"{name}_measured": m["measured_peak_step"], f"{name}_analytic": m["analytic_total"],
                        f"{name}_activations": m["breakdown"]["activations"]})
        if len(algorithms) >= 2:
            for kind in ("measured", "analytic"):
                row[f"ratio_{kind}"] = row[f"{algorithms[0]}_{kind}"] / row[f"{algorithms[1]}_{kind}"]
        rows.append(row)
    return rows


# ----------------------------------------------------------------------- passes and time


def step_cost(algorithm_name, preset="cpu", reference=None, n_steps=5, seed=0, with_reference=None) -> dict:
    """MEASURED: what one training step (``train.collect`` then ``algorithm.update``) does.

    Counted by hooks: forward calls of the policy / reference / critic modules, and backward
    passes (a post-accumulate-grad hook on each trained model's first parameter fires once
    per backward); per step and per update (optimizer step). The generation phase (one
    policy forward per decoded token, KV cache) is counted apart. Wall seconds of
    generation and update: medians over ``n_steps`` after one uncounted warm-up step.
    ``reference=None``: a random-init policy of the preset (the counts do not depend on
    the weights; the seconds barely, through answer lengths). The reference is attached
    when the algorithm uses it (beta > 0); ``train()`` always attaches it (for the logged
    kl): ``with_reference=True`` counts that forward too.
    """
    if n_steps < 1:
        raise ValueError(f"n_steps must be >= 1, got {n_steps}")
    preset, task = _preset_and_task(preset)
    device = torch.device(preset.device)
    if reference is None:
        torch.manual_seed(seed)
        reference = TinyGPT(preset.model).to(device)
    policy = copy.deepcopy(reference)
    algo = _setup(algorithm_name, policy, with_reference, seed)
    n_prompts = preset.sequences_per_step // algo.config.group_size
    rng, gen = _rngs(seed, device)
    phase, counts, handles = ["generation"], {}, []

    def bump(key):
        counts[phase[0], key] = counts.get((phase[0], key), 0) + 1

    for name, m in (("policy", algo.policy), ("reference", algo.reference), ("critic", algo.critic)):
        if m is not None:
            handles.append(m.register_forward_hook(lambda *_, k=f"{name}_forward": bump(k)))
            p = next(m.parameters())
            if p.requires_grad:
                handles.append(p.register_post_accumulate_grad_hook(lambda _, k=f"{name}_backward": bump(k)))

    def timed(name, fn, *args):
        phase[0] = name
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        out = fn(*args)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return out, time.perf_counter() - t0

    times, updates = [], []
    try:
        for step in range(n_steps + 1):
            if step == 1:
                counts.clear()  # the warm-up step is not counted
            (ro, scores, _), t_gen = timed("generation", collect, policy, task, algo, n_prompts, rng, gen)
            stats, t_upd = timed("update", algo.update, ro, scores)
            times.append((t_gen, t_upd))
            updates.append(stats["updates"])
    finally:
        for h in handles:
            h.remove()
    u = statistics.mean(updates[1:])
    keys = [f"{m}_{d}" for m in ("policy", "reference", "critic") for d in ("forward", "backward")]
    per_step = {k: counts.get(("update", k), 0) / n_steps for k in keys}
    t_gen, t_upd = zip(*times[1:], strict=True)
    return {"algorithm": algo.name, "device": str(device), "n_steps": n_steps,
            "sequences_per_step": n_prompts * algo.config.group_size, "updates_per_step": u,
            "generation_forwards_per_step": counts.get(("generation", "policy_forward"), 0) / n_steps,
            "passes_per_step": per_step, "passes_per_update": {k: v / u for k, v in per_step.items()},
            "seconds_per_step": statistics.median(a + b for a, b in times[1:]),
            "generation_seconds": statistics.median(t_gen), "update_seconds": statistics.median(t_upd)}
