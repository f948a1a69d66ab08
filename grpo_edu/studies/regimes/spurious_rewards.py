"""The spurious-rewards regime: does a reward that ignores correctness raise accuracy (Shao et al. 2025)?

Shao et al. ("Spurious Rewards: Rethinking Training Signals in RLVR", 2025, arXiv 2506.10947) trained
Qwen2.5-Math-7B with GRPO on rewards that carry little or no information about the answer, and MATH-500
rose by 21.4 points with a random reward and 24.1 with "incorrect label" rewards, against 29.1 with the
ground truth; the same rewards did not help Llama3 or OLMo2. The two rewards run here, as they define them:

- **random**: "the reward is assigned randomly with a 50% chance for +1 or 0, completely independent of
  the answer" (`GRPOConfig.reward_signal="random"`, p = 0.5);
- **incorrect label**: the usual answer-matching reward, checked against a label that is wrong: their
  labels come from a majority vote over a model's sampled answers to each training prompt, "filtered to
  keep only the incorrect labels" (the data folder ``DeepScaleR_mv_labeled_llama3.2_3b_instruct_incorrect``
  of their repository, ruixin31/Rethink_RLVR), so an answer is paid when it matches the one fixed
  incorrect label of its prompt. The course's analogue (`IncorrectLabels`): each training prompt's label
  is the reference's most frequent *wrong* answer among ``votes`` = 64 answers it samples to that prompt
  (at temperature 1, ties to the smaller string; an answer that never ends or holds a special token does
  not vote), drawn the first time the prompt is sampled and kept for the run; a prompt to which the
  reference wrote no wrong answer has no label and is left out, as the paper leaves out the prompts whose
  vote is right. Where the reference's majority vote over all its answers is wrong (about two prompts in
  three here, `IncorrectLabels.stats`) the label is exactly the paper's; elsewhere it is the runner-up.

They trace the gains to the clip of PPO's objective: with a random reward the unclipped gradient is zero
in expectation, but the ratio's upper bound 1 + eps_high cannot bind on a token whose probability is
above 1 / (1 + eps_high) (its ratio cannot reach it), so the clipped objective leans towards what the
model already writes with high probability; that helps where what the model is sure of is often right
(Qwen-Math's code reasoning). The condition is counted here, not assumed (`clip_condition`): at the places
where the reference's sampled answer can still be right (after a right prefix), the share of its tokens above
that probability, and how many of those are right.

Here, each reward x each update schedule, in the default world and the spread world (notebook 08):

    one update        epochs 1, minibatches 1: the ratio is 1 at the only step, the clip idle
    several           epochs 4, minibatches 4 (16 updates per batch): the clip active (eps 0.2)
    several, no clip  the same with eps_low 1, eps_high 1e6: the clip never binds

beta = 0 (no KL to hold the policy back: the reward is the only force), the course's lr otherwise.
MEASURED per run: greedy held-out accuracy, sampled accuracy (pass@1 from n answers per prompt), pass@k,
the policy's token entropy on its own samples (the loss's logged ``entropy``), the clip fractions and the
training reward (for the incorrect label: how often the policy writes the label). `clip_bias` measures the
bias on one batch: how far one update moves the policy, on answers sampled fresh from pi_old.
"""

from __future__ import annotations

import copy
import dataclasses
from collections import Counter

import numpy as np
import torch

from ... import functional as Fn
from ...algorithms import make_algorithm
from ...evaluation import evaluate
from ...measure.difficulty import pass_at_k_curve
from ...train import train
from ...warmstart.presets import resolve_preset, with_world
from .common import bar, claim, paired, rule, spread, task_of, verdict

SIGNALS = ("true", "random", "incorrect label")
SCHEDULES = {  # name -> the GRPOConfig knobs of the update schedule
    "one update": dict(epochs=1, minibatches=1),
    "several": dict(epochs=4, minibatches=4),
    "several, no clip": dict(epochs=4, minibatches=4, eps_low=1.0, eps_high=1e6),
}
WORLDS = ("default", "spread")
SPREAD = " (spread)"  # the suffix of a run in the spread world
RUNS = {f"{s}, {u}": (s, u, "default") for s in SIGNALS for u in SCHEDULES} | {
    f"{s}, several{SPREAD}": (s, "several", "spread") for s in SIGNALS
}  # name -> (reward, schedule, world)
CORE = ("true, one update", "true, several", "random, one update", "random, several", "random, several, no clip")
BETA = 0.0  # no KL penalty: the reward (and the clip) are the only forces
VOTES = 64  # answers of the reference per prompt whose vote gives the incorrect label (Shao et al. vote over 64)
EPS_HIGH = 0.2  # the clip's upper range in "several" (GRPOConfig's default eps_low, eps_high None)
SIZES = {  # "full": the verb's; "notebook": notebook 12's; "tiny": the tests' (seconds, numbers meaningless)
    "full": dict(steps=30, pass_prompts=200, pass_ks=(1, 4, 16, 64, 256), runs=tuple(RUNS)),
    "notebook": dict(steps=15, pass_prompts=100, pass_ks=(1, 4, 16, 64),
                     runs=("true, one update", "true, several", "random, one update", "random, several",
                           "random, several, no clip", "incorrect label, several", f"true, several{SPREAD}",
                           f"random, several{SPREAD}")),
    "tiny": dict(steps=2, pass_prompts=4, pass_ks=(1, 2), runs=CORE + ("incorrect label, several",)),
}  # fmt: skip


def config(name: str) -> dict:
    """The GRPOConfig knobs of run ``name`` (a key of `RUNS`); the incorrect label is the task's
    (`IncorrectLabels`), so its config is the true reward's."""
    if name not in RUNS:
        raise ValueError(f"unknown run {name!r}; choose from {list(RUNS)}")
    signal, schedule, _ = RUNS[name]
    return dict(reward_signal="random" if signal == "random" else "true", beta=BETA, **SCHEDULES[schedule])


# ------------------------------------------------------------------ the incorrect-label reward


class IncorrectLabels:
    """A task whose training prompts carry one fixed incorrect label each: Shao et al.'s "incorrect label"
    reward is the task's own answer check against that label (the module docstring says how the labels are
    made). Held-out problems, the prompts' encoding and everything else are the wrapped task's, so held-out
    accuracy is measured against the true answers.

    ``stats``: prompts labelled, prompts left out (no wrong answer among the votes), prompts whose
    majority vote over all answers was wrong (where the label is the paper's exactly), and the mean share
    of the votes the label got."""

    def __init__(self, task, reference, votes: int = VOTES, seed: int = 0, device=None):
        if isinstance(votes, bool) or not isinstance(votes, int) or votes < 1:
            raise ValueError(f"votes must be a positive int, got {votes!r}")
        self.task, self.reference, self.votes = task, reference, votes
        device = device or next(reference.parameters()).device
        self.generator = torch.Generator(device=device).manual_seed(int(seed) + 7919)
        self.labels: dict[tuple, str | None] = {}
        self.stats = Counter()
        self._share = []

    def __getattr__(self, name):  # everything but sample() is the wrapped task's
        if name == "task":
            raise AttributeError(name)
        return getattr(self.task, name)

    @staticmethod
    def key(p) -> tuple:
        return (p.a, p.op, p.b)

    def _answers(self, problems) -> list[list[str | None]]:
        """``votes`` sampled answers (decoded) per problem; None for one that never ends or holds a special token."""
        from ...rollout import generate

        tok = self.task.tokenizer
        with torch.no_grad():
            ro = generate(self.reference, self.task.encode_prompts(problems), group_size=self.votes,
                          max_new_tokens=self.task.max_answer_length, temperature=1.0, generator=self.generator,
                          tokenizer=tok)  # fmt: skip
        out = []
        for i in range(len(problems)):
            row = []
            for ids in ro.completion_ids[i * self.votes : (i + 1) * self.votes].tolist():
                if tok.eos_id not in ids or any(t < 3 for t in ids[: ids.index(tok.eos_id)]):
                    row.append(None)
                    continue
                row.append(tok.decode(ids[: ids.index(tok.eos_id)]))
            out.append(row)
        return out

    def label(self, problems) -> None:
        """Draw the labels of the problems not labelled yet (one batch of ``votes`` answers each)."""
        new = list({self.key(p): p for p in problems if self.key(p) not in self.labels}.values())
        if not new:
            return
        for p, answers in zip(new, self._answers(new), strict=True):
            counts = Counter(a for a in answers if a is not None)
            wrong = sorted(((-c, a) for a, c in counts.items() if a != p.answer))
            self.stats["prompts"] += 1
            if not wrong:
                self.labels[self.key(p)] = None
                self.stats["left out"] += 1
                continue
            (neg, label), top = wrong[0], max(counts.values())
            self.labels[self.key(p)] = label
            self.stats["vote wrong"] += int(-neg == top and counts.get(p.answer, 0) < top)
            self._share.append(-neg / self.votes)

    @property
    def label_share(self) -> float:
        """The mean share of the votes the labels got."""
        return float(np.mean(self._share)) if self._share else float("nan")

    def sample(self, n: int, rng) -> list:
        """``n`` training problems, each with its incorrect label as the answer to match (prompts without
        one are left out and drawn again)."""
        out = []
        for _ in range(100):
            probs = self.task.sample(n - len(out), rng)
            self.label(probs)
            out += [dataclasses.replace(p, answer=self.labels[self.key(p)]) for p in probs
                    if self.labels[self.key(p)] is not None]  # fmt: skip
            if len(out) == n:
                return out
        raise RuntimeError("the reference answered (almost) every prompt right: no incorrect labels to train on")


# ------------------------------------------------------------------ the condition, counted


@torch.no_grad()
def clip_condition(reference, task, preset, seed: int = 0, prompts: int = 64, eps_high: float = EPS_HIGH) -> dict:
    """MEASURED at the reference, on ``prompts`` x G answers it samples (temperature 1). A token is
    *confident* when its probability is above 1 / (1 + eps_high): there the clip's upper bound cannot bind
    and its bias acts. Over the answer tokens (the masked completion tokens, <eos> included): the share
    confident (``above``), that share among the digits and among the <eos> tokens. The condition is read
    at the *open* positions, those after a right prefix (every earlier token the answer's), the only places
    where the token written decides whether the answer can still be right: the share of the answer tokens
    that are open (``open``), the share of the open positions that are confident (``above_open``), and
    among the confident and the other open positions the share that are right, the answer's token
    (``right_above``, ``right_below``). After a wrong prefix no token is right, so a count over every
    position would mix the model's confidence with its earlier mistakes: ``above_after_wrong`` is the share
    of the confident tokens that sit there. With the sampled and the greedy accuracy."""
    from ...measure.common import rngs
    from ...rollout import expand, generate

    G = make_algorithm("grpo").config.group_size
    rng, gen = rngs(seed + 3000, preset.device)
    probs = task.sample(prompts, rng)
    ro = generate(reference, task.encode_prompts(probs), group_size=G, max_new_tokens=task.max_answer_length,
                  temperature=1.0, generator=gen, tokenizer=task.tokenizer)  # fmt: skip
    rows, T = expand(probs, G), ro.completion_ids.shape[1]
    y = torch.tensor([(task.target_ids(p) + [-1] * T)[:T] for p in rows], device=ro.mask.device)
    match = (ro.completion_ids == y).long()
    m = ro.mask.bool()
    before = torch.cat([torch.ones_like(match[:, :1]), match.cumprod(1)[:, :-1]], 1).bool()
    opened = before & m  # after a right prefix (the first token's prefix is empty, so right)
    right = opened & match.bool()
    thr = 1.0 / (1.0 + eps_high)
    above = (ro.logprobs.exp() > thr) & m
    eos = (ro.completion_ids == task.tokenizer.eos_id) & m
    digit = m & ~eos

    def share(num, den):
        return float(num.sum()) / max(1, int(den.sum()))

    correct = task.token_scores(rows, ro.completion_ids, ro.mask).sum(1) > 0
    return {
        "threshold": thr,
        "tokens": int(m.sum()),
        "above": share(above, m),
        "digits_above": share(above & digit, digit),
        "eos_above": share(above & eos, eos),
        "open": share(opened, m),
        "above_open": share(above & opened, opened),
        "right_above": share(above & right, above & opened),
        "right_below": share(opened & ~above & right, opened & ~above),
        "above_after_wrong": share(above & ~opened, above),
        "sampled": float(correct.float().mean()),
        "greedy": float(evaluate(reference, task)),
    }


# ------------------------------------------------------------------ the bias on one batch


def clip_bias(reference, task, preset, seed: int = 0, draws: int = 8, prompts: int = 64) -> dict:
    """MEASURED on one batch (``prompts`` x G answers sampled from ``reference``): for each update schedule
    of `SCHEDULES`, ``draws`` independent random rewards (p = 0.5), each trained on from the reference
    (one `grpo_edu.train.update`, a fresh optimizer). Per draw, on a second batch sampled FRESH from the
    reference (pi_old), with the states of its answers: the exact KL(pi_old || pi_new) per token (``kl``),
    the mean log pi_new - log pi_old of its tokens (``dlogp``: an estimate of -KL(pi_old || pi_new), <= 0
    in expectation whatever the update did, so a distance, not a direction) and the change of the token
    entropy (``dH``); on the batch the update fitted, the mean log pi change of its own tokens
    (``dlogp_fitted``: not a distance, a true-reward update raises its right answers there); and the clip
    fractions. The mean over draws is the schedule's bias; the noise averages out as 1/sqrt(draws). The
    controls "one update, true reward" and "several, true reward" train on the true reward (their draws
    differ only in the minibatches' shuffle, so the one-update control's draws are equal)."""
    from ...measure.common import rngs
    from ...rollout import sample_batch
    from ...train import update

    G = make_algorithm("grpo").config.group_size
    rng, gen = rngs(seed, preset.device)
    ro, scores, _ = sample_batch(reference, task, prompts, G, rng, gen)
    fresh, _, _ = sample_batch(reference, task, prompts, G, *rngs(seed + 500, preset.device))

    @torch.no_grad()
    def logits_on(policy, r):
        return policy(r.input_ids)[:, r.prompt_length - 1 : -1]

    def mean_logp(logits, r):
        return float(Fn.masked_mean(Fn.token_logprobs(logits, r.completion_ids), r.mask))

    old_fresh, old_fit = logits_on(reference, fresh), logits_on(reference, ro)
    h0 = float(Fn.masked_mean(Fn.entropy(old_fresh), fresh.mask))
    lp0, lp0_fit = mean_logp(old_fresh, fresh), mean_logp(old_fit, ro)
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
            new_fresh = logits_on(policy, fresh)
            rows.append({
                "kl": float(Fn.masked_mean(Fn.exact_kl(new_fresh, old_fresh, "ref||pi"), fresh.mask)),
                "dlogp": mean_logp(new_fresh, fresh) - lp0,
                "dH": float(Fn.masked_mean(Fn.entropy(new_fresh), fresh.mask)) - h0,
                "dlogp_fitted": mean_logp(logits_on(policy, ro), ro) - lp0_fit,
                "clip_high": st["clip_high"],
                "clip_low": st["clip_low"],
            })  # fmt: skip
        out[name] = {k: [r[k] for r in rows] for k in rows[0]}
    return {"entropy": h0, "logp": lp0, "schedules": out}


# ------------------------------------------------------------------ training runs


def measure_policy(policy, task, z: dict, seed: int) -> dict:
    """Greedy held-out accuracy and pass@k (k in ``z["pass_ks"]``, n = the largest k, on the first
    ``z["pass_prompts"]`` held-out prompts): pass@1 is the sampled accuracy."""
    probs = task.eval_problems()[: z["pass_prompts"]]
    pk = pass_at_k_curve(policy, task, z["pass_ks"], problems=probs, seed=seed)["all"]
    return {"greedy": float(evaluate(policy, task)), "pass": {int(k): float(v) for k, v in pk.items()}}


def one_run(reference, task, preset, name: str, seed: int, z: dict, labels: IncorrectLabels | None = None) -> dict:
    """Run ``name`` for ``z["steps"]`` from ``reference`` on ``task`` (the incorrect-label runs on
    ``labels``, that task relabelled): its measurements on the true task (`measure_policy`), the entropy
    and the training reward per step, and the clip fractions (mean over steps)."""
    if RUNS[name][0] == "incorrect label" and labels is None:
        raise ValueError(f"run {name!r} needs the task's incorrect labels (IncorrectLabels)")
    policy = copy.deepcopy(reference)
    train_task = labels if RUNS[name][0] == "incorrect label" else task
    h = train(make_algorithm("grpo", **config(name)), train_task, reference, policy, preset, steps=z["steps"],
              seed=seed, eval_every=z["steps"], progress=False, name=name)  # fmt: skip
    out = measure_policy(policy, task, z, seed)
    out["entropy"] = [round(float(x), 5) for x in h.series("entropy")]
    out["reward"] = [round(float(x), 5) for x in h.series("reward")]
    for k in ("clip_ratio", "clip_high", "clip_low"):
        out[k] = float(np.nanmean(h.series(k)))
    return out


def run_spurious(reference, preset="cpu", seeds=(0, 1, 2), size: str = "full", runs=None, progress=True,
                 references=None) -> dict:  # fmt: skip
    """Each run of ``runs`` (default: the size's; `RUNS`: reward x update schedule x world) from the
    world's reference (``reference`` for the preset's world; the other from ``references[world]``, else
    `reference_policy`, trained once and cached), per seed; per world and seed the reference's own
    measurements (pass@k draws its samples with that seed), the condition (`clip_condition`) and, for
    the incorrect-label runs, the labels' statistics."""
    from ...warmstart.reference import reference_policy

    if size not in SIZES:
        raise ValueError(f"size must be one of {list(SIZES)}, got {size!r}")
    preset, z = resolve_preset(preset), SIZES[size]
    runs = tuple(z["runs"] if runs is None else runs)
    unknown = [r for r in runs if r not in RUNS]
    if unknown or not runs:
        raise ValueError(f"unknown runs {unknown or '(none given)'}; choose from {list(RUNS)}")
    worlds = [w for w in WORLDS if any(RUNS[r][2] == w for r in runs)]
    presets = {w: preset if preset.world == w else with_world(preset, w) for w in worlds}
    refs = {}
    for w in worlds:
        given = reference if preset.world == w else (references or {}).get(w)
        refs[w] = given if given is not None else reference_policy(presets[w], progress=progress)
    tasks = {w: task_of(presets[w]) for w in worlds}
    res = {"size": size, "steps": z["steps"], "seeds": list(seeds), "ks": list(z["pass_ks"]), "worlds": worlds,
           "reference": {w: [] for w in worlds}, "condition": {w: [] for w in worlds}, "labels": {w: [] for w in worlds},
           "runs": {r: [] for r in runs}}  # fmt: skip
    progress_bar = bar(len(seeds) * (len(runs) + len(worlds)), "spurious rewards", progress)
    for seed in seeds:
        labels = {}
        for w in worlds:
            res["reference"][w].append(measure_policy(refs[w], tasks[w], z, seed))
            res["condition"][w].append(clip_condition(refs[w], tasks[w], presets[w], seed))
            labels[w] = IncorrectLabels(tasks[w], refs[w], seed=seed)
            progress_bar.update(1)
        for name in runs:
            w = RUNS[name][2]
            res["runs"][name].append(one_run(refs[w], tasks[w], presets[w], name, seed, z, labels[w]))
            progress_bar.update(1)
        for w in worlds:
            if labels[w].stats["prompts"]:
                lab = labels[w]
                res["labels"][w].append({"prompts": lab.stats["prompts"], "left_out": lab.stats["left out"],
                                         "vote_wrong": lab.stats["vote wrong"] / lab.stats["prompts"],
                                         "label_share": lab.label_share})  # fmt: skip
    progress_bar.close()
    if set(CORE) <= set(runs):  # the claims need these runs at least
        res["claims"] = claims(res)
    return res


def tail(series, steps: int) -> float:
    """The mean of the last tenth of the steps (at least one) of a per-step series."""
    w = max(1, steps // 10)
    return float(np.mean(series[-w:]))


def claims(res) -> list:
    """Shao et al.'s claims and the controls, each by the two-sided rule over the seeds; each claim's text
    names the reward (as the paper defines it), the schedule and the world it tests."""
    runs, ref, n, steps = res["runs"], res["reference"], len(res["seeds"]), res["steps"]
    k_max = max(res["ks"])

    def each(values, spec=".3f"):
        return spread(list(values), spec)

    def world(name):
        return RUNS[name][2]

    def p1(name):
        return [r["pass"][1] for r in runs[name]]

    def rise(name):  # sampled accuracy after minus the reference's, per seed
        return paired(p1(name), [r["pass"][1] for r in ref[world(name)]])

    def row(name):
        rs = runs[name]
        return (f"{name}: sampled {each(p1(name))}, greedy {each(r['greedy'] for r in rs)}, pass@{k_max} "
                f"{each(r['pass'][k_max] for r in rs)}, entropy {each(tail(r['entropy'], steps) for r in rs)}")  # fmt: skip

    def start(w):
        c = res["condition"][w]
        return (f"{w} world reference: sampled {each(r['pass'][1] for r in ref[w])}, greedy "
                f"{each(r['greedy'] for r in ref[w])}; answer tokens above 1/(1 + eps_high) = "
                f"{c[0]['threshold']:.3f}: {each(x['above'] for x in c)} (digits {each(x['digits_above'] for x in c)}, "
                f"<eos> {each(x['eos_above'] for x in c)}), {each(x['above_after_wrong'] for x in c)} of them after a "
                f"wrong token; of the positions after a right prefix ({each(x['open'] for x in c)} of the answer "
                f"tokens) {each(x['above_open'] for x in c)} confident, right among those "
                f"{each(x['right_above'] for x in c)}, among the others {each(x['right_below'] for x in c)}")  # fmt: skip

    out = []
    for w in res["worlds"]:
        c = res["condition"][w]
        out.append(claim(
            f"[{w} world] the reference meets Shao et al.'s condition, counted where its answer can still be right "
            "(after a right prefix): most of its tokens there on which the clip's upward bias acts (probability above "
            "1/(1 + eps_high)) are right",
            f"{start(w)} ({rule(0.5, 0.5, 'the share right among the confident ones after a right prefix', n)})",
            verdict([x["right_above"] for x in c], 0.5, 0.5),
        ))  # fmt: skip
    out.append(claim(
        "control [default world]: the true reward raises the sampled accuracy (several updates per batch)",
        f"after {steps} steps {row('true, several')} ({rule(0.02, 0.0, 'the rise', n)})",
        verdict(rise("true, several"), 0.02, 0.0),
    ))  # fmt: skip
    for name in ("random, several", f"random, several{SPREAD}"):
        if name in runs:
            other = "random, one update" if name == "random, several" else f"true, several{SPREAD}"
            also = f"; {row(other)}" if other in runs else ""  # the other schedule, or the world's true reward
            out.append(claim(
                f"[{world(name)} world] random rewards (p = 0.5, Shao et al.'s) raise the sampled accuracy with "
                "several updates per batch (the clip active)",
                f"{row(name)}{also} ({rule(0.02, 0.0, 'the rise', n)})",
                verdict(rise(name), 0.02, 0.0),
            ))  # fmt: skip
    for name in ("incorrect label, several", f"incorrect label, several{SPREAD}"):
        if name in runs:
            lab = res["labels"][world(name)]
            out.append(claim(
                f"[{world(name)} world] incorrect-label rewards (Shao et al.: an answer is paid when it matches its "
                "prompt's one fixed wrong label, here the reference's most frequent wrong answer) raise the sampled "
                "accuracy (several updates per batch)",
                f"{row(name)}; the label was the majority vote on {each(x['vote_wrong'] for x in lab)} of the prompts, "
                f"with {each(x['label_share'] for x in lab)} of the votes; the policy wrote the label on "
                f"{each(tail(r['reward'], steps) for r in runs[name])} of its answers at the end "
                f"({rule(0.02, 0.0, 'the rise', n)})",
                verdict(rise(name), 0.02, 0.0),
            ))  # fmt: skip
    out.append(claim(
        "[default world] with random rewards and several updates per batch, the sampled accuracy ends higher with "
        "the clip than without it",
        f"{row('random, several, no clip')}; clip fraction with the clip "
        f"{each(r['clip_ratio'] for r in runs['random, several'])} (above "
        f"{each(r['clip_high'] for r in runs['random, several'])}, below "
        f"{each(r['clip_low'] for r in runs['random, several'])}) "
        f"({rule(0.01, 0.0, 'clip minus no clip, per seed', n)})",
        verdict(paired(p1("random, several"), p1("random, several, no clip")), 0.01, 0.0),
    ))  # fmt: skip
    h0 = [r["entropy"][0] for r in runs["true, one update"]]  # step 1 at ratio 1: the reference on its samples
    ent = {u: [tail(r["entropy"], steps) for r in runs[f"random, {u}"]] for u in SCHEDULES}
    out.append(claim(
        "[default world] with random rewards and several clipped updates per batch the entropy ends below the "
        "reference's (the sharpening Shao et al. credit to the clip; no clip-off control in this rule)",
        f"entropy: reference {each(h0)}; after {steps} steps of random rewards, one update {each(ent['one update'])}, "
        f"several {each(ent['several'])}, several without the clip {each(ent['several, no clip'])} "
        f"({rule(0.02, 0.0, 'the reference minus several, per seed', n)})",
        verdict(paired(h0, ent["several"]), 0.02, 0.0),
    ))  # fmt: skip
    return out


def figure(res):
    """Sampled accuracy (pass@1) and entropy of each run after its steps, against its world's reference."""
    from matplotlib.figure import Figure

    from ...figures.plotstyle import PALETTE, set_alt
    from .figures import PERCENT

    fig = Figure(figsize=(11, 4.2), layout="constrained")
    ax, bx = fig.subplots(1, 2)
    names = list(res["runs"])
    groups = [(s, w) for w in res["worlds"] for s in SIGNALS if any(RUNS[r][0] == s and RUNS[r][2] == w for r in names)]
    schedules = [u for u in SCHEDULES if any(RUNS[r][1] == u for r in names)]
    width = 0.8 / max(1, len(schedules))
    for j, u in enumerate(schedules):
        xs, p1, ent = [], [], []
        for i, (s, w) in enumerate(groups):
            rs = res["runs"].get(f"{s}, {u}{SPREAD if w == 'spread' else ''}")
            if rs:
                xs.append(i + j * width)
                p1.append(float(np.mean([r["pass"][1] for r in rs])))
                ent.append(float(np.mean([tail(r["entropy"], res["steps"]) for r in rs])))
        ax.bar(xs, p1, width, color=PALETTE[j], label=u)
        bx.bar(xs, ent, width, color=PALETTE[j], label=u)
    for i, (_s, w) in enumerate(groups):
        ref_p1 = float(np.mean([r["pass"][1] for r in res["reference"][w]]))
        ax.hlines(
            ref_p1, i - width / 2, i + 0.8 - width / 2, color="0.3", ls="--", label="reference" if i == 0 else None
        )
    for a, what in ((ax, "sampled accuracy"), (bx, "token entropy (nats)")):
        a.set_xticks(np.arange(len(groups)) + 0.4 - width / 2,
                     [f"{s}\n({w} world)" if s != "incorrect label" else f"incorrect\nlabel ({w})" for s, w in groups])  # fmt: skip
        a.set_ylabel(f"{what} after {res['steps']} steps")
        a.legend(fontsize="small")
    ax.yaxis.set_major_formatter(PERCENT)
    ax.set_title("sampled accuracy (pass@1), mean over seeds")
    bx.set_title("the policy's entropy on its own samples")
    return set_alt(fig, "Bars: sampled accuracy (left) and token entropy (right) after GRPO with the true, a random "
                   "and an incorrect-label reward, one update per batch, several, and several without the clip, in "
                   "the default world and the spread world; dashed: each world's reference.")  # fmt: skip
