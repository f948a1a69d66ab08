"""The reference-seed study: its bad input, and its report's numbers computed by hand."""

import argparse

import pytest

from grpo_edu.studies import reference_seeds as rs


def test_bad_input_is_one_line_before_any_work():
    with pytest.raises(ValueError, match="shifts must be non-negative integers"):
        rs.run([])
    with pytest.raises(ValueError, match="shifts must be non-negative integers"):
        rs.run([0, -1])
    with pytest.raises(ValueError, match=r"unknown part\(s\) \['sprad'\]: choose from \['spread', 'reward_model'\]"):
        rs.run([0], parts=("sprad",))
    with pytest.raises(argparse.ArgumentTypeError, match="--shifts takes"):
        rs._shifts("0-x")


def test_shift_ranges_parse():
    assert rs._shifts("0-3,7") == [0, 1, 2, 3, 7]
    assert rs._shifts("5") == [5]


def test_report_gains_mean_std_and_range_by_hand():
    res = {
        "spread": {
            0: {"start": 0.3, "end": 0.5, "hard_start": 0.0, "hard_end": 0.4},
            1: {"start": 0.3, "end": 0.3, "hard_start": 0.1, "hard_end": 0.1},
        },
        "reward_model": {
            0: {"start": 0.5, 8192: {"val_accuracy": 0.8, "always_wrong": 0.9, "gold": 0.1}},
            1: {"start": 0.6, 8192: {"val_accuracy": 0.95, "always_wrong": 0.9, "gold": 0.8}},
        },
    }
    text = rs.report(res)
    # gains +0.2 and 0.0: mean 0.1, sample std sqrt(0.02) = 0.141
    assert "gain on all: mean +0.100, std 0.141, [+0.000, +0.200] over 2 references" in text
    assert "gain on hard: mean +0.200, std 0.283, [+0.000, +0.400] over 2 references" in text
    # gold changes -0.4 and +0.2: one fall; r_phi beats "always wrong" on one reference
    assert "8192 labels: gold change mean -0.100, std 0.424, [-0.400, +0.200]; falls on 1 of 2" in text
    assert "r_phi beats 'always wrong' on 1" in text
