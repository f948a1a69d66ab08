"""The grpo-edu command: train, compare and measure from a shell.

``grpo-edu compare`` is the main job: all four algorithms side by side, measured. The
verbs and their flags are declared in `_parser` (``grpo-edu --help`` lists the verbs,
``grpo-edu VERB --help`` a verb's flags and defaults); each verb runs one function below,
named in `VERBS`.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap

COMPARE_SECONDS = 30.0  # compare --budget seconds without --seconds
VERB_NAMES = ("compare", "train", "sample", "reference", "bench", "sweep", "variance", "ablate", "trl-launch", "regimes",
              "speedrun", "check-notebooks")  # the order --help lists them; _parser declares each  # fmt: skip
CONFIG_VERBS = ("train", "compare")  # the verbs with every config field as a flag, and --config
CONFIG_HELP = "a .toml, .yaml or .json file of flag = value (the flags' names; a flag given too beats it)"


def _int(lo: int):
    def parse(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if v < lo:
            raise argparse.ArgumentTypeError(f"must be >= {lo}, got {v}")
        return v

    return parse


def _positive_float(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return v


def _list(kind):
    """Comma-separated values, each parsed by ``kind``: an empty item ("1e-4,,3e-4", a trailing
    comma) or a repeated one is an error, not skipped or run twice."""

    def parse(text):
        items = [x.strip() for x in text.split(",")]
        if not any(items):
            raise argparse.ArgumentTypeError("expected at least one value")
        if "" in items:
            raise argparse.ArgumentTypeError(f"empty item in {text!r} (item {items.index('') + 1})")
        try:
            values = [kind(x) for x in items]
        except (ValueError, argparse.ArgumentTypeError) as exc:
            raise argparse.ArgumentTypeError(f"expected comma-separated values, got {text!r} ({exc})") from None
        repeated = [x for i, (x, v) in enumerate(zip(items, values)) if v in values[:i]]
        if repeated:
            raise argparse.ArgumentTypeError(f"repeated item {repeated[0]!r} in {text!r}")
        return values

    return parse


class _Parser(argparse.ArgumentParser):
    """argparse's parser whose every error is one line, ``grpo-edu VERB: error: ...``, as the verbs'
    own errors are (argparse prints the usage above it: for train and compare, 22 lines of flags;
    ``grpo-edu VERB --help`` shows it)."""

    def error(self, message):
        _error_line(self.prog, message)


def _error_line(prog: str, message: str):
    sys.stderr.write(f"{prog}: error: {' '.join(message.split())}\n")
    raise SystemExit(2)


class _VerbHelp(argparse.ArgumentDefaultsHelpFormatter):
    """A flag's help ends with its default once: not where the help already says it
    ("default: the preset's"), nor for a default of None or a switch's False."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text or action.default is None or action.default is False:
            return text
        return super()._get_help_string(action)


class _TopHelp(argparse.RawDescriptionHelpFormatter):
    """The verbs listed once, one line each, under "verbs:" (without argparse's extra
    "VERB" line above them)."""

    def _format_action(self, action):
        text = super()._format_action(action)
        return text.split("\n", 1)[1] if action.nargs == argparse.PARSER else text


def _parser(algo: str = "grpo", only: str | None = None) -> argparse.ArgumentParser:
    """Every verb's flags, declared in one place in the order ``--help`` lists them (long
    because there are twelve verbs; each block is a flat list of ``add_argument`` calls). ``train``
    also takes every field of ``algo``'s config, ``compare`` every field of the four (config_io.py).
    ``only``: the verb the command line names, the one whose config fields and regime names are read
    (the others keep their own flags; None: every verb whole, as a test or ``--help`` of all reads them)."""
    from ..algorithms import ALGORITHMS
    from .config_io import add_config_flags

    def whole(name):
        return only is None or only == name

    parser = _Parser(
        prog="grpo-edu",
        description="Train, compare and measure REINFORCE, baseline, PPO and GRPO from a shell.",
        formatter_class=_TopHelp,
    )
    sub = parser.add_subparsers(dest="cmd", required=True, metavar="VERB", title="verbs")

    def verb(name, text, description=None, **kw):
        p = sub.add_parser(name, help=text, description=description or text, formatter_class=_VerbHelp, **kw)
        p.add_argument(
            "--preset",
            default="auto",
            choices=("cpu", "gpu", "auto"),  # presets.PRESETS + "auto", checked by the verb's own parser
            metavar="NAME",
            help="cpu, gpu or auto (gpu with CUDA, else cpu)",
        )
        p.add_argument(
            "--world",
            default="default",
            choices=("default", "spread"),  # presets.WORLDS, checked by the verb's own parser
            help="the reference RL starts from: default, or spread (taught only small operands: easy and hard prompts)",
        )
        p.add_argument("--seed", type=_int(0), default=0, metavar="N", help="base seed (added to $GRPO_EDU_SEED_SHIFT)")
        p.add_argument("--quiet", action="store_true", help="no progress bars")
        return p

    c = verb(
        "compare",
        "the main job: the four algorithms side by side, measured",
        "train all four algorithms side by side from one reference, measure them (gradient "
        "variance, step memory), print one table, where each rung wins and which claims of "
        "the derivation hold, and write the figures and comparison.json",
        allow_abbrev=False,
    )
    c.add_argument("--out", default="out/compare", metavar="DIR", help="folder for the PNG figures and the report")
    c.add_argument("--seeds", type=_int(1), default=1, metavar="N", help="RL seeds per algorithm (min-max bands)")
    c.add_argument(
        "--budget",
        choices=["samples", "seconds"],
        default="samples",
        help="same number of sampled completions, or same training wall time",
    )
    c.add_argument(
        "--steps",
        type=_int(1),
        default=None,
        metavar="N",
        help="steps of the samples budget (default: the preset's)",
    )
    c.add_argument(
        "--seconds",
        type=_positive_float,
        default=None,
        metavar="S",
        help=f"seconds per algorithm with --budget seconds (default: {COMPARE_SECONDS:g})",
    )
    c.add_argument(
        "--variance-batches", type=_int(2), default=8, metavar="K", help="K batches for the gradient variance"
    )
    c.add_argument(
        "--memory-sweep",
        action="store_true",
        help="also PPO/GRPO memory from 0.1M to 25M parameters (figure memory_ratio.png; ~20 s)",
    )
    c.add_argument("--config", default=None, metavar="FILE", help=CONFIG_HELP)
    if whole("compare"):
        add_config_flags(c, {a: ALGORITHMS[a].Config for a in ALGORITHMS}, reserved=[a.dest for a in c._actions])
    _trl_only_flags(c)
    t = verb(
        "train",
        "one training run from the reference, its learning curve",
        "one training run from the reference, printing its learning curve; with --out DIR it is kept "
        "(config.toml, metrics.jsonl, evals.jsonl, policy.pt, TensorBoard events). Every field of the "
        "algorithm's config is a flag below (grpo-edu train --algo ppo --help lists PPO's).",
        allow_abbrev=False,
    )
    t.add_argument("--algo", default="grpo", choices=list(ALGORITHMS), help="which algorithm")
    t.add_argument("--steps", type=_int(1), default=None, metavar="N", help="RL steps (default: the preset's)")
    t.add_argument("--config", default=None, metavar="FILE", help=CONFIG_HELP)
    t.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="keep the run in DIR (its files replaced): config.toml, metrics.jsonl, evals.jsonl, policy.pt, "
        "TensorBoard events with tensorboard installed",
    )
    t.add_argument(
        "--pipeline",
        default="sync",
        choices=("sync", "async"),  # studies/pipeline.py PIPELINES
        help="sync: one process, train.py's loop; async: a generator process samples while this one updates "
        "(GRPO; grpo_edu/studies/pipeline.py)",
    )
    t.add_argument(
        "--max_staleness",
        type=_int(0),
        default=None,
        metavar="N",
        help="with --pipeline async: the most weight versions a batch's sampler lags the learner (TRL's "
        "AsyncGRPOTrainer max_staleness; default 1; 0: the synchronous loop's numbers)",
    )
    if whole("train"):
        add_config_flags(t, {algo: ALGORITHMS[algo].Config}, reserved=[a.dest for a in t._actions])
    if algo == "grpo":
        _trl_only_flags(t)
    s_ = sub.add_parser(
        "sample",
        formatter_class=_VerbHelp,
        help="a kept run's policy answers held-out problems",
        description="load the policy grpo-edu train --out DIR kept, answer N held-out problems, print each "
        "prompt, the answer, whether it is right, and the accuracy",
        allow_abbrev=False,
    )
    s_.add_argument_group("required").add_argument(  # checked by _sample, in its own words
        "--from", dest="from_dir", default=None, metavar="DIR", help="the folder grpo-edu train --out DIR kept a run in"
    )
    s_.add_argument("--n", type=_int(1), default=10, metavar="N", help="problems to answer")
    s_.add_argument("--seed", type=_int(0), default=0, metavar="N", help="which problems (and samples)")
    s_.add_argument(
        "--temperature", type=float, default=0.0, metavar="T", help="0: greedy (as the accuracy is measured)"
    )
    s_.usage = s_.format_usage().split(": ", 1)[1].strip().replace("[--from DIR]", "--from DIR")  # not optional
    r = verb("reference", "build (or load) the SFT reference policy, its accuracy")
    r.add_argument("--retrain", action="store_true", help="train it again even if it is cached")
    b = verb(
        "bench",
        "generation speed, step time and memory per algorithm",
        "generation speed (KV cache, shared prompts), step time, forward/backward passes and "
        "peak memory of one step per algorithm",
    )
    b.add_argument("--json", default=None, metavar="FILE", help="also write the numbers to this file")
    b.add_argument(
        "--memory-sweep",
        action="store_true",
        help="also the PPO/GRPO peak-memory ratio from a small to a 25M-parameter model",
    )
    b.add_argument("--trl", action="store_true", help="also grpo_edu vs TRL seconds per GRPO cycle (needs [trl])")
    w = verb("sweep", "learning rate x seed per algorithm: is the comparison fair?")
    w.add_argument("--steps", type=_int(1), default=40, metavar="N", help="RL steps per run")
    w.add_argument(
        "--lrs",
        type=_list(_positive_float),
        default="1e-4,3e-4,1e-3",
        metavar="LRS",
        help="comma-separated learning rates",
    )
    w.add_argument("--seeds", type=_list(_int(0)), default="0,1", metavar="SEEDS", help="comma-separated seeds")
    w.add_argument("--json", default=None, metavar="FILE", help="also write the numbers to this file")
    v = verb("variance", "gradient variance of each estimator at several snapshots")
    v.add_argument("--batches", type=_int(2), default=16, metavar="K", help="K independent batches per snapshot")
    v.add_argument("--json", default=None, metavar="FILE", help="also write the numbers to this file")
    a = verb(
        "ablate",
        "why RL learns fast from one reference, slowly from another",
        "one difference at a time: REINFORCE and GRPO from references built different ways "
        "(why RL from one reference learns fast and from another slowly)",
    )
    a.add_argument("--seeds", type=_int(1), default=3, metavar="N", help="seeds per row (each: SFT + RL)")
    a.add_argument("--steps", type=_int(1), default=60, metavar="N", help="RL steps per run")
    a.add_argument(
        "--rows", type=_list(str), default=None, metavar="NAMES", help="comma-separated row names (default: all)"
    )
    a.add_argument("--json", default=None, metavar="FILE", help="also write the numbers to this file")
    h = verb(
        "trl-launch",
        "TRL's GRPOTrainer on N CPU processes (needs [trl])",
        "train the reference with TRL's GRPOTrainer on N CPU processes (torchrun, gloo), check that "
        "N ranks ran and hold identical parameters (needs the [trl] extra)",
    )
    h.add_argument("--nproc", type=_int(1), default=2, metavar="N", help="processes (ranks); the run checks it got N")
    h.add_argument("--steps", type=_int(1), default=3, metavar="N", help="generations of 64 completions, all ranks")
    h.add_argument("--out", default=None, metavar="DIR", help="folder for each rank's record (default: a temp dir)")
    g = verb(
        "regimes",
        "each claim where it fails and where it holds (regimes)",
        "where each idea of the derivation pays: its claims measured in the regimes the default task "
        "removes (reward offset, a learned reward model, difficulty spread, a long run with and without "
        "clip-higher, a free answer length), with verdicts and a figure each",
    )
    if whole("regimes"):  # the names are the regimes' table (importing it imports every regime)
        from ..studies.regimes import REGIMES

        g.add_argument(
            "--only",
            type=_list(str),
            default=",".join(REGIMES),
            metavar="NAMES",
            help=f"comma-separated regimes ({', '.join(REGIMES)})",
        )
    g.add_argument("--seeds", type=_int(1), default=2, metavar="N", help="seeds per run")
    g.add_argument("--out", default="out/regimes", metavar="DIR", help="folder for one PNG figure per regime")
    sub.add_parser(  # its own flags and rules (grpo_edu/studies/speedrun.py): main hands it the arguments
        "speedrun",
        add_help=False,
        help="GRPO to 90%% held-out accuracy, timed by the speedrun's rules, recorded on its leaderboard",
    )
    n = sub.add_parser(
        "check-notebooks",
        formatter_class=_VerbHelp,
        help="pytest --nbval under several seed shifts and CPU kernels",
        description="pytest --nbval on the notebooks once per (GRPO_EDU_SEED_SHIFT, ATEN_CPU_CAPABILITY) "
        "pair (needs the dev extra)",
    )
    n.add_argument("notebooks", nargs="*", help="notebook paths (default: notebooks/*.ipynb)")
    n.add_argument(
        "--runs",
        type=_list(str),
        default="0:native,1:native,2:native,0:default,0:avx2",
        metavar="PAIRS",
        help="comma-separated SHIFT:CAPABILITY pairs (native = the CPU's own)",
    )
    n.add_argument("--jobs", type=_int(1), default=2, metavar="N", help="runs at a time")
    n.add_argument("--json", default=None, metavar="FILE", help="also write the results to this file")
    verbs = sub.choices
    common = [v for v, p in verbs.items() if "--preset" in p._option_string_actions]
    others = [v for v in verbs if v not in common]
    parser.epilog = textwrap.fill(
        f"Every verb but {', '.join(others[:-1])} and {others[-1]} takes --preset cpu|gpu|auto, --world, --seed and "
        "--quiet; "
        "sample takes --seed. grpo-edu VERB --help lists each verb's flags, with their defaults.",
        79,
    )
    return parser


def _checkout_tool():
    """``(check_notebooks, format_check)`` from the repository checkout this command runs in: the
    tool needs the notebooks and the dev extra, so it lives with the checkout (tests/tools/), not
    in the installed package."""
    import importlib.util
    from pathlib import Path

    path = Path.cwd() / "tests" / "tools" / "check_notebooks.py"
    if not path.is_file():
        _error_line(
            "grpo-edu check-notebooks",
            "needs a checkout of the repository: run it from the folder that holds notebooks/ and tests/tools/",
        )
    spec = importlib.util.spec_from_file_location("grpo_edu_check_notebooks", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.check_notebooks, module.format_check


def _check_notebooks(args):
    check_notebooks, format_check = _checkout_tool()

    runs = [tuple(r.split(":", 1)) for r in args.runs]
    if not all(len(r) == 2 and r[0].isdigit() and r[1] for r in runs):
        _fail(args, f"--runs wants SHIFT:CAPABILITY pairs, got {args.runs}")
    res = check_notebooks(args.notebooks or None, runs=runs, jobs=args.jobs)
    print(format_check(res))
    _dump({**res, "runs": [{k: v for k, v in r.items() if k != "output"} for r in res["runs"]]}, args.json)
    return 0 if res["all_passed"] else 1


def _dump(res, path):
    if path:
        with open(path, "w") as f:
            json.dump({k: v for k, v in res.items() if not k.startswith("_")}, f, indent=1, default=str)


def _compare(args, preset, progress):
    import torch

    from ..measure import format_table, memory_sweep, run_comparison
    from .reports import format_memory_sweep, write_report

    res = run_comparison(
        preset,
        seeds=args.seeds,
        budget=args.budget,
        steps=args.steps,
        seconds=(args.seconds or COMPARE_SECONDS) if args.budget == "seconds" else None,
        variance_batches=args.variance_batches,
        progress=progress,
        configs=args.overrides,
    )
    if args.memory_sweep:
        res["memory_sweep"] = memory_sweep(preset=preset, seed=preset.seed, progress=progress)
    paths = write_report(res, args.out)
    print(format_table(res))
    if args.memory_sweep:
        print(format_memory_sweep(res["memory_sweep"]))
    print(f"total {res['total_seconds']:.0f} s on {preset.device} ({torch.get_num_threads()} thread(s))")
    print("wrote " + ", ".join(sorted(paths.values())))


def _train(args, preset, progress):
    import copy

    from ..algorithms import ALGORITHMS
    from ..warmstart.presets import make_task
    from ..warmstart.reference import reference_policy, train_from_preset

    algo = ALGORITHMS[args.algo](args.configs[args.algo])
    pipeline = None
    if args.pipeline == "async":  # two processes (studies/pipeline.py): its rules checked before any work
        from ..studies.pipeline import check_pipeline

        pipeline = dict(pipeline="async", max_staleness=1 if args.max_staleness is None else args.max_staleness)
        try:
            check_pipeline(algo, pipeline["max_staleness"])
        except ValueError as exc:
            _fail(args, f"--pipeline async: {exc}")
    world = "" if preset.world == "default" else f", {preset.world} world"
    how = f", two processes, max_staleness {pipeline['max_staleness']}" if pipeline else ""
    print(f"training {args.algo} ({preset.name} preset{world}, seed {preset.seed}{how})")
    task = make_task(preset)
    reference = reference_policy(preset, task=task, progress=progress)
    policy = copy.deepcopy(reference)  # the policy train() updates, kept for --out
    log = None
    if args.out:  # the run kept as it trains (warmstart/run_dir.py): config.toml now, a line per step after
        from ..warmstart.run_dir import RunLog

        run = dict(algo=args.algo, preset=preset.name, world=preset.world, seed=args.seed)
        run["steps"] = args.steps or preset.steps
        run.update(pipeline or {})
        header = (
            f"grpo-edu train: repeat this run with grpo-edu train --config {args.out}/config.toml\n"
            f"effective seed {preset.seed} (seed + $GRPO_EDU_SEED_SHIFT)"
        )
        log = RunLog(args.out, run, algo.config.to_dict(), header)
    if pipeline:
        h = _train_pipeline(args, algo, task, reference, policy, preset, progress, log, pipeline["max_staleness"])
    else:
        h = train_from_preset(
            algo, task, reference, policy, preset=preset, steps=args.steps, progress=progress, callback=log
        )
    for e in h.evals:
        print(f"step {e['step']:4d}  samples {e['samples']:7d}  {e['seconds']:6.1f} s  accuracy {e['accuracy']:.4f}")
    if log is not None:
        wrote, note = log.close(h, policy, task)
        print("wrote " + ", ".join(wrote) + (f"\n{note}" if note else ""))


def _train_pipeline(args, algo, task, reference, policy, preset, progress, log, max_staleness):
    """train's run through two processes; the generator's error, or Ctrl-C, is one line (both stopped)."""
    from ..studies.pipeline import PipelineError, train_pipeline

    try:
        return train_pipeline(algo, task, reference, policy, preset, max_staleness, steps=args.steps,
                              progress=progress, callback=log)  # fmt: skip
    except PipelineError as exc:
        _fail(args, str(exc))
    except KeyboardInterrupt:
        sys.stderr.write(f"grpo-edu {args.cmd}: interrupted: the learner and the generator process stopped\n")
        raise SystemExit(130) from None


def _sample(args, preset=None, progress=False):  # the preset is the kept run's
    from ..warmstart.run_dir import sample_from
    from .reports import format_samples

    if args.from_dir is None:
        _fail(args, "--from DIR is required: the folder grpo-edu train --out DIR kept the run in")
    try:
        res = sample_from(args.from_dir, n=args.n, seed=args.seed, temperature=args.temperature)
    except (FileNotFoundError, ValueError) as exc:  # no policy there, or not a usable one (CheckpointError)
        _fail(args, str(exc))
    print(format_samples(res))
    return 0


def _reference(args, preset, progress):
    from ..warmstart.reference import reference_policy

    _, info = reference_policy(preset, progress=progress, retrain=args.retrain, return_info=True)
    how = "loaded from" if info["loaded"] else f"trained in {info['seconds']:.1f} s, saved to"
    world = "" if preset.world == "default" else f", {preset.world} world"
    print(f"reference policy ({preset.name} preset{world}, {info['steps']} SFT steps) {how} {info['path']}")
    print(f"held-out greedy accuracy: {info['accuracy']:.4f}")


def _bench(args, preset, progress):
    from ..measure import memory_sweep
    from ..studies.bench import run_bench
    from .reports import format_bench, format_memory_sweep

    res = run_bench(preset, seed=preset.seed, progress=progress)
    print(format_bench(res))
    if args.memory_sweep:
        res["memory_sweep"] = memory_sweep(preset=preset, seed=preset.seed, progress=progress)
        print(format_memory_sweep(res["memory_sweep"]))
    if args.trl:
        from .. import hf

        res["trl"] = hf.bench_trl(preset=preset, seed=preset.seed)
        print(hf.format_bench_trl(res["trl"]))
    _dump(res, args.json)


def _sweep(args, preset, progress):
    from ..studies.sweep import run_sweep
    from .reports import format_sweep

    res = run_sweep(preset, lrs=args.lrs, seeds=args.seeds, steps=args.steps, progress=progress)
    print(format_sweep(res))
    _dump(res, args.json)


def _variance(args, preset, progress):
    from ..studies.variance_study import run_variance_study
    from .reports import format_variance_study

    res = run_variance_study(preset, n_batches=args.batches, seed=preset.seed, progress=progress)
    print(format_variance_study(res))
    _dump(res, args.json)


def _ablate(args, preset, progress):
    from ..studies.ablation import ROWS, run_ablation
    from .reports import format_ablation

    rows = ROWS
    if args.rows:
        by_name = {r.name: r for r in ROWS}
        unknown = [n for n in args.rows if n not in by_name]
        if unknown:
            _fail(args, f"unknown rows {unknown}; choose from {list(by_name)}")
        rows = [by_name[n] for n in args.rows]
    res = run_ablation(
        preset, rows=rows, seeds=tuple(preset.seed + k for k in range(args.seeds)), steps=args.steps, progress=progress
    )
    print(format_ablation(res))
    _dump(res, args.json)


def _trl_launch(args, preset, progress):
    from ..hf.launch import format_launch, launch

    res = launch(nproc=args.nproc, steps=args.steps, out=args.out, preset=preset, seed=preset.seed, progress=progress)
    print(format_launch(res))


def _regimes(args, preset, progress):
    from ..studies.regimes import check_names, format_regimes, run_regimes

    try:
        only = check_names(args.only)
    except ValueError as exc:
        _fail(args, str(exc))
    res = run_regimes(preset, only=only, seeds=args.seeds, out=args.out, progress=progress)
    print(format_regimes(res, seconds=True))


VERBS = {  # sample runs before a preset is built (main), check-notebooks without one
    "compare": _compare,
    "train": _train,
    "reference": _reference,
    "bench": _bench,
    "sweep": _sweep,
    "variance": _variance,
    "ablate": _ablate,
    "regimes": _regimes,
    "trl-launch": _trl_launch,
    "sample": _sample,
}


def _fail(args, message: str):
    """A one-line error (no traceback), as the parser writes its own (`_Parser`)."""
    _error_line(f"grpo-edu {args.cmd}", message)


# Flags that act only with another flag's value: (verb, flag, the value it needs, what to write instead).
_ONLY_WITH = (
    ("compare", "seconds", ("budget", "seconds"), "add --budget seconds, or drop --seconds"),
    ("compare", "steps", ("budget", "samples"), "drop --steps (a seconds budget trains each algorithm --seconds)"),
    ("train", "max_staleness", ("pipeline", "async"), "add --pipeline async, or drop --max_staleness"),
)


def _check_flags(args) -> None:
    """A flag that would have no effect in this combination is refused, before any work (not ignored);
    and the [trl] extra, for the verbs that need it, is checked before they start."""
    for cmd, flag, (other, value), fix in _ONLY_WITH:
        if args.cmd == cmd and getattr(args, flag) is not None and getattr(args, other) != value:
            _fail(args, f"--{flag} acts only with --{other} {value} (got --{other} {getattr(args, other)}): {fix}")
    if args.cmd == "trl-launch" or (args.cmd == "bench" and args.trl):
        from ..hf._common import missing_extra

        reason = missing_extra()
        if reason:
            _fail(args, f"--trl {reason} (or drop --trl)" if args.cmd == "bench" else f"this verb {reason}")


def _check_outputs(args) -> None:
    """Every place a verb writes to (--out, --json) can be written, checked before any training."""
    from ..warmstart.checkpoint import NotWritableError, ensure_writable

    for flag, is_file in (("out", False), ("json", True)):
        path = getattr(args, flag, None)
        if path:
            try:
                ensure_writable(path, f"--{flag}", f"pass --{flag} a writable path", file=is_file)
            except NotWritableError as exc:
                _fail(args, str(exc))


class _PreParse(argparse.ArgumentParser):
    def error(self, message):  # the full parser reports it
        raise ValueError(message)


def _error(cmd: str, message: str):
    _error_line(f"grpo-edu {cmd}", message)


def _read_config(argv) -> tuple[str, dict, str | None]:
    """Before the parser is built: the algorithm (``--algo``, else the config file's, else grpo),
    whose fields ``train`` takes as flags, and the ``--config`` file's keys."""
    if not argv or argv[0] not in CONFIG_VERBS:
        return "grpo", {}, None
    pre = _PreParse(add_help=False, allow_abbrev=False)
    pre.add_argument("--config")
    pre.add_argument("--algo")
    try:
        known, _ = pre.parse_known_args(argv[1:])
    except ValueError:
        return "grpo", {}, None
    values = {}
    if known.config:
        from .config_io import ConfigFileError, read_config_file

        try:
            values = read_config_file(known.config)
        except ConfigFileError as exc:
            _error(argv[0], f"--config {exc}")
    from ..algorithms import ALGORITHMS

    algo = known.algo or values.get("algo", "grpo")
    if algo not in ALGORITHMS:
        if known.algo:  # argparse names the choices of --algo
            return "grpo", values, known.config
        _error(argv[0], f"--config {known.config}: algo: unknown algorithm {algo!r}; choose one of {list(ALGORITHMS)}")
    return algo, values, known.config


def _trl_only_flags(parser) -> None:
    """TRL's names that are no field of ours, still taken (grpo_edu.hf.names.from_trl translates them)."""
    from ..hf.names import TRL_ONLY_FIELDS

    for name in TRL_ONLY_FIELDS:
        parser.add_argument(
            f"--{name}", default=argparse.SUPPRESS, metavar="STR", help="TRL's name, for GRPO's --policy_loss"
        )


def _file_defaults(cmd, verb_parser, values: dict, path: str) -> None:
    """The config file's keys become the verb's defaults (so a flag given too beats them), each
    checked as its flag is: an unknown key or a wrong value is one line naming it."""
    from dataclasses import fields

    from ..algorithms import ALGORITHMS
    from .config_io import parse_value, show

    fields_ = {f.name: f for a in ALGORITHMS.values() for f in fields(a.Config)}
    actions = {a.dest: a for a in verb_parser._actions if a.dest not in ("help", "config")}
    out = {}
    for key, value in values.items():
        key = key.replace("-", "_")  # variance-batches = variance_batches, as the flag's dest
        where = f"--config {path}: {key}"
        if key not in actions:
            _unknown(cmd, f"key {where}", key, [n for n, a in actions.items() if a.option_strings])
        a = actions[key]
        try:
            if a.default is argparse.SUPPRESS:  # a config field (or TRL's name of one: kept as given)
                out[key] = parse_value(where, fields_[key], value) if key in fields_ else value
                continue
            if a.nargs == 0:  # a switch (--quiet)
                if not isinstance(value, bool):
                    raise ValueError(f"{where} takes true or false, got {value!r}")
                out[key] = value
                continue
            text = ",".join(map(show, value)) if isinstance(value, (list, tuple)) else show(value)
            out[key] = a.type(text) if a.type else text
            if a.choices is not None and out[key] not in a.choices:
                raise ValueError(f"{where} must be one of {list(a.choices)}, got {value!r}")
        except (ValueError, argparse.ArgumentTypeError) as exc:
            msg = str(exc)
            _error(cmd, msg if msg.startswith(where) else f"{where}: {msg}")
    verb_parser.set_defaults(**out)


def _unknown(cmd, what, name, names):
    """``unknown <what>: did you mean <the closest names>?`` and where the valid ones are listed (the
    verb's --help): one line, not the list of every name (train and compare take forty)."""
    import difflib

    near = difflib.get_close_matches(name, sorted(names), n=3)
    hint = f"did you mean {', '.join(near)}? " if near else ""
    _error(cmd, f"unknown {what}: {hint}(grpo-edu {cmd} --help lists them)")


def _build_configs(args) -> None:
    """Each algorithm's config from its defaults and the fields set (flags, --config), checked
    by its own ``__post_init__`` before any work: ``args.configs`` (name -> config) and
    ``args.overrides`` (name -> the fields set)."""
    from dataclasses import fields

    from ..algorithms import ALGORITHMS
    from ..hf.names import TRL_ONLY_FIELDS, from_trl
    from .config_io import parse_value

    algos = [args.algo] if args.cmd == "train" else list(ALGORITHMS)
    args.configs, args.overrides = {}, {}
    try:
        for name in algos:
            cls = ALGORITHMS[name].Config
            given = [f for f in fields(cls) if hasattr(args, f.name)]
            args.overrides[name] = {f.name: parse_value(f"--{f.name}", f, getattr(args, f.name)) for f in given}
            trl = {k: getattr(args, k) for k in TRL_ONLY_FIELDS if hasattr(args, k) and name == "grpo"}
            args.configs[name] = cls(**from_trl(cls, {**args.overrides[name], **trl}))  # TRL's names made ours
    except (ValueError, TypeError) as exc:  # a wrong type (parse_value), out of range (__post_init__)
        _fail(args, str(exc))


def _check_verb(argv) -> None:
    """A first word that is no verb is one line that names the closest verb."""
    import difflib

    if argv and not argv[0].startswith("-") and argv[0] not in VERB_NAMES:
        near = difflib.get_close_matches(argv[0], VERB_NAMES, n=1)
        hint = f"did you mean {near[0]}? " if near else ""
        _error_line("grpo-edu", f"unknown verb {argv[0]!r}: {hint}the verbs are {', '.join(VERB_NAMES)}")


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _check_verb(argv)
    if argv[:1] == ["speedrun"]:  # its own flags and rules: grpo_edu/studies/speedrun.py
        from ..studies.speedrun import main as speedrun

        return speedrun(argv[1:], prog="grpo-edu speedrun")
    algo, values, path = _read_config(argv)
    parser = _parser(algo, only=argv[0] if argv and argv[0] in VERB_NAMES else "")
    verbs = parser._subparsers._group_actions[0].choices
    if values:
        _file_defaults(argv[0], verbs[argv[0]], values, path)
    args, extra = parser.parse_known_args(argv)
    if extra:
        flag = next((x for x in extra if x.startswith("-")), extra[0]).split("=")[0]
        names = [o for a in verbs[args.cmd]._actions for o in a.option_strings if o.startswith("--") and o != "--help"]
        _unknown(args.cmd, f"flag {flag}", flag, names)
    _check_flags(args)
    if args.cmd in CONFIG_VERBS:
        _build_configs(args)
    if args.cmd == "sample":
        return _sample(args)
    if args.cmd == "check-notebooks":
        _check_outputs(args)
        return _check_notebooks(args)
    from dataclasses import replace

    import torch

    from ..warmstart.checkpoint import NotWritableError
    from ..warmstart.presets import get_preset, setup_torch
    from ..warmstart.reference import CacheEnvError

    if args.preset == "gpu" and not torch.cuda.is_available():
        _fail(
            args,
            "--preset gpu needs CUDA, which is not available on this machine: "
            "use --preset cpu (or auto, the default, which picks cpu here)",
        )
    try:
        preset = get_preset(args.preset, world=args.world)
    except ValueError as exc:  # an environment variable it reads ($GRPO_EDU_SEED_SHIFT)
        _fail(args, str(exc))
    preset = replace(preset, seed=preset.seed + args.seed, sft=replace(preset.sft, seed=preset.sft.seed + args.seed))
    setup_torch(preset, preset.seed)
    _check_outputs(args)
    try:
        VERBS[args.cmd](args, preset, not args.quiet)
    except (NotWritableError, CacheEnvError) as exc:  # the reference cache ($GRPO_EDU_CACHE), before its training
        _fail(args, str(exc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
