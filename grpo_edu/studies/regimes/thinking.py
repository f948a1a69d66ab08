"""The thinking regime: a scratchpad that can make the answer right, and R1-Zero's length curve.

DeepSeek-R1-Zero, trained by GRPO on a final-answer reward alone, wrote longer and longer
responses as its accuracy rose. Whether RL lengthens responses because longer reasoning pays,
or because of the loss (GRPO's 1/|o_i| pushes long wrong answers down less per token, "Concise
Reasoning via RL", 2504.05185), is disputed. `envs.ScratchpadTask` has both causes and a switch
for each: the policy may write per-digit partial products and carries before ``=`` and its
answer (only the answer is checked), which makes hard products (b >= 2) tractable and easy ones
(b in {0, 1}) no easier; ``loss_type`` turns the aggregation's length bias on (sequence_mean)
or off (constant, token_mean); ``scratchpad="blank"`` keeps the lengths and empties the
working, so thinking cannot pay.

Every training batch is recorded (`batch_record`, from ``train``'s per-step callback), so the
curves over steps are what the policy wrote while it learned, split by difficulty and by form,
at no extra sampling; each of ``train``'s evaluations (its ``on_evaluate`` hook, the first and the
last included) gives its greedy held-out answers, recorded by difficulty and form (`answers_record`):
nothing is generated twice.
"""

from __future__ import annotations

import copy
import dataclasses
import math

import numpy as np
import torch

from ...algorithms import make_algorithm
from ...evaluation import evaluate
from ...measure.common import plain
from ...rollout import sample_batch
from ...train import train
from ...warmstart.presets import resolve_preset
from .common import above, bar, claim, paired, rngs, rule, spread, verdict
from .free_length import _within_group_corr, length_push, long_over_short

PARTS = ("curve", "bias", "cause", "budget", "clip_higher")
DEFAULT_PARTS = ("curve", "bias", "cause")  # about 5 minutes on the cpu preset
DIFFICULTIES = ("hard", "easy")
WINDOW = 10  # training steps averaged for "the end of a run" (one batch is 512 samples)


def thinking_setup(preset="cpu", tiny: bool = False, **knobs):
    """``(task, preset)`` of the thinking regime: ``ScratchpadTask(digits=preset digits + 1,
    **knobs)`` (3-digit x 1-digit products on the cpu preset, 4-digit on the gpu one) and the
    preset with a context long enough for the scratchpad. ``tiny``: a few prompts per step, a
    small held-out set and an SFT of a few steps (a test of the code, seconds, not a result).
    ``reference_policy(preset, task=task)`` trains (once, then cached) the task's reference."""
    from envs import ScratchpadTask

    preset = resolve_preset(preset)
    knobs = {"digits": preset.task["digits"] + 1, "eval_size": 64 if tiny else preset.task["eval_size"], **knobs}
    task = ScratchpadTask(**knobs)
    fit = task.prompt_length + task.scratchpad_length
    model = dataclasses.replace(preset.model, max_seq_len=max(preset.model.max_seq_len, fit))
    preset = dataclasses.replace(preset, model=model)
    if tiny:
        sft = dataclasses.replace(preset.sft, max_steps=10, eval_every=5, batch_size=64)
        preset = dataclasses.replace(preset, sft=sft, sequences_per_step=32, eval_every=2)  # GRPO 4 x 8
    return task, preset


# ---------------------------------------------------------------- what the policy writes
def _mean(x: np.ndarray) -> float:
    return float(x.mean()) if x.size else math.nan


def summarize(hard, scratch, length, reward, truncated=None, group_size: int | None = None) -> dict:
    """By difficulty (``"all"``, ``"hard"``, ``"easy"``): the share of completions that write a
    scratchpad, the mean length (tokens, ``<eos>`` included), the accuracy, the accuracy of each
    form, the mean length of wrong and of right answers, the share truncated; with
    ``group_size`` (rows in groups of that many samples of one prompt) the within-group
    correlation of length and reward, ``"corr"`` (all prompts) and ``"corr_hard"``."""
    hard, scratch = np.asarray(hard, bool), np.asarray(scratch, bool)
    length, reward = np.asarray(length, float), np.asarray(reward, float)
    truncated = np.zeros_like(hard) if truncated is None else np.asarray(truncated, bool)
    out = {}
    for name, sel in (("all", np.ones_like(hard)), ("hard", hard), ("easy", ~hard)):
        right = reward > 0
        out[name] = {
            "n": int(sel.sum()),
            "p_scratchpad": _mean(scratch[sel]),
            "length": _mean(length[sel]),
            "accuracy": _mean(reward[sel]),
            "acc_scratchpad": _mean(reward[sel & scratch]),
            "acc_direct": _mean(reward[sel & ~scratch]),
            "len_wrong": _mean(length[sel & ~right]),
            "len_right": _mean(length[sel & right]),
            "truncated": _mean(truncated[sel]),
        }
    if group_size:
        L, r = torch.tensor(length), torch.tensor(reward)
        out["corr"] = _within_group_corr(L, r, group_size)
        g = torch.tensor(hard).view(-1, group_size)[:, 0].repeat_interleave(group_size)
        out["corr_hard"] = _within_group_corr(L[g], r[g], group_size) if bool(g.any()) else math.nan
    return out


def batch_record(task, problems, rollout, scores, group_size: int) -> dict:
    """`summarize` of one training batch: what the policy wrote in that step, by difficulty and
    form (``scores``: the task's per-token scores of ``rollout``; ``problems``: one per row)."""
    ids, m = rollout.completion_ids, rollout.mask > 0
    eos = ((ids == task.tokenizer.eos_id) & m).any(1)
    return summarize(
        [task.difficulty(p) == "hard" for p in problems],
        ((ids == task.equals_id) & m).any(1).cpu().numpy(),
        rollout.mask.sum(1).cpu().numpy(),
        (scores.sum(1) > task.reward_values[0]).float().cpu().numpy(),
        (~eos).cpu().numpy(),
        group_size,
    )


def answers_record(task, problems, completions, correct) -> dict:
    """`summarize` of answers to ``problems`` (texts) and whether each was right (0/1), by difficulty
    and form: of an evaluation's greedy held-out answers (a `grpo_edu.train.Evaluation`)."""
    length = [len(task.tokenizer.encode(c)) + 1 for c in completions]
    hard = [task.difficulty(p) == "hard" for p in problems]
    return summarize(hard, [task.form(c) == "scratchpad" for c in completions], length, np.asarray(correct, float))


class DirectOnly(torch.nn.Module):
    """``policy`` with every token that is not a digit or ``<eos>`` forbidden: it can only answer
    directly. Greedy, its held-out accuracy is the policy's direct-answer ceiling."""

    def __init__(self, policy, task):
        super().__init__()
        self.policy, self.config = policy, policy.config
        tok = task.tokenizer
        self.banned = [i for i, s in enumerate(tok.vocab) if not (s.isdigit() or i == tok.eos_id)]

    def new_cache(self):
        return self.policy.new_cache()

    def forward(self, idx, cache=None, last=None):
        logits = self.policy(idx, cache, last)
        logits[..., self.banned] = float("-inf")
        return logits


def held_out(policy, task) -> dict:
    """Greedy held-out accuracy by difficulty, as the policy answers and answering directly."""
    problems = task.eval_problems()
    hard = np.array([task.difficulty(p) == "hard" for p in problems])
    out = {}
    for name, model in (("greedy", policy), ("direct", DirectOnly(policy, task))):
        _, correct = evaluate(model, task, return_correct=True)
        c = correct.numpy().astype(float)
        out[name] = {"all": _mean(c), "hard": _mean(c[hard]), "easy": _mean(c[~hard])}
    return out


def profile(policy, task, seed: int, n_prompts: int = 256, group_size: int | None = None) -> dict:
    """What ``policy`` writes at temperature 1 on ``n_prompts`` training problems x ``group_size``
    (default GRPO's G, its config's; `summarize`, seeded), its greedy held-out accuracy by
    difficulty (`held_out`), and the push per token of one update on a group's longest wrong
    (right) answer over its shortest, per aggregation (`long_over_short`)."""
    group_size = group_size or make_algorithm("grpo").config.group_size
    ro, scores, problems = sample_batch(
        policy, task, n_prompts, group_size, *rngs(seed, next(policy.parameters()).device)
    )
    r = (scores.sum(1) > task.reward_values[0]).float()
    out = summarize(
        [task.difficulty(p) == "hard" for p in problems],
        [task.form(t) == "scratchpad" for t in ro.texts],
        ro.lengths.cpu().numpy(),
        r.cpu().numpy(),
        ro.truncated.cpu().numpy(),
        group_size,
    )
    L = ro.mask.sum(1)
    out["push"] = {
        m: {part: long_over_short(length_push(ro, r, group_size, m), L, sel, group_size)
            for part, sel in (("wrong", r == 0), ("right", r > 0))}
        for m in ("sequence_mean", "token_mean", "constant")
    }  # fmt: skip
    out["held_out"] = held_out(policy, task)
    out["examples"] = [
        {"prompt": problems[i].prompt, "completion": ro.texts[i], "reward": float(r[i])} for i in range(0, 48, 6)
    ]
    return out


def curve(records, part: str, key: str) -> list[float]:
    """One quantity over steps from `batch_record` records: ``records[i][part][key]`` (``part`` ``"corr"``
    or ``"corr_hard"``: ``key`` is ignored)."""
    return [float(rec[part]) if part.startswith("corr") else float(rec[part][key]) for rec in records]


def window(records, part: str, key: str, end: int | None = None, w: int = WINDOW) -> float:
    """The mean of `curve` over the ``w`` steps up to ``end`` (default: the last), NaN steps skipped."""
    vals = np.array(curve(records, part, key)[: end or len(records)][-w:], float)
    return float(np.nanmean(vals)) if np.isfinite(vals).any() else math.nan


def run_one(task, reference, preset, steps: int, seed: int, name: str, samples: int = 0, **config) -> dict:
    """GRPO with ``config`` for ``steps`` steps from ``reference``, every batch recorded.

    Returns ``{"name", "config", "batches", "evals", "eval_steps", "accuracy", "entropy",
    "examples", "policy"}``: the per-step summaries (`batch_record`, one per step), greedy held-out accuracy
    (overall, and by difficulty in ``evals``) at each evaluation, the loss's entropy per step,
    and ``samples`` completions of the final policy (prompt, completion, reward)."""
    algo = make_algorithm("grpo", **config)
    policy = copy.deepcopy(reference)
    batches, evals = [], []

    def watch(step):  # train's callback, after each step: what the policy wrote
        batches.append(batch_record(task, step.problems, step.rollout, step.scores, algo.config.group_size))

    def answers(e):  # train's on_evaluate, at each evaluation (step 0 and the last included): its greedy answers
        evals.append(answers_record(task, e.problems, e.completions, e.correct.numpy()))

    h = train(algo, task, reference=reference, policy=policy, preset=preset, steps=steps, seed=seed, progress=False,
              name=name, callback=watch, on_evaluate=answers)  # fmt: skip
    examples = []
    if samples:
        ro, scores, problems = sample_batch(policy, task, samples, 1, *rngs(seed + 99, preset.device))
        examples = [{"prompt": p.prompt, "completion": t, "reward": float(s)}
                    for p, t, s in zip(problems, ro.texts, scores.sum(1).tolist())]  # fmt: skip
    return {
        "name": name,
        "config": config,
        "batches": batches,
        "evals": evals,
        "eval_steps": [e["step"] for e in h.evals],
        "accuracy": [e["accuracy"] for e in h.evals],
        "entropy": [float(x) for x in h.series("entropy")],
        "examples": examples,
        "policy": policy,
    }


def _growth(run, ref, part: str, key: str = "length", end: int | None = None) -> float:
    """The mean of ``key`` over the training batches up to step ``end`` (the last WINDOW of them)
    minus the reference's (`profile`)."""
    return window(run["batches"], part, key, end) - ref[part][key]


# ---------------------------------------------------------------- the regime
def run_thinking(
    reference=None,
    preset="cpu",
    seeds=(0, 1, 2),
    steps: int = 100,
    arm_steps: int = 50,
    parts=DEFAULT_PARTS,
    budget: int | None = None,
    eps_high: float = 0.28,
    tiny: bool = False,
    own_references: dict | None = None,
    progress: bool = True,
) -> dict:
    """R1-Zero's length curve on `envs.ScratchpadTask`, by difficulty, and what drives it.

    ``reference``: the ScratchpadTask's reference (None: `reference_policy` of
    `thinking_setup`'s task, trained once and cached); a policy whose context cannot hold the
    task's prompt and scratchpad (the default task's, which `run_regimes` hands every regime)
    is not used, as in the free-length regime. ``own_references`` may hold
    ``{"blank": policy}`` for the blank task's. ``tiny``: `thinking_setup`'s tiny preset, for
    tests. ``parts`` (`PARTS`), MEASURED per seed of ``seeds``:

    - ``"curve"``: GRPO (token_mean, the default) for ``steps`` steps. Every training batch by
      difficulty (hard: b >= 2; easy: b in {0, 1}) and form: P(scratchpad), the length, the
      accuracy of direct and scratchpad answers; greedy held-out accuracy by difficulty every
      ``eval_every`` steps; at the reference (256 prompts x 8 samples) and at the end, the
      same numbers, the within-group correlation of length and reward, and the greedy
      held-out accuracy when the policy may only answer directly (`DirectOnly`).
    - ``"bias"``: the push per token of one reference update on a group's longest wrong (right)
      answer over its shortest, per aggregation; GRPO for ``arm_steps`` steps with
      sequence_mean (GRPO's 1/|o_i|) and constant (Dr. GRPO): the length of wrong answers and
      P(scratchpad) over the last WINDOW steps, against token_mean's at the same step.
    - ``"cause"``: the same with thinking switched off: ``ScratchpadTask(scratchpad="blank")``
      (the same lengths, nothing in the working) from its own reference, sequence_mean and
      constant for ``arm_steps`` steps: does the aggregation's bias alone lengthen responses,
      and is whatever the length does there the bias's (sequence_mean against constant)?
    - ``"budget"``: ``ScratchpadTask(budget=...)`` (default: the scratchpad length - 1, so a
      scratchpad answer with a 4-digit product runs past it and is wrong) from the same
      reference, token_mean for ``arm_steps`` steps with and without
      ``mask_truncated_completions``: the share truncated.
    - ``"clip_higher"``: token_mean with ``eps_high`` for ``steps`` steps: its entropy over the
      run against the symmetric clip's (the curve's runs)."""
    from ...warmstart.reference import reference_policy

    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        raise ValueError(f"unknown parts {unknown}; choose from {list(PARTS)}")
    if tiny:
        steps, arm_steps = min(steps, 4), min(arm_steps, 4)
    if arm_steps > steps and ("bias" in parts):
        raise ValueError(f"arm_steps ({arm_steps}) must not exceed steps ({steps}): the bias arms compare at arm_steps")
    task, fit = thinking_setup(preset, tiny)
    need = task.prompt_length + task.scratchpad_length  # the default task's reference (run_regimes') cannot
    if reference is not None and getattr(getattr(reference, "config", None), "max_seq_len", 0) < need:
        reference = None
    ref = reference if reference is not None else reference_policy(fit, task=task, progress=progress)
    own = dict(own_references or {})
    n_prompts = 16 if tiny else 256
    n_runs = len(seeds) * (("curve" in parts) + 2 * ("bias" in parts) + 2 * ("cause" in parts) + 2 * ("budget" in parts)
                           + ("clip_higher" in parts))  # fmt: skip
    progress_bar = bar(n_runs, "thinking", progress)
    res = {"steps": steps, "arm_steps": arm_steps, "seeds": list(seeds), "parts": list(parts), "window": WINDOW,
           "task": repr(task), "eps_high": eps_high, "runs": {}, "reference": {}}  # fmt: skip

    def add(key, seed, run):
        run.pop("policy", None)
        res["runs"].setdefault(key, []).append(run)
        progress_bar.update(1)

    for seed in seeds:
        res["reference"].setdefault("carries", []).append(profile(ref, task, seed + 11, n_prompts))
        if "curve" in parts or "bias" in parts or "clip_higher" in parts:
            run = run_one(task, ref, fit, steps, seed, "token_mean", samples=16, loss_type="token_mean")
            run["final"] = profile(run["policy"], task, seed + 11, n_prompts)
            add("token_mean", seed, run)
        if "bias" in parts:
            for mode in ("sequence_mean", "constant"):
                add(mode, seed, run_one(task, ref, fit, arm_steps, seed, mode, loss_type=mode))
        if "cause" in parts:
            blank, _ = thinking_setup(preset, tiny, scratchpad="blank")
            if "blank" not in own:
                own["blank"] = reference_policy(fit, task=blank, progress=progress)
            res["reference"].setdefault("blank", []).append(profile(own["blank"], blank, seed + 11, n_prompts))
            for mode in ("sequence_mean", "constant"):
                add(f"blank {mode}", seed,
                    run_one(blank, own["blank"], fit, arm_steps, seed, f"blank {mode}", loss_type=mode))  # fmt: skip
        if "budget" in parts:
            cut, _ = thinking_setup(preset, tiny, budget=budget or task.scratchpad_length - 1)
            res["budget"] = cut.max_answer_length
            res["reference"].setdefault("budget", []).append(profile(ref, cut, seed + 11, n_prompts))
            for mask in (False, True):
                key = "budget, masked" if mask else "budget"
                add(key, seed, run_one(cut, ref, fit, arm_steps, seed, key, mask_truncated_completions=mask))
        if "clip_higher" in parts:
            add("clip-higher", seed, run_one(task, ref, fit, steps, seed, "clip-higher", eps_high=eps_high))
    progress_bar.close()
    res["claims"] = thinking_claims(res)
    return res


def task_reference(preset="cpu"):
    """The thinking task's reference on ``preset`` (cached), as notebook 09 builds it."""
    from ...warmstart.reference import reference_policy

    task, fit = thinking_setup(preset)
    return reference_policy(fit, task=task, progress=False)


def run_causes(reference, preset="cpu", progress: bool = True, seeds=(0,), steps: int = 50, tiny: bool = False) -> dict:
    """Notebook 09 section 4's runs, per seed of ``seeds``: `profile` of the blank task's reference (its own
    SFT, cached; `thinking_setup`'s task with ``scratchpad="blank"``), then `run_one` for ``steps`` steps with
    constant and sequence_mean on the task from ``reference`` (the thinking task's, ``reference_policy(fit,
    task=task)``) and with sequence_mean and constant on the blank task from its reference.

    Returns ``{"seeds", "steps", "blank_ref", "runs"}``: ``blank_ref[i]`` the blank reference's profile on
    seed ``i``; ``runs[key][i]`` a `run_one` result without its policy, ``key`` "constant", "sequence_mean",
    "blank, sequence_mean" and "blank, constant". Numbers only (JSON): `grpo_edu.studies.stored_runs` keeps it.
    ``tiny``: `thinking_setup`'s tiny task and preset, 16 prompts profiled (a test of the code, seconds)."""
    from ...warmstart.reference import reference_policy

    task, fit = thinking_setup(preset, tiny)
    need = task.prompt_length + task.scratchpad_length
    if getattr(getattr(reference, "config", None), "max_seq_len", 0) < need:
        raise ValueError(
            f"the reference's context cannot hold the task's {need} tokens: pass the thinking task's reference, "
            "reference_policy(fit, task=task) with task, fit = thinking_setup(preset)"
        )
    blank, _ = thinking_setup(preset, tiny, scratchpad="blank")
    blank_reference = reference_policy(fit, task=blank, progress=False)  # SFT on the blank demonstrations, cached
    progress_bar = bar(4 * len(seeds), "thinking causes", progress)
    res = {"seeds": list(seeds), "steps": steps, "blank_ref": [], "runs": {}}

    def add(key, run):
        run.pop("policy")
        res["runs"].setdefault(key, []).append(plain(run))
        progress_bar.update(1)

    for seed in seeds:
        res["blank_ref"].append(plain(profile(blank_reference, blank, seed + 11, 16 if tiny else 256)))
        for mode in ("constant", "sequence_mean"):
            add(mode, run_one(task, reference, fit, steps, seed, mode, loss_type=mode))
        for mode in ("sequence_mean", "constant"):
            add(f"blank, {mode}", run_one(blank, blank_reference, fit, steps, seed, "blank", loss_type=mode))
    progress_bar.close()
    return res


def thinking_claims(res: dict) -> list[dict]:
    """The regime's claims from `run_thinking`'s numbers (each with its two-sided rule)."""
    runs, refs, n = res["runs"], res["reference"], len(res["seeds"])
    steps, arm, claims = res["steps"], res["arm_steps"], []
    ref = refs["carries"]
    tm = runs.get("token_mean", [])
    if tm and "curve" in res["parts"]:
        hard = [_growth(r, p, "hard") for r, p in zip(tm, ref)]
        easy = [_growth(r, p, "easy") for r, p in zip(tm, ref)]
        p_easy = [p["easy"]["p_scratchpad"] - window(r["batches"], "easy", "p_scratchpad") for r, p in zip(tm, ref)]
        direct_ref = [p["held_out"]["direct"]["hard"] for p in ref]
        greedy_end = [r["final"]["held_out"]["greedy"]["hard"] for r in tm]
        greedy_ref = [p["held_out"]["greedy"]["hard"] for p in ref]
        direct_end = [r["final"]["held_out"]["direct"]["hard"] for r in tm]
        corr = [p["corr_hard"] for p in ref]
        gap = {d: [p[d]["acc_scratchpad"] - p[d]["acc_direct"] for p in ref] for d in DIFFICULTIES}
        corr_run = [window(r["batches"], "corr_hard", "") for r in tm]
        claims += [
            claim(
                "RL lengthens responses where thinking pays (hard prompts, b >= 2)",
                f"mean completion length on hard prompts: reference {spread([p['hard']['length'] for p in ref], '.2f')}, "
                f"growth over the last {res['window']} of {steps} steps {spread(hard, '+.2f')} tokens (token_mean; "
                f"{rule(1.0, 0.25, 'the growth', n)})",
                verdict(hard, 1.0, 0.25),
            ),
            claim(
                "... and not where it does not (easy prompts, b in {0, 1})",
                f"growth on easy prompts {spread(easy, '+.2f')} tokens (reference "
                f"{spread([p['easy']['length'] for p in ref], '.2f')}; at temperature 1 the reference's scratchpad "
                f"answers are right more often than its direct ones by {spread(gap['easy'], '+.3f')} on easy prompts, "
                f"{spread(gap['hard'], '+.3f')} on hard ones; {rule(-0.5, -1.0, 'minus the growth', n)})",
                verdict([-g for g in easy], -0.5, -1.0),
            ),
            claim(
                "on easy prompts RL learns to answer directly",
                f"P(scratchpad) on easy prompts: reference {spread([p['easy']['p_scratchpad'] for p in ref], '.2f')}, "
                f"fall by the end {spread(p_easy, '+.2f')} ({rule(0.1, 0.0, 'the fall', n)})",
                verdict(p_easy, 0.1, 0.0),
            ),
            claim(
                "RL lifts greedy accuracy on hard prompts above the reference's (which already passes its "
                "direct-answer ceiling)",
                f"greedy held-out accuracy on hard prompts after {steps} steps {spread(greedy_end, '.3f')}; the "
                f"reference's {spread(greedy_ref, '.3f')}, answering directly {spread(direct_ref, '.3f')} "
                f"({rule(0.05, 0.0, 'after minus the reference', n)})",
                above(greedy_end, greedy_ref, 0.05, 0.0, pair=True),
            ),
            claim(
                "the direct answers wither (RL practises the scratchpad only)",
                f"greedy held-out accuracy on hard prompts answering directly: reference {spread(direct_ref, '.3f')}, "
                f"after {steps} steps {spread(direct_end, '.3f')} ({rule(0.02, 0.0, 'the fall', n)})",
                above(direct_ref, direct_end, 0.02, 0.0, pair=True),
            ),
            claim(
                "within a group, longer answers are more often right here (the filler world: -0.01)",
                f"within-group correlation of length and reward on hard prompts: reference {spread(corr, '+.3f')}, "
                f"last {res['window']} steps {spread(corr_run, '+.3f')} ({rule(0.1, 0.03, 'the reference value', n)})",
                verdict(corr, 0.1, 0.03),
            ),
        ]
    if "bias" in res["parts"]:
        push = {m: {part: [p["push"][m][part] for p in ref] for part in ("wrong", "right")}
                for m in ("sequence_mean", "token_mean", "constant")}  # fmt: skip
        exact = all(abs(x - 1) < 1e-4 for m in ("token_mean", "constant") for x in push[m]["wrong"] + push[m]["right"])
        lw = {
            m: [window(r["batches"], "all", "len_wrong", arm) for r in runs[m]] for m in ("sequence_mean", "constant")
        }
        lw["token_mean"] = [window(r["batches"], "all", "len_wrong", arm) for r in tm]
        ps = {
            m: [window(r["batches"], "hard", "p_scratchpad", arm) for r in runs[m]]
            for m in ("sequence_mean", "constant")
        }
        ps["token_mean"] = [window(r["batches"], "hard", "p_scratchpad", arm) for r in tm]
        grow = {m: [window(r["batches"], "hard", "length", arm) - p["hard"]["length"] for r, p in zip(runs[m], ref)]
                for m in ("sequence_mean", "constant")}  # fmt: skip
        grow["token_mean"] = [_growth(r, p, "hard", end=arm) for r, p in zip(tm, ref)]
        ref_lw = [p["all"]["len_wrong"] for p in ref]
        claims += [
            claim(
                "GRPO's 1/|o_i| (sequence_mean) pushes a long wrong answer down less per token than a short one",
                "push per token on a group's longest wrong answer over its shortest, at the reference: "
                + ", ".join(f"{m} {spread(v['wrong'], '.2f')}" for m, v in push.items())
                + f" ({rule(0.2, 0.05, '1 - the sequence_mean ratio', n)}, the others exactly 1)",
                verdict([1 - x for x in push["sequence_mean"]["wrong"]], 0.2, 0.05) if exact else "fails here",
            ),
            claim(
                "... and a long right answer up less per token than a short one",
                f"the same on right answers: sequence_mean {spread(push['sequence_mean']['right'], '.2f')} "
                f"({rule(0.2, 0.05, '1 - the ratio', n)})",
                verdict([1 - x for x in push["sequence_mean"]["right"]], 0.2, 0.05),
            ),
            claim(
                "so GRPO's wrong answers grow longer than Dr. GRPO's",
                f"mean length of wrong answers over steps {arm - res['window'] + 1}-{arm}: "
                + ", ".join(f"{m} {spread(v, '.2f')}" for m, v in lw.items())
                + f" (reference {spread(ref_lw, '.2f')}; {rule(0.5, 0.0, 'sequence_mean minus constant', n)})",
                above(lw["sequence_mean"], lw["constant"], 0.5, 0.0, pair=True),
            ),
            claim(
                "thinking pays whatever the loss: hard-prompt responses lengthen under every aggregation",
                f"growth of the hard-prompt length by step {arm}: "
                + ", ".join(f"{m} {spread(v, '+.2f')}" for m, v in grow.items())
                + f" ({rule(1.0, 0.25, 'the growth, every run', n)})",
                verdict(grow["sequence_mean"] + grow["constant"] + grow["token_mean"], 1.0, 0.25),
            ),
            claim(
                "GRPO's 1/|o_i| slows the adoption of the long form (long right answers are pushed up less)",
                f"P(scratchpad) on hard prompts over steps {arm - res['window'] + 1}-{arm}: "
                + ", ".join(f"{m} {spread(v, '.3f')}" for m, v in ps.items())
                + f" ({rule(0.02, 0.0, 'constant minus sequence_mean', n)})",
                above(ps["constant"], ps["sequence_mean"], 0.02, 0.0, pair=True),
            ),
        ]
    if "cause" in res["parts"]:
        bref, bseq, bconst = refs["blank"], runs["blank sequence_mean"], runs["blank constant"]
        pays = [p["hard"]["acc_scratchpad"] - p["hard"]["acc_direct"] for p in bref]
        pays_carries = [p["hard"]["acc_scratchpad"] - p["hard"]["acc_direct"] for p in ref]
        g_seq = [_growth(r, p, "all") for r, p in zip(bseq, bref)]
        g_const = [_growth(r, p, "all") for r, p in zip(bconst, bref)]
        claims += [
            claim(
                "the scratchpad's content is what pays: a blank one (the same lengths) does not",
                f"accuracy of scratchpad minus direct answers on hard prompts at the reference: carries "
                f"{spread(pays_carries, '+.3f')}, blank {spread(pays, '+.3f')} "
                f"({rule(0.1, 0.0, 'carries minus blank', n)})",
                above(pays_carries, pays, 0.1, 0.0, pair=True),
            ),
            claim(
                "with thinking switched off (blank), GRPO's length bias alone lengthens responses",
                f"growth of the mean length by step {arm} on the blank task: sequence_mean {spread(g_seq, '+.2f')}, "
                f"constant {spread(g_const, '+.2f')} tokens (reference {spread([p['all']['length'] for p in bref], '.2f')}, "
                f"P(scratchpad) {spread([p['all']['p_scratchpad'] for p in bref], '.2f')}, within-group correlation of "
                f"length and reward {spread([p['corr'] for p in bref], '+.3f')}; {rule(1.0, 0.25, 'the sequence_mean growth', n)})",
                verdict(g_seq, 1.0, 0.25),
            ),
            claim(
                "... and the two losses move the length apart there (the bias's part: sequence_mean minus constant)",
                f"sequence_mean minus constant growth on the blank task: {spread(paired(g_seq, g_const), '+.2f')} tokens "
                f"({rule(0.5, 0.2, 'its size', n)})",
                verdict([abs(x) for x in paired(g_seq, g_const)], 0.5, 0.2),
            ),
        ]
    if "budget" in res["parts"]:
        bref = refs["budget"]
        t0 = [p["all"]["truncated"] for p in bref]
        t_plain = [window(r["batches"], "all", "truncated", arm) for r in runs["budget"]]
        t_mask = [window(r["batches"], "all", "truncated", arm) for r in runs["budget, masked"]]
        claims += [
            claim(
                f"a budget that truncates (max_completion_length {res['budget']}): RL learns to stay within it",
                f"share truncated: reference {spread(t0, '.3f')}, last {res['window']} of {arm} steps "
                f"{spread(t_plain, '.3f')} ({rule(0.05, 0.0, 'the fall', n)})",
                above(t0, t_plain, 0.05, 0.0, pair=True),
            ),
            claim(
                "mask_truncated_completions (no gradient from truncated answers) keeps them",
                f"share truncated after {arm} steps: masked {spread(t_mask, '.3f')}, not masked {spread(t_plain, '.3f')} "
                f"({rule(0.02, 0.0, 'masked minus not', n)})",
                above(t_mask, t_plain, 0.02, 0.0, pair=True),
            ),
        ]
    if "clip_higher" in res["parts"]:
        high, w = runs["clip-higher"], res["window"]
        first = [float(np.mean(r["entropy"][:w])) for r in tm]
        last = [float(np.mean(r["entropy"][-w:])) for r in tm]
        last_high = [float(np.mean(r["entropy"][-w:])) for r in high]
        claims += [
            claim(
                "the entropy of the policy falls as it settles on a form",
                f"mean token entropy, first vs last {w} of {steps} steps (symmetric clip): "
                + ", ".join(f"{a:.3f} -> {b:.3f}" for a, b in zip(first, last, strict=True))
                + f" ({rule(0.3, 0.1, '1 - last / first', n)})",
                verdict([1 - b / a for a, b in zip(first, last, strict=True)], 0.3, 0.1),
            ),
            claim(
                f"clip-higher (eps_high {res.get('eps_high', 0.28)}) keeps the entropy higher",
                f"mean token entropy over the last {w} steps: clip-higher {spread(last_high, '.3f')}, symmetric "
                f"{spread(last, '.3f')} ({rule(0.0, 0.0, 'the difference', n)})",
                above(last_high, last, pair=True),
            ),
        ]
    return claims


def _smooth(y, k: int = 5) -> np.ndarray:
    """A centred running mean over ``k`` steps (edges padded with the end values)."""
    y = np.asarray(y, float)
    return np.convolve(np.pad(y, k // 2, mode="edge"), np.ones(k) / k, mode="valid")


def figure(res: dict):
    """The regime's figure: the mean completion length of every training batch over the RL steps,
    hard prompts and easy ones (token_mean, one line per seed, a 5-step running mean), and at the
    right the same for the other runs (all prompts) when the bias and cause parts ran."""
    from matplotlib.figure import Figure

    from ...figures.plotstyle import PALETTE, set_alt

    others = [k for k in ("sequence_mean", "constant", "blank sequence_mean", "blank constant", "budget", "budget, masked")
              if k in res["runs"]]  # fmt: skip
    fig = Figure(figsize=(11, 4.2) if others else (7, 4.2), layout="constrained")
    axes = fig.subplots(1, 2 if others else 1)
    ax = axes[0] if others else axes
    for i, run in enumerate(res["runs"].get("token_mean", [])):
        x = np.arange(1, len(run["batches"]) + 1)
        for d, style in (("hard", "-"), ("easy", "--")):
            label = f"{d} prompts" if i == 0 else None
            ax.plot(x, _smooth(curve(run["batches"], d, "length")), style, color=PALETTE[0], alpha=0.8, label=label)
    ax.set(xlabel="RL step", ylabel="mean completion length (tokens)", title="GRPO (token_mean): length by difficulty")
    ax.legend(loc="lower right")
    if others:
        colors = [c for c in PALETTE if c != "#F0E442"]  # no yellow lines on white
        for j, key in enumerate(["token_mean", *others]):
            for i, run in enumerate(res["runs"][key]):
                b = run["batches"][: res["arm_steps"]]
                axes[1].plot(np.arange(1, len(b) + 1), _smooth(curve(b, "all", "length")), color=colors[j % len(colors)],
                             alpha=0.8, label=key if i == 0 else None)  # fmt: skip
        axes[1].set(xlabel="RL step", ylabel="mean completion length (tokens)", title="every run, all prompts")
        axes[1].legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    alt = ("The mean completion length of each training batch over the RL steps, hard prompts solid and easy prompts "
           "dashed, one line per seed")  # fmt: skip
    if others:
        alt += "; right: the same over all prompts for each run (aggregations, the blank scratchpad, budgets)"
    return set_alt(fig, alt + ".")
