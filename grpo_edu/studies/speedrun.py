"""The speedrun: GRPO from the cached reference to 90% held-out greedy accuracy, timed.

The rules (checked by `check_rules` before any work; a run that breaks one is refused in one line
and not recorded):

1. The task is the cpu preset's default world, its reference the cached SFT policy (its own
   training time is measured apart, by training it again uncached, and reported beside the run).
2. The target is greedy accuracy 0.90 on the task's fixed held-out set (``task.eval_problems()``,
   all 500 problems), evaluated at step 0 and then every 5,120 sampled completions (every 10 steps
   of the default 512), neither less nor more often: the evaluations' time counts toward the clock,
   and greedy accuracy is noisy from step to step, so a run evaluated more often crosses 0.90 sooner
   by chance (measured: evaluated after every step, the default run's seeds 0, 1, 2 first read 0.90
   at steps 41, 55, 51; every 10 steps, at 60, 60, 70).
3. The clock is the wall time of ``grpo_edu.train`` from the reference in memory to the first
   evaluation at or above the target (a warm process: one untimed step first pays the imports),
   on a stated number of torch threads.
4. At least 3 seeds (0, 1, 2, ...); the record is the median over them. A seed that does not reach
   the target within 204,800 completions (400 steps of 512) counts as never (infinite time).
5. Any GRPO config (lr, epochs, beta, group size, ...) and any ``sequences_per_step`` that divides
   5,120 may be used: the model, the task, the reference and the evaluation are fixed. The default config's record is
   kept beside the tuned ones.

Beside the clock each record holds machine-independent counts: completions sampled, completion
tokens generated, and the forward and backward FLOPs computed, counted from the model's shapes
(`grpo_edu.model.forward_flops`, evaluations included). Each run appends a record (commit, CPU,
ATen kernel, threads, date, config, the numbers) to ``course/speedrun/leaderboard.json``, which the
site renders (``course/site/speedrun.md``).

    python -m grpo_edu.studies.speedrun                      # the default config, 3 seeds, recorded
    python -m grpo_edu.studies.speedrun --set lr=6e-4 --name "lr 6e-4"
    python -m grpo_edu.studies.speedrun --leaderboard        # the table the site shows
    python -m grpo_edu.studies.speedrun --profile            # where one step's time goes
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from ..algorithms import GRPOConfig, make_algorithm
from ..train import train
from ..warmstart.presets import get_preset, make_task, setup_torch
from ..warmstart.reference import reference_policy
from .step_profile import FlopCounter, format_profile, profile_step

ROOT = Path(__file__).resolve().parents[2]
LEADERBOARD = ROOT / "course" / "speedrun" / "leaderboard.json"
RULES = {  # what every record keeps; check_rules refuses anything else
    "preset": "cpu",
    "world": "default",
    "target": 0.9,
    "eval_problems": 500,  # the task's whole held-out set
    "eval_samples": 5120,  # evaluate every this many sampled completions (10 steps of 512)
    "min_seeds": 3,
}
BATCH = get_preset(RULES["preset"]).sequences_per_step  # the preset's completions per step (512 on cpu)
MAX_SAMPLES = 204_800  # a seed below the target after this many completions (400 steps of 512) never reaches it


@dataclasses.dataclass
class Run:
    """One speedrun's settings: what the rules look at, and the GRPO config it trains with."""

    config: dict = dataclasses.field(default_factory=dict)  # GRPOConfig fields that differ from the default
    sequences_per_step: int = BATCH
    eval_every: int | None = None  # steps between evaluations; None: the rules' (5,120 completions)
    eval_size: int = 500
    target: float = 0.9
    seeds: int = 3
    threads: int = 1
    world: str = "default"
    preset: str = "cpu"
    max_steps: int | None = None  # None: MAX_SAMPLES // sequences_per_step
    name: str = ""


def check_rules(run: Run) -> None:
    """A one-line ``ValueError`` for the first rule ``run`` breaks (see the module's docstring)."""
    if run.preset != RULES["preset"] or run.world != RULES["world"]:
        raise ValueError(
            f"the speedrun is on the {RULES['preset']} preset's {RULES['world']} world, not {run.preset}/{run.world}"
        )
    if run.target != RULES["target"]:
        raise ValueError(f"the speedrun's target is held-out accuracy {RULES['target']}, not {run.target}")
    if run.eval_size != RULES["eval_problems"]:
        raise ValueError(
            f"the speedrun evaluates on all {RULES['eval_problems']} held-out problems, not {run.eval_size}"
        )
    n, every = run.sequences_per_step, RULES["eval_samples"]
    if not isinstance(n, int) or n < 1 or every % n:
        raise ValueError(f"sequences_per_step must divide {every} (the evaluation schedule), got {n!r}")
    if run.eval_every is not None and run.eval_every != every // n:
        raise ValueError(
            f"the speedrun evaluates every {every} completions, every {every // n} steps of {n}, not every {run.eval_every}"
        )
    if not isinstance(run.seeds, int) or run.seeds < RULES["min_seeds"]:
        raise ValueError(f"the speedrun takes the median of at least {RULES['min_seeds']} seeds, not {run.seeds}")
    if not isinstance(run.threads, int) or run.threads < 1:
        raise ValueError(f"threads must be a positive integer, got {run.threads!r}")
    unknown = sorted(set(run.config) - {f.name for f in dataclasses.fields(GRPOConfig)})
    if unknown:
        raise ValueError(f"not fields of GRPOConfig: {', '.join(unknown)}")
    if n % GRPOConfig(**run.config).group_size:  # (the config's own range checks, one line each, first)
        raise ValueError(f"sequences_per_step={n} is not a multiple of the group size")


def eval_every(run: Run) -> int:
    """Steps between evaluations: every 5,120 sampled completions."""
    return RULES["eval_samples"] // run.sequences_per_step


def _one_seed(run: Run, preset, task, reference, seed: int) -> dict:
    policy = copy.deepcopy(reference)
    counter = FlopCounter(policy, reference)
    algo = make_algorithm("grpo", **run.config)
    kw = dict(sequences_per_step=run.sequences_per_step, eval_every=run.eval_every or eval_every(run), progress=False)
    w0, c0 = time.perf_counter(), time.process_time()
    budget = run.max_steps or MAX_SAMPLES // run.sequences_per_step
    hist = train(algo, task, reference, policy=policy, preset=preset, seed=seed, steps=budget,
                 target_accuracy=run.target, **kw)  # fmt: skip
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    counter.close()
    reached = hist.first_reaching(run.target, "step") is not None
    steps = hist.steps
    tokens = sum(
        round(s["completion_length"] * (s["samples"] - (steps[i - 1]["samples"] if i else 0)))
        for i, s in enumerate(steps)
    )
    return {
        "seed": seed,
        "reached": reached,
        "seconds": wall if reached else math.inf,
        "cpu_seconds": cpu if reached else math.inf,
        "train_seconds": hist.first_reaching(run.target, "seconds") if reached else math.inf,
        "steps": len(steps),
        "samples": steps[-1]["samples"] if steps else 0,
        "tokens": tokens,
        "evaluations": len(hist.evals),
        "forward_flops": counter.forward,
        "backward_flops": counter.backward,
        "accuracy": hist.final_accuracy,
    }


def _git(*args) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine() -> dict:
    """The CPU model, the ATen kernel in use, torch's version and threads, the commit (and whether
    the library's files differ from it)."""
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    dirty = bool(_git("status", "--porcelain", "--", "grpo_edu", "envs"))
    return {
        "cpu": cpu,
        "kernel": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "commit": _git("rev-parse", "--short=10", "HEAD") or "unknown",
        "dirty": dirty,
    }


def speedrun(run: Run | None = None, sft_seconds: bool = True, progress: bool = False) -> dict:
    """Run the speedrun (`check_rules` first) and return its record: the median wall seconds over
    the seeds, each seed's numbers, the machine, the config and the reference's own SFT time."""
    run = run or Run()
    check_rules(run)
    preset = get_preset(run.preset, world=run.world)
    setup_torch(preset, preset.seed)
    torch.set_num_threads(run.threads)
    task = make_task(preset)
    if len(task.eval_problems()) != run.eval_size:
        raise ValueError(f"the task's held-out set has {len(task.eval_problems())} problems, the rules {run.eval_size}")
    reference, info = reference_policy(preset, task=task, progress=progress, return_info=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    train(make_algorithm("grpo", **run.config), task, reference, preset=preset, steps=1, eval_every=1,
          sequences_per_step=run.sequences_per_step, progress=False)  # fmt: skip  # warm-up, untimed
    seeds = [_one_seed(run, preset, task, reference, preset.seed + k) for k in range(run.seeds)]
    load = [load, os.getloadavg()[0] if hasattr(os, "getloadavg") else None]
    sft = None
    if sft_seconds:  # the reference's own training, apart: the same SFT, uncached
        c0 = time.process_time()
        _, fresh = reference_policy(preset, task=task, cache=False, progress=False, return_info=True)
        sft = {"seconds": fresh["seconds"], "cpu_seconds": time.process_time() - c0, "steps": fresh["steps"],
               "accuracy": fresh["accuracy"]}  # fmt: skip
    med = lambda key: statistics.median(s[key] for s in seeds)  # noqa: E731
    return {
        "name": run.name or ("default" if not run.config and run.sequences_per_step == BATCH else "tuned"),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        **machine(),
        "load": load,  # the 1-minute load average before and after the seeds: others' work on the machine
        "config": dict(run.config),
        "sequences_per_step": run.sequences_per_step,
        "eval_every": eval_every(run),
        "seconds": med("seconds"),
        "cpu_seconds": med("cpu_seconds"),
        "train_seconds": med("train_seconds"),
        "samples": med("samples"),
        "tokens": med("tokens"),
        "forward_flops": med("forward_flops"),
        "backward_flops": med("backward_flops"),
        "reached": sum(s["reached"] for s in seeds),
        "seeds": seeds,
        # the cached file's key (a hash of the config and of the code that trained it): records that
        # started from the same reference share it
        "reference": {"accuracy": info["accuracy"], "sft": sft, "key": Path(info["path"]).stem.split("-")[-1]},
    }


def load_leaderboard(path: Path = LEADERBOARD) -> dict:
    if path.exists():
        return json.loads(path.read_text())
    return {"rules": RULES, "records": []}


def append_record(record: dict, path: Path = LEADERBOARD) -> None:
    """Add ``record`` to the leaderboard file (infinite times written as null)."""
    board = load_leaderboard(path)
    board["rules"] = RULES
    board["records"].append(json.loads(json.dumps(record, default=str).replace("Infinity", "null")))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(board, indent=1) + "\n")


def _config_text(rec: dict) -> str:
    parts = [f"{k}={v}" for k, v in sorted(rec["config"].items())]
    if rec["sequences_per_step"] != BATCH:
        parts.append(f"sequences_per_step={rec['sequences_per_step']}")
    return ", ".join(parts) or "defaults"


def format_leaderboard(board: dict) -> str:
    """The records, fastest median first: wall seconds (and the process's CPU seconds), the counts to
    the target (completions, tokens, forward + backward TFLOP), how many seeds reached it, the ATen
    kernel and threads, the date, the commit (+ when the library's files differed from it), the reference's
    cache key (its first 6 characters; "-" for records from before it was kept), the config."""

    def key(r):
        return (r["seconds"] is None, r["seconds"] or 0.0)

    rules = board["rules"]
    lines = [
        f"GRPO to greedy accuracy {rules['target']} on the {rules['eval_problems']} held-out problems of the "
        f"{rules['preset']} preset,",
        f"evaluated every {rules['eval_samples']} completions; medians over at least {rules['min_seeds']} seeds",
        f"{'#':>2s} {'name':16s} {'wall s':>6s} {'cpu s':>6s} {'samples':>7s} {'tokens':>7s} {'TFLOP':>5s} "
        f"{'seeds':>5s} {'kernel':7s} {'thr':>3s} {'load':>4s} {'date':10s} {'commit':9s} {'ref':6s} config",
    ]
    for i, r in enumerate(sorted(board["records"], key=key), 1):
        sec, cpu = ("never" if x is None else f"{x:.2f}" for x in (r["seconds"], r["cpu_seconds"]))
        flops = (r["forward_flops"] + r["backward_flops"]) / 1e12
        seeds = f"{r['reached']}/{len(r['seeds'])}"
        commit = r["commit"][:8] + ("+" if r.get("dirty") else "")
        ref = (r.get("reference", {}).get("key") or "-")[:6]
        load = "" if not r.get("load") or None in r["load"] else f"{max(r['load']):.1f}"
        lines.append(
            f"{i:2d} {r['name'][:16]:16s} {sec:>6s} {cpu:>6s} {r['samples']:7.0f} {r['tokens']:7.0f} {flops:5.2f} "
            f"{seeds:>5s} {r['kernel']:7s} {r['threads']:3d} {load:>4s} {r['date'][:10]:10s} {commit:9s} {ref:6s} "
            f"{_config_text(r)}"
        )
    lines.append(f"CPU: {'; '.join(sorted({r['cpu'] for r in board['records']})) or 'no record yet'}")
    return "\n".join(lines)


def format_record(rec: dict) -> str:
    lines = [f"{rec['name']}: {rec['seconds']:.2f} s wall (median of {len(rec['seeds'])} seeds), {rec['cpu']}, "
             f"kernel {rec['kernel']}, {rec['threads']} thread(s); config: {_config_text(rec)}"]  # fmt: skip
    lines.append(
        f"{'seed':>4s} {'wall s':>7s} {'cpu s':>6s} {'train s':>7s} {'steps':>5s} {'samples':>7s} {'tokens':>7s} {'fwd GF':>7s} {'bwd GF':>7s}"
    )
    for s in rec["seeds"]:
        lines.append(
            f"{s['seed']:4d} {s['seconds']:7.2f} {s['cpu_seconds']:6.2f} {s['train_seconds']:7.2f} {s['steps']:5d} "
            f"{s['samples']:7d} {s['tokens']:7d} {s['forward_flops'] / 1e9:7.1f} {s['backward_flops'] / 1e9:7.1f}"
        )
    sft = rec["reference"]["sft"]
    if sft:
        lines.append(
            f"the reference apart: SFT {sft['seconds']:.2f} s wall, {sft['cpu_seconds']:.2f} s CPU "
            f"({sft['steps']} steps, greedy {sft['accuracy']:.3f})"
        )
    return "\n".join(lines)


def _parse_set(items: list[str]) -> dict:
    types = {f.name: type(f.default) for f in dataclasses.fields(GRPOConfig)}
    out = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or key not in types:
            raise ValueError(f"--set takes FIELD=VALUE with a GRPOConfig field, got {item!r}")
        kind = types[key]
        if kind is bool:
            out[key] = {"true": True, "false": False}[text.lower()]
        elif kind in (int, float):
            out[key] = kind(text)
        elif text == "None":
            out[key] = None
        else:
            out[key] = float(text) if key in ("eps_high", "vllm_importance_sampling_clip_min") else text
    return out


class _Parser(argparse.ArgumentParser):
    """An argument error is one line, ``PROG: error: ...`` (as the grpo-edu command's), with exit status 2."""

    def error(self, message):
        sys.stderr.write(f"{self.prog}: error: {' '.join(message.split())} ({self.prog} --help lists the flags)\n")
        raise SystemExit(2)


def main(argv: list[str] | None = None, prog: str = "python -m grpo_edu.studies.speedrun") -> int:
    """The command (``grpo-edu speedrun``, or ``python -m grpo_edu.studies.speedrun``): parse, check the
    rules (a refusal is one line, exit status 2, nothing recorded), run, record."""
    p = _Parser(prog=prog, description=__doc__.splitlines()[0], allow_abbrev=False)
    p.add_argument("--profile", action="store_true", help="print where one default step's time goes, and its limit")
    p.add_argument("--leaderboard", action="store_true", help="print the leaderboard and exit")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="a GRPOConfig field (repeatable)")
    p.add_argument(
        "--sequences-per-step",
        type=int,
        default=BATCH,
        metavar="N",
        help=f"completions per step (divides 5120; default {BATCH})",
    )
    p.add_argument("--seeds", type=int, default=RULES["min_seeds"], metavar="N", help="seeds 0..N-1 (at least 3)")
    p.add_argument(
        "--eval-every", type=int, default=None, metavar="N", help="steps between evaluations (the rules fix it)"
    )
    p.add_argument(
        "--eval-size", type=int, default=RULES["eval_problems"], metavar="N", help="held-out problems (all 500)"
    )
    p.add_argument("--target", type=float, default=RULES["target"], metavar="ACC", help="held-out accuracy (0.9)")
    p.add_argument("--world", default=RULES["world"], metavar="NAME", help="the task's world (default)")
    p.add_argument("--threads", type=int, default=1, metavar="N", help="torch threads (1)")
    p.add_argument("--name", default="", help="the record's name (default: 'default' or 'tuned')")
    p.add_argument("--no-record", action="store_true", help="print the result, do not append it")
    p.add_argument("--no-sft-timing", action="store_true", help="do not time the reference's SFT apart")
    args = p.parse_args(argv)
    if args.leaderboard:
        print(format_leaderboard(load_leaderboard()))
        return 0
    if args.profile:
        torch.set_num_threads(args.threads)
        print(format_profile(profile_step("cpu")))
        return 0
    try:
        run = Run(config=_parse_set(args.set), sequences_per_step=args.sequences_per_step, eval_every=args.eval_every,
                  eval_size=args.eval_size, target=args.target, seeds=args.seeds, threads=args.threads,
                  world=args.world, name=args.name)  # fmt: skip
        check_rules(run)
    except ValueError as exc:
        print(f"speedrun: refused: {exc}", file=sys.stderr)
        return 2
    rec = speedrun(run, sft_seconds=not args.no_sft_timing)
    print(format_record(rec))
    if not args.no_record:
        append_record(rec)
        print(f"recorded in {LEADERBOARD.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
