"""Training the exported model with TRL's GRPOTrainer, logged like grpo_edu's train()."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import weakref
from dataclasses import replace

from ._common import _require, batch_of, quiet
from .data import reward_fn, task_dataset
from .export import from_hf, to_hf
from .knobs import trl_config


def make_trainer(
    policy,
    task,
    grpo_config,
    cycles: int,
    sequences_per_step: int | None = None,
    seed: int = 0,
    reward_kind: str = "outcome",
    reference=None,
    callbacks=(),
    approximate=(),
    **trainer_kwargs,
):
    """A ``trl.GRPOTrainer`` that trains an export of ``policy`` for ``cycles`` generations of
    ``sequences_per_step`` completions (None: the cpu preset's) on fresh training problems of ``task``, with the knobs
    of ``grpo_config`` (`trl_config`). The reference model (``beta > 0``) is an export of
    ``reference`` (default: the policy), saved under a temp dir for TRL to load."""
    trl = _require("trl")
    G, sequences_per_step = grpo_config.group_size, batch_of(sequences_per_step)
    steps_per_cycle = grpo_config.epochs * grpo_config.minibatches
    args = trl_config(
        grpo_config,
        sequences_per_step=sequences_per_step,
        approximate=approximate,
        **{
            "max_steps": cycles * steps_per_cycle,
            "seed": seed,
            "max_completion_length": task.max_answer_length,
            **trainer_kwargs,
        },
    )
    with quiet():
        ref_dir = tempfile.mkdtemp(prefix="grpo-edu-ref-")  # removed with the trainer
        to_hf(reference if reference is not None else policy, ref_dir)
        model, tok = to_hf(policy)
        model.config._name_or_path = ref_dir  # TRL builds pi_ref from here
        data = task_dataset(task, cycles * sequences_per_step // G, seed)
        trainer = trl.GRPOTrainer(
            model=model,
            processing_class=tok,
            reward_funcs=reward_fn(task, reward_kind),
            train_dataset=data,
            args=args,
            callbacks=list(callbacks),
        )
    trainer.remove_callback(_require("transformers").PrinterCallback)  # logs stay in state.log_history
    weakref.finalize(trainer, shutil.rmtree, ref_dir, True)
    return trainer


_TRL_METRICS = {
    "reward": "reward",
    "reward_std": "reward_std",
    "kl": "kl",
    "entropy": "entropy",
    "clip_ratio/region_mean": "clip_ratio",
    "completions/mean_length": "completion_length",
    "frac_reward_zero_std": "frac_reward_zero_std",
    "grad_norm": "grad_norm",
    "loss": "loss",
}


def train_trl(
    policy,
    task,
    grpo_config,
    cycles: int,
    sequences_per_step: int | None = None,
    seed: int = 0,
    eval_every: int = 5,
    reward_kind: str = "outcome",
    reference=None,
    name: str = "TRL GRPO",
    **trainer_kwargs,
):
    """Train with TRL's GRPOTrainer and record a `grpo_edu.train.History` like `grpo_edu.train`:
    greedy held-out accuracy (``evaluate`` on the model imported back with `from_hf`) every
    ``eval_every`` cycles, training seconds without evaluation, TRL's logged metrics under
    the course's names. Returns ``(history, trainer)``."""
    transformers = _require("transformers")
    from ..evaluation import evaluate
    from ..train import History

    sequences_per_step = batch_of(sequences_per_step)

    per_cycle = grpo_config.epochs * grpo_config.minibatches
    hist = History(
        name, {"algorithm": "trl-grpo", **grpo_config.to_dict(), "sequences_per_step": sequences_per_step, "seed": seed}
    )
    clock = {"train": 0.0, "mark": None}

    def record(step):
        t0 = time.perf_counter()
        acc = evaluate(from_hf(trainer.model), task)
        hist.evals.append(
            {"step": step, "samples": step * sequences_per_step, "seconds": clock["train"], "accuracy": acc}
        )
        return time.perf_counter() - t0

    class Eval(transformers.TrainerCallback):
        def on_train_begin(self, args, state, control, **kw):
            record(0)
            clock["mark"] = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            if state.global_step % per_cycle:
                return
            now = time.perf_counter()
            clock["train"] += now - clock["mark"]
            cycle = state.global_step // per_cycle
            if cycle % eval_every == 0 or cycle == cycles:
                record(cycle)
            clock["mark"] = time.perf_counter()

    trainer = make_trainer(
        policy,
        task,
        grpo_config,
        cycles,
        sequences_per_step,
        seed,
        reward_kind,
        reference,
        callbacks=[Eval()],
        **trainer_kwargs,
    )
    with quiet():
        trainer.train()
    steps: dict[int, dict] = {}
    for log in trainer.state.log_history:
        if "step" not in log or "train_runtime" in log:
            continue
        cycle = (log["step"] - 1) // per_cycle + 1
        rec = steps.setdefault(cycle, {"step": cycle, "samples": cycle * sequences_per_step})
        for k, ours in _TRL_METRICS.items():
            if k in log and ours not in rec:
                rec[ours] = float(log[k])
    hist.steps = [steps[k] for k in sorted(steps)]
    return hist, trainer


def rank_trainer(model_dir, task, cfg, sequences_per_step: int, max_steps: int, seed: int, rollout_func=None):
    """A GRPOTrainer for the exported model in ``model_dir`` whose generation batch is
    ``sequences_per_step`` rows over all ranks (per rank: that / world / minibatches)."""
    trl, transformers = _require("trl"), _require("transformers")
    from .export import head_bias_classes, hf_tokenizer

    head_bias_classes()  # registers the head-bias GPT-2, in case the policy has one
    world = int(os.environ.get("WORLD_SIZE", "1"))
    # every parameter is used: ddp_find_unused_parameters=False spares DDP a pass over the graph
    args = trl_config(
        cfg,
        sequences_per_step=sequences_per_step,
        max_steps=max_steps,
        seed=seed,
        max_completion_length=task.max_answer_length,
        ddp_find_unused_parameters=False,
    )
    # trl_config sizes one process; N ranks each hold sequences_per_step / N of the generation batch
    args = replace(
        args,
        per_device_train_batch_size=sequences_per_step // (world * cfg.minibatches * cfg.gradient_accumulation_steps),
        generation_batch_size=None,
    )
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir)
    model.config._name_or_path = str(model_dir)  # TRL builds pi_ref (beta > 0) from here
    n_prompts = -(-max_steps // (cfg.epochs * cfg.minibatches)) * sequences_per_step // cfg.group_size
    trainer = trl.GRPOTrainer(
        model=model,
        processing_class=hf_tokenizer(),
        reward_funcs=reward_fn(task),
        train_dataset=task_dataset(task, n_prompts, seed),
        args=args,
        rollout_func=rollout_func,
    )
    trainer.remove_callback(transformers.PrinterCallback)
    return trainer
