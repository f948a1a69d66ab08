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


@pytest.fixture
def project_files_run():
    """``files(call)``: call ``call()`` and return the project files whose code ran (``sys.setprofile``), the
    tests' own files and hidden folders (a venv) left out: what a cache key's source hash must cover."""
    import os
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])
    tests = os.path.join(root, "tests") + os.sep

    def files(call) -> set:
        ran = set()

        def watch(frame, event, arg):
            name = frame.f_code.co_filename
            if name.startswith(root + os.sep) and os.sep + "." not in name[len(root) :] and not name.startswith(tests):
                ran.add(name)

        sys.setprofile(watch)
        try:
            call()
        finally:
            sys.setprofile(None)
        return ran

    return files
