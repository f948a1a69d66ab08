"""The speedrun (grpo_edu/studies/speedrun.py): its rules refuse a run that breaks them and record
nothing; its counts are the model's shapes; its profile runs train()'s step; the leaderboard the
site shows is the file's. And the speed changes it measures keep the numbers: the attention written
out equals PyTorch's, the fast unique equals torch.unique."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from grpo_edu import ModelConfig, make_algorithm, train
from grpo_edu.model import forward_flops
from grpo_edu.rollout import generate, unique_rows
from grpo_edu.studies import speedrun as S
from grpo_edu.studies.step_profile import FlopCounter, _Phases, timed_step


def test_forward_flops_by_hand():
    # d=2, m=1, V=3, one layer; 1 row, 2 new positions after 1 cached: 2 positions see 2 and 3 keys
    cfg = ModelConfig(vocab_size=3, d_model=2, n_layers=1, n_heads=1, max_seq_len=4, mlp_ratio=1)
    linear = 2 * 2 * (2 * 6 + 2 * 2 + 2 * 2 + 2 * 2)  # 2 FLOPs x 2 positions x (qkv 2x6, out 2x2, mlp 2x2 twice)
    attention = 2 * 2 * 2 * (2 + 3)  # q k^T and att v: 2 FLOPs x d x keys seen, twice
    head = 2 * 2 * 2 * 3
    assert forward_flops(cfg, rows=1, new_tokens=2, past=1) == linear + attention + head == 160
    assert forward_flops(cfg, rows=5, new_tokens=2, past=1) == 5 * 160
    # the last position's output only: qkv at both positions; out, MLP, attention (3 keys), head at one
    qkv, rest, att_one, head_one = 2 * 2 * (2 * 6), 2 * (2 * 2 + 2 * 2 * 2), 2 * 2 * 2 * 3, 2 * 2 * 3
    assert forward_flops(cfg, 1, 2, past=1, last=1) == qkv + rest + att_one + head_one == 108


def test_flop_counter_sees_every_call_and_only_grad_ones_backward(tiny_policy):
    prompts = torch.randint(3, 13, (3, 5))
    counter = FlopCounter(tiny_policy)
    ro = generate(tiny_policy, prompts, group_size=4, max_new_tokens=3, generator=torch.Generator().manual_seed(0))
    cfg, T = tiny_policy.config, ro.completion_ids.shape[1]
    # each prompt once (3 x 5 positions), then one token per row per later step, after the prefix
    want = forward_flops(cfg, 3, 5, last=1) + sum(forward_flops(cfg, 12, 1, past=5 + t) for t in range(T - 1))
    assert counter.forward == want and counter.backward == 0
    tiny_policy(prompts).sum().backward()
    assert counter.backward == 2 * forward_flops(cfg, 3, 5)
    counter.close()
    tiny_policy(prompts)
    assert counter.forward == want + forward_flops(cfg, 3, 5)  # closed: no longer counts


def test_attention_written_out_equals_pytorchs(tiny_policy):
    """The attention of model.py (q k^T, the causal bias, a softmax written out) against
    F.scaled_dot_product_attention, with and without a cached prefix, values and gradients."""
    attn = tiny_policy.trunk.blocks[0].attn
    B, C, H = 3, 16, 2
    x = torch.randn(B, 7, C, requires_grad=True)

    def reference(x, past_x=None):
        full = x if past_x is None else torch.cat([past_x, x], 1)
        q, k, v = (t.view(B, -1, H, C // H).transpose(1, 2) for t in attn.qkv(full).split(C, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, -1, C)
        return attn.proj(y)[:, -x.shape[1] :]

    torch.testing.assert_close(attn(x), reference(x), rtol=1e-5, atol=1e-6)
    g = torch.autograd.grad(attn(x).square().sum(), x)[0]
    torch.testing.assert_close(g, torch.autograd.grad(reference(x).square().sum(), x)[0], rtol=1e-4, atol=1e-6)
    cache = tiny_policy.new_cache()
    attn(x[:, :4], cache, 0)  # a prefix of 4, then 3 new positions (and then 1)
    torch.testing.assert_close(attn(x[:, 4:], cache, 0), reference(x[:, 4:], x[:, :4]), rtol=1e-5, atol=1e-6)
    one = torch.randn(B, 1, C)
    torch.testing.assert_close(attn(one, cache, 0), reference(one, x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("seed", range(5))
def test_unique_rows_is_torch_unique(seed):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 3 + seed, (40, 1 + seed), generator=g)[torch.randint(0, 40, (60,), generator=g)]
    for got, want in zip(unique_rows(ids), torch.unique(ids, dim=0, return_inverse=True), strict=True):
        assert torch.equal(got, want)
    big = torch.randint(0, 10**6, (8, 5), generator=g)  # base 10^6, 5 digits: past int64, the general path
    assert all(torch.equal(a, b) for a, b in zip(unique_rows(big), torch.unique(big, dim=0, return_inverse=True)))


def test_the_profiled_step_is_trains_step(task, reference, cpu_preset):
    """timed_step runs train()'s calls in train()'s order: from one seed, the same parameters."""
    kw = dict(steps=2, sequences_per_step=64, eval_every=100, seed=3, progress=False)
    a = copy.deepcopy(reference)
    train(make_algorithm("grpo"), task, reference, policy=a, preset=cpu_preset, **kw)
    b = copy.deepcopy(reference)
    algo = make_algorithm("grpo")
    torch.manual_seed(3)
    algo.setup(b, reference, generator=torch.Generator().manual_seed(4))
    rng, gen, phases = np.random.default_rng(3), torch.Generator().manual_seed(3), _Phases()
    for _ in range(2):
        timed_step(algo, task, 8, rng, gen, phases)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not all(torch.equal(p, q) for p, q in zip(a.parameters(), reference.parameters()))  # it moved
    assert phases.seconds["update: backward"] > 0


@pytest.mark.parametrize(
    "change, says",
    [
        (dict(eval_every=20), "evaluates every 5120 completions, every 10 steps of 512, not every 20"),
        (dict(eval_every=5), "not every 5"),
        (dict(sequences_per_step=384), "must divide 5120"),
        (dict(eval_size=100), "all 500 held-out problems"),
        (dict(seeds=2), "at least 3 seeds"),
        (dict(target=0.8), "target is held-out accuracy 0.9"),
        (dict(world="spread"), "default world"),
        (dict(config={"lr": -1.0}), "GRPOConfig.lr"),
        (dict(config={"grup_size": 4}), "not fields of GRPOConfig: grup_size"),
    ],
)
def test_a_run_that_breaks_a_rule_is_refused_and_not_recorded(change, says, tmp_path, monkeypatch, capsys):
    with pytest.raises(ValueError, match=says):
        S.check_rules(S.Run(**change))
    S.check_rules(S.Run())  # the default run keeps them
    S.check_rules(S.Run(sequences_per_step=256, eval_every=20, seeds=4, config={"lr": 1e-3}))  # tuned: fine
    board = tmp_path / "board.json"
    monkeypatch.setattr(S, "LEADERBOARD", board)
    monkeypatch.setattr(S, "speedrun", lambda *a, **k: pytest.fail("a refused run must not train"))
    key, value = next(iter(change.items()))
    argv = [f"--set={k}={v}" for k, v in value.items()] if key == "config" else [f"--{key.replace('_', '-')}={value}"]
    assert S.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("speedrun: refused: ") and err.count("\n") == 1
    assert not board.exists()


def test_the_grpo_edu_verb_hands_its_arguments_to_the_speedrun(tmp_path, monkeypatch, capsys):
    """``grpo-edu speedrun ...`` is the speedrun's own command: its help, its refusal (one line, exit
    status 2, nothing trained or recorded), its leaderboard; a flag it does not have is one line too."""
    from grpo_edu.command.cli import main

    board = tmp_path / "board.json"
    monkeypatch.setattr(S, "LEADERBOARD", board)
    monkeypatch.setattr(S, "speedrun", lambda *a, **k: pytest.fail("a refused run must not train"))
    with pytest.raises(SystemExit) as exc:
        main(["speedrun", "--help"])
    assert exc.value.code == 0 and capsys.readouterr().out.startswith("usage: grpo-edu speedrun [-h] [--profile]")
    assert main(["speedrun", "--seeds", "2"]) == 2
    assert capsys.readouterr().err == "speedrun: refused: the speedrun takes the median of at least 3 seeds, not 2\n"
    assert not board.exists()
    with pytest.raises(SystemExit) as exc:
        main(["speedrun", "--seed", "2"])  # train's flag, not the speedrun's
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and err.startswith("grpo-edu speedrun: error: ")
    board.write_text(json.dumps({"rules": S.RULES, "records": []}))
    assert main(["speedrun", "--leaderboard"]) == 0
    assert capsys.readouterr().out.startswith("GRPO to greedy accuracy 0.9 on the 500 held-out problems")


def test_one_seed_counts_what_it_ran(task, reference, cpu_preset):
    """Two steps that do not reach the target: samples are steps x sequences, tokens the completions'
    lengths, every evaluation counted (step 0, 1, 2); its time is infinite. A target the reference
    already meets is reached at step 0, in the time of one evaluation."""
    run = S.Run(sequences_per_step=64, target=1.0, eval_every=1, max_steps=2)  # (the rules are not checked here)
    out = S._one_seed(run, cpu_preset, task, reference, seed=0)
    assert not out["reached"] and out["seconds"] == math.inf and out["steps"] == 2
    assert out["samples"] == 128 and out["evaluations"] == 3
    assert 2 * 128 <= out["tokens"] <= task.max_answer_length * 128
    one_eval = FlopCounter(reference)
    from grpo_edu import evaluate

    evaluate(reference, task)
    one_eval.close()
    # the forward: 3 evaluations, 2 generations, 2 reference passes and 8 teacher-forced minibatches
    assert (
        3 * one_eval.forward
        < out["forward_flops"]
        < 3 * one_eval.forward + 12 * 64 * forward_flops(reference.config, 1, 11)
    )
    assert 0 < out["backward_flops"] <= 2 * 8 * 32 * forward_flops(reference.config, 1, 11)  # 2 x the updates' forward
    met = S._one_seed(S.Run(target=0.5, eval_every=1, max_steps=5), cpu_preset, task, reference, seed=0)
    assert met["reached"] and met["steps"] == 0 and met["samples"] == 0 and 0 < met["seconds"] < math.inf


def _record(name, seconds, **kw):
    seeds = [{"seed": i, "seconds": seconds} for i in range(3)]
    return {"name": name, "seconds": seconds, "cpu_seconds": seconds, "samples": 30720, "tokens": 100000,
            "forward_flops": 2e11, "backward_flops": 3e11, "reached": 3, "seeds": seeds, "kernel": "AVX512",
            "threads": 1, "date": "2026-01-01 00:00 UTC", "commit": "abc", "cpu": "a CPU", "config": {},
            "sequences_per_step": 512, "eval_every": 10, **kw}  # fmt: skip


def test_leaderboard_appends_and_ranks(tmp_path):
    path = tmp_path / "board.json"
    S.append_record(_record("default", 7.0), path)
    S.append_record(_record("tuned", 3.0, config={"lr": 0.001}, reference={"key": "cac088ae1b4259ac"}), path)
    S.append_record(_record("stalled", math.inf), path)
    board = json.loads(path.read_text())
    assert board["rules"] == S.RULES and [r["name"] for r in board["records"]] == ["default", "tuned", "stalled"]
    assert board["records"][2]["seconds"] is None  # infinity kept as null: the file stays JSON
    table = S.format_leaderboard(board).splitlines()
    assert [line.split()[1] for line in table[3:6]] == ["tuned", "default", "stalled"]
    assert "lr=0.001" in table[3] and "defaults" in table[4] and "never" in table[5]
    refs = [line.split()[-2] for line in table[3:6]]  # the reference's key, "-" where a record has none
    assert table[2].split()[-2] == "ref" and refs == ["cac088", "-", "-"]
    assert max(len(line) for line in table) <= 120  # fits the site's column


def test_the_site_shows_the_leaderboard_file():
    from course.site import blocks

    assert blocks.read("speedrun") == S.format_leaderboard(S.load_leaderboard())
    names = [r["name"] for r in S.load_leaderboard()["records"]]
    assert "default" in names  # the default config's record is kept beside the tuned ones


def test_share_prompts_is_a_parameter_the_rollout_carries(tiny_policy):
    """``generate(share_prompts=False)`` samples a rollout whose every teacher-forced pass runs each
    row's own prompt (one forward over prompt + completion), as its selected rows do; the default
    runs each distinct prompt once; the numbers agree to float rounding."""
    from grpo_edu.rollout import Rollout, sequence_logprobs

    prompts = torch.randint(3, 13, (3, 5))
    kw = dict(group_size=4, max_new_tokens=3, generator=torch.Generator().manual_seed(0))
    shared = generate(tiny_policy, prompts, **kw)
    kw["generator"] = torch.Generator().manual_seed(0)
    own = generate(tiny_policy, prompts, share_prompts=False, **kw)
    assert shared.share_prompts and not own.share_prompts and not own.select(torch.arange(6)).share_prompts
    assert not Rollout.concat([shared, own]).share_prompts
    B, T = own.completion_ids.shape
    for ro, want in ((own, forward_flops(tiny_policy.config, B, 5 + T)),
                     (shared, forward_flops(tiny_policy.config, 3, 5, last=1) + forward_flops(tiny_policy.config, B, T - 1, 5))):  # fmt: skip
        counter = FlopCounter(tiny_policy)
        lp = sequence_logprobs(tiny_policy, ro)
        counter.close()
        assert counter.forward == want
    torch.testing.assert_close(
        sequence_logprobs(tiny_policy, own), sequence_logprobs(tiny_policy, shared), atol=1e-6, rtol=1e-5
    )
    torch.testing.assert_close(lp, shared.logprobs, atol=1e-6, rtol=1e-5)
    with pytest.raises(ValueError, match="share_prompts must be True or False"):
        generate(tiny_policy, prompts, share_prompts=None)


def test_a_reserved_cache_writes_in_place_without_grad_and_matches(tiny_policy):
    """``KVCache.reserve(n)``: under no_grad each token's keys and values go into one buffer (the
    same storage from token to token), the logits those of the appending cache; with grad it appends."""
    ids = torch.randint(3, 13, (4, 9))
    plain, reserved = tiny_policy.new_cache(), tiny_policy.new_cache().reserve(12)
    with torch.no_grad():
        a = [tiny_policy(ids[:, :6], plain)] + [tiny_policy(ids[:, t : t + 1], plain) for t in range(6, 9)]
        b = [tiny_policy(ids[:, :6], reserved)]
        storage = reserved.keys[0].untyped_storage().data_ptr()
        b += [tiny_policy(ids[:, t : t + 1], reserved) for t in range(6, 9)]
    assert reserved.keys[0].untyped_storage().data_ptr() == storage and reserved.length == plain.length == 9
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)
    with_grad = tiny_policy.new_cache().reserve(12)
    tiny_policy(ids[:, :6], with_grad)
    out = tiny_policy(ids[:, 6:], with_grad)
    out.sum().backward()  # appended (torch.cat): autograd follows it
    assert with_grad.keys[0].requires_grad and with_grad.length == 9


def test_the_profile_counts_each_phase(reference):
    """One profiled step: every phase timed; the backward's FLOPs twice the update's forward ones, the
    reference's forward as many as the sampling's prompt-and-decode (the same rows, one model each);
    the table prints them with the peak and the step's limit."""
    from grpo_edu.studies.step_profile import PHASES, format_profile, profile_step

    r = profile_step("cpu", steps=1, warmup=0)
    p = r["phases"]
    assert set(p) == set(PHASES) and all(v["seconds"] > 0 for v in p.values())
    assert p["update: backward"]["flops"] == 2 * p["update: forward + loss"]["flops"] > 0
    assert p["score"]["flops"] == 0 and p["generate (sample completions)"]["flops"] > 0
    assert p["prepare: reference log-probs, advantages"]["flops"] > 0 and r["evaluation"]["flops"] > 0
    assert 10 < r["peak"][0] < 10_000 and all(v["ops"] > 0 for v in p.values())
    text = format_profile(r)
    assert "step, evaluation included" in text and "the step's FLOPs" in text and text.count("\n") >= 14


def test_minibatches_in_order_hold_whole_groups_and_run_fewer_prompts(task, tiny_policy):
    """``shuffle=False`` (verl's split): minibatches of consecutive rows, the same each pass, so each holds
    whole groups and runs half the prompts of a step; shuffled rows (the default, the control) spread a
    minibatch over nearly every prompt, and the update's forward then counts more FLOPs."""
    from grpo_edu.train import minibatches, update

    gen = torch.Generator().manual_seed(0)
    assert [m.tolist() for m in minibatches(8, 2, gen, shuffle=False)] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert [m.tolist() for m in minibatches(8, 2, gen)] != [[0, 1, 2, 3], [4, 5, 6, 7]]  # shuffled
    prompts = task.encode_prompts(task.sample(8, np.random.default_rng(0)))
    ro = generate(tiny_policy, prompts, group_size=4, max_new_tokens=4, generator=torch.Generator().manual_seed(1))
    assert ro.group_ids.tolist() == [i // 4 for i in range(32)]  # a group's rows are consecutive
    flops = {}
    for shuffle in (True, False):
        algo = make_algorithm("grpo", group_size=4, epochs=1, minibatches=2, shuffle=shuffle)
        algo.setup(copy.deepcopy(tiny_policy), copy.deepcopy(tiny_policy), generator=torch.Generator().manual_seed(2))
        counter = FlopCounter(algo.policy)
        update(algo, ro, torch.rand(ro.mask.shape).round() * ro.mask)
        flops[shuffle] = counter.forward
        counter.close()
    assert flops[False] < flops[True]
