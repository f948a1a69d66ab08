"""The one two-sided verdict rule (grpo_edu.measure.verdicts), by hand and as properties."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grpo_edu.measure import verdicts as V


def test_verdict_by_hand():
    assert V.verdict([0.2, 0.3], margin=0.1) == "holds"  # beyond the margin on every seed
    assert V.verdict([-0.1, 0.0], margin=0.1) == "fails here"  # absent (0) or reversed on every seed
    assert V.verdict([0.2, -0.1], margin=0.1) == "depends"  # the seeds disagree
    assert V.verdict([0.05, 0.08], margin=0.1) == "depends"  # seen, but inside the band (0, 0.1]
    assert V.verdict([0.05, 0.08], margin=0.1, null=0.1) == "fails here"  # no band: one-sided
    assert V.verdict([0.1], margin=0.1) == "depends" and V.verdict([0.1], 0.1, 0.1) == "fails here"  # > m, <= n
    assert V.verdict([], 0.1) == "depends" and V.verdict([math.nan, 1.0], 0.1) == "depends"
    with pytest.raises(ValueError, match="null"):
        V.verdict([1.0], margin=0.0, null=0.1)


def test_paired_and_unpaired_by_hand():
    assert V.paired([0.9, 0.8], [0.7, 0.75]) == pytest.approx([0.2, 0.05])
    assert sorted(V.unpaired([1.0, 2.0], [0.5])) == [0.5, 1.5]
    # paired: clip-higher 0.939/0.941 vs 0.957/0.959: -0.018 on both seeds, between -0.02 and -0.01
    assert V.above([0.939, 0.941], [0.957, 0.959], -0.01, -0.02, pair=True) == "depends"
    # unpaired: every a above every b by the margin
    assert V.above([0.5, 0.6], [0.1, 0.2], 0.1) == "holds"
    assert V.above([0.1, 0.2], [0.5, 0.6]) == "fails here"
    assert V.above([0.1, 0.6], [0.5, 0.6]) == "depends"
    with pytest.raises(ValueError):
        V.paired([1.0], [1.0, 2.0])  # paired needs one b per a


def test_rule_says_what_it_tests():
    text = V.rule(0.1, 0.0, "the gap", seeds=3)
    assert text == "holds: the gap > 0.1 on each of 3 seeds; fails here: <= 0 on each of 3 seeds; between: depends"
    assert "between" not in V.rule(0.1, 0.1)
    # one value (one reward model, one batch): not "every seed", which claims more than was measured
    assert (
        V.rule(0.0, 0.0, seeds=1)
        == "holds: the effect > 0 on its one measurement; fails here: <= 0 on its one measurement"
    )
    assert V.on_seeds() == "every seed" and V.on_seeds(2) == "each of 2 seeds"
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="seeds must be"):
            V.on_seeds(bad)


floats = st.floats(-10, 10, allow_nan=False)


@given(st.lists(floats, min_size=1, max_size=6), floats, st.floats(0, 5))
def test_verdict_properties(effects, null, band):
    margin = null + band
    v = V.verdict(effects, margin, null)
    assert v in V.VERDICTS
    # shifting every effect far up makes it hold, far down makes it fail
    assert V.verdict([e + 100 for e in effects], margin, null) == "holds"
    assert V.verdict([e - 100 for e in effects], margin, null) == "fails here"
    # holds and fails here are each other's mirror: negate the effects and swap the thresholds
    mirror = V.verdict([-e for e in effects], -null, -margin)
    if v == "holds":  # every e > m, so every -e < -m: the mirror fails here
        assert mirror == "fails here"
    # adding a seed can only weaken a verdict, never turn holds into fails here
    more = V.verdict([*effects, effects[0]], margin, null)
    assert more == v


def test_compare_uses_the_same_rule():
    """grpo-edu compare's verdict helpers are `verdicts` with their stated margins."""
    from grpo_edu.measure import compare

    assert compare._compare_ranges([10, 12], [20, 30], seeds=2) == "holds"  # every a below every b
    assert compare._compare_ranges([20, 30], [10, 12], seeds=2) == "fails here"
    assert compare._compare_ranges([10, 20], [20, 30], seeds=2) == "depends"  # a tie is not a reversal
    assert compare._compare_ranges([10], [20], seeds=1) == "one seed"
    assert compare._compare_ranges([None], [20], seeds=2) == "fails here"  # a never reached the target
    assert compare._compare_ranges([10], [None, None], seeds=2) == "holds"
    assert compare._compare_ranges([None, None], [None], seeds=2) == "depends"  # neither reached it: no ranking
    assert compare._by_margin(0.5) == "holds" and compare._by_margin(1.2) == "fails here"
    assert compare._by_margin(1.0) == "depends"


def test_compare_says_which_notebook_explains_a_claim_that_does_not_hold():
    from grpo_edu.measure.reports import explained_in, format_claims

    claims = [
        {"claim": "a baseline lowers the variance of the policy gradient", "measurement": "m", "verdict": "fails here"},
        {"claim": "every rung learns from the same reference", "measurement": "m", "verdict": "holds"},
    ]
    text = format_claims(claims, seeds=3)
    assert "why: notebook 02, section 2, and 02_baseline_variance, section 2" in text
    assert text.count("why:") == 1  # a claim that holds needs no explanation
    assert explained_in("an unknown claim") is None


def test_a_long_why_line_is_wrapped_to_the_report_width():
    from grpo_edu.measure.reports import WIDTH, format_claims

    claim = {"claim": "a learned critic (PPO) beats the group baseline (GRPO) per sampled answer"}
    text = format_claims([{**claim, "measurement": "m", "verdict": "fails here"}], seeds=3)
    why = text[text.index("why: ") :]
    assert "gap_ablation" in why and "notebook 08, part 2" in why
    assert max(len(line) for line in text.splitlines()) <= WIDTH
    assert len(why.splitlines()) > 1  # the control: unwrapped, this line is wider than WIDTH
