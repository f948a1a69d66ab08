"""Checks of notebooks/14_distillation_and_loss_scale.ipynb (on-policy distillation; loss scale under accumulation).

The notebook was written with its checks here (0 assert statements in its lesson cells). Part one: the hand
example's gradients are identities (exact); the live study runs one seed of `grpo_edu.studies.distillation`, and
its comparisons are each arm against GRPO from the same reference and seed, with a comparison where the claim is
false beside it (a teacher that is the student itself, a teacher wrong on the hard prompts). Part two: the hand
weights and the grid are exact (float64); the bug's signature reads one GRPO step per run from the same batch.
"""

from __future__ import annotations

from course.checks import Measured, check, printed

NB = "14_distillation_and_loss_scale"
DISTILL, SFT, GRPO = "on-policy distillation", "SFT on the teacher's answers", "GRPO, 0/1 reward"
DEFAULT, SPREAD, EASY = "default world, RL teacher", "spread world, RL teacher", "spread world, easy-only teacher"


@check(
    NB,
    exact=True,
    claim="The policy gradient with distillation's advantage is the reverse KL's gradient, and SFT's on the "
    "teacher's tokens the forward KL's (a state with four tokens, summed over the vocabulary)",
    control="distillation's policy gradient against the forward KL's gradient",
)
def gradients_are_the_kls(ns):
    g = ns["gaps"]
    return [
        Measured("distillation minus reverse-KL gradient norm", g["distillation to the reverse KL's gradient"], "<",
                 1e-6, g["distillation to the forward KL's gradient"]),
        Measured("SFT minus forward-KL gradient norm", g["SFT to the forward KL's gradient"], "<", 1e-6,
                 g["distillation to the forward KL's gradient"]),
    ]  # fmt: skip


@check(
    NB,
    exact=True,
    claim="Distillation from a copy of the student gives no signal: the student ends exactly at the reference",
    control="distillation from the RL teacher (default world), its held-out accuracy's distance to the reference",
)
def own_teacher_moves_nothing(ns):
    own, res = ns["own"], ns["res"]
    moved = abs(ns["runs"][DEFAULT][DISTILL]["all"] - res["cases"][DEFAULT]["reference"]["all"])
    return Measured("|own-teacher final minus reference|", abs(own["all"] - own["reference"]), "<", 1e-9, moved)


@printed(
    NB,
    why="each seed trains its own teachers, and the spread world's lead ranged from 0.006 to 0.15 over the first "
    "three seeds (the default world's 0.126 to 0.208): no bound three deviations below the spread world's mean is "
    "above 0; reported with its spread, and the stored study's verdicts (one teacher, three seeds) are pinned",
    claim="With the RL teacher, distillation ends above GRPO's 0/1 reward at the same generated answers, in both "
    "worlds",
    control="default world: distillation from a copy of the student, minus GRPO; spread world: distillation from "
    "the easy-only teacher, minus GRPO",
)
def beats_grpo(ns):
    runs, own = ns["runs"], ns["own"]
    d, s = runs[DEFAULT], runs[SPREAD]
    return [
        Measured("default: distillation minus GRPO final accuracy", d[DISTILL]["all"] - d[GRPO]["all"], ">", 0.0,
                 own["all"] - d[GRPO]["all"]),
        Measured("spread: distillation minus GRPO final accuracy", s[DISTILL]["all"] - s[GRPO]["all"], ">", 0.0,
                 runs[EASY][DISTILL]["all"] - s[GRPO]["all"]),
    ]  # fmt: skip


@printed(
    NB,
    claim="Read at the fewest generated tokens any arm of the run reached, distillation is above GRPO in both worlds",
    control="the same reads with the teacher replaced as in beats_grpo (the student itself; the easy-only teacher)",
    why="in the default world GRPO's read at equal tokens falls on its first steps' dip at some seeds (0.126 to 0.23 "
    "above it over the study's seeds and the first draws), and the student itself in distillation's place came "
    "0.014 above it once: no bound three deviations below the mean stays above that; reported with its spread",
)
def beats_grpo_at_equal_tokens(ns):
    runs, own = ns["runs"], ns["own"]
    d, s = runs[DEFAULT], runs[SPREAD]
    return [
        Measured("default: distillation minus GRPO at equal tokens", d[DISTILL]["acc_equal_tokens"]
                 - d[GRPO]["acc_equal_tokens"], ">", 0.05, own["all"] - d[GRPO]["acc_equal_tokens"]),
        Measured("spread: distillation minus GRPO at equal tokens", s[DISTILL]["acc_equal_tokens"]
                 - s[GRPO]["acc_equal_tokens"], ">", 0.05,
                 runs[EASY][DISTILL]["acc_equal_tokens"] - s[GRPO]["acc_equal_tokens"]),
    ]  # fmt: skip


@printed(
    NB,
    why="below GRPO on every draw so far, by 0.063 to 0.297 (each seed its own teachers): the spread leaves no bound "
    "three deviations from the mean below 0; reported with its spread",
    claim="Distilled from a teacher wrong on the hard prompts, the student ends below GRPO on the hard prompts",
    control="distillation from the RL teacher, minus GRPO, on the hard prompts",
)
def wrong_teacher(ns):
    runs = ns["runs"]
    g = runs[SPREAD][GRPO]["hard"]
    return Measured("distillation from the easy-only teacher minus GRPO, hard-prompt accuracy",
                    runs[EASY][DISTILL]["hard"] - g, "<", 0.0, runs[SPREAD][DISTILL]["hard"] - g)  # fmt: skip


@printed(
    NB,
    claim="Distillation against SFT on the same teacher's answers: the difference of their final accuracies",
    why="the stored three seeds put it on both sides of zero in both worlds (the verdict depends): a result "
    "reported, not a rule",
)
def against_sft(ns):
    runs = ns["runs"]
    return [
        Measured(f"{w}: distillation minus SFT final accuracy", runs[c][DISTILL]["all"] - runs[c][SFT]["all"], ">", 0.0)
        for w, c in (("default", DEFAULT), ("spread", SPREAD))
    ]


@printed(
    NB,
    claim="At equal wall time (each arm's last evaluation within the fastest arm's training time), distillation "
    "minus GRPO; and distillation's training time over GRPO's",
    why="wall time on a shared machine moves with its load: the stored three seeds' default-world difference took "
    "both signs; reported with its spread",
)
def equal_time(ns):
    runs = ns["runs"]
    out = []
    for w, c in (("default", DEFAULT), ("spread", SPREAD)):
        r = runs[c]
        out.append(Measured(f"{w}: distillation minus GRPO at equal time", r[DISTILL]["acc_equal_time"]
                            - r[GRPO]["acc_equal_time"], ">", 0.0))  # fmt: skip
        out.append(Measured(f"{w}: distillation seconds over GRPO's", r[DISTILL]["seconds"] / r[GRPO]["seconds"], ">",
                            1.0, scale="log"))  # fmt: skip
    return out


@check(
    NB,
    exact=True,
    claim="Under the 1/k average a token of a 2-token micro-batch weighs 3 times one of a 6-token micro-batch; under "
    "the library's weights both weigh 1/8, as in one batch",
    control="the 1/k average's ratio, against the rule that the two weigh the same",
)
def hand_weights(ns):
    r = ns["ratio"]
    return [
        Measured("library: |short over long token weight - 1|", abs(r["library's w_j / n_j"] - 1), "<", 1e-9,
                 abs(r["1/k average"] - 1)),
        Measured("1/k average: short over long token weight", r["1/k average"], ">", 2.999, r["one batch"]),
    ]  # fmt: skip


@check(
    NB,
    exact=True,
    claim="On the grid (k in 2, 4, 8 x one or two optimizer steps per batch x three aggregations) the library's "
    "accumulated gradient is the one-batch gradient to float64 rounding",
    control="the 1/k average of token means, its largest gap on the grid",
)
def grid_is_one_batch(ns):
    grid = ns["grid"]
    wrong = max(g[4] for g in grid if g[0] == "token_mean")
    return Measured("largest relative gradient gap, library's accumulation", ns["right_max"], "<", 1e-10, wrong)


@printed(
    NB,
    why="at one seed of five (3) every group of the 128 answers tied (all right or all wrong), so neither step had a "
    "gradient and the gap was 0/0 (NaN); at the other four it was 10^-2.7 to 10^-0.8, far above float rounding. "
    "The tests hold the rule on their own seeds (tests/test_accumulation_bug.py); here it is reported",
    claim="The bug's signature: one step's grad_norm with the 1/k average differs from the one-batch step's by "
    "more than 1e-6 of it",
    control="the library's accumulation (4 micro-batches, weighted by tokens), the same gap",
)
def bug_signature(ns):
    right = max(float(ns["gap_right"]), -16.0)  # -inf where the two agree exactly
    return Measured("bugged: log10 relative grad_norm gap", float(ns["gap_bug"]), ">", -6.0, right)


@check(
    NB,
    exact=True,
    claim="TRL's knob names: our minibatches is TRL's steps_per_generation, and gradient_accumulation_steps keeps "
    "its name; bnpo is a token mean per micro-batch, dapo divides by the generated batch's tokens",
    control="the names swapped",
)
def trl_names(ns):
    names = {ours: trl for ours, trl, _ in ns["KNOB_MAP"]}
    rows = ns["TRL_LOSS_TYPES"]
    ok = float(names["minibatches"] == "steps_per_generation"
               and names["gradient_accumulation_steps"] == "gradient_accumulation_steps"
               and not rows["bnpo"].generation_batch and rows["dapo"].generation_batch)  # fmt: skip
    swapped = float(names["minibatches"] == "gradient_accumulation_steps")
    return Measured("TRL's names as the lesson says (1 yes, 0 no)", ok, ">", 0.5, swapped)
