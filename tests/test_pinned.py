"""Pinned numbers: a short seeded run of every algorithm, recorded before a refactor and
asserted after it, so a change of structure that changes a number fails here.

The runs start from a small seeded reference (d32, one layer, 60 SFT steps on 1-digit addition, never cached)
with 64 completions per step for 3 steps; every metric the history records and the
final parameter norm must match the recorded ones to rtol 1e-4 (float rounding differs
across CPU kernels; a refactor that changes the math moves them by far more).
Regenerate on purpose, never to make a failure go away:

    python -m tests.test_pinned   # rewrites tests/data/pinned_history.json
"""

import json
import math
from pathlib import Path

import pytest
import torch

PINNED = Path(__file__).parent / "data" / "pinned_history.json"
RUNS = {  # name -> (algorithm, config overrides, train kwargs)
    "reinforce": ("reinforce", {}, {}),
    "baseline_critic": ("baseline", {}, {}),
    "baseline_batch_mean": ("baseline", {"baseline": "batch_mean"}, {}),
    "baseline_running_mean": ("baseline", {"baseline": "running_mean"}, {}),
    "ppo": ("ppo", {}, {}),
    "grpo": ("grpo", {}, {}),
    "grpo_kl_reward_k3_dr": (
        "grpo",
        {
            "kl_placement": "reward",
            "kl_estimator": "k3",
            "scale_rewards": "none",
            "loss_type": "dr_grpo",
            "eps_high": 0.28,
        },
        {},
    ),
    "grpo_seqmean_unbiased": ("grpo", {"loss_type": "sequence_mean", "unbiased_std": True, "beta": 0.0}, {}),
    "grpo_dynamic_process": ("grpo", {"dynamic_sampling": True}, {"reward_kind": "process"}),
    "ppo_kl_k2_entropy": ("ppo", {"kl_estimator": "k2", "entropy_coef": 0.01, "lam": 0.95}, {}),
}


def _run(name):
    from grpo_edu import ModelConfig, SFTConfig, TinyGPT, get_preset, make_algorithm, train
    from grpo_edu.warmstart.reference import reference_policy

    algo, config, kw = RUNS[name]
    from envs import ArithmeticTask

    preset = get_preset("cpu")
    task = ArithmeticTask(digits=1, eval_size=100)  # easy: the reference is partly right after 60 steps
    reference = reference_policy(
        task=task,
        model_config=ModelConfig(d_model=32, n_layers=1, n_heads=2, max_seq_len=12),
        sft_config=SFTConfig(max_steps=60, target_accuracy=1.0, eval_every=60, batch_size=128),
        cache=False,
        progress=False,
    )
    policy = TinyGPT(reference.config)
    policy.load_state_dict(reference.state_dict())
    h = train(
        make_algorithm(algo, **config),
        task=task,
        reference=reference,
        policy=policy,
        preset=preset,
        steps=3,
        sequences_per_step=128,
        seed=0,
        eval_every=3,
        progress=False,
        **kw,
    )
    steps = [{k: v for k, v in s.items() if k != "seconds"} for s in h.steps]
    norm = float(torch.sqrt(sum((p.detach().double() ** 2).sum() for p in policy.parameters())))
    return {"steps": steps, "accuracy": [e["accuracy"] for e in h.evals], "param_norm": norm}


def _close(a, b, path=""):
    if isinstance(a, dict):
        assert set(a) == set(b), f"{path}: keys {sorted(set(a) ^ set(b))} differ"
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), f"{path}: length {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-6), f"{path}: {a} != pinned {b}"
    else:
        assert a == b, f"{path}: {a!r} != pinned {b!r}"


@pytest.mark.parametrize("name", sorted(RUNS))
def test_history_matches_the_pinned_one(name):
    torch.set_num_threads(1)
    pinned = json.loads(PINNED.read_text())
    _close(_run(name), pinned[name], name)


if __name__ == "__main__":
    torch.set_num_threads(1)
    PINNED.write_text(json.dumps({n: _run(n) for n in sorted(RUNS)}, indent=1, sort_keys=True) + "\n")
    print(f"wrote {PINNED}")
