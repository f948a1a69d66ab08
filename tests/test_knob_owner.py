"""One owner per knob: the group size G is set once, on GRPO's config, and every consumer samples
with it. A spy on each consumer's rollout call records the layout (prompts, G) it asked for:
training's rollout, compare's variance and memory measurements, bench's generation speed, step
cost and memory. The preset states only the sequences per step, so the prompts follow from G.

Control: with GRPOConfig's default G (8) the same spies see 8, so a consumer that ignored the
configured G (or read it from anywhere else) would fail the G = 4 case."""

import importlib

import pytest
import torch

from grpo_edu import ModelConfig, TinyGPT, get_preset, make_algorithm, make_task, train
from grpo_edu.algorithms import GRPOConfig

# the modules themselves (grpo_edu.train is also the name of a function)
bench, compare, memory, train_module, variance = (
    importlib.import_module(f"grpo_edu.{m}")
    for m in ("studies.bench", "measure.compare", "measure.memory", "train", "measure.variance")
)

TINY = ModelConfig(d_model=16, n_layers=1, n_heads=2, max_seq_len=12)
SEQUENCES = 32  # per step: G = 4 -> 8 prompts x 4, G = 8 -> 4 prompts x 8


def _tiny():
    torch.manual_seed(0)
    return TinyGPT(TINY)


@pytest.fixture
def spy(monkeypatch):
    """``calls[module]``: the (prompts, G) of every rollout that module's code sampled."""
    calls = {}

    def wrap(module, name, layout):
        real = getattr(module, name)

        def spied(*args, **kwargs):
            calls.setdefault(module.__name__, []).append(layout(*args, **kwargs))
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, spied)

    def sampled(policy, task, n_prompts, group_size=1, *args, **kwargs):
        return n_prompts, group_size

    def generated(policy, prompt_ids, group_size=1, **kwargs):
        return len(prompt_ids), group_size

    for module in (train_module, variance, memory):
        wrap(module, "sample_batch", sampled)
    wrap(bench, "generate", generated)
    return calls


def _configs(G):
    return {} if G is None else {"grpo": {"group_size": G}}


@pytest.mark.parametrize("G", [None, 4])  # None: GRPOConfig's default, the control
def test_the_group_size_set_once_reaches_every_consumer(G, spy, monkeypatch):
    want = G or GRPOConfig().group_size
    layout = (SEQUENCES // want, want)
    preset = get_preset("cpu", model=TINY, sequences_per_step=SEQUENCES, eval_every=1)
    task = make_task(preset)

    # training's rollout
    train(make_algorithm("grpo", **_configs(G).get("grpo", {})), task, _tiny(), preset=preset, steps=1, progress=False)
    assert set(spy.pop("grpo_edu.train")) == {layout}

    # compare's variance (the group layout) and memory measurements, as run_comparison calls them
    out = {"algorithms": {"grpo": {"minibatches": GRPOConfig().minibatches}}}
    compare.measure_at_reference(out, preset, task, _tiny(), 2, False, ("grpo",), 1, _configs(G))
    assert set(spy.pop("grpo_edu.measure.variance")) == {layout}
    assert out["gradient_variance"]["_meta"]["group_size"] == want
    assert set(spy.pop("grpo_edu.measure.memory")) == {layout}

    # bench: generation speed, step cost and memory
    monkeypatch.setattr(bench, "reference_policy", lambda *a, **k: _tiny())
    res = bench.run_bench(preset, algorithms=("grpo",), n_steps=1, progress=False, configs=_configs(G))
    assert set(spy.pop("grpo_edu.studies.bench")) == {layout}
    assert set(spy.pop("grpo_edu.measure.memory")) == {layout}  # step_cost and step_memory both sample here
    assert res["generation"]["batch"] == SEQUENCES
    assert not spy  # no other consumer sampled


def test_the_preset_states_sequences_and_the_algorithm_splits_them():
    p = get_preset("cpu")
    assert p.sequences_per_step == 512
    assert (p.prompts(GRPOConfig().group_size), GRPOConfig().group_size) == (64, 8)  # GRPO 64 x 8
    assert p.prompts(make_algorithm("ppo").config.group_size) == 512  # PPO 512 x 1
    assert not hasattr(p, "group_size")  # one owner: the algorithm's config
    with pytest.raises(ValueError, match=r"sequences_per_step=512 is not a multiple of group_size=3"):
        p.prompts(3)
    with pytest.raises(ValueError, match=r"Preset.sequences_per_step must be an integer >= 1, got 0"):
        get_preset("cpu", sequences_per_step=0)
    with pytest.raises(ValueError, match="unknown preset fields.*group_size"):
        get_preset("cpu", group_size=16)
