"""Checks of notebooks/08_easy_and_hard_prompts_2_credit.ipynb (the critic token by token, and where its credit pays).

Before this registry the notebook held 8 assert statements, 14 comparisons as they ran (three statements in a loop
over the default and spread worlds, two more in another, one in a loop over the junk world's two arms): V*'s EV_0
equals part 1's EV_max; V* explains most of R two tokens in; the learned critic reads no digit; V* puts the blame on
the first wrong token and the critic does not; the junk world's critic reads the prefix where the prompt tells
little; the junk world's reward climbs with either baseline. All 14 run here, each with its control computed beside
it. The scratchpad world's reading of the form token, and the two pairs' differences in accuracy, were printed
before and are recorded here, not checked. The agreement of V*'s EV_0 with EV_max is relative to EV_max (an
absolute bound passed when V* explained nothing of the default world's small EV_max), against V*(s_0) with the
prompts' values shuffled among the same answers. Redrawn after a reader's round: asserted in the spread world only;
in the default world a constant V*(s_0) (EV 0) sat 1.0 EV_max away, 0.1 past a bound three deviations above
the draws, so there it is printed.
"""

from __future__ import annotations

import numpy as np

from course.checks import Measured, check, printed

NB = "08_easy_and_hard_prompts_2_credit"
WORLDS = ("default", "spread")


def _rise(r: dict, key: str = "ev") -> float:
    """The best EV_t over t > 0 minus EV_0."""
    return float(np.nanmax(r[key][1:]) - r[key][0])


def _shuffled_v0_ev(ns, w: str) -> float:
    """The exact V*(s_0) of the same 2048 answers as `pos` (its seed), each answer given another's prompt
    value (seeded shuffles, the mean over 20): its explained variance of R, a prompt value wrong by construction."""
    import torch

    from grpo_edu.measure import credit
    from grpo_edu.measure.common import rngs
    from grpo_edu.rollout import sample_batch

    policy, task = ns["refs"][w], ns["task"]
    rng, gen = rngs(ns["SEED"] + 7, "cpu")
    R, V = [], []
    with torch.no_grad():
        for _ in range(4):
            ro, scores, problems = sample_batch(policy, task, 512, 1, rng, gen)
            first = credit.first_wrong_position(task, problems, ro.completion_ids, ro.mask)
            V.append(credit.oracle_values(policy, task, ro, problems, first)[:, 0].cpu())
            R.append(scores.sum(1).cpu())
    R, V = torch.cat(R), torch.cat(V)
    rng = np.random.default_rng(ns["SEED"])
    perms = [torch.as_tensor(rng.permutation(len(V))) for _ in range(20)]  # the mean over 20 shuffles
    return float(np.mean([credit.ev_by_position(V[p][:, None], R, torch.ones(len(V), 1))["ev"][0] for p in perms]))


@check(
    NB,
    claim="In the spread world the exact V*(s_0) explains what part 1's EV_max says a value of the prompt can: "
    "the two differ by under 0.25 EV_max",
    control="V*(s_0) of the same answers with the prompts' values shuffled among them, against EV_max",
)
def exact_v_matches_ev_max(ns):
    pos, m = ns["pos"], ns["dec"]["spread"]["ev_max"]
    return Measured(
        "spread: |V*'s EV_0 - EV_max| / EV_max",
        abs(pos["spread"]["oracle_ev"][0] - m) / m,
        "<",
        0.25,
        abs(_shuffled_v0_ev(ns, "spread") - m) / m,
    )


@check(
    NB,
    claim="Two tokens in, the prefix reveals most of R: the exact V*(s_2) explains over 0.8 of it, in each world",
    control="V*(s_0), the prompt alone, in the same world",
)
def prefix_reveals_outcome(ns):
    pos = ns["pos"]
    return [Measured(w, pos[w]["oracle_ev"][2], ">", 0.8, pos[w]["oracle_ev"][0]) for w in WORLDS]


@check(
    NB,
    claim="The learned critic did not read a digit in 40 fit steps: its best EV_t over t > 0 rises under 0.05 "
    "above its EV_0, in each world",
    control="the exact V*'s rise in the same world",
)
def critic_reads_no_digit(ns):
    pos = ns["pos"]
    return [Measured(w, _rise(pos[w]), "<", 0.05, _rise(pos[w], "oracle_ev")) for w in WORLDS]


@check(
    NB,
    claim="A critic that read the prefix (V*) puts most of a wrong answer's blame on its first wrong token: "
    "its share there exceeds GRPO's flat 1/L by over 0.24, in each world",
    control="the learned critic's share over 1/L",
)
def exact_blame_on_first_wrong(ns):
    pos = ns["pos"]
    return [
        Measured(
            f"{w}: V*'s share on the first wrong token - 1/L",
            pos[w]["oracle_credit"]["share"] - pos[w]["oracle_credit"]["flat"],
            ">",
            0.24,
            pos[w]["credit"]["share"] - pos[w]["credit"]["flat"],
        )
        for w in WORLDS
    ]


@check(
    NB,
    claim="The learned critic puts no more blame on the first wrong token than GRPO's flat 1/L (within 0.05), "
    "in each world",
    control="V*'s share over 1/L",
)
def critic_blame_flat(ns):
    pos = ns["pos"]
    return [
        Measured(
            f"{w}: the critic's share on the first wrong token - 1/L",
            pos[w]["credit"]["share"] - pos[w]["credit"]["flat"],
            "<",
            0.05,
            pos[w]["oracle_credit"]["share"] - pos[w]["oracle_credit"]["flat"],
        )
        for w in WORLDS
    ]


@check(
    NB,
    claim="In the junk world the learned critic reads the prefix: its best EV_t over t > 0 rises over 0.25 above its EV_0",
    control="the larger rise of the default and spread worlds' critics",
)
def junk_critic_reads(ns):
    pos = ns["pos"]
    return Measured("junk", _rise(pos["junk"]), ">", 0.25, max(_rise(pos[w]) for w in WORLDS))


@check(
    NB,
    claim="... where the prompt tells little: the exact V*(s_0) explains under 0.15 of the junk world's reward",
    control="V*(s_0) in the spread world",
)
def junk_prompt_tells_little(ns):
    pos = ns["pos"]
    return Measured("junk", pos["junk"]["oracle_ev"][0], "<", 0.15, pos["spread"]["oracle_ev"][0])


@check(
    NB,
    claim="In the junk world the sampled reward climbs within a few steps with either baseline: steps 6-10 "
    "over 0.2 above the reference's",
    control="the untrained junk reference on 5 fresh batches of 512, minus its own sampled reward",
)
def junk_reward_climbs(ns):
    import torch

    from grpo_edu import sample_batch

    seed, base = ns["SEED"], ns["pos"]["junk"]["reward_mean"]
    rng, gen = np.random.default_rng(seed + 2000), torch.Generator().manual_seed(seed + 2000)
    fresh = [
        float(sample_batch(ns["jref"], ns["jtask"], ns["jfit"].sequences_per_step, 1, rng, gen)[1].sum(1).mean())
        for _ in range(5)
    ]
    control = float(np.mean(fresh)) - base
    return [
        Measured(arm, float(np.mean(ns["cr"]["junk"][arm]["reward"][5:10])) - base, ">", 0.2, control)
        for arm in ns["pairs"]["junk"]
    ]


# ------------------------------------------------------------------ printed, not checked


@printed(
    NB,
    claim="In the default world, the exact V*(s_0)'s explained variance against part 1's EV_max",
    why="EV_max (about 0.017) is too small for 2048 answers to resolve: a V*(s_0) that explains nothing (a "
    "constant, EV 0) is 1.0 EV_max away, and the draws before this registry's redraw ran from 0.01 to 0.44 (sd "
    "0.18), so a bound three deviations above them (0.9) fails the constant by 0.1 only",
)
def exact_v_default(ns):
    m = ns["dec"]["default"]["ev_max"]
    return Measured(
        "default: |V*'s EV_0 - EV_max| / EV_max", abs(ns["pos"]["default"]["oracle_ev"][0] - m) / m, "<", 1.0
    )


@printed(
    NB,
    claim="In the scratchpad world the learned critic's best EV_t over t > 0 rises above its EV_0",
    why="its rise moves with the seed: 0.07 to 0.13 at shifts 0-4, 2.1 sd above 0.05; the old notebook's record "
    "had it lower at shift 8",
)
def scratchpad_form_token(ns):
    return Measured("scratchpad", _rise(ns["pos"]["scratchpad"]), ">", 0.05)


@printed(
    NB,
    claim="Per-token credit against a value of the prompt, 40 steps: in the spread world the exact V*(s_t) at "
    "lambda 0 minus the exact prompt value; in the junk world the learned critic minus the batch mean "
    "(sampled held-out accuracy)",
    why="one run per arm at one reference: over shifts 0-4 the spread world's difference ran from -0.018 to "
    "+0.113 (ahead on 4 of 5) and the junk world's from -0.069 to +0.029 (ahead on 2 of 5), either sign; the "
    "three-seed verdicts are the measurements page's block creditpays",
)
def credit_difference(ns):
    cr, pairs = ns["cr"], ns["pairs"]
    return [Measured(w, cr[w][b]["sampled"] - cr[w][a]["sampled"], ">", 0.0) for w, (a, b) in pairs.items()]
