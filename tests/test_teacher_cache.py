"""The distillation study's cached teachers (`teacher_policy`): the cache key hashes every project file a
teacher's training runs (`TEACHER_SOURCES`, traced here) and the device, so a teacher trained by other code
or on another device is trained again, never served from the cache; unchanged, it is loaded, not retrained."""

import dataclasses
import importlib
import os
import shutil
from pathlib import Path

import pytest
import torch

from grpo_edu import ModelConfig, TinyGPT, get_preset, make_task
from grpo_edu.studies import distillation as study
from grpo_edu.warmstart import reference as reference_module
from grpo_edu.warmstart.reference import source_files

TINY = ModelConfig(d_model=16, n_layers=1, n_heads=2, max_seq_len=12)
BUDGET = dict(steps=1, sequences_per_step=16)  # one GRPO step of 2 prompts x 8: seconds


def _tiny(seed=0):
    torch.manual_seed(seed)
    return TinyGPT(TINY)


@pytest.mark.parametrize("kind", ["rl", "easy"])
def test_the_teacher_fingerprint_covers_every_project_file_its_training_runs(kind, tmp_path, project_files_run):
    """A file the teacher's training runs that `TEACHER_SOURCES` does not hash could change the teacher's
    weights without changing its key (a stale teacher served from the cache)."""
    preset = get_preset("cpu", world="spread")
    task = make_task(preset)
    ran = project_files_run(lambda: study.teacher_policy(kind, task, preset, _tiny(), **BUDGET, cache=tmp_path))
    hashed = {str(f) for f in source_files(study.TEACHER_SOURCES)}
    # control: it watched the RL loop (files the reference's SFT sources do not hash)
    assert any(f.endswith(os.path.join("grpo_edu", "train.py")) for f in ran)
    assert any(f.endswith(os.path.join("algorithms", "grpo.py")) for f in ran)
    assert not {f for f in ran if "algorithms" in f} & {str(f) for f in source_files()}
    assert ran <= hashed, f"the teacher's training ran files its cache key does not hash: {sorted(ran - hashed)}"


@pytest.mark.parametrize("change", ["nothing", "teacher code", "sft code", "device", "reference"])
def test_the_teacher_key_moves_with_what_trains_it(change, tmp_path, monkeypatch):
    """The same teacher asked again is loaded, not retrained (the control); asked after the code of its
    training, the reference's SFT code, the preset's device or the reference's weights changed, it is
    another file, trained anew."""
    train_module = importlib.import_module("grpo_edu.train")
    real_train, trains = train_module.train, []
    monkeypatch.setattr(train_module, "train", lambda *a, **k: trains.append(1) or real_train(*a, **k))
    preset = get_preset("cpu")
    task, reference = make_task(preset), _tiny()
    first = study.teacher_policy("rl", task, preset, reference, **BUDGET, cache=tmp_path)
    assert len(trains) == 1 and len(list(tmp_path.glob("teacher-rl-*.pt"))) == 1

    real = reference_module.code_fingerprint
    sft = reference_module._SFT_SOURCES
    if change == "teacher code":
        edited = lambda patterns=sft: "edited" if patterns == study.TEACHER_SOURCES else real(patterns)  # noqa: E731
        monkeypatch.setattr(reference_module, "code_fingerprint", edited)
    elif change == "sft code":
        edited = lambda patterns=sft: "edited" if patterns == sft else real(patterns)  # noqa: E731
        monkeypatch.setattr(reference_module, "code_fingerprint", edited)
    elif change == "device":
        preset = dataclasses.replace(preset, device="cuda")  # the key only: the tiny reference stays on the CPU
    elif change == "reference":
        reference = _tiny(seed=1)
    again = study.teacher_policy("rl", task, preset, reference, **BUDGET, cache=tmp_path)
    files = len(list(tmp_path.glob("teacher-rl-*.pt")))
    if change == "nothing":
        assert len(trains) == 1 and files == 1  # loaded from the cache
        for a, b in zip(first.parameters(), again.parameters()):
            assert torch.equal(a, b)
    else:
        assert len(trains) == 2 and files == 2


def test_an_edit_to_the_rl_loop_moves_the_teachers_fingerprint_not_the_references(tmp_path, monkeypatch):
    """`code_fingerprint(TEACHER_SOURCES)` reads the bytes of train.py (which the reference's SFT never runs):
    one edit there moves the teacher's fingerprint and leaves the reference's as it was."""
    root = Path(reference_module.__file__).resolve().parents[2]
    for f in source_files(study.TEACHER_SOURCES):
        dst = tmp_path / f.relative_to(root)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(f, dst)
    monkeypatch.setattr(reference_module, "_ROOT", tmp_path)
    fingerprint = reference_module.code_fingerprint
    fingerprint.cache_clear()
    try:
        before = fingerprint(study.TEACHER_SOURCES), fingerprint()
        loop = tmp_path / "grpo_edu" / "train.py"
        loop.write_text(loop.read_text() + "\n# an edit\n")
        fingerprint.cache_clear()
        after = fingerprint(study.TEACHER_SOURCES), fingerprint()
    finally:
        fingerprint.cache_clear()
    assert before[0] != after[0] and before[1] == after[1]
