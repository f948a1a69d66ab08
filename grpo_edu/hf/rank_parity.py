"""What N ranks compute in one TRL update, loss type by loss type, against one process.

DDP averages the ranks' gradients, so N ranks minimise the mean of the ranks' losses. Whether
that is one process's loss over the same batch depends on what a rank's loss divides by (TRL
1.16, ``GRPOTrainer._compute_loss``):

    grpo     mean over its sequences of each one's token mean     = one process (equal rows per rank)
    dr_grpo  its token sum / (its sequences x max_completion_length) = one process (a constant)
    dapo     its token sum / (all ranks' tokens, gathered, / N)      = one process (gathered for this)
    bnpo     its token sum / its own tokens                          = the mean of per-rank token means

so bnpo differs from one process as soon as the ranks hold different numbers of tokens.
`injected_update` takes one update on fixed completions (`fixed_completion`, injected through
TRL's ``rollout_func`` hook: sampling differs per rank) so that 1 and N ranks can be compared to
float rounding (``tests/test_hf_distributed.py``, notebook 06).
"""

from __future__ import annotations

import torch

from ._common import _require, quiet
from .names import TRL_LOSS_TYPES, from_trl

PARITY_LOSS_TYPES = tuple(name for name, row in TRL_LOSS_TYPES.items() if row.policy_loss == "clip")
"""TRL loss types whose N-rank update `injected_update` compares with one process's: those of PPO's
clip, one per aggregation ("grpo", "bnpo", "dr_grpo", "dapo"; their rows: `names.TRL_LOSS_TYPES`)."""
LOSS_TYPES = PARITY_LOSS_TYPES  # the name notebook 06 imports


def fixed_completion(task, problem, row: int) -> list[int]:
    """The completion injected at global row ``row`` of a generation batch: right (reward 1) when
    ``row % 3 == 0``, else a wrong digit and EOS, or 1 to 4 wrong digits without EOS (the length
    grows with ``row``), so rewards vary within every group of 4 and the two halves of a batch
    of 12 (two ranks' rows) hold different numbers of tokens."""
    tok = task.tokenizer
    answer = tok.encode(problem.answer, add_eos=True)
    if row % 3 == 0:
        return answer
    wrong = tok.encode(str((int(problem.answer[0]) + 1 + row % 9) % 10))  # never the right first digit
    if row % 3 == 1:
        return wrong + [tok.eos_id]
    return (wrong * task.max_answer_length)[: 1 + (row // 3) % task.max_answer_length]


def injected_update(
    model_dir, task, loss_type: str, rows: int = 12, group_size: int = 4, seed: int = 0, shards: int = 0
) -> dict:
    """One TRL update (``trainer.train()``, one optimizer step) on fixed completions: TRL's
    generation is replaced by ``rollout_func`` (TRL's hook for custom generation), which writes
    `fixed_completion` for each global row of the generation batch of ``rows`` completions, so
    one rank and N ranks see the same completions. Returns this rank's gradient (after DDP's
    average, before the optimizer step), its loss and token count, the advantages of its rows and
    the global rows it held. ``shards`` (one process only): also TRL's ``_compute_loss`` gradient
    on each of ``shards`` contiguous blocks of the prepared batch, what each of that many ranks
    would compute alone before DDP averages them."""
    if loss_type not in PARITY_LOSS_TYPES:
        raise ValueError(f"loss_type must be one of {PARITY_LOSS_TYPES}, got {loss_type!r}")
    transformers = _require("transformers")
    from ..algorithms import GRPOConfig
    from .data import _problem_from_prompt
    from .trainer import rank_trainer

    cfg = GRPOConfig(
        **from_trl(GRPOConfig, {"loss_type": loss_type}),  # our loss_type of TRL's
        unbiased_std=True,
        group_size=group_size,
        epochs=1,
        minibatches=1,
        beta=0.0,
        max_grad_norm=1e9,
        max_length=task.max_answer_length,
    )
    rec: dict = {"loss": [], "tokens": []}

    def rollout(prompts, trainer):
        rank, n = trainer.accelerator.process_index, len(prompts)
        problems = [_problem_from_prompt(task, p) for p in prompts]
        rec["rows"] = list(range(rank * n, (rank + 1) * n))
        return {
            "prompt_ids": [task.tokenizer.encode(p.prompt, add_bos=True) for p in problems],
            "completion_ids": [fixed_completion(task, p, j) for p, j in zip(problems, rec["rows"])],
            "logprobs": None,
        }

    with quiet():
        trainer = rank_trainer(model_dir, task, cfg, rows, max_steps=1, seed=seed, rollout_func=rollout)
        trainer.loss_type = trainer.args.loss_type = loss_type  # TRL's own name, "dapo" included
    initial = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
    score, compute = trainer._generate_and_score_completions, trainer.compute_loss

    def scored(batch):
        rec["inputs"] = score(batch)  # before TRL shuffles the rows
        return rec["inputs"]

    def loss_of(model, inputs, *a, **k):
        loss = compute(model, inputs, *a, **k)
        rec["loss"].append(float(loss.detach()))
        rec["tokens"].append(int(inputs["completion_mask"].sum()))
        return loss

    class Grad(transformers.TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, **kw):
            rec["grad"] = torch.cat([p.grad.detach().flatten().cpu() for p in trainer.model.parameters()])

    trainer._generate_and_score_completions, trainer.compute_loss = scored, loss_of
    trainer.add_callback(Grad())
    with quiet():
        trainer.train()
    acc = trainer.accelerator
    res = {
        "loss_type": loss_type,
        "world_size": acc.num_processes,
        "rank": acc.process_index,
        "rows": rec["rows"],
        "grad": rec["grad"],
        "loss": rec["loss"][0],
        "tokens": rec["tokens"][0],
        "advantages": rec["inputs"]["advantages"].detach().cpu().clone(),
    }
    if shards:
        res["shard_grads"] = _shard_grads(trainer, initial, rec["inputs"], shards)
    return res


def _shard_grads(trainer, initial: dict, inputs: dict, shards: int) -> list[torch.Tensor]:
    """TRL's ``_compute_loss`` gradient on each contiguous block of rows of ``inputs``, at the
    parameters before the update (one process: there is no DDP average to do it for us)."""
    if trainer.accelerator.num_processes != 1:
        raise ValueError("shards: only in one process (N ranks compute their own blocks)")
    trainer.model.load_state_dict(initial)
    trainer.model.train()
    n = inputs["completion_ids"].shape[0]
    if n % shards:
        raise ValueError(f"shards={shards} must divide the {n} rows")
    grads = []
    for s in range(shards):
        rows = slice(s * n // shards, (s + 1) * n // shards)
        part = {k: v[rows] if torch.is_tensor(v) and v.dim() and v.shape[0] == n else v for k, v in inputs.items()}
        trainer.model.zero_grad()
        trainer._compute_loss(trainer.model, part).backward()
        grads.append(torch.cat([p.grad.detach().flatten().cpu() for p in trainer.model.parameters()]))
    return grads
