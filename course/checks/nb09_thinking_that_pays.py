"""Checks of notebooks/09_thinking_that_pays.ipynb (R1-Zero's length curve; which cause drives the length).

Before this registry the notebook held 14 assert statements: the scratchpad pays on hard prompts (1), easy
prompts far easier, greedy and at T = 1 (1), the scratchpad paying less on easy prompts (1), the within-group
correlation of length and reward on hard prompts (1); the hard answers lengthening and their greedy accuracy
passing the reference's (2); constant and sequence_mean lengthening, their controls failing (2), the blank
scratchpad paying nothing and its lengths not the right ones (2); sequence_mean's push on long answers below
0.8, token_mean's and constant's exactly 1, sequence_mean's and constant's wrong answers alike in length, and
that rule's control failing (4). All 14 run here as 12 checks, each control beside its rule (a control assert
of the notebook is now the `control` of the rule it guarded); the two difficulty claims get a control they
lacked (the same difference over a random half of the prompts). The results the comments called printed are
recorded as printed results, with the reason.

Calibrated on seed shifts 0-4 (native): 10 of the 12 are asserted (9 with a bound at least 3 sd from the mean,
and the exact other_losses_push_alike), and both held-out draws (shift 21 native, 22 default) passed them; the
scratchpad paying less on easy prompts and the hard prompts' accuracy passing the reference's are printed (each
why says the spread). Before shifts 1-4 only the exact check was asserted. After a reader's audit (R5),
wrong_lengths_alike is printed too (a null claim whose control differed by training, not by the loss): 9 asserted.
"""

from __future__ import annotations

import numpy as np

from course.checks import Measured, check, printed

NB = "09_thinking_that_pays"


def _pays(prof, d="hard"):
    return prof[d]["acc_scratchpad"] - prof[d]["acc_direct"]


def _random_halves(correct, seed: int) -> float:
    """The accuracy of a random half of the problems minus the other half's (about 0: no difficulty)."""
    c = np.asarray(correct, float)
    half = np.random.default_rng(seed).permutation(len(c)) < len(c) // 2
    return float(c[half].mean() - c[~half].mean())


# ------------------------------------------------------------------ section 1: a task where thinking can pay


@check(
    NB,
    claim="Thinking pays on hard prompts: at T = 1 the reference's scratchpad answers are right far more often "
    "than its direct ones",
    control="the blank scratchpad's reference (section 4), whose working holds nothing",
)
def scratchpad_pays(ns):
    return Measured(
        "hard prompts, the reference: scratchpad minus direct accuracy", _pays(ns["ref"]), ">", 0.14,
        _pays(ns["blank_ref"]),
    )  # fmt: skip


@check(
    NB,
    claim="Easy prompts (b in {0, 1}) are far easier than hard ones: answering directly, greedily, and at T = 1",
    control="the same difference between a random half of the prompts and the other half (a split that does not "
    "follow difficulty)",
)
def easy_prompts_easier(ns):
    from grpo_edu import evaluate, sample_batch
    from grpo_edu.measure.common import rngs
    from grpo_edu.studies.regimes import thinking

    ref, reference, task, SEED = ns["ref"], ns["reference"], ns["task"], ns["SEED"]
    h = ref["held_out"]["direct"]
    _, direct = evaluate(thinking.DirectOnly(reference, task), task, return_correct=True)
    G = 8
    _, scores, _ = sample_batch(reference, task, 256, G, *rngs(SEED + 11, ns["preset"].device))
    right = (scores.sum(1) > task.reward_values[0]).float().view(-1, G).mean(1).numpy()  # per prompt
    return [
        Measured("greedy, answering directly: easy minus hard accuracy", h["easy"] - h["hard"], ">", 0.3,
                 _random_halves(direct.numpy(), SEED + 1)),
        Measured("T = 1: easy minus hard accuracy", ref["easy"]["accuracy"] - ref["hard"]["accuracy"], ">", 0.3,
                 _random_halves(right, SEED + 2)),
    ]  # fmt: skip


@printed(
    NB,
    why="at shift 3 the scratchpad paid more on easy prompts than on hard ones (-0.012), and at shift 2 the "
    "blank reference's own difference (0.069) passed the bound of 0.05: the claim holds on most seeds, not each",
    claim="At T = 1 the scratchpad pays on easy prompts too, but less than on hard ones",
    control="the blank scratchpad's reference, whose working pays on neither",
)
def scratchpad_pays_less_on_easy(ns):
    ref, blank = ns["ref"], ns["blank_ref"]
    return Measured(
        "the scratchpad's gain, hard minus easy prompts", _pays(ref) - _pays(ref, "easy"), ">", 0.05,
        _pays(blank) - _pays(blank, "easy"),
    )  # fmt: skip


@check(
    NB,
    claim="Within a group of answers to a hard prompt, the longer answers are the right ones more often",
    control="the blank scratchpad's reference",
)
def length_and_reward_together(ns):
    return Measured(
        "hard prompts, the reference: within-group correlation of length and reward", ns["ref"]["corr_hard"], ">",
        0.15, ns["blank_ref"]["corr_hard"],
    )  # fmt: skip


# ------------------------------------------------------------------ section 2: the curve


@check(
    NB,
    claim="Under GRPO the responses to hard prompts lengthen: their mean length over the last 10 of 100 steps "
    "minus the reference's",
    control="the reference itself, profiled on another sample of prompts",
)
def hard_answers_lengthen(ns):
    return Measured("hard prompts: mean length, last 10 steps minus the reference's", ns["grow_hard"], ">", 2.0,
                    ns["again"]["hard"])  # fmt: skip


@printed(
    NB,
    why="its gain over shifts 0-4 (0.060 to 0.174, mean 0.118, sd 0.042) puts 3 sd below the mean under 0: "
    "no bound that far out holds the claim that the accuracy passes the reference's",
    claim="After 100 steps the greedy held-out accuracy on hard prompts passes the reference's",
    control="the reference itself (a gain of 0)",
)
def hard_accuracy_rises(ns):
    gain = ns["late"]["held_out"]["greedy"]["hard"] - ns["ref"]["held_out"]["greedy"]["hard"]
    return Measured("hard prompts: greedy held-out accuracy after 100 steps minus the reference's", gain, ">", 0.02,
                    0.0)  # fmt: skip


# ------------------------------------------------------------------ section 4: which cause drives the length


@check(
    NB,
    claim="With the length bias off (constant) the responses still lengthen, as with it on (sequence_mean): the "
    "growth of the mean length by step 50, all prompts",
    control="the reference itself on another sample of prompts (for constant); the blank task under "
    "sequence_mean (for sequence_mean)",
)
def length_grows_without_bias(ns):
    growth, again = ns["growth"], ns["again"]
    return [
        Measured("constant: growth by step 50, all prompts", growth["constant"], ">", 1.7, again["all"]),
        Measured("sequence_mean: growth by step 50, all prompts", growth["sequence_mean"], ">", 1.0,
                 growth["blank, sequence_mean"]),
    ]  # fmt: skip


@check(
    NB,
    claim="The blank scratchpad is a true control: its answers are hardly more often right than direct ones",
    control="the real scratchpad's reference",
)
def blank_does_not_pay(ns):
    return Measured(
        "hard prompts, the blank reference: scratchpad minus direct accuracy", _pays(ns["blank_ref"]), "<", 0.12,
        _pays(ns["ref"]),
    )  # fmt: skip


@check(
    NB,
    claim="On the blank task the longer answers are not the right ones",
    control="the real scratchpad's reference",
)
def blank_length_not_right(ns):
    return Measured(
        "hard prompts, the blank reference: within-group correlation of length and reward",
        ns["blank_ref"]["corr_hard"], "<", 0.15, ns["ref"]["corr_hard"],
    )  # fmt: skip


# ------------------------------------------------------------------ section 5: the length bias, where it can act


@check(
    NB,
    claim="sequence_mean pushes a long answer's tokens less than a short one's (a group's longest over its "
    "shortest answer, on the reference's batch)",
    control="token_mean's push ratio on the same batch",
)
def sequence_mean_pushes_long_less(ns):
    push = ns["ref"]["push"]
    return [
        Measured(f"sequence_mean: push per token, longest over shortest, {part}", push["sequence_mean"][part], "<",
                 0.8, push["token_mean"][part])
        for part in ("wrong", "right")
    ]  # fmt: skip


@check(
    NB,
    exact=True,
    claim="token_mean and constant push every token of a group alike: the ratio is exactly 1",
    control="sequence_mean's push ratio on the same batch",
)
def other_losses_push_alike(ns):
    push = ns["ref"]["push"]
    return [
        Measured(f"{m}: |push ratio - 1|, {part}", abs(push[m][part] - 1), "<", 1e-4,
                 abs(push["sequence_mean"][part] - 1))
        for m in ("token_mean", "constant")
        for part in ("wrong", "right")
    ]  # fmt: skip


@printed(
    NB,
    claim="sequence_mean's wrong answers do not end longer than those of constant (Dr. GRPO's aggregation, the "
    "std division kept), nor shorter, by more than a token or so (mean length of wrong answers, steps 41-50)",
    why="a null claim without a positive case: no run here makes the two losses' wrong answers differ in length "
    "(the former control, the reference's wrong answers against constant's, differs by training, not by the "
    "loss), and the bound 1.5 sat 8 deviations above values of 0.05 to 0.44 (shifts 0-4)",
)
def wrong_lengths_alike(ns):
    w = ns["wrong_len"]
    return Measured("wrong answers, steps 41-50: |sequence_mean - constant| (tokens)",
                    abs(w["sequence_mean"] - w["constant"]), "<", 1.5)  # fmt: skip


# ------------------------------------------------------------------ printed, not checked


@printed(
    NB,
    claim="The reference answering directly, greedily: its held-out accuracy on easy and on hard prompts",
    why="levels the lesson quotes; their difference is checked (easy_prompts_easier)",
)
def direct_levels(ns):
    h = ns["ref"]["held_out"]["direct"]
    return [
        Measured("easy prompts, answering directly", h["easy"], ">", 0.5),
        Measured("hard prompts, answering directly", h["hard"], "<", 0.5),
    ]


@printed(
    NB,
    claim="Easy prompts: the reference's scratchpad minus direct accuracy at T = 1, and the growth of the mean "
    "length under GRPO (last 10 of 100 steps minus the reference's)",
    why="levels the lesson quotes; the scratchpad's gain on easy against hard prompts is checked "
    "(scratchpad_pays_less_on_easy), and whether the easy answers lengthen has no claim of its own",
)
def easy_levels(ns):
    return [
        Measured("easy prompts, the reference: scratchpad minus direct accuracy", _pays(ns["ref"], "easy"), ">", 0.0),
        Measured("easy prompts: mean length, last 10 steps minus the reference's", ns["grow_easy"], ">", 0.0),
    ]  # fmt: skip


@printed(
    NB,
    claim="The reference profiled on another sample of prompts: its mean length minus the first sample's",
    why="the control of hard_answers_lengthen and of constant's growth, quoted by the lesson with its spread",
)
def reference_resampled(ns):
    again = ns["again"]
    return [Measured(f"{d} prompts: the reference, another sample minus the first", again[d], "<", 1.2)
            for d in ("hard", "all")]  # fmt: skip


@printed(
    NB,
    claim="After 100 steps the policy forced to answer directly gets fewer hard prompts right than the reference did",
    why="the direct ceiling before and after: the lesson quotes it; the cause (RL no longer practises the direct "
    "form) is not isolated, and before this registry it was a comment only",
)
def direct_withers(ns):
    late, ref = ns["late"]["held_out"]["direct"]["hard"], ns["ref"]["held_out"]["direct"]["hard"]
    return Measured("hard prompts, answering directly: after 100 steps minus the reference", late - ref, "<", 0.0)


@printed(
    NB,
    claim="With the payoff off and the bias off (the blank task under constant) the responses grow less than with "
    "the payoff on: its growth by step 50, and the real task's minus it",
    why="over shifts 0-4 constant's growth on the blank task, -1.11 to +1.66 (mean 0.11, sd 1.23), is 1.3 sd below "
    "constant's bound (1.7), and the real task's growth minus it, +1.94 to +4.27 (mean 3.19, sd 1.02), 2.1 sd above "
    "1.0: neither holds a bound 3 sd out",
)
def blank_constant_grows_less(ns):
    g = ns["growth"]
    return [
        Measured("blank, constant: growth by step 50, all prompts", g["blank, constant"], "<", 1.8),
        Measured("constant: the real task's growth minus the blank task's", g["constant"] - g["blank, constant"], ">",
                 1.0),
    ]  # fmt: skip


@printed(
    NB,
    claim="On the blank task the bias shortens the responses: sequence_mean ends below constant, and below the "
    "reference",
    why="one run per loss: over shifts 0-4 sequence_mean ends below constant by 0.92 to 3.40 tokens (mean 1.98, sd "
    "1.10: 1.8 sd from 0; by 0.47 at shift 0 on an AVX2 machine before this registry), and below the reference by "
    "1.34 to 2.68; `grpo-edu regimes --only thinking` measures the difference over two seeds",
)
def blank_bias_shortens(ns):
    g = ns["growth"]
    return [
        Measured("blank: constant's growth minus sequence_mean's", g["blank, constant"] - g["blank, sequence_mean"],
                 ">", 0.0),
        Measured("blank, sequence_mean: growth by step 50, all prompts", g["blank, sequence_mean"], "<", 0.0),
    ]  # fmt: skip


@printed(
    NB,
    claim="On the blank task, hard prompts, steps 41-50: the blank answers' accuracy minus the direct ones', under "
    "each loss",
    why="a hypothesis's trace, one run per loss: its sign moves with the seed (constant -0.052 to +0.061, "
    "sequence_mean -0.078 to +0.007 over shifts 0-4)",
)
def blank_forms_learn(ns):
    from grpo_edu.studies.regimes import thinking

    out = []
    for mode in ("constant", "sequence_mean"):
        b = ns["runs"][f"blank, {mode}"]["batches"]
        gap = thinking.window(b, "hard", "acc_scratchpad") - thinking.window(b, "hard", "acc_direct")
        out.append(Measured(f"blank, {mode}: blank minus direct accuracy, hard prompts", gap, ">", 0.0))
    return out


@printed(
    NB,
    claim="sequence_mean's wrong answers against constant's (Dr. GRPO's aggregation): mean length, steps 41-50 (signed)",
    why="its sign changes with the seed (-0.19 to +0.44 over shifts 0-4); its size is printed too (wrong_lengths_alike)",
)
def wrong_length_sign(ns):
    w = ns["wrong_len"]
    return Measured("wrong answers, steps 41-50: sequence_mean minus constant (tokens)",
                    w["sequence_mean"] - w["constant"], ">", 0.0)  # fmt: skip
