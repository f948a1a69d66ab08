"""Checks of notebooks/11_silent_bugs.ipynb (silent bugs: reading a run that does not crash).

Before this registry the notebook held 10 assert statements: in a loop, each of the ten bugs' signatures on both
seeds and the healthy run of the same seed failing it, and k3_naive_float32's relative signature failing between
the two healthy seeds (3); the three loud bugs ending below 0.05 held-out accuracy, the healthy run above it, and
ratio_always_one ending below the healthy run by more than 0.07 (3); a prompt's own advantages summing to 0 where
mixed groups' do not (1); clip_ratio 0 for the healthy run with one update per batch while its ratio differs from 1
by rounding, and ratio_always_one's ratio exactly 1 (2); the group z-score's ceiling sqrt(G - 1) against a batch
std (1). Each runs here with its control. The signatures are the library's (`grpo_edu.demos.silent_bugs.SIGNATURES`,
the rules homework 5's graded runs are tested against): one check per bug, both seeds, the healthy run of the same
seed as the control (for a relative mark: the healthy run of the other seed, or a paired run without the missing
piece); the marks that are exact by construction (an exact 0, a sign) are exact checks. Three marks are printed
(`PRINTED`, each with its why): ratio_always_one's accuracy gap and kl_sign_flipped's |kl| ratio held on every
calibration seed but under three deviations; lr_past_collapse's largest kl failed on its control (a healthy run
reached 2.99).
"""

from __future__ import annotations

import math

from course.checks import Measured, check, printed

NB = "11_silent_bugs"
EXACT = {  # bug -> the quantities of its signature that hold by construction (an exact 0, a sign)
    "ratio_always_one": ("largest clip_ratio or ratio_std of any step",),
    "reference_is_policy": ("largest |kl| of any step",),
    "kl_sign_flipped": ("largest kl after the first step",),
}


PRINTED: dict[str, dict[str, str]] = {  # bug -> {quantity of its signature: why it is printed, not checked}
    "ratio_always_one": {
        "final held-out accuracy below the healthy run's": "above 0.07 on every seed of shifts 0-4 (0.13 to 0.28), "
        "but the bound sat 2.0 deviations from the mean on the second seed",
    },
    "kl_sign_flipped": {
        "largest |kl| over the healthy run's largest kl": "above 2 on every seed of shifts 0-4 (3.6 to 82), but "
        "the bound sat 2.3 deviations from the mean (log10) on the first seed",
    },
    "lr_past_collapse": {
        "largest kl of any step": "its control failed: the healthy run of RL seed 3 reached a largest kl of 2.99, "
        "above the bound 1.5, so a large kl alone does not tell the collapse from a healthy run",
    },
}


def _marks(ns, bug: str, exact: bool, printed: bool = False) -> list[Measured]:
    """The bug's signatures on each seed, against the healthy run of the same seed (see the module docstring for the
    relative marks' controls); ``printed``: only the marks in `PRINTED`, else only the others."""
    from grpo_edu.demos.silent_bugs import SIGNATURES

    runs, out = ns["runs"], []
    healthy = runs["healthy"]
    for sig in SIGNATURES[bug]:
        if (sig.quantity in EXACT.get(bug, ())) != exact or (sig.quantity in PRINTED.get(bug, {})) != printed:
            continue
        for i, (h, ok) in enumerate(zip(runs[bug], healthy, strict=True)):
            if "step 1 over the healthy run's" in sig.quantity and bug == "k3_naive_float32":
                control = sig.of(healthy[1 - i], ok)  # two healthy seeds: their step-1 kl differ by a few times
            elif sig.quantity == "final held-out accuracy below the healthy run's":
                control = sig.of(runs["k3_naive_float32"][i], ok)  # a paired run with nothing missing
            else:
                control = sig.of(ok, ok)  # the healthy run itself
            scale = (
                "log" if "over the healthy run's" in sig.quantity and not sig.quantity.startswith("log10") else "linear"
            )
            out.append(Measured(f"{sig.quantity}, seed {i + 1} of 2", sig.of(h, ok), sig.op, sig.bound, control, scale))
    return out


def _signature(bug: str, control: str, exact: bool = False):
    from grpo_edu.demos.silent_bugs import BUGS, SIGNATURES

    def fn(ns):
        return _marks(ns, bug, exact)

    def shown(ns):
        return _marks(ns, bug, False, printed=True)

    claim = f"{bug} shows its signature on both seeds: {BUGS[bug].signature}"
    moved = PRINTED.get(bug, {}) if not exact else {}
    kept = any(s.quantity not in moved and (s.quantity in EXACT.get(bug, ())) == exact for s in SIGNATURES[bug])
    if kept:
        fn.__name__ = f"{bug}_exact" if exact else bug
        check(NB, claim=claim, control=control, exact=exact)(fn)
    if moved:
        shown.__name__ = f"{bug}_printed" if kept else bug  # all its marks printed: the check keeps its name
        why = "; ".join(f"{q}: {w}" for q, w in moved.items())
        printed(NB, claim=f"{bug}'s marks printed apart from its checked signature: {', '.join(moved)}", why=why,
                control=control)(shown)  # fmt: skip


SAME_SEED = "the healthy run from the same reference and seed"
for _bug in ("group_misaligned", "std_floor_too_small", "answers_cut", "lr_past_collapse"):
    _signature(_bug, SAME_SEED)
_signature("ratio_always_one", SAME_SEED, exact=True)
_signature(
    "ratio_always_one", "k3_naive_float32 of the same seed (a paired run with nothing missing: its final-accuracy gap)"
)
_signature("reference_is_policy", SAME_SEED, exact=True)
_signature("kl_sign_flipped", SAME_SEED, exact=True)
_signature("kl_sign_flipped", SAME_SEED + " (its own largest |kl| over itself: 1)")
_signature("k3_naive_float32", "the healthy run of the other seed against this seed's (a different batch)")
_signature(
    "loss_over_padding", "the healthy run of the same seed against itself (the same batch and updates: 0); a weak one"
)
_signature("temperature_mismatch", SAME_SEED + " (its step-1 kl: rounding)")


@check(
    NB,
    claim="A prompt's own z-scores sum to 0 up to float rounding, however small its std; a baseline taken from other "
    "prompts does not: the largest |sum of one prompt's 8 advantages| on one batch from the reference",
    control="the healthy GRPO's advantages for group_misaligned's rule; group_misaligned's for std_floor_too_small's",
)
def own_group_sums(ns):
    s = ns["sums"]
    return [
        Measured("largest |sum|, group_misaligned", s["group_misaligned"], ">", 1.0, s["healthy"], "log"),
        Measured(
            "largest |sum|, std_floor_too_small", s["std_floor_too_small"], "<", 1e-4, s["group_misaligned"], "log"
        ),
    ]


@check(
    NB,
    exact=True,
    claim="With one update per batch a healthy run logs clip_ratio 0 at every step (every update is the first, at "
    "ratio 1 up to rounding)",
    control="the healthy run with the default 2 x 2 updates per batch (its largest clip_ratio)",
)
def one_update_never_clips(ns):
    healthy = max(h.series("clip_ratio").max() for h in ns["runs"]["healthy"])
    return Measured(
        "largest clip_ratio, healthy, one update per batch", ns["one"].series("clip_ratio").max(), "<", 1e-12, healthy
    )


@check(
    NB,
    claim="What separates that healthy run from ratio_always_one: its ratio differs from 1 by float rounding (the "
    "trainer recomputes log pi by teacher forcing), the bug's is exactly 1",
    control="ratio_always_one (its largest ratio_std over both seeds: exactly 0)",
)
def ratio_differs_by_rounding(ns):
    bug = max(h.series("ratio_std").max() for h in ns["runs"]["ratio_always_one"])
    return Measured(
        "smallest ratio_std, healthy, one update per batch", ns["one"].series("ratio_std").min(), ">", 0.0, bug
    )


@check(
    NB,
    exact=True,
    claim="With the population std a group's advantage cannot exceed sqrt(G - 1), however tiny its std: a hand-made "
    "batch of 32 groups, all wrong but one with a single right answer",
    control="the same batch with the std taken over the whole batch while the mean is the group's (scale='batch')",
)
def advantage_ceiling(ns):
    by, root = ns["by"], math.sqrt(ns["G"] - 1)
    return Measured("largest |A| minus sqrt(G - 1), scale='group'", by["group"] - root, "<", 1e-5, by["batch"] - root)


# ------------------------------------------------------------------ printed, not checked


@printed(
    NB,
    claim="The healthy run's held-out accuracy gain over 30 steps, per seed",
    why="how much the healthy run learns at this budget varies with the seed; no claim rests on its size",
)
def healthy_gain(ns):
    return [Measured(f"healthy gain, seed {i + 1} of 2", g, ">", 0.0) for i, g in enumerate(ns["gain"]["healthy"])]


@printed(
    NB,
    claim="temperature_mismatch's grad_norm at step 1 over the healthy run's, per seed",
    why="above 3 on both seeds of shift 0, below 1 on one seed of shifts 1 and 2 (0.77, 0.40): the signature "
    "(SIGNATURES) leaves it out",
)
def temperature_grad_norm(ns):
    runs = ns["runs"]
    return [
        Measured(
            f"grad_norm at step 1 over the healthy run's, seed {i + 1} of 2",
            h.series("grad_norm")[0] / ok.series("grad_norm")[0], ">", 1.0, scale="log",
        )
        for i, (h, ok) in enumerate(zip(runs["temperature_mismatch"], runs["healthy"], strict=True))
    ]  # fmt: skip


@printed(
    NB,
    claim="The largest |A| of any update in any run, against sqrt(G - 1)",
    why="the ceiling is a theorem (advantage_ceiling checks it on a hand-made batch); no run could break it",
)
def largest_advantage(ns):
    return Measured(
        "largest |A| of any run minus sqrt(G - 1)", max(ns["largest"].values()) - math.sqrt(ns["G"] - 1), "<", 1e-5
    )


@printed(
    NB,
    claim="The two healthy seeds' step-1 entropies differ, on some references as much as loss_over_padding's mark (which "
    "is read against the healthy run of the same reference and seed)",
    why="a description of the noise that makes loss_over_padding's mark relative; homework 5 does not grade it",
)
def healthy_entropy_gap(ns):
    a, b = ns["runs"]["healthy"]
    return Measured(
        "|step-1 entropy, healthy seed 1 - seed 2|", abs(a.series("entropy")[0] - b.series("entropy")[0]), "<", 0.015
    )
