"""The RL's Razor regime: at equal new-task accuracy, does RL forget less of the old task than SFT (Shenfeld et al. 2025)?

Shenfeld, Pari and Agrawal ("RL's Razor: Why Online Reinforcement Learning Forgets Less", 2025)
fine-tuned models on a new task by SFT and by on-policy RL, swept the hyperparameters, and compared
them at matched new-task accuracy: RL kept more of the old tasks. Across both methods the old
tasks' drop followed one curve of the KL divergence between the fine-tuned and the base policy,
measured on the new task's inputs; on-policy RL, which only reweights what the policy already
samples, lands on solutions near the base in KL, SFT can be pulled anywhere its labels say.

Here the old task is addition, the new one subtraction (``ArithmeticTask(ops=("-",))``: the same
prompt format, ``43-18=`` -> ``52``, reversed). The default reference knows no subtraction: its
sampled accuracy there is below 1%, so a 0/1 reward almost never fires, and GRPO did not start from
it in the one run tried (40 steps at lr 1e-3 left it under 2%). The paper's base models already solved part of
their new tasks; so the base here is the reference after a short SFT on both operations
(`train_sft` on ``ops=("+", "-")`` to ``BASE_TARGET`` greedy held-out accuracy): it knows addition
and some subtraction. From that base, per seed:

    SFT    train_sft on subtraction (batch ``SFT_BATCH``), one run per lr of ``sft_lrs``
    RL     GRPO on subtraction (beta 0: no KL penalty holds it near the base), one per lr of ``rl_lrs``
    both   stopped at the same greedy held-out subtraction accuracy ``target`` (checked every 2 steps)
    controls  SFT and RL (each at its first lr) stopped at ``early`` < target ("SFT early", "RL early"):
              comparisons at unequal accuracy

MEASURED per run: greedy held-out accuracy on subtraction (new) and addition (old); the drop =
the base's addition accuracy minus the run's; and KL between the run's policy pi and the base
pi_0 on subtraction prompts, both directions, per completion: the exact KL over the vocabulary at
each token (`grpo_edu.functional.exact_kl`) summed over the completion, on completions sampled
from the first argument's policy (by the chain rule that sum is the KL between the two
distributions over whole completions, averaged over the samples): "base||ft" = KL(pi_0 || pi),
sampled from the base; "ft||base" = KL(pi || pi_0), sampled from the fine-tuned policy. The paper's
forgetting law (its section 4) predicts the forgetting from E_{x~tau} KL(pi_0 || pi) on the new task's
inputs tau, which it calls the forward KL: the claims use that direction, "base||ft" (`PRIMARY`), and
both are printed. The fit is a least-squares line drop = a + b KL over every run (SFT and RL, at the
target and stopped early) together (the paper fits a quadratic, one curve for both methods). The paper compares the methods' frontiers (the best
retention a hyperparameter sweep reaches at a given new-task accuracy): the claims compare, per target
and seed, each method's least-forgetting run (`frontier`: the least drop over its lrs, among the runs
that reached the target), and that run's new-task accuracy and KL. Both methods sweep the same lrs
(GRPO at 1e-3 diverged from this base, so neither goes there): a least over more runs would favour one.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from ... import functional as Fn
from ...algorithms import make_algorithm
from ...evaluation import evaluate
from ...rollout import generate, sequence_logprobs
from ...train import train
from ...warmstart.presets import resolve_preset
from ...warmstart.sft import SFTConfig, train_sft
from .common import bar, claim, paired, rule, spread, task_of, verdict

OLD, NEW = ("+",), ("-",)
BASE_TARGET = 0.3  # the base: the reference after SFT on "+" and "-" to this greedy held-out accuracy on both
SFT_BATCH = 64  # problems per SFT step on the new task (small: the stop at the target is finer)
CHECK_EVERY = 2  # steps between the accuracy checks that stop SFT and RL at the target
METHODS = ("SFT", "RL", "SFT early", "RL early")  # the runs at the target, and the controls stopped early
BETA = 0.0  # GRPO without the KL penalty: if anything keeps RL near the base, it is not a penalty
DIRECTIONS = {"base||ft": "ref||pi", "ft||base": "pi||ref"}  # our name -> exact_kl's (pi = fine-tuned, ref = base)
PRIMARY = "base||ft"  # the direction the claims use (the other is printed beside it): KL(pi_0 || pi), sampled from pi_0
# "full": the verb's; "notebook": notebook 12 part 2's; "tiny": the tests' (seconds, numbers meaningless). GRPO at
# lr 1e-3 (and with only negative samples at 3e-4) diverged from this base: subtraction fell to ~2% in 120 steps
SIZES = {
    "full": dict(targets=(0.5,), early=0.3, sft_lrs=(3e-5, 1e-4, 3e-4), rl_lrs=(3e-5, 1e-4, 3e-4), max_steps=250,
                 kl_prompts=200, kl_group=4, base_steps=1000),
    "notebook": dict(targets=(0.45,), early=0.3, sft_lrs=(1e-4, 3e-4), rl_lrs=(1e-4, 3e-4), max_steps=120,
                     kl_prompts=100, kl_group=4, base_steps=1000),
    "tiny": dict(targets=(0.25,), early=0.23, sft_lrs=(1e-4,), rl_lrs=(3e-4,), max_steps=2, kl_prompts=4, kl_group=2,
                 base_steps=2),
}  # fmt: skip


def tasks(preset):
    """``(old, new, both)``: the preset's task with ``ops`` addition, subtraction, and both."""
    return task_of(preset, ops=OLD), task_of(preset, ops=NEW), task_of(preset, ops=OLD + NEW)


def trainable(policy):
    """A deep copy of ``policy`` with every parameter trainable (train() freezes its reference)."""
    out = copy.deepcopy(policy)
    for p in out.parameters():
        p.requires_grad_(True)
    return out.train()


def make_base(reference, preset="cpu", seed: int = 0, target: float = BASE_TARGET, max_steps: int = 1000,
              progress: bool = False):  # fmt: skip
    """The base pi_0: ``reference`` after SFT on addition and subtraction together (`train_sft` on
    ``ops=("+", "-")``) until ``target`` greedy held-out accuracy on both (at most ``max_steps``);
    ``(base, sft history)``."""
    if not 0.0 < target <= 1.0:
        raise ValueError(f"target must be in (0, 1], got {target!r}")
    base = trainable(reference)
    cfg = SFTConfig(target_accuracy=target, seed=seed, max_steps=max_steps)
    hist = train_sft(base, tasks(preset)[2], cfg, progress=progress)
    return base.eval(), hist


@torch.no_grad()
def sequence_kl(policy, base, task, direction: str, n_prompts: int = 100, group: int = 4, seed: int = 0) -> float:
    """The KL between ``policy`` (pi) and ``base`` (pi_0) per completion on the first ``n_prompts``
    held-out prompts of ``task``, ``group`` completions each: ``direction`` "ft||base" is
    KL(pi || pi_0), sampled from pi; "base||ft" is KL(pi_0 || pi), sampled from pi_0. Each
    completion contributes sum_t exact_kl over the vocabulary at its tokens (mean over completions)."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {list(DIRECTIONS)}, got {direction!r}")
    sampler = base if direction == "base||ft" else policy
    prompts = task.encode_prompts(task.eval_problems()[:n_prompts])
    gen = torch.Generator(device=next(policy.parameters()).device).manual_seed(seed)
    ro = generate(sampler, prompts, group, task.max_answer_length, 1.0, generator=gen)
    _, logits = sequence_logprobs(policy, ro, return_logits=True)
    _, base_logits = sequence_logprobs(base, ro, return_logits=True)
    kl = Fn.exact_kl(logits, base_logits, DIRECTIONS[direction])
    return float(Fn.masked_sum(kl, ro.mask, dim=1).mean())


def measure(policy, base, base_old: float, preset, z: dict, seed: int) -> dict:
    """New- and old-task greedy accuracy, the old task's drop from the base, the KL in both directions."""
    old, new, _ = tasks(preset)
    out = {"new": float(evaluate(policy, new)), "old": float(evaluate(policy, old))}
    out["drop"] = base_old - out["old"]
    for d in DIRECTIONS:
        out[f"kl {d}"] = sequence_kl(policy, base, new, d, z["kl_prompts"], z["kl_group"], seed)
    return out


def sft_run(base, preset, lr: float, target: float, seed: int, max_steps: int) -> tuple:
    """SFT on subtraction from ``base`` at ``lr`` until ``target`` greedy held-out accuracy: ``(policy, steps)``."""
    policy = trainable(base)
    cfg = SFTConfig(lr=lr, batch_size=SFT_BATCH, max_steps=max_steps, eval_every=CHECK_EVERY,
                    target_accuracy=target, seed=seed)  # fmt: skip
    h = train_sft(policy, tasks(preset)[1], cfg, progress=False)
    return policy.eval(), steps_of(h, max_steps)


def steps_of(sft_history: dict, max_steps: int) -> int:
    """The steps an SFT run took: its last check's step (it stops at a check), or all ``max_steps`` without one."""
    return int(sft_history["step"][-1]) if sft_history["step"] else max_steps


def rl_run(base, preset, lr: float, target: float, seed: int, max_steps: int) -> tuple:
    """GRPO (beta 0) on subtraction from ``base`` at ``lr`` until ``target`` greedy held-out accuracy: ``(policy, steps)``."""
    policy = trainable(base)
    h = train(make_algorithm("grpo", lr=lr, beta=BETA), tasks(preset)[1], base, policy, preset, steps=max_steps,
              seed=seed, eval_every=CHECK_EVERY, target_accuracy=target, progress=False, name=f"RL lr {lr:g}")  # fmt: skip
    return policy.eval(), int(h.evals[-1]["step"])


def run_razor(reference, preset="cpu", seeds=(0, 1, 2), size: str = "full", progress=True) -> dict:
    """Per seed, from the base (`make_base`, built once with the first seed): SFT at each lr of the
    size and GRPO at each lr, each stopped at each target accuracy, and the two unmatched controls;
    each run's `measure`. ``runs``: one dict per run with "method" (`METHODS`), "lr",
    "target", "seed", "steps" and the measurements."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {list(SIZES)}, got {size!r}")
    seeds = tuple(seeds)
    if not seeds:
        raise ValueError("seeds must name at least one seed")
    preset, z = resolve_preset(preset), SIZES[size]
    base, base_hist = make_base(reference, preset, seed=seeds[0], max_steps=z["base_steps"])
    old, new, _ = tasks(preset)
    base_acc = {"old": float(evaluate(base, old)), "new": float(evaluate(base, new))}
    ref_acc = {"old": float(evaluate(reference, old)), "new": float(evaluate(reference, new))}
    plan = [(m, lr, t) for t in z["targets"] for m, lrs in (("SFT", z["sft_lrs"]), ("RL", z["rl_lrs"])) for lr in lrs]
    plan += [("SFT early", z["sft_lrs"][0], z["early"]), ("RL early", z["rl_lrs"][0], z["early"])]
    progress_bar = bar(len(seeds) * len(plan), "RL's razor", progress)
    runs = []
    for seed in seeds:
        for method, lr, target in plan:
            fn = rl_run if method.startswith("RL") else sft_run
            policy, steps = fn(base, preset, lr, target, seed, z["max_steps"])
            m = measure(policy, base, base_acc["old"], preset, z, seed)
            runs.append({"method": method, "lr": lr, "target": target, "seed": seed, "steps": steps, **m})
            progress_bar.update(1)
    progress_bar.close()
    res = {"size": size, "seeds": list(seeds), "targets": list(z["targets"]), "early": z["early"], "base": base_acc,
           "reference": ref_acc, "base_sft_steps": steps_of(base_hist, z["base_steps"]), "runs": runs}  # fmt: skip
    res["fit"] = {d: line_fit([r[f"kl {d}"] for r in runs], [r["drop"] for r in runs]) for d in DIRECTIONS}
    res["claims"] = claims(res)
    return res


def line_fit(x, y) -> dict:
    """Least squares drop = a + b KL: ``{"a", "b", "r2", "n"}`` (r2: the share of the drop's variance
    the line explains; 0 when the drops do not vary)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) != len(y) or len(x) < 3:
        raise ValueError(f"line_fit needs at least 3 (kl, drop) pairs of equal length, got {len(x)} and {len(y)}")
    if np.ptp(x) == 0:
        raise ValueError("line_fit: every KL is the same, the slope is not determined")
    b, a = np.polyfit(x, y, 1)
    ss = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - float(np.sum((y - (a + b * x)) ** 2)) / ss if ss > 0 else 0.0
    return {"a": float(a), "b": float(b), "r2": r2, "n": len(x)}


def r_squared(runs, key: str, log: bool = False) -> float:
    """R^2 of the line drop = a + b x over ``runs``, x each run's ``key`` (its log10 if ``log``), signed by
    the slope: -R^2 when the drop falls as x grows (NaN: under 3 runs, or one x)."""
    x = [float(np.log10(r[key])) if log else r[key] for r in runs]
    if len(x) < 3 or max(x) == min(x):
        return float("nan")
    fit = line_fit(x, [r["drop"] for r in runs])
    return fit["r2"] if fit["b"] > 0 else -fit["r2"]


def reached(run) -> bool:
    """Whether a run's greedy new-task accuracy reached its target (a run that hit ``max_steps`` first did not)."""
    return run["new"] >= run["target"]


def frontier_runs(res, method: str, seed) -> list:
    """Per target, ``method``'s least-forgetting run of ``seed``: the least drop over its lrs, among the
    runs that reached the target (all of them if none did: a run short of it forgot less by stopping early)."""
    out = []
    for t in sorted({r["target"] for r in res["runs"] if r["method"] == method}):
        runs = [r for r in res["runs"] if r["method"] == method and r["seed"] == seed and r["target"] == t]
        out.append(min([r for r in runs if reached(r)] or runs, key=lambda r: r["drop"]))
    return out


def matched(res, seed=None, method=None) -> list:
    """The runs stopped at a target (SFT and RL, not the controls), of one seed and method when given."""
    return [r for r in res["runs"] if r["method"] in ("SFT", "RL") and (seed is None or r["seed"] == seed)
            and (method is None or r["method"] == method)]  # fmt: skip


def per_seed(res, method: str, key: str, how: str = "mean") -> list:
    """Per seed, ``key`` over that method's runs: "mean" over every lr and target, or "frontier": ``key`` of
    its least-forgetting run at each target (`frontier_runs`), mean over the targets."""
    if how not in ("mean", "frontier"):
        raise ValueError(f"how must be 'mean' or 'frontier', got {how!r}")
    out = []
    for s in res["seeds"]:
        runs = [r for r in res["runs"] if r["method"] == method and r["seed"] == s]
        if how == "mean":
            out.append(float(np.mean([r[key] for r in runs])))
        else:
            out.append(float(np.mean([r[key] for r in frontier_runs(res, method, s)])))
    return out


def claims(res) -> list:
    """Shenfeld et al.'s claims and the unmatched controls, each by the two-sided rule over the seeds."""
    n, kl, other_d = len(res["seeds"]), f"kl {PRIMARY}", next(d for d in DIRECTIONS if d != PRIMARY)
    new = {m: per_seed(res, m, "new", "frontier") for m in METHODS}
    drop = {m: per_seed(res, m, "drop", "frontier") for m in METHODS}
    div = {m: per_seed(res, m, kl, "frontier") for m in ("SFT", "RL")}
    other = {m: per_seed(res, m, f"kl {other_d}", "frontier") for m in ("SFT", "RL")}
    gap = [abs(a - b) for a, b in zip(new["SFT"], new["RL"], strict=True)]
    seeds = [[r for r in res["runs"] if r["seed"] == s] for s in res["seeds"]]
    r2 = [r_squared(runs, kl) for runs in seeds]
    r2_new = [r_squared(runs, "new") for runs in seeds]
    r2_lr = [r_squared([r for r in runs if r["method"] in ("SFT", "RL")], "lr", log=True) for runs in seeds]
    at = [r for r in res["runs"] if r["method"] in ("SFT", "RL")]
    start = (f"base: addition {res['base']['old']:.3f}, subtraction {res['base']['new']:.3f} greedy (the reference: "
             f"{res['reference']['old']:.3f}, {res['reference']['new']:.3f})")  # fmt: skip
    fit = res["fit"][PRIMARY]
    name, other_name = PRIMARY.replace("||", " || "), other_d.replace("||", " || ")
    return [
        claim(
            "condition: the runs compared, each method's least-forgetting run, stop at the same new-task accuracy",
            f"{start}; {sum(map(reached, at))} of {len(at)} runs reached the target; subtraction of the runs compared: "
            f"SFT {spread(new['SFT'], '.3f')}, RL {spread(new['RL'], '.3f')} "
            f"({rule(-0.05, -0.1, 'minus |SFT - RL|, per seed', n)})",
            verdict([-g for g in gap], -0.05, -0.1),
        ),
        claim(
            "at matched new-task accuracy RL forgets less of the old task than SFT (Shenfeld et al. 2025; each "
            "method's least-forgetting run over the same lrs, the frontier of its sweep)",
            f"addition drop from the base of the runs compared: SFT {spread(drop['SFT'], '.3f')}, RL "
            f"{spread(drop['RL'], '.3f')} ({rule(0.02, 0.0, 'SFT minus RL, per seed', n)})",
            verdict(paired(drop["SFT"], drop["RL"]), 0.02, 0.0),
        ),
        claim(
            f"RL's least-forgetting run ends closer to the base than SFT's in KL on the new task (KL({name}) per "
            "completion)",
            f"SFT {spread(div['SFT'], '.3f')}, RL {spread(div['RL'], '.3f')}; the other direction KL({other_name}): "
            f"SFT {spread(other['SFT'], '.3f')}, RL {spread(other['RL'], '.3f')} "
            f"({rule(0.0, 0.0, 'SFT minus RL, per seed', n)})",
            verdict(paired(div["SFT"], div["RL"]), 0.0, 0.0),
        ),
        claim(
            "the forgetting follows that KL: a line drop = a + b KL explains more than half the drop's variance "
            "over the runs of each seed (SFT, RL, both early)",
            f"R^2 per seed (negative: a falling line) {spread(r2, '.2f')}; over the same runs a line in the "
            f"new-task accuracy {spread(r2_new, '.2f')}, and over the runs at the target one in log10 lr "
            f"{spread(r2_lr, '.2f')} (the KL and the lr rise together: this sweep does not separate them); "
            f"all seeds: drop = {fit['a']:.3f} + {fit['b']:.3f} KL, R^2 {fit['r2']:.2f} on {fit['n']} runs "
            f"({rule(0.5, 0.2, 'R^2', n)})",
            verdict(r2, 0.5, 0.2),
        ),
        claim(
            f"control, unequal accuracy: SFT stopped at {res['early']:g} forgets less than RL at the target",
            f"SFT early: subtraction {spread(new['SFT early'], '.3f')}, addition drop "
            f"{spread(drop['SFT early'], '.3f')}; RL at the target {spread(drop['RL'], '.3f')} "
            f"({rule(0.0, -0.02, 'RL minus SFT early, per seed', n)})",
            verdict(paired(drop["RL"], drop["SFT early"]), 0.0, -0.02),
        ),
        claim(
            f"control, unequal accuracy: RL stopped at {res['early']:g} forgets less than SFT at the target",
            f"RL early: subtraction {spread(new['RL early'], '.3f')}, addition drop "
            f"{spread(drop['RL early'], '.3f')}; SFT at the target {spread(drop['SFT'], '.3f')} "
            f"({rule(0.0, -0.02, 'SFT minus RL early, per seed', n)})",
            verdict(paired(drop["SFT"], drop["RL early"]), 0.0, -0.02),
        ),
    ]


def figure(res):
    """The old task's drop against the KL to the base on the new task, each run a point (SFT, RL,
    both stopped early), the fitted line over every run; one panel per KL direction."""
    from matplotlib.figure import Figure

    from ...figures.plotstyle import PALETTE, set_alt

    fig = Figure(figsize=(11, 4.2), layout="constrained")
    axes = fig.subplots(1, 2)
    marks = {"SFT": ("o", PALETTE[0]), "RL": ("s", PALETTE[1]), "SFT early": ("^", PALETTE[0]),
             "RL early": ("v", PALETTE[1])}  # fmt: skip
    for ax, d in zip(axes, DIRECTIONS, strict=True):
        for m, (marker, color) in marks.items():
            pts = [r for r in res["runs"] if r["method"] == m]
            if pts:
                label = f"{m[:-6]} stopped at {res['early']:g} (unmatched)" if m.endswith("early") else m
                ax.scatter([r[f"kl {d}"] for r in pts], [r["drop"] for r in pts], marker=marker, label=label,
                           **({"facecolors": "none", "edgecolors": color} if m.endswith("early") else {"color": color}))  # fmt: skip
        fit = res["fit"][d]
        xs = np.linspace(0.0, max(r[f"kl {d}"] for r in res["runs"]), 50)
        ax.plot(xs, fit["a"] + fit["b"] * xs, color="0.3", ls="--", label=f"fit over every run, R^2 {fit['r2']:.2f}")
        ax.axhline(0.0, color="0.8", lw=0.8)
        ax.set_xlabel(f"KL({d.replace('||', ' || ')}) per completion on subtraction prompts (nats)")
        ax.set_ylabel("addition accuracy drop from the base")
        ax.set_title(f"forgetting against KL({d.replace('||', ' || ')})")
        ax.legend()
    targets = ", ".join(f"{t:g}" for t in res["targets"])
    fig.suptitle(f"Teaching subtraction by SFT and by RL to {targets} accuracy: what addition loses")
    return set_alt(fig, "Scatter: the drop in addition accuracy against the KL between the fine-tuned policy and "
                   "the base on subtraction prompts, one point per run, SFT and RL stopped at the same subtraction "
                   "accuracy, and both stopped earlier; dashed: the least-squares line over every run.")  # fmt: skip
