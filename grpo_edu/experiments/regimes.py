"""Where each idea of the derivation pays (grpo-edu regimes): the regimes the default task removes.

The default task (0/1 rewards, uniform 2-digit addition, an exact checker) makes several of
the derivation's claims fail (`grpo-edu compare`). Each regime here turns one mechanism back
on with a task or reward knob, trains through the public API, and tests the claims again:

    offset        rewards (c, c+1) and (-1, +1): a baseline, a critic's warm-up, whitening, GRPO's group norm
    reward_model  RL against a learned r_phi (grpo_edu.reward_model): over-optimisation, what beta buys
    difficulty    mixed operand lengths: a prompt has a value to learn, groups tie by difficulty
    long_run      GRPO for many steps with and without clip-higher: does the entropy collapse (DAPO)?
    free_length   filler tokens after the answer: the length is the policy's; Dr. GRPO's length bias

Every function returns a dict with "claims" (``{"claim", "measurement", "verdict"}``, the
form `measure.format_claims` prints) and the numbers behind them.
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import torch

from .. import functional as Fn
from ..algorithms import make_algorithm
from ..algorithms.critic import fit_critic
from ..evaluation import evaluate
from ..measure.common import rngs, spread
from ..measure.reports import wrap
from ..presets import make_task, resolve_preset
from ..reward_model import ProxyTask, RewardModelConfig, exploits, train_reward_model
from ..rollout import generate, sample_batch, sequence_logprobs
from ..train import train

REGIMES = ("offset", "reward_model", "difficulty", "long_run", "free_length")


def _claim(claim, measurement, verdict):  # the form measure.format_claims prints
    return {"claim": claim, "measurement": measurement, "verdict": verdict}


def _above(a, b, margin=0.0):
    """holds: every seed of a above every seed of b (by margin); fails here: the other way; else depends."""
    if min(a) > max(b) + margin:
        return "holds"
    return "fails here" if max(a) < min(b) - margin else "depends"


def _bar(total, desc, progress):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, disable=not progress, leave=False)


def _task(preset, **knobs):
    from envs import ArithmeticTask

    return ArithmeticTask(**{**resolve_preset(preset).task, **knobs})


def with_critic_warmup(algo, task, steps: int, seed: int):
    """``algo`` whose critic first fits ``steps`` batches from the starting policy, before the policy moves."""
    setup = algo.setup

    def warm_setup(policy, reference=None, generator=None):
        setup(policy, reference, generator)
        rng, gen = rngs(seed + 7, next(policy.parameters()).device)
        for _ in range(steps):
            ro, scores, _ = sample_batch(policy, task, 512, 1, rng, gen)
            algo.critic.step(ro, Fn.discounted_returns(scores, ro.mask, 1.0), ro.mask)
        return algo

    algo.setup = warm_setup
    return algo


def affine_gap(rewards, shift: float, scale: float, group_size: int = 8, eps: float = 1e-4) -> float:
    """max_i |A_i(shift + scale * r) - A_i(r)| of GRPO's group advantage (scale_rewards="group"):
    0 up to float rounding for any shift, about eps / std(r) relative for a scale, and far
    more once scale * std(r) is not large against eps."""
    a = Fn.group_advantages(shift + scale * rewards, group_size, eps=eps)[0]
    return float((a - Fn.group_advantages(rewards, group_size, eps=eps)[0]).abs().max())


def run_offset(reference, preset="cpu", seeds=(0, 1), steps=20, warmup=60, progress=True) -> dict:
    """Rewards (wrong, right) = (0, 1), (5, 6), (-1, 1): REINFORCE, the baselines, PPO and GRPO.

    MEASURED: greedy held-out accuracy after ``steps`` steps, per seed; GRPO's advantages of
    one reference batch under affine maps of the reward (max |A' - A|, exact arithmetic)."""
    preset = resolve_preset(preset)
    start = evaluate(reference, _task(preset))
    ro, scores, _ = sample_batch(reference, _task(preset), 64, 8, *rngs(preset.seed, preset.device))
    r = scores.sum(1)
    eps = make_algorithm("grpo").config.adv_eps
    maps = {"(5, 6)": (5.0, 1.0), "(-1, 1)": (-1.0, 2.0), "(0, 1e-4)": (0.0, 1e-4), "(0, 1e-2)": (0.0, 1e-2)}
    adv_diff = {k: affine_gap(r, a, b, 8, eps) for k, (a, b) in maps.items()}
    runs = {  # name -> (algorithm, reward_values, config, critic warm-up)
        "REINFORCE (0, 1)": ("reinforce", (0.0, 1.0), {}, 0),
        "REINFORCE (5, 6)": ("reinforce", (5.0, 6.0), {}, 0),
        "REINFORCE (-1, 1)": ("reinforce", (-1.0, 1.0), {}, 0),
        "batch-mean baseline (0, 1)": ("baseline", (0.0, 1.0), {"baseline": "batch_mean"}, 0),
        "batch-mean baseline (5, 6)": ("baseline", (5.0, 6.0), {"baseline": "batch_mean"}, 0),
        "critic baseline (5, 6)": ("baseline", (5.0, 6.0), {}, 0),
        "critic baseline (5, 6), warm-up": ("baseline", (5.0, 6.0), {}, warmup),
        "PPO (5, 6)": ("ppo", (5.0, 6.0), {}, 0),
        "PPO (5, 6), no whitening": ("ppo", (5.0, 6.0), {"whiten_advantages": False}, 0),
        "GRPO (0, 1)": ("grpo", (0.0, 1.0), {}, 0),
        "GRPO (5, 6)": ("grpo", (5.0, 6.0), {}, 0),
    }
    acc, bar = {k: [] for k in runs}, _bar(len(runs) * len(seeds), "offset", progress)
    for seed in seeds:
        for name, (algo, rv, cfg, warm) in runs.items():
            a, task = make_algorithm(algo, **cfg), _task(preset, reward_values=rv)
            a = with_critic_warmup(a, task, warm, seed) if warm else a
            h = train(a, task, reference, preset=preset, steps=steps, seed=seed, eval_every=steps, progress=False)
            acc[name].append(h.final_accuracy)
            bar.update(1)
    bar.close()

    claims = [
        _claim(
            "an offset in the reward wrecks plain REINFORCE (every answer is pushed up)",
            f"held-out accuracy {start:.3f} -> {spread(acc['REINFORCE (5, 6)'], '.3f')} with (5, 6) vs "
            f"{spread(acc['REINFORCE (0, 1)'], '.3f')} with (0, 1) after {steps} steps",
            _above(acc["REINFORCE (0, 1)"], acc["REINFORCE (5, 6)"], 0.1),
        ),
        _claim(
            "a batch-mean baseline removes the offset",
            f"batch-mean baseline {spread(acc['batch-mean baseline (5, 6)'], '.3f')} with (5, 6) vs {spread(acc['batch-mean baseline (0, 1)'], '.3f')} "
            "with (0, 1) (holds within 0.02)",
            "holds"
            if max(abs(a - b) for a, b in zip(acc["batch-mean baseline (5, 6)"], acc["batch-mean baseline (0, 1)"]))
            <= 0.02
            else "fails here",
        ),
        _claim(
            "a learned critic baseline copes with an offset only after it has learned it (warm-up)",
            f"(5, 6): critic from cold {spread(acc['critic baseline (5, 6)'], '.3f')}, after {warmup} critic-only "
            f"steps {spread(acc['critic baseline (5, 6), warm-up'], '.3f')}",
            _above(acc["critic baseline (5, 6), warm-up"], acc["critic baseline (5, 6)"], 0.1),
        ),
        _claim(
            "whitening the advantages (PPO) protects a cold critic from the offset",
            f"(5, 6): PPO {spread(acc['PPO (5, 6)'], '.3f')} vs without whitening "
            f"{spread(acc['PPO (5, 6), no whitening'], '.3f')}",
            _above(acc["PPO (5, 6)"], acc["PPO (5, 6), no whitening"], 0.1),
        ),
        _claim(
            "GRPO's group normalisation ignores an affine change of the reward",
            f"max |A' - A| on one batch: (5, 6) {adv_diff['(5, 6)']:.1e}, (-1, 1) {adv_diff['(-1, 1)']:.1e}; "
            f"training: {spread(acc['GRPO (5, 6)'], '.3f')} vs {spread(acc['GRPO (0, 1)'], '.3f')}",
            "holds"
            if adv_diff["(5, 6)"] < 1e-5
            and max(abs(a - b) for a, b in zip(acc["GRPO (5, 6)"], acc["GRPO (0, 1)"])) <= 0.01
            else "fails here",
        ),
        _claim(
            "... up to its eps: a reward scaled to (0, 1e-4) loses the normalisation",
            f"max |A' - A|: scale 1e-2 {adv_diff['(0, 1e-2)']:.1e}, scale 1e-4 {adv_diff['(0, 1e-4)']:.3f} "
            f"(adv_eps = {eps:g}: A = (r - mean) / (std + eps / scale))",
            "holds" if adv_diff["(0, 1e-4)"] > 0.1 else "fails here",
        ),
        _claim(
            "rewards (-1, +1) let plain REINFORCE push wrong answers down and learn faster than (0, 1)",
            f"REINFORCE {spread(acc['REINFORCE (-1, 1)'], '.3f')} with (-1, 1) vs "
            f"{spread(acc['REINFORCE (0, 1)'], '.3f')} with (0, 1)",
            _above(acc["REINFORCE (-1, 1)"], acc["REINFORCE (0, 1)"]),
        ),
    ]
    return {"start": start, "steps": steps, "accuracy": acc, "adv_diff": adv_diff, "claims": claims}


class KLMonitor:
    """At each evaluation: KL(pi || pi_ref) per completion (exact over the vocabulary, summed
    over the tokens of completions sampled from pi for a fixed set of prompts)."""

    def __init__(self, policy, reference, task, n_prompts=64, group=4, seed=12345):
        self.policy, self.reference, self.task, self.seed, self.group = policy, reference, task, seed, group
        self.prompts = task.encode_prompts(task.sample(n_prompts, seed))
        self.kl: list[float] = []

    @torch.no_grad()
    def __call__(self, *_):
        gen = torch.Generator(device=next(self.policy.parameters()).device).manual_seed(self.seed)
        ro = generate(self.policy, self.prompts, self.group, self.task.max_answer_length, 1.0, generator=gen)
        _, logits = sequence_logprobs(self.policy, ro, return_logits=True)
        _, ref_logits = sequence_logprobs(self.reference, ro, return_logits=True)
        self.kl.append(float(Fn.masked_sum(Fn.exact_kl(logits, ref_logits), ro.mask, dim=1).mean()))


def run_reward_model(
    reference, preset="cpu", seeds=(0, 1), steps=60,
    settings=((0.0, "loss"), (0.3, "loss"), (1.0, "loss"), (0.3, "reward")), n_labels=8192, progress=True,
) -> dict:  # fmt: skip
    """GRPO against sigmoid(r_phi) with each (beta, kl_placement) of ``settings``, per seed.

    MEASURED every 10 steps: gold (exact) held-out accuracy, the proxy reward of the training
    batch, KL(pi || pi_ref) per completion on a fixed prompt set; the completions r_phi scores
    highest among those the checker rejects, at the end of the beta = 0 run of the first seed."""
    preset = resolve_preset(preset)
    task = make_task(preset)
    rm, rm_info = train_reward_model(reference, task, RewardModelConfig(n_labels=n_labels, seed=preset.seed), progress)
    curves, examples, bar = {}, [], _bar(len(settings) * len(seeds), "reward model", progress)
    for beta, where in settings:
        key = f"beta {beta:g}" + (f" ({where})" if beta > 0 else "")
        curves[key] = []
        for seed in seeds:
            policy = copy.deepcopy(reference)
            monitor = KLMonitor(policy, reference, task)
            proxy = ProxyTask(task, rm, on_evaluate=monitor)
            algo = make_algorithm("grpo", beta=beta, kl_placement=where)
            h = train(algo, proxy, reference, policy, preset, steps=steps, seed=seed, eval_every=10, progress=False)
            ev, reward = [e["step"] for e in h.evals], h.series("reward")
            curves[key].append({
                "step": ev, "gold": list(h.eval_series()), "kl": monitor.kl,
                "proxy": [float(reward[0])] + [float(np.mean(reward[max(0, s - 5) : s])) for s in ev[1:]],
            })  # fmt: skip
            if beta == 0 and not examples:
                examples = exploits(proxy, policy, seed=seed)
            bar.update(1)
    bar.close()
    b0, start = curves["beta 0"], curves["beta 0"][0]["gold"][0]
    peak, final = [max(c["gold"]) for c in b0], [c["gold"][-1] for c in b0]
    ends = {
        k: (spread([c["kl"][-1] for c in v], ".2f"), spread([c["gold"][-1] for c in v], ".3f"))
        for k, v in curves.items()
    }
    claims = [
        _claim(
            "r_phi tells right from wrong on the reference's samples better than a constant 'wrong'",
            f"validation accuracy {rm_info['val_accuracy']:.3f} vs {rm_info['always_wrong']:.3f} for 'always wrong' "
            f"({n_labels} labels)",
            "holds" if rm_info["val_accuracy"] > rm_info["always_wrong"] + 0.02 else "fails here",
        ),
        _claim(
            "optimising a learned reward without a penalty: the proxy rises, the gold accuracy falls (reward hacking)",
            f"beta 0: proxy {spread([c['proxy'][0] for c in b0], '.3f')} -> {spread([c['proxy'][-1] for c in b0], '.3f')}; "
            f"gold {start:.3f} -> {spread(final, '.3f')} at step {steps}",
            "holds" if min(c["proxy"][-1] - c["proxy"][0] for c in b0) > 0 and max(final) < start - 0.1 else "fails here",
        ),
        _claim(
            "the gold accuracy first rises, then falls as the KL grows (Gao et al. 2022)",
            f"beta 0: peak {spread(peak, '.3f')} vs start {start:.3f}; KL, gold at step {steps}: "
            + ", ".join(f"{k} {kl}, {g}" for k, (kl, g) in ends.items()),
            "holds" if min(peak) > start + 0.05 and min(p - f for p, f in zip(peak, final)) > 0.05 else "fails here",
        ),
    ]  # fmt: skip
    for key in list(curves)[1:]:
        g = [c["gold"][-1] for c in curves[key]]
        claims.append(_claim(
            f"the KL penalty ({key}) prevents the reward hacking",
            f"gold at step {steps}: {spread(g, '.3f')} vs {spread(final, '.3f')} at beta 0",
            _above(g, final, 0.05),
        ))  # fmt: skip
    return {"reward_model": rm_info, "curves": curves, "examples": examples, "steps": steps, "claims": claims}


def _difficulty_class(p) -> str:
    short = (p.a < 10) + (p.b < 10)
    return ("2+2 digits", "1+2 digits", "1+1 digits")[short]


def run_difficulty(reference, preset="cpu", seeds=(0, 1), critic_steps=40, own_reference=None, progress=True) -> dict:
    """Uniform 2-digit addition vs mixed operand lengths (1 or 2 digits), from the default
    reference and from one trained by SFT on the mixed task itself (``own_reference``;
    default: `reference_policy` of the mixed task, trained once and cached).

    MEASURED per seed: the explained variance of R by a critic fitted at the reference
    (`fit_critic`); on one batch of 128 prompts x 8, Var(R - b) with b the leave-one-out mean
    of the other 7 answers to the same prompt over Var(R - batch mean); the share of groups
    whose 8 rewards tie (GRPO's frac_reward_zero_std: 1 - the effective batch), by difficulty."""
    from ..reference import reference_policy

    preset = resolve_preset(preset)
    mixed = _task(preset, mixed_digits=(1, 2))
    setups = {
        "uniform": (_task(preset), reference),
        "mixed": (mixed, reference),
        "mixed, own reference": (mixed, own_reference or reference_policy(preset, task=mixed, progress=progress)),
    }
    res = {k: {"ev": [], "var_ratio": [], "zero_std": [], "by_class": {}} for k in setups}
    G, bar = 8, _bar(len(setups) * len(seeds), "difficulty", progress)
    for seed in seeds:
        for name, (task, ref) in setups.items():
            r = res[name]
            r["ev"].append(fit_critic(ref, task, critic_steps, seed=seed, progress=False)[1]["explained_variance"])
            ro, scores, problems = sample_batch(ref, task, 128, G, *rngs(seed + 5, preset.device))
            g = scores.sum(1).double().view(-1, G)
            loo = (g.sum(1, keepdim=True) - g) / (G - 1)
            r["var_ratio"].append(float((g - loo).var() / (g - g.mean()).var()))
            tied = g.amax(1) == g.amin(1)
            r["zero_std"].append(float(tied.float().mean()))
            for i, p in enumerate(problems[::G]):
                c = r["by_class"].setdefault(_difficulty_class(p), {"groups": 0, "all right": 0, "all wrong": 0})
                c["groups"] += 1
                c["all right"] += int(tied[i] and g[i, 0] > 0)
                c["all wrong"] += int(tied[i] and g[i, 0] == 0)
            bar.update(1)
    bar.close()

    def each(key, spec=".3f"):
        return ", ".join(f"{k} {spread(v[key], spec)}" for k, v in res.items())

    own = res["mixed, own reference"]
    share = ", ".join(
        f"{k}: {v['all right'] / v['groups']:.2f} all right, {v['all wrong'] / v['groups']:.2f} all wrong"
        for k, v in sorted(own["by_class"].items())
    )
    best_ev, best_ratio = max(min(v["ev"]) for v in res.values()), min(max(v["var_ratio"]) for v in res.values())
    claims = [
        _claim(
            "the critic learns to predict the reward from the prompt",
            f"explained variance of R by V(s_0): {each('ev')} (holds above 0.1)",
            "holds" if best_ev > 0.1 else "fails here",
        ),
        _claim(
            "a per-prompt baseline (the other answers to the prompt) leaves less variance than the batch mean",
            f"Var(R - b_loo) / Var(R - b_batch): {each('var_ratio')} (holds below 0.9)",
            "holds" if best_ratio < 0.9 else "fails here",
        ),
        _claim(
            "easy and hard prompts tie whole groups (all right or all wrong): GRPO's effective batch shrinks",
            f"tied groups of 8 at the reference: {each('zero_std')}; own reference by difficulty: {share}",
            _above(own["zero_std"], res["uniform"]["zero_std"], 0.02),
        ),
    ]
    return {"setups": res, "claims": claims}


def _paired(a, b, margin=0.0):
    """Per seed: holds if every a_i >= b_i - margin, fails here if every a_i < b_i - margin, else depends."""
    ok = [x >= y - margin for x, y in zip(a, b, strict=True)]
    return "holds" if all(ok) else ("fails here" if not any(ok) else "depends")


def run_long_run(reference, preset="cpu", seeds=(0, 1), steps=200, eps_high=0.28, progress=True) -> dict:
    """GRPO for ``steps`` steps with the symmetric clip (eps_high = eps_low = 0.2) and with
    clip-higher (``eps_high``, DAPO), per seed: the token entropy of the policy on its sampled
    answers (the loss's logged ``entropy``, every step) and the held-out accuracy.

    DAPO's argument: with a symmetric clip a token of probability 0.01 may only rise to 0.012
    in one update (rho <= 1 + eps), while a likely token is free to become certain, so the
    exploring tokens are held back and the entropy collapses; a larger eps_high lets them rise."""
    preset = resolve_preset(preset)
    task = _task(preset)
    settings = {"clip 0.2": {}, f"clip-higher {eps_high}": {"eps_high": eps_high}}
    curves = {k: [] for k in settings}
    bar = _bar(len(settings) * len(seeds), "long run", progress)
    for seed in seeds:
        for name, cfg in settings.items():
            h = train(make_algorithm("grpo", **cfg), task, reference, preset=preset, steps=steps, seed=seed,
                      progress=False, name=name)  # fmt: skip
            curves[name].append(
                {
                    "entropy": [round(float(x), 5) for x in h.series("entropy")],
                    "eval_step": [e["step"] for e in h.evals],
                    "accuracy": [e["accuracy"] for e in h.evals],
                }
            )
            bar.update(1)
    bar.close()
    w = max(1, steps // 10)
    base, high = settings

    def mean(c, part):
        return float(np.mean(c["entropy"][:w] if part == "first" else c["entropy"][-w:]))

    first, last = [mean(c, "first") for c in curves[base]], [mean(c, "last") for c in curves[base]]
    last_high = [mean(c, "last") for c in curves[high]]
    final, final_high = [c["accuracy"][-1] for c in curves[base]], [c["accuracy"][-1] for c in curves[high]]
    falls = [b < 0.5 * a for a, b in zip(first, last, strict=True)]
    claims = [
        _claim(
            "over a long run the entropy of the policy collapses (the problem clip-higher addresses)",
            f"mean token entropy, first vs last {w} of {steps} steps, {base}: "
            + ", ".join(f"{a:.3f} -> {b:.3f}" for a, b in zip(first, last, strict=True))
            + " (holds below half)",
            "holds" if all(falls) else ("fails here" if not any(falls) else "depends"),
        ),
        _claim(
            "clip-higher keeps the entropy from collapsing (DAPO)",
            f"mean token entropy over the last {w} steps: {high} {spread(last_high, '.3f')} vs {base} "
            f"{spread(last, '.3f')} (holds when higher on every seed)",
            _paired(last_high, last, margin=-1e-9) if len(seeds) else "depends",
        ),
        _claim(
            "clip-higher costs no accuracy",
            f"held-out accuracy after {steps} steps: {high} {spread(final_high)} vs {base} {spread(final)} "
            "(holds within 0.02 on every seed)",
            _paired(final_high, final, margin=0.02),
        ),
    ]
    return {"steps": steps, "window": w, "curves": curves, "claims": claims}


def free_length_setup(preset="cpu", filler: int = 4):
    """``(task, preset)`` of the free-length regime: ``ArithmeticTask(filler=filler)`` (the
    policy may write up to ``filler`` tokens ``=`` after its answer; only the answer is
    checked) and the preset with a model context long enough for the longer completions.
    ``reference_policy(preset, task=task)`` trains (once, then cached) its reference, by SFT on
    demonstrations with 0 to ``filler`` fillers."""
    preset = resolve_preset(preset)
    task = _task(preset, filler=filler)
    fit = task.prompt_length + task.max_answer_length
    model = dataclasses.replace(preset.model, max_seq_len=max(preset.model.max_seq_len, fit))
    return task, dataclasses.replace(preset, model=model)


def length_push(rollout, rewards, group_size: int, mode: str) -> torch.Tensor:
    """``[B]``: how hard one update pushes on each token of each completion, |A_i| * w_i, where
    w_i = d aggregate_loss / d L_it is the weight the aggregation ``mode`` gives every token of
    completion i (at the first inner step rho = 1, so the surrogate's gradient with respect to
    log pi(a_it) is -A_i w_i). "sequence_mean": w_i = 1/(B |o_i|); "token_mean": 1/sum|o|;
    "constant": 1/(B T)."""
    return Fn.group_advantages(rewards, group_size)[0].abs() * token_weight(rollout.mask, mode)


def token_weight(mask, mode: str) -> torch.Tensor:
    """``[B]``: w_i = d aggregate_loss / d L_it, the weight ``mode`` gives each token of completion i."""
    ones = torch.ones_like(mask, requires_grad=True)
    Fn.aggregate_loss(ones, mask, mode).backward()
    return ones.grad.amax(dim=1)  # the same for every token of a completion


def long_over_short(push, lengths, chosen, group_size: int) -> float:
    """Geometric mean over groups of push(longest chosen answer) / push(shortest chosen answer),
    over the groups whose chosen answers (the right ones, or the wrong ones: the same A_i) differ
    in length and are not tied (A_i = 0 pushes nothing).
    Within a group every wrong answer has the same advantage, so this is the aggregation's own
    weight: |o_short| / |o_long| for sequence_mean, 1 for token_mean and constant."""
    logs = []
    for p, n, c in zip(push.view(-1, group_size), lengths.view(-1, group_size), chosen.view(-1, group_size)):
        if int(c.sum()) >= 2 and int(n[c].max()) > int(n[c].min()) and bool((p[c] > 0).all()):
            long, short = p[c][n[c].argmax()], p[c][n[c].argmin()]
            logs.append(float(torch.log(long / short)))
    return float(np.exp(np.mean(logs))) if logs else float("nan")


def _fillers(rollout, task) -> torch.Tensor:
    return ((rollout.completion_ids == task.filler_id) & (rollout.mask > 0)).sum(1).float()


def _within_group_corr(x: torch.Tensor, y: torch.Tensor, group_size: int) -> float:
    """Pearson correlation of x and y after subtracting each group's mean (what a group baseline sees)."""
    x, y = (v.double().view(-1, group_size) for v in (x, y))
    x, y = x - x.mean(1, keepdim=True), y - y.mean(1, keepdim=True)
    return float((x * y).sum() / ((x * x).sum() * (y * y).sum()).sqrt().clamp(min=1e-12))


def _length_gap(policy, task, seed, device, G=8):
    """(mean fillers of wrong answers - of right ones, within-group corr(reward, length)) on 128 x G samples."""
    ro, scores, _ = sample_batch(policy, task, 128, G, *rngs(seed, device))
    r, f = scores.sum(1), _fillers(ro, task)
    gap = float(f[r == 0].mean() - f[r > 0].mean()) if bool((r > 0).any() and (r == 0).any()) else 0.0
    return gap, _within_group_corr(r, ro.mask.sum(1), G), ro, r


def run_free_length(
    reference, preset="cpu", seeds=(0, 1), steps=40, own_reference=None, budget: int | None = 1, progress=True
) -> dict:
    """Answers whose length is the policy's: ``ArithmeticTask(filler=4)`` from its own reference
    (``own_reference``; default: `reference_policy` of that task, trained once and cached; the
    default task's ``reference`` is not used: its context is too short).

    MEASURED per seed, on 128 prompts x 8 samples: the push per token of one update (`length_push`)
    on the longest wrong answer of a group over its shortest (`long_over_short`), and the same on
    right answers, for each aggregation; then GRPO for ``steps`` steps with loss_type="sequence_mean"
    (GRPO's 1/|o_i|) and "constant" (Dr. GRPO): mean fillers of wrong answers minus right ones,
    and the within-group correlation of reward and length, before and after. With ``budget``
    (None: skipped), the same two runs on ``ArithmeticTask(filler=4, filler_budget=budget)``, the
    same reference with room for only ``budget`` fillers: answers that run past it are truncated
    and wrong, so there long answers are the wrong ones; and the share truncated, and the
    held-out accuracy of every run."""
    from ..reference import reference_policy

    task, fit = free_length_setup(preset)
    ref = own_reference or reference_policy(fit, task=task, progress=progress)
    modes, G = ("sequence_mean", "token_mean", "constant"), 8
    runs = {"sequence_mean": "GRPO (sequence_mean)", "constant": "Dr. GRPO (constant)"}
    res = {"push": {m: {"wrong": [], "right": []} for m in modes}, "by_length": {m: {} for m in modes},
           "gap": {k: [] for k in runs}, "corr": {k: [] for k in runs}, "start_gap": [], "start_corr": [],
           "accuracy": {k: [] for k in runs}, "steps": steps}  # fmt: skip
    tasks = {"free": task}
    if budget is not None:
        tasks["budget"] = _task(fit, filler=task.filler, filler_budget=budget)
        res["budget"] = {"filler_budget": budget, "start_gap": [], "start_corr": [], "start_truncated": [],
                         **{k: {m: [] for m in runs} for k in ("gap", "corr", "truncated", "accuracy")}}  # fmt: skip
    bar = _bar(len(seeds) * (1 + len(runs) * len(tasks)), "free length", progress)
    for seed in seeds:
        gap, corr, ro, r = _length_gap(ref, task, seed + 11, fit.device, G)
        res["start_gap"].append(gap)
        res["start_corr"].append(corr)
        L = ro.mask.sum(1)
        for m in modes:
            push = length_push(ro, r, G, m)
            for part, sel in (("wrong", r == 0), ("right", r > 0)):
                res["push"][m][part].append(long_over_short(push, L, sel, G))
            if seed == seeds[0]:  # the weight per token by length, relative to token_mean's (the figure)
                w = token_weight(ro.mask, m) * L.sum()
                res["by_length"][m] = {int(n): float(w[L == n].mean()) for n in L.unique()}
        bar.update(1)
        if budget is not None:
            b = res["budget"]
            gap, corr, ro, _ = _length_gap(ref, tasks["budget"], seed + 11, fit.device, G)
            b["start_gap"].append(gap)
            b["start_corr"].append(corr)
            b["start_truncated"].append(float(ro.truncated.float().mean()))
        for setup, t in tasks.items():
            out = res if setup == "free" else res["budget"]
            for mode, name in runs.items():
                algo = make_algorithm("grpo", loss_type=mode)
                h = train(algo, t, ref, preset=fit, steps=steps, seed=seed, progress=False, name=name)
                gap, corr, ro, _ = _length_gap(algo.policy, t, seed + 11, fit.device, G)
                out["gap"][mode].append(gap)
                out["corr"][mode].append(corr)
                out["accuracy"][mode].append(h.final_accuracy)
                if setup == "budget":
                    out["truncated"][mode].append(float(ro.truncated.float().mean()))
                bar.update(1)
    bar.close()
    push, seq, const = res["push"], res["gap"]["sequence_mean"], res["gap"]["constant"]
    ratios = ", ".join(f"{m} {spread(push[m]['wrong'], '.2f')}" for m in modes)
    weight_only = all(abs(x - 1) < 1e-4 for m in modes[1:] for x in push[m]["wrong"])
    claims = [
        _claim(
            "GRPO's 1/|o_i| (sequence_mean) pushes a long wrong answer down less per token than a short one (Dr. GRPO)",
            f"push per token |A| w on a group's longest wrong answer over its shortest: {ratios} (holds: "
            "sequence_mean below 0.8, the others 1)",
            "holds" if max(push["sequence_mean"]["wrong"]) < 0.8 and weight_only else "fails here",
        ),
        _claim(
            "... and a long right answer up less per token than a short one",
            f"the same on right answers: sequence_mean {spread(push['sequence_mean']['right'], '.2f')}, "
            f"constant {spread(push['constant']['right'], '.2f')}",
            "holds" if max(push["sequence_mean"]["right"]) < 0.8 else "fails here",
        ),
        _claim(
            "so over training GRPO's wrong answers grow longer than its right ones, Dr. GRPO's do not",
            f"fillers of wrong answers minus right ones after {steps} steps: sequence_mean {spread(seq, '+.3f')}, "
            f"constant {spread(const, '+.3f')} (reference {spread(res['start_gap'], '+.3f')}; holds when "
            "sequence_mean's is higher by 0.1 on every seed)",
            _paired(seq, [c + 0.1 for c in const]),
        ),
        _claim(
            "the length the policy writes depends on whether it is right (what the bias needs to select on)",
            f"within-group correlation of reward and length: reference {spread(res['start_corr'], '+.3f')}, "
            f"after sequence_mean {spread(res['corr']['sequence_mean'], '+.3f')} (holds above 0.1 in size)",
            "holds" if min(abs(c) for c in res["start_corr"] + res["corr"]["sequence_mean"]) > 0.1 else "fails here",
        ),
    ]
    acc_seq, acc_const = list(res["accuracy"]["sequence_mean"]), list(res["accuracy"]["constant"])
    if budget is not None:
        b = res["budget"]
        bseq, bconst = b["gap"]["sequence_mean"], b["gap"]["constant"]
        acc_seq, acc_const = acc_seq + b["accuracy"]["sequence_mean"], acc_const + b["accuracy"]["constant"]
        claims += [
            _claim(
                f"with room for {budget} filler (filler_budget={budget}) long answers run past the budget and are "
                "wrong: the correlation exists",
                f"at the reference: truncated {spread(b['start_truncated'], '.3f')}, within-group correlation of "
                f"reward and length {spread(b['start_corr'], '+.3f')} (holds above 0.1 in size on every seed)",
                "holds" if min(abs(c) for c in b["start_corr"]) > 0.1 else "fails here",
            ),
            _claim(
                "... and there GRPO's wrong answers stay longer than Dr. GRPO's",
                f"fillers of wrong minus right after {steps} steps: sequence_mean {spread(bseq, '+.3f')}, constant "
                f"{spread(bconst, '+.3f')}; truncated: sequence_mean {spread(b['truncated']['sequence_mean'], '.3f')}, "
                f"constant {spread(b['truncated']['constant'], '.3f')}; correlation after sequence_mean "
                f"{spread(b['corr']['sequence_mean'], '+.3f')} (holds when sequence_mean's gap is higher by 0.1)",
                _paired(bseq, [c + 0.1 for c in bconst]),
            ),
        ]
    claims.append(
        _claim(
            "Dr. GRPO's unbiased aggregation (constant) costs no accuracy against sequence_mean",
            f"held-out accuracy after {steps} steps, every run: constant {spread(acc_const)} vs sequence_mean "
            f"{spread(acc_seq)} (holds within 0.02 on every run)",
            _paired(acc_const, acc_seq, margin=0.02),
        )
    )
    res["claims"] = claims
    return res


def plot_regime(name: str, res: dict, path) -> None:
    """One figure per regime: final accuracy per run (offset), gold accuracy vs KL
    (reward_model), tied groups by difficulty (difficulty), entropy over steps (long_run),
    each aggregation's weight per token by completion length, relative to token_mean's (free_length)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4))
    ax = fig.subplots()
    if name == "offset":
        names = list(res["accuracy"])
        for i, k in enumerate(names):
            ax.scatter([res["accuracy"][k]], [i] * len(res["accuracy"][k]), color="C0")
        ax.axvline(res["start"], color="grey", ls="--", label="reference")
        ax.set_yticks(range(len(names)), names)
        ax.set_xlabel(f"held-out accuracy after {res['steps']} steps (one dot per seed)")
        ax.legend()
    elif name == "reward_model":
        for i, (k, runs) in enumerate(res["curves"].items()):
            for j, c in enumerate(runs):
                ax.plot(c["kl"], c["gold"], "o-", color=f"C{i}", alpha=0.8, label=k if j == 0 else None)
        ax.set_xlabel("KL(pi || pi_ref) per completion (nats)")
        ax.set_ylabel("gold (exact) held-out accuracy")
        ax.set_title("RL against a learned reward: gold accuracy as the policy drifts")
        ax.legend()
    elif name == "free_length":
        for m, by in res["by_length"].items():
            ax.plot(list(by), list(by.values()), "o-", label=m)
        ax.set_xlabel("completion length |o| (tokens, <eos> included)")
        ax.set_ylabel("weight per token, relative to token_mean's")
        ax.set_title("the weight each aggregation gives each token of a completion")
        ax.legend()
    elif name == "long_run":
        for i, (k, runs) in enumerate(res["curves"].items()):
            for j, c in enumerate(runs):
                ax.plot(range(1, len(c["entropy"]) + 1), c["entropy"], color=f"C{i}", alpha=0.8,
                        label=k if j == 0 else None)  # fmt: skip
        ax.set_xlabel("RL step")
        ax.set_ylabel("mean token entropy of the policy (nats)")
        ax.set_title("GRPO over a long run: symmetric clip vs clip-higher (one line per seed)")
        ax.legend()
    else:
        cls = res["setups"]["mixed, own reference"]["by_class"]
        keys = sorted(cls)
        for j, what in enumerate(("all right", "all wrong")):
            ax.bar(np.arange(len(keys)) + 0.4 * j, [cls[k][what] / cls[k]["groups"] for k in keys], 0.4, label=what)
        ax.set_xticks(np.arange(len(keys)) + 0.2, keys)
        ax.set_ylabel("share of groups of 8 whose rewards tie")
        ax.set_title("mixed operand lengths, at the reference trained on them")
        ax.legend()
    fig.savefig(path, bbox_inches="tight")


RUNNERS = {"offset": run_offset, "reward_model": run_reward_model, "difficulty": run_difficulty,
           "long_run": run_long_run, "free_length": run_free_length}  # fmt: skip


def run_regimes(preset="cpu", only=REGIMES, seeds=2, out=None, progress=True, reference=None) -> dict:
    """Each regime of ``only`` over ``seeds`` seeds (the preset's seed, +1, ...): its claims,
    and a figure ``<out>/regime_<name>.png`` when ``out`` is given."""
    from pathlib import Path

    from ..reference import reference_policy

    unknown = [r for r in only if r not in RUNNERS]
    if unknown:
        raise ValueError(f"unknown regimes {unknown}; choose from {list(REGIMES)}")
    preset = resolve_preset(preset)
    reference = reference if reference is not None else reference_policy(preset, progress=progress)
    out = Path(out) if out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    results = {}
    for name in only:
        results[name] = RUNNERS[name](
            reference, preset, seeds=tuple(preset.seed + k for k in range(seeds)), progress=progress
        )
        if out:
            plot_regime(name, results[name], out / f"regime_{name}.png")
    return results


def format_regimes(results: dict) -> str:
    """Per regime, its claims in the form `grpo-edu compare` prints them."""
    lines = []
    for name, res in results.items():
        lines.append(f"regime {name}: {DESCRIPTIONS[name]}")
        lines += [
            wrap(f"{c['claim']}: {c['measurement']}", " " * 15, f"  [{c['verdict']:>10}] ") for c in res["claims"]
        ]
        for e in res.get("examples", []):
            lines.append(f"    r_phi {e['proxy']:.3f} for {e['prompt']}{e['completion']} (right: {e['answer']})")
    return "\n".join(lines)


DESCRIPTIONS = {
    "offset": "rewards (0, 1), (5, 6), (-1, 1), same reference, same steps",
    "reward_model": "GRPO against sigmoid(r_phi), a small learned reward model; gold = the exact checker",
    "difficulty": "operands of 1 or 2 digits (ArithmeticTask(mixed_digits=(1, 2))) vs uniform 2-digit, at the reference",
    "long_run": "GRPO for 200 steps, symmetric clip (0.2) vs clip-higher (eps_high 0.28), the policy's entropy",
    "free_length": "ArithmeticTask(filler=4): up to 4 '=' after the answer, only the answer checked; own reference",
}
