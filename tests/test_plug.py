"""`grpo_edu.plug` is the functional core's one piece of state (`functional.PLUGGED`, process-global):
a replacement is used inside its ``with`` block and never after it, also when the block raises.

Control in each test: inside the block the plugged function is the one that runs (a check that
passed without the plug taking effect would prove nothing about the restore)."""

import pytest
import torch

import grpo_edu
from grpo_edu import functional as Fn
from grpo_edu.functional import masked_mean  # a name imported before the plug: plugged too

X = torch.tensor([[1.0, 2.0, 3.0]])
M = torch.tensor([[1.0, 1.0, 0.0]])
TRUE = 1.5  # the masked mean of X under M


def fake_masked_mean(x, mask, dim=None):
    return torch.tensor(42.0)


def test_a_plug_is_used_inside_its_block_and_gone_after():
    assert float(Fn.masked_mean(X, M)) == TRUE
    with grpo_edu.plug(masked_mean=fake_masked_mean):
        assert float(Fn.masked_mean(X, M)) == 42.0  # control: the replacement runs
        assert float(masked_mean(X, M)) == 42.0  # also through a name imported earlier
        assert Fn.PLUGGED == {"masked_mean": fake_masked_mean}
    assert float(Fn.masked_mean(X, M)) == TRUE and float(masked_mean(X, M)) == TRUE
    assert Fn.PLUGGED == {} and Fn._running == set()


def test_a_plug_is_gone_after_its_block_raises():
    seen = []
    with pytest.raises(RuntimeError, match="inside the block"):
        with grpo_edu.plug(masked_mean=fake_masked_mean):
            seen.append(float(Fn.masked_mean(X, M)))
            raise RuntimeError("inside the block")
    assert seen == [42.0]  # control: it was plugged when the block raised
    assert float(Fn.masked_mean(X, M)) == TRUE
    assert Fn.PLUGGED == {} and Fn._running == set()


def test_a_replacement_that_raises_leaves_nothing_behind():
    def broken(x, mask, dim=None):
        raise ValueError("the homework's bug")

    with pytest.raises(ValueError, match="the homework's bug"):
        with grpo_edu.plug(masked_mean=broken):
            Fn.masked_mean(X, M)  # raises inside the replacement, with its name marked running
    assert float(Fn.masked_mean(X, M)) == TRUE  # not stuck calling the original as "inside the replacement"
    assert Fn.PLUGGED == {} and Fn._running == set()
    with grpo_edu.plug(masked_mean=fake_masked_mean):  # and a later plug of the same name still works
        assert float(Fn.masked_mean(X, M)) == 42.0


def test_nested_plugs_restore_the_outer_one():
    def outer(x, mask, dim=None):
        return torch.tensor(1.0)

    with grpo_edu.plug(masked_mean=outer):
        with grpo_edu.plug(masked_mean=fake_masked_mean):
            assert float(Fn.masked_mean(X, M)) == 42.0
        assert float(Fn.masked_mean(X, M)) == 1.0  # the outer block's replacement again
    assert float(Fn.masked_mean(X, M)) == TRUE and Fn.PLUGGED == {}


def test_a_refused_plug_changes_nothing():
    def lacks_dim(x, mask):
        return torch.tensor(42.0)

    with pytest.raises(ValueError, match="no parameter dim"):
        with grpo_edu.plug(masked_mean=fake_masked_mean, masked_sum=lacks_dim):
            pass
    assert Fn.PLUGGED == {}
    assert float(Fn.masked_mean(X, M)) == TRUE  # the valid one of the pair was not plugged either
