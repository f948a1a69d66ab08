import pytest
import torch

from grpo_edu import TinyGPT, get_preset, make_algorithm, make_task, train


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
    p = get_preset("gpu")
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
