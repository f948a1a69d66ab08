"""The loop: determinism, budgets, errors, and short seeded learning tests."""

import math

import pytest
import torch

from grpo_edu import History, make_algorithm, train


def _run(name, reference, task, cpu_preset, **kw):
    base = dict(task=task, reference=reference, preset=cpu_preset, progress=False, seed=0)
    base.update(kw)
    return train(make_algorithm(name), **base)


def test_same_seed_same_history(reference, task, cpu_preset):
    a = _run("grpo", reference, task, cpu_preset, steps=2, sequences_per_step=64, eval_every=1)
    b = _run("grpo", reference, task, cpu_preset, steps=2, sequences_per_step=64, eval_every=1)
    strip = lambda h: [{k: v for k, v in s.items() if k != "seconds"} for s in h.steps]  # noqa: E731
    assert strip(a) == strip(b)
    assert [e["accuracy"] for e in a.evals] == [e["accuracy"] for e in b.evals]
    c = _run("grpo", reference, task, cpu_preset, steps=2, sequences_per_step=64, eval_every=1, seed=1)
    assert strip(a) != strip(c)


def test_history_records_the_usual_metrics(reference, task, cpu_preset):
    h = _run("grpo", reference, task, cpu_preset, steps=2, sequences_per_step=64, eval_every=1)
    for key in (
        "reward",
        "reward_std",
        "kl",
        "entropy",
        "clip_ratio",
        "completion_length",
        "frac_reward_zero_std",
        "grad_norm",
        "samples",
        "seconds",
    ):
        assert key in h.steps[-1], key
    assert [e["step"] for e in h.evals] == [0, 1, 2]
    assert h.steps[-1]["samples"] == 128
    assert 0 <= h.final_accuracy <= 1
    again = History.from_dict(h.to_dict())
    assert again.evals == h.evals and again.series("reward").tolist() == h.series("reward").tolist()
    ppo = _run("ppo", reference, task, cpu_preset, steps=1, sequences_per_step=64)
    assert "value_loss" in ppo.steps[-1]


def test_budgets(reference, task, cpu_preset):
    h = _run("reinforce", reference, task, cpu_preset, samples=150, sequences_per_step=64)
    assert len(h.steps) == 3 and h.steps[-1]["samples"] == 192  # ceil(150 / 64) steps
    h = _run("reinforce", reference, task, cpu_preset, seconds=0.0, sequences_per_step=64)
    assert len(h.steps) == 0 and len(h.evals) == 1
    with pytest.raises(ValueError, match="not a multiple of group_size=8"):
        _run("grpo", reference, task, cpu_preset, steps=1, sequences_per_step=100)
    with pytest.raises(ValueError, match="reward_kind"):
        _run("grpo", reference, task, cpu_preset, steps=1, reward_kind="dense")


def test_dynamic_sampling_fills_with_informative_groups(reference, task, cpu_preset):
    algo = make_algorithm("grpo", dynamic_sampling=True)
    h = train(algo, task=task, reference=reference, preset=cpu_preset, steps=2, sequences_per_step=128, progress=False)
    # every group that reached the update had rewards that differ
    assert all(s["frac_reward_zero_std"] == 0.0 for s in h.steps)
    assert h.steps[0]["samples_trained"] <= 128 <= h.steps[0]["samples"]  # generated counts the dropped
    plain = _run("grpo", reference, task, cpu_preset, steps=1, sequences_per_step=128)
    assert plain.steps[0]["samples"] == plain.steps[0]["samples_trained"] == 128


def test_non_finite_loss_names_step_and_quantity(reference, task, cpu_preset):
    class NaNTask:
        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def token_scores(self, *a, **k):
            s = self.inner.token_scores(*a, **k)
            return s * math.nan

    with pytest.raises(FloatingPointError, match="step 1: advantages is nan"):
        train(
            make_algorithm("reinforce"),
            task=NaNTask(task),
            reference=reference,
            preset=cpu_preset,
            steps=1,
            sequences_per_step=32,
            progress=False,
        )


# -- learning tests: short, seeded, CPU ---------------------------------------------------
# What RL optimises is the *sampled* (T=1) reward, and that is what rises reliably in a short
# run: MEASURED from the references of SFT seeds 0, 1, 2 (held-out 0.54 / 0.56 / 0.62), mean
# reward of the last 5 steps minus the first 5: REINFORCE +0.066/+0.051/+0.041, baseline
# +0.059/+0.049/+0.038, PPO +0.091/+0.070/+0.049, GRPO +0.091/+0.075/+0.068. Greedy held-out
# accuracy can dip in the first ~40 steps before it climbs (-0.18..+0.21 at these budgets), so
# it is measured over longer runs by `grpo-edu compare` / `grpo-edu ablate`, not here.
@pytest.mark.parametrize(
    "name, steps, seqs",
    [("reinforce", 40, 512), ("baseline", 40, 512), ("ppo", 25, 256), ("grpo", 25, 512)],
)
def test_each_algorithm_raises_the_sampled_reward(name, steps, seqs, reference, task, cpu_preset):
    torch.manual_seed(0)
    h = _run(name, reference, task, cpu_preset, steps=steps, sequences_per_step=seqs, eval_every=steps)
    r = h.series("reward")
    assert r[-5:].mean() >= r[:5].mean() + 0.025, (r[:5].mean(), r[-5:].mean())
