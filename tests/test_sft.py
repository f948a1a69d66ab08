import os
import pickle
from pathlib import Path

import pytest
import torch

from envs import ArithmeticTask
from grpo_edu.evaluation import evaluate
from grpo_edu.model import ModelConfig, TinyGPT
from grpo_edu.warmstart import reference as reference_module
from grpo_edu.warmstart.checkpoint import NotWritableError, load_checkpoint, load_state_dict_checked, save_checkpoint
from grpo_edu.warmstart.reference import reference_policy, source_files
from grpo_edu.warmstart.sft import SFTConfig, sft_batch

TINY = ModelConfig(d_model=16, n_layers=1, n_heads=2, max_seq_len=12)


def test_sft_batch_targets_only_the_answer():
    task = ArithmeticTask(digits=2)
    p = task.make_problem(23, 58)  # 81 reversed -> "18"
    ids, targets = sft_batch(task, [p])
    tok = task.tokenizer
    assert ids[0].tolist() == tok.encode("23+58=", add_bos=True) + tok.encode("18", add_eos=True)
    P = task.prompt_length
    assert (targets[0, : P - 1] == -100).all()
    assert targets[0, P - 1 : P + 2].tolist() == tok.encode("18", add_eos=True)


def test_sft_batch_teaches_the_filler_of_a_free_length_task():
    task = ArithmeticTask(filler=3)
    problems = task.sample(16, 0)
    ids, targets = sft_batch(task, problems)
    tok, P = task.tokenizer, task.prompt_length
    for i, p in enumerate(problems):
        demo = tok.encode(task.demonstration(p), add_eos=True)
        assert targets[i, P - 1 : P - 1 + len(demo)].tolist() == demo
        assert (targets[i, P - 1 + len(demo) :] == -100).all()
    assert len({len(task.demonstration(p)) - len(p.answer) for p in problems}) > 1  # lengths differ


def test_reference_is_partly_right_and_cached(reference, task):
    acc = evaluate(reference, task)
    assert 0.5 <= acc <= 0.8  # stopped at >= 50% (checked every 5 steps): RL has something to improve
    again, info = reference_policy("cpu", progress=False, return_info=True)
    assert info["loaded"]
    h = info["history"]  # the SFT curve is stored with the weights
    assert h["step"][-1] == info["steps"] and h["accuracy"][-1] == info["accuracy"] >= 0.5 > max(h["accuracy"][:-1])
    for a, b in zip(reference.parameters(), again.parameters()):
        assert torch.equal(a, b)


def test_sft_is_deterministic_and_cache_roundtrips(tmp_path):
    task = ArithmeticTask(digits=1, eval_size=20)
    cfg = SFTConfig(max_steps=10, target_accuracy=1.0, eval_every=5, batch_size=32)
    a, ia = reference_policy(
        task=task, model_config=TINY, sft_config=cfg, cache=tmp_path, progress=False, return_info=True
    )
    b, ib = reference_policy(
        task=task, model_config=TINY, sft_config=cfg, cache=False, progress=False, return_info=True
    )
    assert not ia["loaded"] and os.path.exists(ia["path"])
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)  # same seed, same weights
    c, ic = reference_policy(
        task=task, model_config=TINY, sft_config=cfg, cache=tmp_path, progress=False, return_info=True
    )
    assert ic["loaded"] and ic["path"] == ia["path"]
    # another config -> another file, never the old one
    d, idd = reference_policy(
        task=task,
        model_config=TINY,
        sft_config=SFTConfig(max_steps=5, eval_every=5, batch_size=32, target_accuracy=1.0),
        cache=tmp_path,
        progress=False,
        return_info=True,
    )
    assert not idd["loaded"] and idd["path"] != ia["path"]


def test_the_fingerprint_covers_every_project_file_the_sft_runs(project_files_run):
    """The cache key hashes `source_files`; a file the SFT runs that is not among them could change
    the weights without changing the key (a stale reference served from the cache)."""
    task = ArithmeticTask(digits=1, eval_size=20)
    cfg = SFTConfig(max_steps=5, target_accuracy=1.0, eval_every=5, batch_size=32, operand_below=5)
    ran = project_files_run(
        lambda: reference_policy(task=task, model_config=TINY, sft_config=cfg, cache=False, progress=True)
    )
    hashed = {str(f) for f in source_files()}
    assert any(f.endswith("sft.py") for f in ran) and any(f.endswith("model.py") for f in ran)  # it watched
    assert ran <= hashed, f"the SFT ran files the cache key does not hash: {sorted(ran - hashed)}"


@pytest.mark.parametrize("part", ["source", "torch", "kernel", "device"])
def test_a_changed_fingerprint_retrains_instead_of_loading(tmp_path, monkeypatch, part):
    """The same config trained by other code, another torch, another kernel or device is another file."""
    task = ArithmeticTask(digits=1, eval_size=20)
    cfg = SFTConfig(max_steps=5, target_accuracy=1.0, eval_every=5, batch_size=32)
    kw = dict(task=task, model_config=TINY, sft_config=cfg, cache=tmp_path, progress=False, return_info=True)
    _, first = reference_policy(**kw)
    _, same = reference_policy(**kw)
    assert not first["loaded"] and same["loaded"] and same["path"] == first["path"]  # control: unchanged loads
    real = reference_module.runtime_fingerprint
    monkeypatch.setattr(reference_module, "runtime_fingerprint", lambda device: {**real(device), part: "other"})
    _, other = reference_policy(**kw)
    assert not other["loaded"] and other["path"] != first["path"]
    assert len(list(tmp_path.glob("reference-*.pt"))) == 2


def test_a_source_edit_changes_the_fingerprint(tmp_path, monkeypatch):
    """`code_fingerprint` reads the files' bytes: one changed byte in one of them is another key."""
    import shutil

    root = Path(reference_module.__file__).resolve().parents[2]
    real = reference_module.code_fingerprint()
    for f in source_files():
        dst = tmp_path / f.relative_to(root)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(f, dst)
    monkeypatch.setattr(reference_module, "_ROOT", tmp_path)
    reference_module.code_fingerprint.cache_clear()
    try:
        before = reference_module.code_fingerprint()
        model = tmp_path / "grpo_edu" / "model.py"
        model.write_text(model.read_text() + "\n# an edit\n")
        reference_module.code_fingerprint.cache_clear()
        after = reference_module.code_fingerprint()
    finally:
        reference_module.code_fingerprint.cache_clear()
    assert before == real != after  # control: the copy hashes as the original


def test_checkpoint_atomic_and_checked(tmp_path):
    path = tmp_path / "ck.pt"
    m = TinyGPT(TINY)
    save_checkpoint(path, {"config": {"a": 1}, "state_dict": m.state_dict()})
    assert [p.name for p in tmp_path.iterdir()] == ["ck.pt"]  # no temp file left behind
    state = load_checkpoint(path, expected_config={"a": 1})
    load_state_dict_checked(TinyGPT(TINY), state["state_dict"])
    with pytest.raises(ValueError, match=r"another config.*\['a'\]"):
        load_checkpoint(path, expected_config={"a": 2})
    big = TinyGPT(ModelConfig(d_model=32, n_layers=1, n_heads=2, max_seq_len=12))
    with pytest.raises(ValueError, match="wrong shapes"):
        load_state_dict_checked(big, state["state_dict"])
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="not a usable grpo-edu checkpoint: it is not a PyTorch checkpoint"):
        load_checkpoint(tmp_path / "junk.pt")


def test_corrupted_cache_file_is_replaced_with_a_one_line_warning(tmp_path, capsys):
    task = ArithmeticTask(digits=1, eval_size=20)
    cfg = SFTConfig(max_steps=5, target_accuracy=1.0, eval_every=5, batch_size=16)
    _, info = reference_policy(
        task=task, model_config=TINY, sft_config=cfg, cache=tmp_path, progress=False, return_info=True
    )
    with open(info["path"], "wb") as f:
        f.write(b"\x00 half a checkpoint")
    capsys.readouterr()
    _, again = reference_policy(
        task=task, model_config=TINY, sft_config=cfg, cache=tmp_path, progress=False, return_info=True
    )
    err = capsys.readouterr().err
    assert not again["loaded"] and err.count("\n") == 1 and "unusable" in err and "training a new one" in err
    _, third = reference_policy(
        task=task, model_config=TINY, sft_config=cfg, cache=tmp_path, progress=False, return_info=True
    )
    assert third["loaded"]  # the replacement is a good file


def test_stale_file_under_the_cache_name_is_retrained(tmp_path):
    task = ArithmeticTask(digits=1, eval_size=20)
    cfg = SFTConfig(max_steps=5, target_accuracy=1.0, eval_every=5, batch_size=16)
    _, info = reference_policy(
        task=task, model_config=TINY, sft_config=cfg, cache=tmp_path, progress=False, return_info=True
    )
    save_checkpoint(info["path"], {"config": {"other": True}, "state_dict": {}})
    _, info2 = reference_policy(
        task=task, model_config=TINY, sft_config=cfg, cache=tmp_path, progress=False, return_info=True
    )
    assert not info2["loaded"] and "another config" in info2["warning"]


@pytest.mark.parametrize(
    "kwargs, match",
    [(dict(lr=0), "lr"), (dict(target_accuracy=1.5), "target_accuracy"), (dict(batch_size=0), "batch_size")],
)
def test_bad_sft_config(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SFTConfig(**kwargs)


def _tiny_reference(tmp_path, **kw):
    task = ArithmeticTask(digits=1, eval_size=20)
    cfg = SFTConfig(max_steps=5, target_accuracy=1.0, eval_every=5, batch_size=16)
    return reference_policy(
        task=task, model_config=TINY, sft_config=cfg, cache=tmp_path, progress=False, return_info=True, **kw
    )


def _zip_cut_in_half(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _another_version(path):
    state = torch.load(path, weights_only=True)
    save_checkpoint(path, {**state, "config": {**state["config"], "format": 1}})


def _missing_keys(path):
    state = torch.load(path, weights_only=True)
    sd = {k: v for k, v in state["state_dict"].items() if not k.startswith("head")}
    save_checkpoint(path, {**state, "state_dict": sd})


@pytest.mark.parametrize(
    "spoil, says",
    [
        (lambda p: p.write_bytes(b""), "the file is empty (0 bytes)"),
        (lambda p: p.write_bytes(b"\x00 half a checkpoint"), "it is not a PyTorch checkpoint (neither a torch zip"),
        (lambda p: p.write_bytes(b"not a checkpoint"), "it is not a PyTorch checkpoint"),
        (_zip_cut_in_half, "it is a damaged or truncated PyTorch file"),
        (lambda p: p.write_bytes(pickle.dumps({"a": 1})), "it is a Python pickle"),
        (lambda p: torch.save({"weights": torch.ones(2)}, p), "it is a PyTorch file but not a grpo-edu checkpoint"),
        (
            _another_version,
            "it was written by another version of grpo-edu (checkpoint format 1, this version reads format",
        ),
        (_missing_keys, "its weights do not fit this model (missing keys ['head."),
    ],
)
def test_unusable_cache_file_is_named_in_the_users_words(tmp_path, capsys, spoil, says):
    _, info = _tiny_reference(tmp_path)
    spoil(Path(info["path"]))
    capsys.readouterr()
    _, again = _tiny_reference(tmp_path)
    err = capsys.readouterr().err
    assert not again["loaded"] and err.count("\n") == 1, err
    assert err.startswith(f"grpo-edu: the cached reference {info['path']} is unusable: {says}"), err
    assert err.endswith("; training a new one in its place\n"), err
    assert "Weights only" not in err and "PyTorch 2.6" not in err and "miniz" not in err  # not torch's text
    assert _tiny_reference(tmp_path)[1]["loaded"]  # the replacement is a good file


def test_unwritable_cache_fails_in_one_line_before_training(tmp_path, monkeypatch):
    import grpo_edu.warmstart.reference as ref

    monkeypatch.setattr(ref, "train_sft", lambda *a, **k: pytest.fail("trained before checking the cache"))
    (tmp_path / "a-file").write_text("")
    folder = tmp_path / "a-file" / "cache"
    with pytest.raises(NotWritableError) as exc:
        _tiny_reference(folder)
    assert str(exc.value) == (
        f"cannot write to {folder} (the reference cache, reference_policy(cache=...)): "
        f"{tmp_path / 'a-file'} is a file, not a folder; pass a writable folder or cache=False"
    )
    monkeypatch.setenv("GRPO_EDU_CACHE", str(folder))
    with pytest.raises(NotWritableError, match=r"set by \$GRPO_EDU_CACHE\).*; set \$GRPO_EDU_CACHE to a writable"):
        reference_policy(
            task=ArithmeticTask(digits=1, eval_size=20), model_config=TINY, sft_config=SFTConfig(max_steps=5)
        )


@pytest.mark.parametrize("progress", [True, False])
def test_sft_progress_bar_shows_where_it_stops(capsys, progress):
    from grpo_edu.warmstart.sft import train_sft

    task = ArithmeticTask(digits=1, eval_size=20)
    torch.manual_seed(0)
    cfg = SFTConfig(max_steps=40, target_accuracy=0.05, eval_every=5, batch_size=16)
    hist = train_sft(TinyGPT(TINY), task, cfg, progress=progress)
    err = capsys.readouterr().err
    if not progress:
        assert err == ""
        return
    stopped = hist["step"][-1]
    assert stopped < 40  # stopped early: the bar's total is max_steps, its title says the target
    assert "SFT warm start (stops early at 5% held-out)" in err and "/40" in err
    assert f"acc {hist['accuracy'][-1]:.1%} -> stop at 5%" in err
