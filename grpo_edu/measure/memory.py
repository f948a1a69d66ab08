"""What one training step holds in memory: MEASURED (profiler / CUDA counters, run the code)
and COMPUTED (a formula from parameter counts); each docstring says which number is which."""

from __future__ import annotations

import contextlib
import copy
import gc
import os
import sys

import numpy as np
import torch

from .. import functional as Fn
from ..algorithms import make_algorithm
from ..model import ModelConfig, TinyGPT
from ..rollout import completion_values, sample_batch
from ..train import collect, minibatches, update
from ..warmstart.presets import make_task, resolve_preset
from .common import progress_bar, rngs

SWEEP = (  # (model, sequences per step): from activations dominating to parameters dominating
    (ModelConfig(d_model=64, n_layers=2, n_heads=4, max_seq_len=12), 512),
    (ModelConfig(d_model=256, n_layers=4, n_heads=4, max_seq_len=12), 64),
    (ModelConfig(d_model=512, n_layers=8, n_heads=8, max_seq_len=12), 16),
)


def peak_memory(*phases, device="cpu") -> tuple[list[int], str]:
    """MEASURED: peak bytes allocated above the start level during each of ``phases`` (callables
    run in order; a phase's peak includes what earlier ones left). CUDA: ``max_memory_allocated``
    per phase. CPU: the running sum of ``torch.profiler``'s ``[memory]`` events (+alloc, -free)
    in time order, its maximum in each phase's span. The profiler misses frees of tensors
    allocated before it started: free those first."""
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
    events = prof.profiler.kineto_results.events()
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
    """fd 2 at /dev/null: the profiler's C++ side prints 'profiler_start/stop' lines to it."""
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


def _storage(t) -> tuple[int, int]:
    return t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()


def _storage_bytes(tensors) -> int:
    """Bytes of the unique storages of ``tensors``."""
    return sum(dict(_storage(t) for t in tensors if isinstance(t, torch.Tensor) and t.numel()).values())


def _param_bytes(model) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters()) if model is not None else 0


def _state_tensors(algo):
    """Weights, grads and optimizer states of every model the algorithm holds."""
    c = algo.critic
    for model, opt in ((algo.policy, algo.optimizer), (c and c.model, c and c.optimizer), (algo.reference, None)):
        for p in model.parameters() if model is not None else ():
            yield from (p, p.grad)
        for state in opt.state.values() if opt is not None else ():
            yield from state.values()


def _activation_bytes(algo, ro, scores) -> dict:
    """MEASURED with saved_tensors_hooks: bytes autograd saves for backward in the loss
    forward of one minibatch (policy: of its first micro-batch with gradient_accumulation_steps, the
    graph one backward frees; critic), unique storages, parameters excluded."""
    batch = algo.prepare(ro, scores)
    idx = minibatches(ro.batch_size, algo.config.minibatches, algo.generator)[0].to(ro.mask.device)
    accumulate = getattr(algo.config, "gradient_accumulation_steps", 1) > 1
    rows = algo.micro_batches(batch, idx)[0][0] if accumulate else idx
    critic = algo.critic.model if algo.critic is not None else None
    params = {_storage(p)[0] for m in (algo.policy, critic, algo.reference) if m is not None for p in m.parameters()}

    def saved(fn):  # bytes of the storages autograd saves while fn runs, parameters excluded
        seen = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: seen.append(_storage(t)) or t, lambda t: t):
            fn()
        return sum(dict(s for s in seen if s[0] not in params).values())

    def critic_loss():
        old = batch.old_values[idx] if batch.old_values is not None else None
        values = completion_values(critic, ro.select(idx))
        return Fn.value_loss(values, batch.returns[idx], batch.mask[idx], old, getattr(algo.config, "value_clip", None))

    return {"policy": saved(lambda: algo.loss(batch, rows)), "critic": saved(critic_loss) if critic is not None else 0}


def setup_step(algorithm, model, preset, seed, with_reference=None, device=None, share_prompts=True):
    """(algorithm, device, sample): ``algorithm`` set up on a copy of ``model`` (a module) or on
    a RANDOM-init policy (``model`` a config, default the preset's), the reference (a copy) only
    if it uses one (beta > 0); ``sample(n)`` collects n sequences of the task as train() does."""
    preset = resolve_preset(preset)
    task, device = make_task(preset), torch.device(device or preset.device)
    if isinstance(model, torch.nn.Module):
        policy = copy.deepcopy(model)
    else:
        torch.manual_seed(seed)
        policy = TinyGPT(ModelConfig(**model) if isinstance(model, dict) else model or preset.model).to(device)
    algo = make_algorithm(algorithm) if isinstance(algorithm, str) else algorithm
    if with_reference is None:
        with_reference = getattr(algo.config, "beta", 0) > 0 and algo.config.kl_placement != "none"
    reference = copy.deepcopy(policy) if with_reference else None
    algo = algo.setup(policy, reference, generator=torch.Generator().manual_seed(seed))
    G, (rng, gen) = algo.config.group_size, rngs(seed, device)
    sample = lambda n: sample_batch(policy, task, n // G, G, rng, gen, share_prompts=share_prompts)  # noqa: E731
    return algo, device, lambda n: collect(algo, lambda: sample(n))


def step_memory(
    algorithm_name,
    model_config=None,
    preset="cpu",
    batch_size=None,
    include_rollout=True,
    device=None,
    seed=0,
    with_reference=None,
    share_prompts=None,
) -> dict:
    """Peak memory of one training step (rollout, then ``update``), fp32, of a RANDOM-init policy
    of ``model_config`` (default the preset's; memory does not depend on training) with the
    algorithm's default config on ``batch_size`` sequences of the preset's task (default: the
    preset's sequences_per_step). The reference is held only if used (beta > 0) unless
    ``with_reference`` says. ``share_prompts``: None as
    the rollout's default (a group runs its prompt once); False: every row its own, so
    two algorithms differ only by their state. After one warm-up step (Adam m, v exist):

    MEASURED: "measured_peak_step" (update() only) and "measured_peak_with_rollout" (None
    without ``include_rollout``) = "persistent" (live weights, grads, Adam states, counted) plus
    ``peak_memory``; breakdown["activations"]: saved_tensors_hooks bytes of the larger of
    the policy's and the critic's loss graph of one minibatch (never alive together).
    COMPUTED, P parameters of 4 bytes: params = grads = 4P, optimizer_state = 8P (Adam m + v),
    reference 4P, critic alike; "analytic_total" their sum (backward frees activations as it
    allocates grads: lower; unsaved temporaries such as logits: higher).
    """
    batch_size = resolve_preset(preset).sequences_per_step if batch_size is None else batch_size
    share = share_prompts is not False  # None: the rollout's default, shared
    algo, device, sample = setup_step(algorithm_name, model_config, preset, seed, with_reference, device, share)
    policy, G = algo.policy, algo.config.group_size
    if batch_size % G:
        raise ValueError(f"batch_size={batch_size} is not a multiple of group_size={G}")
    rollout = lambda: sample(batch_size)[:2]  # noqa: E731  (rollout, scores) of batch_size sequences
    update(algo, *rollout())  # warm-up: the optimizers' states now exist
    acts = _activation_bytes(algo, *rollout())
    held = {} if include_rollout else {"batch": rollout()}
    for opt in (algo.optimizer, algo.critic.optimizer if algo.critic is not None else None):
        if opt is not None:  # update() drops them too, before its first backward
            opt.zero_grad(set_to_none=True)
    gc.collect()
    persistent = _storage_bytes(_state_tensors(algo)) + _storage_bytes(held.get("batch", ()))
    phases = [lambda: held.update(batch=rollout())] if include_rollout else []
    peaks, method = peak_memory(*phases, lambda: update(algo, *held.pop("batch")), device=device)
    pb, rb = _param_bytes(policy), _param_bytes(algo.reference)
    cb = _param_bytes(algo.critic.model if algo.critic is not None else None)
    breakdown = dict(policy_params=pb, policy_grads=pb, optimizer_state=2 * pb, reference_params=rb)
    breakdown.update(critic_params=cb, critic_grads=cb, critic_optimizer_state=2 * cb, activations=max(acts.values()))
    return {
        "algorithm": algo.name,
        "device": str(device),
        "batch_size": batch_size,
        "model": policy.config.to_dict(),
        "params": sum(p.numel() for p in policy.parameters()),
        "measured_peak_step": persistent + peaks[-1],
        "measured_peak_with_rollout": persistent + max(peaks) if include_rollout else None,
        "persistent": persistent,
        "breakdown": breakdown,
        "analytic_total": sum(breakdown.values()),
        "activations_by_model": acts,
        "method": method + " + counted persistent tensors",
    }


def memory_sweep(
    algorithms=("ppo", "grpo"),
    model_configs=None,
    batch_sizes=None,
    preset="cpu",
    device=None,
    seed=0,
    progress=True,
    share_prompts=False,
) -> list[dict]:
    """``step_memory`` (rollout excluded) over zipped (model, batch) pairs (default ``SWEEP``),
    every row running its own prompt by default, so that PPO / GRPO is the critic alone. One
    row per pair: "<algorithm>_measured", "_analytic", "_activations"; "ratio_measured" and
    "ratio_analytic" = first / second: PPO/GRPO grows from ~1 (activations dominate) towards
    36P/20P = 1.8 (parameters dominate)."""
    model_configs = model_configs or [m for m, _ in SWEEP]
    batch_sizes = batch_sizes or [b for _, b in SWEEP][: len(model_configs)]
    if len(batch_sizes) != len(model_configs):
        raise ValueError(f"need one batch size per model config, got {len(batch_sizes)} for {len(model_configs)}")
    rows, kw = [], dict(include_rollout=False, device=device, seed=seed, share_prompts=share_prompts)
    for cfg, bs in progress_bar(list(zip(model_configs, batch_sizes, strict=True)), progress, "memory sweep"):
        row = {}
        for name in algorithms:
            m = step_memory(name, cfg, preset, bs, **kw)
            row.update(d_model=m["model"]["d_model"], n_layers=m["model"]["n_layers"], params=m["params"])
            row["batch_size"] = bs
            row[f"{name}_measured"], row[f"{name}_analytic"] = m["measured_peak_step"], m["analytic_total"]
            row[f"{name}_activations"] = m["breakdown"]["activations"]
        if len(algorithms) >= 2:
            for kind in ("measured", "analytic"):
                row[f"ratio_{kind}"] = row[f"{algorithms[0]}_{kind}"] / row[f"{algorithms[1]}_{kind}"]
        rows.append(row)
    return rows
