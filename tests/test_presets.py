import pytest
import torch

from grpo_edu import TinyGPT, get_preset, make_algorithm, make_task, train
from grpo_edu.warmstart.presets import resolve_preset


def test_auto_picks_by_device():
    p = get_preset("auto")
    assert p.name == ("gpu" if torch.cuda.is_available() else "cpu")
    assert get_preset("cpu").device == "cpu"


def test_cpu_preset_is_small_and_consistent():
    p = get_preset("cpu")
    task = make_task(p)
    assert p.sequences_per_step == 512 and p.threads == 1
    assert task.prompt_length + task.max_answer_length <= p.model.max_seq_len
    n = sum(q.numel() for q in TinyGPT(p.model).parameters())
    assert 50_000 <= n <= 200_000


def test_gpu_preset_runs_a_step_on_any_device():
    # without CUDA the gpu preset is an error unless the CPU is asked for by name
    p = get_preset("gpu") if torch.cuda.is_available() else get_preset("gpu", device="cpu")
    task = make_task(p)
    assert task.prompt_length + task.max_answer_length <= p.model.max_seq_len
    assert p.device == ("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    policy = TinyGPT(p.model).to(p.device)
    h = train(
        make_algorithm("grpo", group_size=16),
        task=task,
        reference=policy,
        preset=p,
        steps=1,
        sequences_per_step=32,
        progress=False,
    )
    assert len(h.steps) == 1


def test_overrides_and_errors():
    assert get_preset("cpu", steps=7).steps == 7
    with pytest.raises(ValueError, match="unknown preset 'tpu'"):
        get_preset("tpu")
    with pytest.raises(ValueError, match="unknown preset fields"):
        get_preset("cpu", stepz=1)


def test_gpu_preset_without_cuda_says_what_to_use(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match=r"needs CUDA, which is not available.*'cpu' preset.*'auto'") as exc:
        get_preset("gpu")
    assert "\n" not in str(exc.value)
    with pytest.raises(ValueError, match="needs CUDA"):
        resolve_preset("gpu")
    with pytest.raises(ValueError, match="device='cuda', but CUDA is not available"):
        get_preset("cpu", device="cuda")
    assert get_preset("gpu", device="cpu").device == "cpu"  # asked for by name: allowed
    assert get_preset("auto").name == "cpu"  # auto stays quiet


def test_gpu_preset_with_cuda_picks_it(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert get_preset("gpu").device == "cuda"
    assert get_preset("auto").name == "gpu" and get_preset("auto").device == "cuda"
    assert get_preset("cpu").device == "cpu"


def test_an_empty_seed_shift_is_an_error(monkeypatch):
    from grpo_edu.warmstart.presets import seed_shift

    monkeypatch.setenv("GRPO_EDU_SEED_SHIFT", "")
    with pytest.raises(ValueError, match="set but empty"):
        seed_shift()
    monkeypatch.setenv("GRPO_EDU_SEED_SHIFT", "2")
    assert seed_shift() == 2
