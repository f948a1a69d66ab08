import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def cpu_preset():
    from grpo_edu import get_preset

    return get_preset("cpu")


@pytest.fixture(scope="session")
def task(cpu_preset):
    from grpo_edu import make_task

    return make_task(cpu_preset)


@pytest.fixture(scope="session")
def reference(cpu_preset):
    """The cpu preset's SFT reference (trained once, then loaded from the cache)."""
    from grpo_edu import reference_policy

    return reference_policy(cpu_preset, progress=False)


@pytest.fixture
def tiny_policy():
    from grpo_edu import ModelConfig, TinyGPT

    torch.manual_seed(0)
    return TinyGPT(ModelConfig(d_model=16, n_layers=1, n_heads=2, max_seq_len=12))
