"""The spurious-rewards regime: does a reward that ignores correctness raise accuracy (Shao et al. 2025)?

Shao et al. ("Spurious Rewards: Rethinking Training Signals in RLVR", 2025) trained Qwen2.5-Math-7B
with GRPO on rewards that carry no information about the answer: MATH-500 rose +21.4 points with
random rewards (against +29.1 with the true ones), and rose with rewards for wrong answers too. They
trace it to the clip of several updates per batch: with a random reward the unclipped gradient is
zero in expectation, but the clip cuts the upward step of an unlikely token (rho <= 1 + eps) sooner
than of a likely one (whose pi cannot pass 1 anyway), so the clipped objective is biased towards
what the model already favours; it sharpens the reference. It needs a reference whose favourite
answer is often right (Qwen-Math's code reasoning) and failed on models without that prior.

Here: the default reference is right about half the time greedily and about one time in eight when
sampled, so sharpening alone could raise the sampled accuracy. Each reward (`GRPOConfig.reward_signal`:
"true", "random" with p = 0.5, "wrong") x each update schedule:

    one update      epochs 1, minibatches 1: the ratio is 1 at the only step, the clip idle
    several         epochs 4, minibatches 4 (16 updates per batch): the clip active (eps 0.2)
    several, no clip  the same with eps_low 1, eps_high 1e6: the clip never binds

beta = 0 (no KL to hold the policy back: the reward is the only force), the course's lr otherwise.
MEASURED per run: greedy held-out accuracy, sampled accuracy (pass@1 from n answers per prompt),
pass@k, the policy's token entropy on its own samples (the loss's logged ``entropy``) and the clip
fractions.
"""

from __future__ import annotations

import copy

import numpy as np

from ...algorithms import make_algorithm
from ...evaluation import evaluate
from ...measure.difficulty import pass_at_k_curve
from ...train import train
from ...warmstart.presets import resolve_preset
from .common import bar, claim, paired, rule, spread, task_of, verdict

SIGNALS = ("true", "random", "wrong")
SCHEDULES = {  # name -> the GRPOConfig knobs of the update schedule
    "one update": dict(epochs=1, minibatches=1),
    "several": dict(epochs=4, minibatches=4),
    "several, no clip": dict(epochs=4, minibatches=4, eps_low=1.0, eps_high=1e6),
}
RUNS = {f"{s}, {u}": (s, u) for s in SIGNALS for u in SCHEDULES}
BETA = 0.0  # no KL penalty: the reward (and the clip) are the only forces
SIZES = {  # "full": the verb's; "notebook": notebook 12's; "tiny": the tests' (seconds, numbers meaningless)
    "full": dict(steps=30, pass_prompts=200, pass_ks=(1, 4, 16, 64, 256)),
    "notebook": dict(steps=15, pass_prompts=100, pass_ks=(1, 4, 16, 64)),
    "tiny": dict(steps=2, pass_prompts=4, pass_ks=(1, 2)),
}


def config(name: str) -> dict:
    """The GRPOConfig knobs of run ``name`` (a key of `RUNS`)."""
    if name not in RUNS:
        raise ValueError(f"unknown run {name!r}; choose from {list(RUNS)}")
    signal, schedule = RUNS[name]
    return dict(reward_signal=signal, beta=BETA, **SCHEDULES[schedule])


def measure_policy(policy, task, z: dict, seed: int) -> dict:
    """Greedy held-out accuracy and pass@k (k in ``z["pass_ks"]``, n = the largest k, on the first
    ``z["pass_prompts"]`` held-out prompts): pass@1 is the sampled accuracy."""
    probs = task.eval_problems()[: z["pass_prompts"]]
    pk = pass_at_k_curve(policy, task, z["pass_ks"], problems=probs, seed=seed)["all"]
    return {"greedy": float(evaluate(policy, task)), "pass": {int(k): float(v) for k, v in pk.items()}}


def one_run(reference, task, preset, name: str, seed: int, z: dict) -> dict:
    """Run ``name`` for ``z["steps"]`` from ``reference``: its measurements (`measure_policy`), the
    entropy per step and the clip fractions (mean over steps)."""
    policy = copy.deepcopy(reference)
    h = train(make_algorithm("grpo", **config(name)), task, reference, policy, preset, steps=z["steps"], seed=seed,
              eval_every=z["steps"], progress=False, name=name)  # fmt: skip
    out = measure_policy(policy, task, z, seed)
    out["entropy"] = [round(float(x), 5) for x in h.series("entropy")]
    for k in ("clip_ratio", "clip_high", "clip_low"):
        out[k] = float(np.nanmean(h.series(k)))
    return out


def clip_bias(reference, task, preset, seed: int = 0, draws: int = 8, prompts: int = 64) -> dict:
    """MEASURED on one batch (``prompts`` x G answers sampled from ``reference``): for each update schedule
    of `SCHEDULES`, ``draws`` independent random rewards (p = 0.5), each trained on from the reference
    (one `grpo_edu.train.update`, a fresh optimizer); per draw the change, on that batch's states, of the
    mean token entropy (``dH``) and of the mean log pi of the sampled tokens (``dlogp``), and the clip
    fractions. The mean over draws is the schedule's bias; the noise averages out as 1/sqrt(draws).
    The controls "one update, true reward" and "several, true reward" train on the true reward (their
    draws differ only in the minibatches' shuffle, so the one-update control's draws are equal)."""
    import torch

    from ... import functional as Fn
    from ...measure.common import rngs
    from ...rollout import sample_batch
    from ...train import update

    G = make_algorithm("grpo").config.group_size
    rng, gen = rngs(seed, preset.device)
    ro, scores, _ = sample_batch(reference, task, prompts, G, rng, gen)

    @torch.no_grad()
    def stats(policy):
        logits = policy(ro.input_ids)[:, ro.prompt_length - 1 : -1]
        H = Fn.masked_mean(Fn.entropy(logits), ro.mask)
        return float(H), float(Fn.masked_mean(Fn.token_logprobs(logits, ro.completion_ids), ro.mask))

    h0, lp0 = stats(reference)
    out = {}
    settings = {name: ("random", knobs) for name, knobs in SCHEDULES.items()}
    settings["one update, true reward"] = ("true", SCHEDULES["one update"])  # the controls: the true reward
    settings["several, true reward"] = ("true", SCHEDULES["several"])
    for name, (signal, knobs) in settings.items():
        rows = []
        for d in range(draws):
            policy = copy.deepcopy(reference)
            algo = make_algorithm("grpo", reward_signal=signal, beta=BETA, **knobs)
            algo.setup(policy, reference, generator=torch.Generator().manual_seed(seed * 1000 + d))
            st = update(algo, ro, scores)
            h, lp = stats(policy)
            rows.append({"dH": h - h0, "dlogp": lp - lp0, "clip_high": st["clip_high"], "clip_low": st["clip_low"]})
        out[name] = {k: [r[k] for r in rows] for k in rows[0]}
    return {"entropy": h0, "logp": lp0, "schedules": out}


def run_spurious(reference, preset="cpu", seeds=(0, 1, 2), size: str = "full", runs=tuple(RUNS), progress=True) -> dict:
    """Each run of ``runs`` (`RUNS`: reward x update schedule) from the preset's ``reference``, per seed,
    and the reference's own measurements (per seed: pass@k draws its samples with that seed)."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {list(SIZES)}, got {size!r}")
    unknown = [r for r in runs if r not in RUNS]
    if unknown:
        raise ValueError(f"unknown runs {unknown}; choose from {list(RUNS)}")
    preset, z = resolve_preset(preset), SIZES[size]
    task = task_of(preset)
    res = {"size": size, "steps": z["steps"], "seeds": list(seeds), "ks": list(z["pass_ks"]), "reference": [],
           "runs": {r: [] for r in runs}}  # fmt: skip
    progress_bar = bar(len(seeds) * (len(runs) + 1), "spurious rewards", progress)
    for seed in seeds:
        res["reference"].append(measure_policy(reference, task, z, seed))
        progress_bar.update(1)
        for name in runs:
            res["runs"][name].append(one_run(reference, task, preset, name, seed, z))
            progress_bar.update(1)
    progress_bar.close()
    if set(RUNS) <= set(runs):
        res["claims"] = claims(res)
    return res


def tail(entropy, steps: int) -> float:
    """The mean entropy of the last tenth of the steps (at least one)."""
    w = max(1, steps // 10)
    return float(np.mean(entropy[-w:]))


def claims(res) -> list:
    """Shao et al.'s claims and the controls, each by the two-sided rule over the seeds."""
    runs, ref, n, steps = res["runs"], res["reference"], len(res["seeds"]), res["steps"]
    k_max = max(res["ks"])

    def p1(name):
        return [r["pass"][1] for r in runs[name]]

    def rise(name):  # sampled accuracy after minus the reference's, per seed
        return paired(p1(name), [r["pass"][1] for r in ref])

    def each(values, spec=".3f"):
        return spread(list(values), spec)

    def row(name):
        rs = runs[name]
        return (f"{name}: sampled {each(p1(name))}, greedy {each(r['greedy'] for r in rs)}, pass@{k_max} "
                f"{each(r['pass'][k_max] for r in rs)}, entropy {each(tail(r['entropy'], steps) for r in rs)}")  # fmt: skip

    h0 = [r["entropy"][0] for r in runs["true, one update"]]  # step 1 at ratio 1: the reference on its samples
    start = (f"reference: sampled {each(r['pass'][1] for r in ref)}, greedy {each(r['greedy'] for r in ref)}, "
             f"pass@{k_max} {each(r['pass'][k_max] for r in ref)}, entropy "
             f"{each(h0)}")  # fmt: skip
    ent = {u: [tail(r["entropy"], steps) for r in runs[f"random, {u}"]] for u in SCHEDULES}
    return [
        claim(
            "control: the true reward raises the sampled accuracy (several updates per batch)",
            f"{start}; after {steps} steps {row('true, several')} ({rule(0.02, 0.0, 'the rise', n)})",
            verdict(rise("true, several"), 0.02, 0.0),
        ),
        claim(
            "random rewards raise the sampled accuracy with several updates per batch (Shao et al. 2025: "
            "the clip active; condition: the reference's favourite answer is often right, here greedy ~50%)",
            f"{row('random, several')}; {row('random, one update')} ({rule(0.02, 0.0, 'the rise', n)})",
            verdict(rise("random, several"), 0.02, 0.0),
        ),
        claim(
            "rewards for wrong answers raise the sampled accuracy too (several updates per batch)",
            f"{row('wrong, several')} ({rule(0.02, 0.0, 'the rise', n)})",
            verdict(rise("wrong, several"), 0.02, 0.0),
        ),
        claim(
            "with random rewards and several updates per batch, the sampled accuracy ends higher with the clip "
            "than without it",
            f"{row('random, several, no clip')}; clip fraction with the clip "
            f"{each(r['clip_ratio'] for r in runs['random, several'])} (above "
            f"{each(r['clip_high'] for r in runs['random, several'])}, below "
            f"{each(r['clip_low'] for r in runs['random, several'])}) "
            f"({rule(0.01, 0.0, 'clip minus no clip, per seed', n)})",
            verdict(paired(p1("random, several"), p1("random, several, no clip")), 0.01, 0.0),
        ),
        claim(
            "with random rewards and several clipped updates per batch the entropy ends below the reference's "
            "(the sharpening Shao et al. credit to the clip; no clip-off control in this rule)",
            f"entropy: reference {each(h0)}; after {steps} steps of random rewards, one update {each(ent['one update'])}, "
            f"several {each(ent['several'])}, several without the clip {each(ent['several, no clip'])} "
            f"({rule(0.02, 0.0, 'the reference minus several, per seed', n)})",
            verdict(paired(h0, ent["several"]), 0.02, 0.0),
        ),
    ]


def figure(res):
    """Sampled accuracy (pass@1) and entropy of each run after its steps, against the reference's."""
    from matplotlib.figure import Figure

    from ...figures.plotstyle import PALETTE, set_alt
    from .figures import PERCENT

    fig = Figure(figsize=(11, 4.2), layout="constrained")
    ax, bx = fig.subplots(1, 2)
    names = list(res["runs"])
    signals = [s for s in SIGNALS if any(RUNS[r][0] == s for r in names)]
    schedules = [u for u in SCHEDULES if any(RUNS[r][1] == u for r in names)]
    width = 0.8 / max(1, len(schedules))
    for j, u in enumerate(schedules):
        xs, p1, ent = [], [], []
        for i, s in enumerate(signals):
            rs = res["runs"].get(f"{s}, {u}")
            if rs:
                xs.append(i + j * width)
                p1.append(float(np.mean([r["pass"][1] for r in rs])))
                ent.append(float(np.mean([tail(r["entropy"], res["steps"]) for r in rs])))
        ax.bar(xs, p1, width, color=PALETTE[j], label=u)
        bx.bar(xs, ent, width, color=PALETTE[j], label=u)
    ref_p1 = float(np.mean([r["pass"][1] for r in res["reference"]]))
    ref_h = float(np.mean([r["entropy"][0] for r in res["runs"][names[0]]]))
    for a, y, what in ((ax, ref_p1, "sampled accuracy"), (bx, ref_h, "token entropy (nats)")):
        a.axhline(y, color="0.3", ls="--", label="reference")
        a.set_xticks(np.arange(len(signals)) + 0.4 - width / 2, [f"{s} reward" for s in signals])
        a.set_ylabel(f"{what} after {res['steps']} steps")
        a.legend()
    ax.yaxis.set_major_formatter(PERCENT)
    ax.set_title("sampled accuracy (pass@1), mean over seeds")
    bx.set_title("the policy's entropy on its own samples")
    return set_alt(fig, "Bars: sampled accuracy (left) and token entropy (right) after GRPO with the true, a "
                   "random and a wrong-answer reward, one update per batch, several, and several without the "
                   "clip; dashed: the reference.")  # fmt: skip
