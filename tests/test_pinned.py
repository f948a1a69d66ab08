"""Pinned numbers: a short seeded run of every algorithm, recorded before a refactor and
asserted after it, so a change of structure that changes a number fails here.

The runs start from a small seeded reference (d32, one layer, 60 SFT steps on 1-digit addition, never cached)
with 64 completions per step for 3 steps; every metric the history records and the
final parameter norm must match the recorded ones to rtol 1e-4 (a refactor that changes
the math moves them by far more).

The runs are pinned to one kernel: they run in a subprocess with ``ATEN_CPU_CAPABILITY=default``
(ATen's scalar kernels, on every CPU) and ``MKL_CBWR=COMPATIBLE`` (MKL's matrix products on its
one code path for every x86-64 CPU), one thread. Unpinned, rounding decides some of what they
record: at step 0 the policy is the reference, so the KL is 0 plus rounding (~1e-15); with the KL
in the reward and no std scaling (``grpo_kl_reward_k3_dr``) a group of equal scores then has a
"zero std" or not, and advantages of +-1e-15 whose sign picks which tokens count as clipped:
MEASURED, its step-0 ``clip_low`` was 0.0144 on AVX-512, 0.0127 on AVX2 and 0.0175 on the default
kernel, and even pinned it came out 0.0112 on one machine and 0.0159 on the CI's. So that run starts
its policy a seeded step away from the reference (``MOVED_OFF_THE_REFERENCE``): its step-0 KL is then
0.039, a number, and its whole history matches to rtol 1e-4 on the default and the AVX2 kernels
without MKL_CBWR (measured). A build without MKL (ARM) cannot pin the matrix products: the test skips
there, saying so.
Regenerate on purpose, never to make a failure go away:

    python -m tests.test_pinned   # rewrites tests/data/pinned_history.json (in the pinned subprocess)
"""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

PINNED = Path(__file__).parent / "data" / "pinned_history.json"
PINNED_ENV = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "OMP_NUM_THREADS": "1"}
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
            "loss_type": "constant",  # Dr. GRPO's aggregation (TRL's "dr_grpo")
            "eps_high": 0.28,
        },
        {},
    ),
    "grpo_seqmean_unbiased": ("grpo", {"loss_type": "sequence_mean", "unbiased_std": True, "beta": 0.0}, {}),
    "grpo_dynamic_process": ("grpo", {"dynamic_sampling": True}, {"reward_kind": "process"}),
    "ppo_kl_k2_entropy": ("ppo", {"kl_estimator": "k2", "entropy_coef": 0.01, "lam": 0.95}, {}),
}

# Runs whose policy starts a seeded 0.02-std step away from the reference: with the KL in the reward
# and no std scaling, a policy equal to the reference makes the step-0 KL rounding (see the docstring).
MOVED_OFF_THE_REFERENCE = {"grpo_kl_reward_k3_dr"}


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
    if name in MOVED_OFF_THE_REFERENCE:  # a KL that is a number at step 0, not rounding (see the docstring)
        g = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for p in policy.parameters():
                p.add_(0.02 * torch.randn(p.shape, generator=g))
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


def run_pinned(names=None) -> dict:
    """``_run`` of each of ``names`` (default: all), in a subprocess under ``PINNED_ENV``."""
    env = {k: v for k, v in os.environ.items() if k != "MKL_ENABLE_INSTRUCTIONS"} | PINNED_ENV
    code = "import json, sys, torch; from tests.test_pinned import _run; torch.set_num_threads(1); "
    code += "print('CAPABILITY', torch.backends.cpu.get_cpu_capability()); "
    code += "print('RESULT', json.dumps({n: _run(n) for n in sys.argv[1:]}))"
    r = subprocess.run([sys.executable, "-c", code, *(names or sorted(RUNS))], env=env, capture_output=True, text=True,
                       cwd=Path(__file__).resolve().parent.parent, timeout=1200)  # fmt: skip
    found = dict(line.split(" ", 1) for line in r.stdout.splitlines() if line.startswith(("CAPABILITY", "RESULT")))
    if r.returncode or "RESULT" not in found:
        raise RuntimeError(f"the pinned runs failed (exit {r.returncode}):\n{r.stderr[-3000:]}")
    if found["CAPABILITY"] != "DEFAULT":
        raise RuntimeError(f"ATEN_CPU_CAPABILITY=default was not honoured: torch ran {found['CAPABILITY']}")
    return json.loads(found["RESULT"])


@pytest.fixture(scope="module")
def pinned_runs():
    if not torch.backends.mkl.is_available():
        pytest.skip("the pinned histories need MKL's compatible code path (MKL_CBWR); this torch has no MKL")
    return run_pinned()


@pytest.mark.parametrize("name", sorted(RUNS))
def test_history_matches_the_pinned_one(name, pinned_runs):
    pinned = json.loads(PINNED.read_text())
    _close(pinned_runs[name], pinned[name], name)


if __name__ == "__main__":
    PINNED.write_text(json.dumps(run_pinned(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {PINNED} ({', '.join(f'{k}={v}' for k, v in PINNED_ENV.items())})")
