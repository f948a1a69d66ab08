"""TRL's GRPOTrainer on several processes: the exported course policy trained on N CPU ranks (gloo).

    res = launch(nproc=2, steps=3)            # python, or: grpo-edu trl-launch --nproc 2 --steps 3

spawns, with the environment variable that keeps accelerate on the CPU,

    ACCELERATE_USE_CPU=1 python -m torch.distributed.run --standalone --nproc_per_node=2 \\
        -m grpo_edu.hf.launch worker --out OUT --expect 2

and checks that the run really had ``nproc`` ranks. ``accelerate launch --cpu --num_processes 2``
does not: accelerate sends every ``--cpu`` launch to its one-process launcher (measured with
accelerate 1.15.0: WORLD_SIZE 1, ``DistributedType.NO``, no warning). `launch` with
``launcher="accelerate-cpu"`` runs that line and raises `WorldSizeError` saying so.

What is sharded (TRL's GRPOTrainer, DDP): one step's ``sequences_per_step`` completions are split
in contiguous blocks, ``sequences_per_step / nproc`` rows per rank (a group of G rows may straddle
two ranks); every rank samples and scores its own rows, the rewards are *gathered* from all ranks
before the group mean and std, so the advantages are those of one process; each rank computes its
loss on its rows and DDP averages the gradients. What each ``loss_type`` then divides by, and so
whether N ranks give one rank's update, is `grpo_edu.hf.rank_parity`'s (tested in
``tests/test_hf_distributed.py``, explained in notebook 06): grpo, dr_grpo and dapo do, bnpo does not.

Each rank writes ``rank{r}.json`` (world size, rank, accelerate's view of the run, the prompts and
rewards of its first step, its loss and a checksum of every parameter after each optimizer step).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from ._common import _require, quiet, require_extra
from .rank_parity import PARITY_LOSS_TYPES
from .trainer import rank_trainer

MODULE = "grpo_edu.hf.launch"


class WorldSizeError(RuntimeError):
    """The launcher started another number of processes than asked for."""


def torchrun_command(nproc: int, worker_args=()) -> list[str]:
    """The launch line that gives ``nproc`` real ranks on the CPU (with ``ACCELERATE_USE_CPU=1``)."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
            "-m", MODULE, "worker", *worker_args]  # fmt: skip


def _accelerate_cpu_command(nproc: int, worker_args=()) -> list[str]:
    """The line that looks right and starts ONE process (kept to show the failure)."""
    return [sys.executable, "-m", "accelerate.commands.launch", "--cpu", "--num_processes", str(nproc),
            "-m", MODULE, "worker", *worker_args]  # fmt: skip


LAUNCHERS = {"torchrun": torchrun_command, "accelerate-cpu": _accelerate_cpu_command}


def check_world(ranks: list[dict], nproc: int) -> None:
    """Raise `WorldSizeError` unless ``ranks`` (one record per process) are ranks 0..nproc-1 of a
    world of ``nproc``."""
    seen = sorted(r["rank"] for r in ranks)
    worlds = sorted({r["world_size"] for r in ranks})
    if seen == list(range(nproc)) and worlds == [nproc]:
        return
    line = "ACCELERATE_USE_CPU=1 python " + " ".join(torchrun_command(nproc, ["..."])[1:])
    raise WorldSizeError(
        f"asked for {nproc} processes, the launcher started {len(ranks)} (world size {worlds or '?'}, ranks {seen}): "
        "`accelerate launch --cpu --num_processes N` runs one process whatever N is; "
        f"launch with torchrun instead: {line}"
    )


def _check_positive(**values):
    for name, v in values.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {v!r}")


def launch(
    nproc: int = 2,
    steps: int = 3,
    out=None,
    policy=None,
    preset="cpu",
    sequences_per_step: int = 64,
    seed: int = 0,
    parity: tuple = (),
    launcher: str = "torchrun",
    timeout: float = 600,
    progress: bool = False,
) -> dict:
    """Train ``policy`` (default: the preset's SFT reference) with TRL's GRPOTrainer for ``steps``
    generations of ``sequences_per_step`` completions (all ranks together) on ``nproc`` CPU
    processes, with the course's GRPO defaults (`grpo_edu.algorithms.GRPOConfig` with
    ``unbiased_std=True``). ``parity``: TRL loss types for which each rank then also runs
    `rank_parity.injected_update` (its gradient in ``out/parity_{loss_type}_rank{r}.pt``). Returns ``{"nproc", "command", "seconds", "ranks": [rank0, ...]}`` (also in
    ``out/summary.json``); `WorldSizeError` if the launcher did not start ``nproc`` ranks, and a
    RuntimeError with the workers' output if they fail. ``progress``: the workers' output (a
    progress bar on rank 0) goes to this terminal instead of being captured."""
    _check_positive(nproc=nproc, steps=steps, sequences_per_step=sequences_per_step)
    require_extra()  # before the reference's SFT and the export
    if launcher not in LAUNCHERS:
        raise ValueError(f"launcher must be one of {sorted(LAUNCHERS)}, got {launcher!r}")
    unknown = set(parity) - set(PARITY_LOSS_TYPES)
    if unknown:
        raise ValueError(f"parity: unknown loss types {sorted(unknown)}; choose from {PARITY_LOSS_TYPES}")
    from ..algorithms import GRPOConfig
    from ..warmstart.presets import get_preset

    preset = get_preset(preset) if isinstance(preset, str) else preset
    G, mb = GRPOConfig().group_size, GRPOConfig().minibatches
    if sequences_per_step % G or sequences_per_step % (nproc * mb):
        raise ValueError(
            f"sequences_per_step={sequences_per_step} must be a multiple of group_size ({G}) and of "
            f"nproc x minibatches ({nproc} x {mb})"
        )
    if policy is None:
        from ..warmstart.reference import reference_policy

        policy = reference_policy(preset, progress=progress)
    out = Path(out or tempfile.mkdtemp(prefix="grpo-edu-launch-"))
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob("rank*.json"), *out.glob("rank*.err")]:
        old.unlink()
    from .export import to_hf

    with quiet():
        to_hf(policy.cpu(), out / "model")
    job = {
        "task": preset.task,
        "steps": steps,
        "sequences_per_step": sequences_per_step,
        "seed": seed,
        "parity": list(parity),
        "progress": progress,
    }
    (out / "job.json").write_text(json.dumps(job))
    cmd = LAUNCHERS[launcher](nproc, ["--out", str(out), "--expect", str(nproc)])
    env = {
        **os.environ,
        "ACCELERATE_USE_CPU": "1",
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "TRL_EXPERIMENTAL_SILENCE": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [_root(), os.environ.get("PYTHONPATH")])),
    }
    t0 = time.perf_counter()
    try:
        run = subprocess.run(cmd, env=env, timeout=timeout, text=True, capture_output=not progress)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"{' '.join(cmd)} ran past {timeout} s") from exc
    seconds = time.perf_counter() - t0
    ranks = [json.loads(p.read_text()) for p in sorted(out.glob("rank*.json"))]
    if run.returncode and all(r["world_size"] == nproc for r in ranks):  # a crash, not a wrong world
        errors = [p.read_text() for p in sorted(out.glob("rank*.err"))]
        tail = "\n".join(errors) or ((run.stdout or "") + (run.stderr or ""))[-4000:]
        raise RuntimeError(f"{' '.join(cmd)} failed (exit {run.returncode}):\n{tail}")
    check_world(ranks, nproc)
    shown = "ACCELERATE_USE_CPU=1 python " + " ".join(cmd[1:])
    res = {"nproc": nproc, "command": shown, "seconds": seconds, "ranks": ranks}
    (out / "summary.json").write_text(json.dumps(res, indent=1))
    res["out"] = str(out)
    return res


def _root() -> str:
    """The folder that holds grpo_edu/ and envs/, for the workers' import path."""
    return str(Path(__file__).resolve().parents[2])


def format_launch(res: dict) -> str:
    """A text report of `launch`: per rank its world, its first step's prompts and reward, its
    first and last loss, and whether the parameters are identical on every rank."""
    lines = [f"{res['nproc']} ranks, {res['seconds']:.1f} s wall: {res['command']}"]
    for r in res["ranks"]:
        prompts = list(dict.fromkeys(r["prompts"]))
        lines.append(
            f"rank {r['rank']} of {r['world_size']} ({r['distributed_type']}, {r['backend']}): {r['rows_per_step']} "
            f"rows per step; first step: prompts {prompts}, mean reward {sum(r['rewards']) / len(r['rewards']):.4f}; "
            f"{len(r['steps'])} updates, loss {r['steps'][0]['loss']:.4f} -> {r['steps'][-1]['loss']:.4f}"
        )
    shas = {r["rank"]: r["steps"][-1]["param_sha256"][:12] for r in res["ranks"]}
    same = len(set(shas.values())) == 1
    lines.append(
        f"parameters after the last update: sha256 {shas}: {'identical' if same else 'DIFFERENT'} on all ranks"
    )
    return "\n".join(lines)


# ------------------------------------------------------------------------------- the worker


def _param_digest(model) -> tuple[str, float]:
    flat = torch.cat([p.detach().float().flatten().cpu() for p in model.parameters()])
    return hashlib.sha256(flat.numpy().tobytes()).hexdigest(), float(flat.double().norm())


def worker(out, expect: int | None = None) -> None:
    """One rank of `launch`: train as ``out/job.json`` says, write ``out/rank{r}.json``."""
    out = Path(out)
    world, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    info = {"world_size": world, "rank": rank, "steps": [], "distributed_type": "?", "backend": "?"}
    if expect is not None and world != expect:  # fail before the slow imports, and say why
        (out / f"rank{rank}.json").write_text(json.dumps(info))
        raise SystemExit(f"{MODULE} worker: asked for {expect} processes, this one sees WORLD_SIZE={world}")
    torch.set_num_threads(1)
    job = json.loads((out / "job.json").read_text())
    transformers = _require("transformers")
    from envs import ArithmeticTask

    from ..algorithms import GRPOConfig

    task = ArithmeticTask(**job["task"])
    cfg = GRPOConfig(unbiased_std=True)
    per_cycle = cfg.epochs * cfg.minibatches
    with quiet():
        trainer = rank_trainer(
            out / "model", task, cfg, job["sequences_per_step"], job["steps"] * per_cycle, job["seed"]
        )
    acc = trainer.accelerator
    info.update(
        world_size=acc.num_processes,
        rank=acc.process_index,
        distributed_type=str(acc.distributed_type),
        backend=str(acc.state.backend),
        rows_per_step=job["sequences_per_step"] // acc.num_processes,
    )
    reward = trainer.reward_funcs[0]

    def recorded(prompts, completions, **kw):
        scores = reward(prompts, completions, **kw)
        if "prompts" not in info:
            info["prompts"], info["rewards"] = [p.removeprefix("<bos>") for p in prompts], scores
        return scores

    trainer.reward_funcs[0] = recorded
    losses: list[float] = []
    compute = trainer.compute_loss
    trainer.compute_loss = lambda *a, **k: losses.append(float((loss := compute(*a, **k)).detach())) or loss
    bar = {}

    class Record(transformers.TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            sha, norm = _param_digest(trainer.model)
            info["steps"].append(
                {"step": state.global_step, "loss": losses[-1], "param_sha256": sha, "param_norm": norm}
            )
            if "bar" in bar:
                bar["bar"].update(1)

    trainer.add_callback(Record())
    if job["progress"] and rank == 0:
        from ..progress import progress_bar as tqdm

        bar["bar"] = tqdm(total=job["steps"] * per_cycle, desc=f"TRL GRPO, {world} ranks", leave=False)
    t0 = time.perf_counter()
    with quiet():
        trainer.train()
    info["train_seconds"] = time.perf_counter() - t0
    with quiet():
        initial = transformers.AutoModelForCausalLM.from_pretrained(out / "model")
    info["initial_param_sha256"], info["initial_param_norm"] = _param_digest(initial)
    from .rank_parity import injected_update

    for loss_type in job["parity"]:
        r = injected_update(out / "model", task, loss_type, seed=job["seed"])
        torch.save(r, out / f"parity_{loss_type}_rank{rank}.pt")
    (out / f"rank{rank}.json").write_text(json.dumps(info))
    _close_process_group()


def _close_process_group() -> None:
    """Every rank done, the process group is shut down before the interpreter exits. Left to the
    exit, gloo's worker threads can be destroyed before they are joined, and the rank aborts
    (SIGABRT, "terminate called without an active exception") after its work is done, more often
    the more the machine is loaded (pytorch/pytorch#65231). Only on success: a rank that failed
    does not wait at a barrier its peers may never reach."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()  # no rank shuts its connections while another still uses them
        dist.destroy_process_group()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("worker", help="one rank (started by torchrun)")
    w.add_argument("--out", required=True, help="the folder launch() prepared (job.json, model/)")
    w.add_argument("--expect", type=int, default=None, help="fail unless WORLD_SIZE is this")
    r = sub.add_parser("run", help="launch the ranks and report")
    r.add_argument("--nproc", type=int, default=2)
    r.add_argument("--steps", type=int, default=3)
    r.add_argument("--out", default=None)
    args = p.parse_args(argv)
    if args.cmd == "worker":
        try:
            worker(args.out, args.expect)
        except Exception:  # the launcher shows it: torchrun's own report hides the traceback
            import traceback

            Path(args.out, f"rank{os.environ.get('RANK', '0')}.err").write_text(traceback.format_exc())
            raise
    else:
        print(format_launch(launch(nproc=args.nproc, steps=args.steps, out=args.out, progress=True)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
