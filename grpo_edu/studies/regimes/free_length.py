"""The free-length regime: filler tokens after the answer, so the length is the policy's: Dr. GRPO's length bias.

`ArithmeticTask(filler=k)` lets the policy write up to k tokens ``=`` after its answer (only the
answer is checked). GRPO's sequence_mean weighs each token of completion i by 1/|o_i|: a long
wrong answer is pushed down less per token than a short one (Dr. GRPO, Liu et al. 2025).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from ... import functional as Fn
from ...algorithms import make_algorithm
from ...rollout import sample_batch
from ...train import train
from ...warmstart.presets import resolve_preset
from .common import above, bar, claim, rngs, rule, spread, task_of, verdict


def free_length_setup(preset="cpu", filler: int = 4):
    """``(task, preset)`` of the free-length regime: ``ArithmeticTask(filler=filler)`` (the
    policy may write up to ``filler`` tokens ``=`` after its answer; only the answer is
    checked) and the preset with a model context long enough for the longer completions.
    ``reference_policy(preset, task=task)`` trains (once, then cached) its reference, by SFT on
    demonstrations with 0 to ``filler`` fillers."""
    preset = resolve_preset(preset)
    task = task_of(preset, filler=filler)
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


def _length_gap(policy, task, seed, device, G):
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
    from ...warmstart.reference import reference_policy

    task, fit = free_length_setup(preset)
    ref = own_reference or reference_policy(fit, task=task, progress=progress)
    modes, G = ("sequence_mean", "token_mean", "constant"), make_algorithm("grpo").config.group_size  # GRPO's G
    runs = {"sequence_mean": "GRPO (sequence_mean)", "constant": "Dr. GRPO (constant)"}
    res = {
        "push": {m: {"wrong": [], "right": []} for m in modes},
        "by_length": {m: {} for m in modes},
        "gap": {k: [] for k in runs},
        "corr": {k: [] for k in runs},
        "start_gap": [],
        "start_corr": [],
        "accuracy": {k: [] for k in runs},
        "steps": steps,
    }
    tasks = {"free": task}
    if budget is not None:
        tasks["budget"] = task_of(fit, filler=task.filler, filler_budget=budget)
        res["budget"] = {
            "filler_budget": budget,
            "start_gap": [],
            "start_corr": [],
            "start_truncated": [],
            **{k: {m: [] for m in runs} for k in ("gap", "corr", "truncated", "accuracy")},
        }
    progress_bar = bar(len(seeds) * (1 + len(runs) * len(tasks)), "free length", progress)
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
        progress_bar.update(1)
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
                progress_bar.update(1)
    progress_bar.close()
    n, push, seq, const = len(seeds), res["push"], res["gap"]["sequence_mean"], res["gap"]["constant"]
    ratios = ", ".join(f"{m} {spread(push[m]['wrong'], '.2f')}" for m in modes)
    weight_only = all(abs(x - 1) < 1e-4 for m in modes[1:] for x in push[m]["wrong"])
    claims = [
        claim(
            "GRPO's 1/|o_i| (sequence_mean) pushes a long wrong answer down less per token than a short one (Dr. GRPO)",
            f"push per token |A| w on a group's longest wrong answer over its shortest: {ratios} "
            f"({rule(0.2, 0.05, '1 - the sequence_mean ratio', n)}, the others exactly 1)",
            verdict([1 - x for x in push["sequence_mean"]["wrong"]], 0.2, 0.05) if weight_only else "fails here",
        ),
        claim(
            "... and a long right answer up less per token than a short one",
            f"the same on right answers: sequence_mean {spread(push['sequence_mean']['right'], '.2f')}, "
            f"constant {spread(push['constant']['right'], '.2f')} ({rule(0.2, 0.05, '1 - the sequence_mean ratio', n)})",
            verdict([1 - x for x in push["sequence_mean"]["right"]], 0.2, 0.05),
        ),
        claim(
            "so over training GRPO's wrong answers grow longer than Dr. GRPO's (relative to the right ones)",
            f"fillers of wrong answers minus right ones after {steps} steps: sequence_mean {spread(seq, '+.3f')}, "
            f"constant {spread(const, '+.3f')} (reference {spread(res['start_gap'], '+.3f')}; "
            f"{rule(0.1, 0.0, 'sequence_mean minus constant', n)})",
            above(seq, const, 0.1, pair=True),
        ),
        claim(
            "the length the policy writes depends on whether it is right",
            f"within-group correlation of reward and length: reference {spread(res['start_corr'], '+.3f')}, "
            f"after sequence_mean {spread(res['corr']['sequence_mean'], '+.3f')} "
            f"({rule(0.1, 0.03, '|correlation| at the reference and after', n)})",
            verdict([abs(c) for c in res["start_corr"] + res["corr"]["sequence_mean"]], 0.1, 0.03),
        ),
    ]
    acc_seq, acc_const = list(res["accuracy"]["sequence_mean"]), list(res["accuracy"]["constant"])
    if budget is not None:
        b = res["budget"]
        bseq, bconst = b["gap"]["sequence_mean"], b["gap"]["constant"]
        acc_seq, acc_const = acc_seq + b["accuracy"]["sequence_mean"], acc_const + b["accuracy"]["constant"]
        claims += [
            claim(
                f"with room for {budget} filler (filler_budget={budget}) long answers run past the budget and are "
                "wrong: the correlation exists",
                f"at the reference: truncated {spread(b['start_truncated'], '.3f')}, within-group correlation of "
                f"reward and length {spread(b['start_corr'], '+.3f')} ({rule(0.1, 0.03, '|correlation|', n)})",
                verdict([abs(c) for c in b["start_corr"]], 0.1, 0.03),
            ),
            claim(
                "... and there GRPO's wrong answers stay longer than Dr. GRPO's",
                f"fillers of wrong minus right after {steps} steps: sequence_mean {spread(bseq, '+.3f')}, constant "
                f"{spread(bconst, '+.3f')}; truncated: sequence_mean {spread(b['truncated']['sequence_mean'], '.3f')}, "
                f"constant {spread(b['truncated']['constant'], '.3f')}; correlation after sequence_mean "
                f"{spread(b['corr']['sequence_mean'], '+.3f')} ({rule(0.1, 0.0, 'sequence_mean minus constant', n)})",
                above(bseq, bconst, 0.1, pair=True),
            ),
        ]
    claims.append(
        claim(
            "Dr. GRPO's unbiased aggregation (constant) costs no accuracy against sequence_mean",
            f"held-out accuracy after {steps} steps, every run: constant {spread(acc_const)} vs sequence_mean "
            f"{spread(acc_seq)} ({rule(-0.01, -0.03, 'constant minus sequence_mean, per run')})",
            above(acc_const, acc_seq, -0.01, -0.03, pair=True),
        )
    )
    res["claims"] = claims
    return res


def figure(res):
    """The regime's figure: the weight each aggregation gives each token, by completion length."""
    from ...figures.plotstyle import PALETTE, set_alt
    from .figures import new_figure

    fig, ax = new_figure()
    for i, (m, by) in enumerate(res["by_length"].items()):
        ax.plot(list(by), list(by.values()), "o-", label=m, color=PALETTE[i])
    ax.set_xlabel("completion length |o| (tokens, <eos> included)")
    ax.set_ylabel("weight per token, relative to token_mean's")
    ax.set_title("the weight each aggregation gives each token of a completion")
    ax.legend()
    return set_alt(fig, "Weight per token against completion length for the three loss aggregations.")
