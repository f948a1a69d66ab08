"""Checks of notebooks/13_off_the_policy.ipynb (a sampler k updates behind, and the corrections).

The notebook was written with its checks here (0 assert statements in its lesson cells, before or after). Each
asserted claim compares the runs of one sweep (the same reference and seed: lag 0 and lag K = the largest lag,
per correction), with its control in the same comparison: the correction or the lag where the claim is false.
The hand example's drops are exact (fixed tensors). The accuracies after 30 steps (no lag against lag K, PPO's
clip against the decoupled objective, the other corrections) varied too much over the five seeds for a bound
three deviations away: they are printed results, each with its spread. The mechanisms are asserted: the share of
tokens PPO's clip against the stale sampler zeroes, the ratio's spread, IcePop's drops and M2PO's M2. At shifts 1
to 3 the ratio spread was a printed result whose rule was "above the spread without a lag"; the spread without a
lag is recorded as its control at shifts 0 and 4.
The verdicts of section 6 come from a kept study (tests/data/policy_lag/study.json), the same on every seed of
the notebook: its one check is exact.
"""

from __future__ import annotations

from course.checks import Measured, check, printed

NB = "13_off_the_policy"


@printed(
    NB,
    claim="Without a lag GRPO gains held-out accuracy in 30 steps: the no-lag final accuracy minus the start",
    control="PPO's clip against a sampler K updates behind, from the same start (its final minus the start)",
    why="its comparison run gained 0.096 at one seed of the five, above any bound under the no-lag gains (0.096 "
    "to 0.194): the rule does not tell the two apart on every seed; the gain is reported with its spread",
)
def no_lag_learns(ns):
    acc, K, start = ns["acc"], ns["K"], ns["start"]
    return Measured("no-lag final minus start", acc["none"][0] - start, ">", 0.03, acc["ppo_clip"][K] - start)


@printed(
    NB,
    claim="PPO's clip measured against a sampler K updates behind ends below the run without a lag; the decoupled "
    "objective at the same lag falls less (or ends above it): the no-lag final accuracy minus each one's at lag K",
    control="for ppo_clip's fall, the decoupled objective's; for the decoupled objective's, ppo_clip's",
    why="the fall ranged from 0.054 to 0.214 over the five seeds (mean 0.145, sd 0.061): no bound three deviations "
    "below the mean is above 0; the decoupled objective's was of either sign (above the run without a lag on some "
    "seeds, below on others); both reported with their spread",
)
def stale_clip_falls(ns):
    acc, K = ns["acc"], ns["K"]
    base = acc["none"][0]
    return [
        Measured(
            f"no-lag minus lag-{K} ppo_clip final accuracy", base - acc["ppo_clip"][K], ">", 0.1,
            base - acc["decoupled"][K],
        ),
        Measured(
            f"no-lag minus lag-{K} decoupled final accuracy", base - acc["decoupled"][K], "<", 0.1,
            base - acc["ppo_clip"][K],
        ),
    ]  # fmt: skip


@printed(
    NB,
    claim="At lag K the decoupled objective ends above PPO's clip against the sampler",
    control="the same difference at lag 0, where the two are the same update (structural: 0 by construction)",
    why="the difference ranged from 0.084 to 0.228 over the five seeds (mean 0.176, sd 0.059): no bound three "
    "deviations below the mean is above 0; reported with its spread",
)
def decoupled_regains(ns):
    acc, K = ns["acc"], ns["K"]
    return Measured(
        f"lag-{K} decoupled minus ppo_clip final accuracy", acc["decoupled"][K] - acc["ppo_clip"][K], ">", 0.1,
        acc["decoupled"][0] - acc["ppo_clip"][0],
    )  # fmt: skip


@check(
    NB,
    claim="PPO's clip against a sampler K updates behind zeroes the gradient of a larger share of the tokens",
    control="the same clip measured against the learner at the step's start (decoupled) at the same lag",
)
def clip_against_sampler(ns):
    clipped, K = ns["shares"]["clipped"], ns["K"]
    return Measured(f"lag-{K} ppo_clip clipped share", clipped["ppo_clip"][K], ">", 0.055, clipped["decoupled"][K])


@check(
    NB,
    claim="IcePop's band [0.5, 5] drops more than 2% of the tokens once the sampler is K updates behind",
    control="the same band with the sampler at the sweep's smallest lag above 0 (a lag of a few updates moves few "
    "weights out of the band)",
)
def icepop_drops(ns):
    dropped, K = ns["shares"]["dropped"], ns["K"]
    near = min(k for k in dropped["icepop"] if k > 0)
    return Measured(f"lag-{K} icepop dropped share", dropped["icepop"][K], ">", 0.02, dropped["icepop"][near])


@check(
    NB,
    claim="On the hand example IcePop drops two of six tokens (above 5 and below 0.5), and M2PO keeps tokens "
    "whose mean squared log-ratio is at most 0.04",
    control="the cap alone (decoupled) drops one; the mean over all six tokens is far above 0.04",
    exact=True,
)
def hand_example(ns):
    hand, prox = ns["hand"], ns["prox"]
    n = {name: int((w == 0).sum()) for name, (w, _) in hand.items()}
    return [
        Measured("tokens IcePop drops of the six", n["icepop"], ">", 1.5, n["decoupled"]),
        Measured("M2 of the tokens M2PO keeps", hand["m2po"][1]["m2_kept"], "<", 0.04, float((prox**2).mean())),
    ]


@printed(
    NB,
    claim="The other corrections at lag K: their final accuracy minus the decoupled objective's",
    why="which of IcePop, TIS, M2PO and no correction ends nearer the decoupled objective varies from seed to seed "
    "in 30 steps; reported with its spread",
)
def others_at_lag(ns):
    acc, K = ns["acc"], ns["K"]
    return [
        Measured(f"lag-{K} {c} minus decoupled final accuracy", acc[c][K] - acc["decoupled"][K], ">", -0.05)
        for c in ("none", "icepop", "tis", "m2po")
    ]


@check(
    NB,
    claim="The spread (std) of the ratio against a sampler K updates behind is above 0.23, and M2PO's M2 of the "
    "log-ratio at lag K is above 0.075, nearly twice its threshold 0.04",
    control="the same spread and the same M2 without a lag (M2PO's M2 at lag 0 is near its threshold, not above 0.075)",
)
def spread_grows(ns):
    s, K = ns["shares"], ns["K"]
    return [
        Measured(
            f"lag-{K} ppo_clip ratio std", s["ratio_std"]["ppo_clip"][K], ">", 0.23, s["ratio_std"]["ppo_clip"][0]
        ),
        Measured(f"lag-{K} m2po M2", s["m2"]["m2po"][K], ">", 0.075, s["m2"]["m2po"][0]),
    ]


@check(
    NB,
    claim="In the kept 400-update study (lags 0 to 256), AReaL's decoupled objective moves up the lag at which plain "
    "GRPO falls short of 90% (its best evaluation more than two standard errors below) on every seed: the fewest "
    "steps of the lag grid it moves that lag, over the seeds",
    control="PPO's clip against the sampler, the same count (it falls short at a smaller lag than plain GRPO)",
    exact=True,
)
def decoupled_moves_the_break(ns):
    study, breaks = ns["study"], ns["breaks"]
    grid = sorted({r["lag"] for r in study["rows"]})

    def place(lag):  # never breaking: one past the grid
        return len(grid) if lag is None else grid.index(lag)

    def fewest(c):
        return min(place(a) - place(b) for a, b in zip(breaks[c], breaks["none"], strict=True))

    return Measured("fewest grid steps decoupled moves plain GRPO's breaking lag", fewest("decoupled"), ">", 0,
                    fewest("ppo_clip"))  # fmt: skip
