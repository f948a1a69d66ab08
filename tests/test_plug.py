"""`grpo_edu.plug`, the homework's shortcut: for its ``with`` block, and only then, the named functions
of `grpo_edu.functional` are the replacements (in the package and in the core's module that defines
them, so the core's own calls see them too); the library's are back after the block, also when it
raises. Outside the homework a run says which functions it replaces: ``make_algorithm(..., functions=)``.

Control in each test: inside the block the plugged function is the one that runs (a check that
passed without the plug taking effect would prove nothing about the restore)."""

import pkgutil

import pytest
import torch

import grpo_edu
from grpo_edu import functional as Fn
from grpo_edu.functional import masked_mean  # a name bound before the plug: the library's, always

X = torch.tensor([[1.0, 2.0, 3.0]])
M = torch.tensor([[1.0, 1.0, 0.0]])
TRUE = 1.5  # the masked mean of X under M
LIBRARY = {name: getattr(Fn, name) for name in Fn.__all__}


def fake_masked_mean(x, mask, dim=None):
    return torch.tensor(42.0)


def untouched() -> bool:
    """Every function of the core is the library's, in the package and in the module defining it."""
    return all(
        getattr(Fn, n) is f and getattr(Fn, f.__module__.rsplit(".", 1)[1]).__dict__[n] is f for n, f in LIBRARY.items()
    )


def test_a_plug_is_used_inside_its_block_and_gone_after():
    assert float(Fn.masked_mean(X, M)) == TRUE and untouched()
    with grpo_edu.plug(masked_mean=fake_masked_mean):
        assert float(Fn.masked_mean(X, M)) == 42.0  # control: the replacement runs
        assert float(Fn.reductions.masked_mean(X, M)) == 42.0  # in the module that defines it too
        assert float(masked_mean(X, M)) == TRUE  # a name bound before the block keeps the library's
        assert not untouched()
    assert float(Fn.masked_mean(X, M)) == TRUE and untouched()


def test_the_core_calls_a_plugged_function_too():
    """regularized_loss averages the entropy with masked_mean: a plug reaches that call (hw4's aggregate_loss too)."""
    logits, m = torch.zeros(1, 3, 4), torch.tensor([[1.0, 1.0, 0.0]])
    _, stats = Fn.regularized_loss(torch.zeros(1, 3), m, "token_mean", None, logits, m)
    assert stats["entropy"] == pytest.approx(float(torch.log(torch.tensor(4.0))))  # control: the uniform entropy
    with grpo_edu.plug(masked_mean=fake_masked_mean):
        _, stats = Fn.regularized_loss(torch.zeros(1, 3), m, "token_mean", None, logits, m)
    assert stats["entropy"] == 42.0 and untouched()


def test_a_plug_is_gone_after_its_block_raises():
    seen = []
    with pytest.raises(RuntimeError, match="inside the block"):
        with grpo_edu.plug(masked_mean=fake_masked_mean):
            seen.append(float(Fn.masked_mean(X, M)))
            raise RuntimeError("inside the block")
    assert seen == [42.0]  # control: it was plugged when the block raised
    assert float(Fn.masked_mean(X, M)) == TRUE and untouched()


def test_a_replacement_that_raises_leaves_nothing_behind():
    def broken(x, mask, dim=None):
        raise ValueError("the homework's bug")

    with pytest.raises(ValueError, match="the homework's bug"):
        with grpo_edu.plug(masked_mean=broken):
            Fn.masked_mean(X, M)  # raises inside the replacement, with its name marked running
    assert float(Fn.masked_mean(X, M)) == TRUE and untouched()
    with grpo_edu.plug(masked_mean=fake_masked_mean):  # and a later plug of the same name still works
        assert float(Fn.masked_mean(X, M)) == 42.0


def test_a_replacement_may_wrap_the_library_s_function():
    """Inside a replacement, a call of the same name is the library's (not the replacement again)."""

    def doubled(x, mask, dim=None):
        return 2 * Fn.masked_mean(x, mask, dim)

    with grpo_edu.plug(masked_mean=doubled):
        assert float(Fn.masked_mean(X, M)) == 2 * TRUE
    assert untouched()


def test_nested_plugs_restore_the_outer_one():
    def outer(x, mask, dim=None):
        return torch.tensor(1.0)

    with grpo_edu.plug(masked_mean=outer):
        with grpo_edu.plug(masked_mean=fake_masked_mean):
            assert float(Fn.masked_mean(X, M)) == 42.0
        assert float(Fn.masked_mean(X, M)) == 1.0  # the outer block's replacement again
    assert float(Fn.masked_mean(X, M)) == TRUE and untouched()


def test_a_refused_plug_changes_nothing():
    def lacks_dim(x, mask):
        return torch.tensor(42.0)

    with pytest.raises(ValueError, match="no parameter dim"):
        with grpo_edu.plug(masked_mean=fake_masked_mean, masked_sum=lacks_dim):
            pass
    assert float(Fn.masked_mean(X, M)) == TRUE and untouched()  # the valid one of the pair was not plugged either
    with pytest.raises(ValueError, match="not functions of grpo_edu.functional"):
        with grpo_edu.plug(not_a_function=fake_masked_mean):
            pass
    with pytest.raises(ValueError, match="must be callable"):
        with grpo_edu.plug(masked_mean=3):
            pass
    assert untouched()


def test_plug_swaps_in_every_module_of_the_core():
    """The modules plug swaps in are every module of the core (a new module would be missed otherwise)."""
    modules = {m.name for m in pkgutil.iter_modules(Fn.__path__) if not m.name.startswith("_")}
    assert {m.__name__ for m in grpo_edu._CORE_MODULES} == {Fn.__name__, *(f"{Fn.__name__}.{m}" for m in modules)}
