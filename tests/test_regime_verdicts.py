"""Every regime's verdicts, pinned: each regime runs small (a tiny policy, 2 seeds, a step or two)
and each claim's verdict must equal the committed one in tests/regime_verdicts.json, so a change
that flips a verdict (a rule, a margin, a measurement) fails here with the claim and both words.

After a deliberate change: ``GRPO_EDU_PIN_VERDICTS=1 pytest tests/test_regime_verdicts.py`` rewrites
the file; commit it with the reason."""

import json
import os
from pathlib import Path

import pytest
import torch

from grpo_edu import ModelConfig, TinyGPT, get_preset
from grpo_edu.studies import regimes

PINS = Path(__file__).with_name("regime_verdicts.json")
SEEDS = (0, 1)


def _tiny_ref(max_seq_len=12):
    torch.manual_seed(0)
    return TinyGPT(ModelConfig(d_model=16, n_layers=1, n_heads=2, max_seq_len=max_seq_len))


def _run(name):
    preset = get_preset("cpu", sequences_per_step=64)
    if name == "offset":
        return regimes.run_offset(_tiny_ref(), preset, seeds=SEEDS, steps=1, warmup=1, progress=False)
    if name == "reward_model":
        return regimes.run_reward_model(
            _tiny_ref(), preset, seeds=SEEDS, steps=2, settings=((0.0, "loss"), (0.3, "loss")), n_labels=64,
            progress=False,
        )  # fmt: skip
    if name == "difficulty":
        ref = _tiny_ref()
        return regimes.run_difficulty(ref, preset, seeds=SEEDS, size="tiny", references={"spread": ref}, progress=False)
    if name == "long_run":
        return regimes.run_long_run(_tiny_ref(), preset, seeds=SEEDS, steps=2, progress=False)
    if name == "long_run_entropy":
        return regimes.run_long_run_entropy(_tiny_ref(), preset, seeds=SEEDS, steps=4, progress=False)
    if name == "free_length":
        _, fit = regimes.free_length_setup(preset)
        own = _tiny_ref(fit.model.max_seq_len)
        return regimes.run_free_length(None, fit, seeds=SEEDS, steps=1, own_reference=own, progress=False)
    if name == "thinking":  # its own tiny reference, trained into the test's cache
        from grpo_edu.studies.regimes.thinking import PARTS

        return regimes.run_thinking(None, seeds=SEEDS, tiny=True, parts=PARTS, progress=False)
    if name == "spurious_rewards":
        return regimes.spurious_rewards.run_spurious(_tiny_ref(), preset, seeds=SEEDS, size="tiny", progress=False)
    if name == "negative_samples":
        ref = _tiny_ref()
        return regimes.negative_samples.run_negative_samples(
            ref, preset, seeds=SEEDS, size="tiny", references={"spread": ref}, progress=False
        )
    if name == "razor":
        return regimes.razor.run_razor(_tiny_ref(), preset, seeds=SEEDS, size="tiny", progress=False)
    if name == "policy_lag":
        return regimes.policy_lag.run_policy_lag(
            _tiny_ref(), preset, seeds=SEEDS, lags=(0, 8, 32, 256), steps=2, eval_every=None, progress=False
        )
    raise AssertionError(name)


PINNED = ("offset", "reward_model", "difficulty", "long_run", "free_length", "thinking", "spurious_rewards",
          "negative_samples", "razor", "policy_lag", "long_run_entropy")  # fmt: skip


@pytest.mark.parametrize("name", PINNED)
def test_verdicts_are_pinned(name, tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_EDU_CACHE", str(tmp_path))
    got = [[c["claim"], c["verdict"]] for c in _run(name)["claims"]]
    pins = json.loads(PINS.read_text()) if PINS.exists() else {}
    if os.environ.get("GRPO_EDU_PIN_VERDICTS"):
        pins[name] = got
        PINS.write_text(json.dumps(pins, indent=1, sort_keys=True) + "\n")
        pytest.skip(f"pinned {len(got)} verdicts of {name}")
    assert name in pins, f"no pinned verdicts for {name}: run with GRPO_EDU_PIN_VERDICTS=1"
    flips = [f"{c!r}: pinned [{p}], now [{v}]" for (c, v), (_, p) in zip(got, pins[name], strict=False) if v != p]
    assert [c for c, _ in got] == [c for c, _ in pins[name]], f"{name}: the claims changed (re-pin with the reason)"
    assert not flips, f"{name}: verdicts flipped:\n" + "\n".join(flips)
