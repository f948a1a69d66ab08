"""On-policy distillation: its per-token signal by hand, its gradient against the exact reverse KL's,
the algorithm's zero signal when the teacher is the student, and a short seeded learning test with its
controls (the teacher equal to the student, a learning rate of ~0)."""

import copy

import numpy as np
import pytest
import torch

from grpo_edu import functional as Fn
from grpo_edu.algorithms import DistillConfig, OnPolicyDistillation, make_algorithm
from grpo_edu.rollout import sample_batch, sequence_logprobs, teacher_forced
from grpo_edu.train import update


def test_distillation_advantages_by_hand():
    logp = torch.tensor([[-1.0, -2.0, -0.5], [-0.1, -3.0, -4.0]])
    teacher = torch.tensor([[-1.5, -0.5, -0.5], [-2.1, -1.0, -9.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    # A = -coef (logp - teacher): row 0: -(0.5), -(-1.5), 0; row 1: -(2.0), -(-2.0), masked
    want = 0.5 * torch.tensor([[-0.5, 1.5, 0.0], [-2.0, 2.0, 0.0]])
    got = Fn.distillation_advantages(logp.requires_grad_(), teacher, mask, coef=0.5)
    assert torch.allclose(got, want) and not got.requires_grad  # data, like a reward
    same = Fn.distillation_advantages(teacher, teacher, mask)
    assert torch.equal(same, torch.zeros_like(same))  # a teacher equal to the student: no signal
    # -A is k1 of KL(student || teacher), the teacher in pi_ref's place
    assert torch.allclose(-Fn.distillation_advantages(logp, teacher, mask), Fn.kl_estimate(logp, teacher, "k1") * mask)


def test_distillation_advantages_bad_input():
    x = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="teacher_logp must have the shape"):
        Fn.distillation_advantages(x, torch.zeros(2, 4), x)
    with pytest.raises(ValueError, match="coef must be in"):
        Fn.distillation_advantages(x, x, x, coef=-1.0)
    with pytest.raises(ValueError, match=r"logp must be \[B, T\]"):
        Fn.distillation_advantages(torch.zeros(3), torch.zeros(3), torch.zeros(3))


def test_expected_policy_gradient_is_the_reverse_kl_gradient():
    """At one state, sum_a pi(a) * grad(-A_a log pi(a)) over every token a (the expectation the sampled
    update estimates) equals grad KL(pi || pi_teacher), exactly: the signal's gradient check."""
    torch.manual_seed(0)
    V = 7
    z = torch.randn(1, 1, V, dtype=torch.float64, requires_grad=True)
    zt = torch.randn(1, 1, V, dtype=torch.float64)
    logpi = torch.log_softmax(z, -1).reshape(1, V)  # each token a as a column: [1, V]
    logq = torch.log_softmax(zt, -1).reshape(1, V)
    adv = Fn.distillation_advantages(logpi, logq, torch.ones(1, V, dtype=torch.float64))
    surrogate = (logpi.detach().exp() * Fn.policy_gradient_loss(logpi, adv)).sum()
    (g_pg,) = torch.autograd.grad(surrogate, z)
    (g_kl,) = torch.autograd.grad(Fn.exact_kl(z, zt, "pi||ref").sum(), z)
    assert torch.allclose(g_pg, g_kl, atol=1e-12) and g_kl.abs().max() > 1e-3  # control: a gradient, not zeros
    (g_fwd,) = torch.autograd.grad(Fn.exact_kl(z, zt, "ref||pi").sum(), z)
    assert not torch.allclose(g_pg, g_fwd, atol=1e-3)  # control: it is the reverse KL's, not the forward's


def test_config_and_setup_refuse_bad_input(tiny_policy):
    with pytest.raises(ValueError, match="DistillConfig.objective='nll' is defined on samples"):
        DistillConfig(objective="nll")
    with pytest.raises(ValueError, match="DistillConfig.samples must be one of"):
        DistillConfig(samples="both")
    with pytest.raises(ValueError, match="DistillConfig.kl_coef must be >= 0"):
        DistillConfig(kl_coef=-1.0)
    with pytest.raises(ValueError, match="needs a teacher"):
        make_algorithm("distill").setup(tiny_policy)
    with pytest.raises(ValueError, match="must not be the policy"):
        make_algorithm("distill", teacher=tiny_policy).setup(tiny_policy)
    assert isinstance(make_algorithm("distill", teacher=copy.deepcopy(tiny_policy)), OnPolicyDistillation)


def _batch(policy, task, n=32, seed=0):
    return sample_batch(policy, task, n, 1, np.random.default_rng(seed), torch.Generator().manual_seed(seed))[:2]


@pytest.mark.parametrize("objective", ["advantage", "reverse_kl", "forward_kl"])
def test_a_teacher_equal_to_the_student_gives_no_signal(objective, task, tiny_policy):
    """The control of the learning tests below: the student is its own teacher, its gradient is zero.
    The sampled signal is zero exactly, so a whole update (Adam included) moves no parameter; the exact
    KLs' gradient is zero only to float rounding, which Adam's normalisation would scale into steps."""
    algo = make_algorithm("distill", teacher=copy.deepcopy(tiny_policy), objective=objective)
    algo.setup(tiny_policy, generator=torch.Generator().manual_seed(0))
    ro, scores = _batch(tiny_policy, task)
    batch = algo.prepare(ro, scores)
    loss, _ = algo.loss(batch, torch.arange(ro.batch_size))
    grads = torch.autograd.grad(loss, list(tiny_policy.parameters()))
    assert batch.stats["teacher_kl"] == 0.0 and max(float(g.abs().max()) for g in grads) < 1e-7
    if objective == "advantage":
        before = [p.detach().clone() for p in tiny_policy.parameters()]
        assert update(algo, ro, scores)["grad_norm"] == 0.0
        assert all(torch.equal(a, b) for a, b in zip(before, tiny_policy.parameters(), strict=True))


def test_the_first_step_is_the_sampled_reverse_kl_gradient(task, tiny_policy, reference):
    """objective="advantage" at rho = 1 has the gradient of token_mean((log pi_old - log pi_teacher) log pi)."""
    algo = make_algorithm("distill", teacher=reference)
    algo.setup(tiny_policy, generator=torch.Generator().manual_seed(0))
    ro, scores = _batch(tiny_policy, task)
    batch = algo.prepare(ro, scores)
    idx = torch.arange(ro.batch_size)
    loss, _ = algo.loss(batch, idx)
    g = torch.autograd.grad(loss, list(tiny_policy.parameters()))
    logp = sequence_logprobs(tiny_policy, ro)
    teacher = Fn.token_logprobs(teacher_forced(reference, ro), ro.completion_ids) * ro.mask
    manual = Fn.masked_mean((ro.logprobs - teacher) * logp, ro.mask)
    want = torch.autograd.grad(manual, list(tiny_policy.parameters()))
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(g, want, strict=True))
    assert max(float(a.abs().max()) for a in g) > 1e-4  # control: a real gradient


def _probe_kl(student, teacher, task):
    """The exact per-token KL(student || teacher), averaged over the teacher's greedy held-out answers."""
    from grpo_edu.rollout import generate

    probs = task.eval_problems()[:200]
    with torch.no_grad():
        ro = generate(teacher, task.encode_prompts(probs), max_new_tokens=task.max_answer_length, temperature=0.0,
                      tokenizer=task.tokenizer)  # fmt: skip
        kl = Fn.exact_kl(teacher_forced(student, ro), teacher_forced(teacher, ro), "pi||ref")
    return float(Fn.masked_mean(kl, ro.mask))


def _distill(task, student, teacher, steps=15, **config):
    algo = make_algorithm("distill", teacher=teacher, **config)
    algo.setup(student, generator=torch.Generator().manual_seed(0))
    rng, gen = np.random.default_rng(0), torch.Generator().manual_seed(0)
    for _ in range(steps):
        ro, scores, _ = sample_batch(algo.sampling_policy(), task, 128, 1, rng, gen)
        update(algo, ro, scores)
    return _probe_kl(student, teacher, task)


@pytest.mark.parametrize("config", [{}, {"objective": "reverse_kl"}, {"samples": "teacher", "objective": "nll"}])
def test_the_student_learns_the_teacher(config, task, tiny_policy, reference):
    """15 steps of 128 answers: a random student's KL to the teacher (the cpu reference) falls; with a
    learning rate of ~0 it does not move (and the teacher-equal-student control is the test above)."""
    start = _probe_kl(tiny_policy, reference, task)
    frozen = _distill(task, copy.deepcopy(tiny_policy), reference, lr=1e-12, **config)
    learned = _distill(task, copy.deepcopy(tiny_policy), reference, lr=3e-3, **config)
    assert abs(frozen - start) < 1e-4 * start
    assert learned < 0.7 * start, (start, learned)


# ------------------------------------------------------------------ TRL's names, and the study


def test_every_distill_knob_has_its_gkd_name():
    from dataclasses import fields

    from grpo_edu.hf.names import GKD_KNOBS

    assert set(GKD_KNOBS) == {f.name for f in fields(DistillConfig)} | {"teacher"}
    assert all(trl and note for trl, note in GKD_KNOBS.values())


@pytest.mark.parametrize(("objective", "beta"), [("reverse_kl", 1.0), ("forward_kl", 0.0)])
def test_the_exact_kls_are_trl_gkd_losses(objective, beta, monkeypatch):
    """objective="reverse_kl" (token_mean) is TRL GKD's loss at beta = 1, "forward_kl" at beta = 0, to 1e-6."""
    pytest.importorskip("trl", reason='needs the [trl] extra: pip install -e ".[trl]"')
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    from trl.experimental.gkd import GKDTrainer

    torch.manual_seed(0)
    student, teacher = torch.randn(3, 4, 17), torch.randn(3, 4, 17)
    mask = torch.tensor([[1.0, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]])
    direction = "pi||ref" if objective == "reverse_kl" else "ref||pi"
    ours = Fn.aggregate_loss(Fn.exact_kl(student, teacher, direction), mask, "token_mean")
    labels = torch.where(mask > 0, 1, -100)
    theirs = GKDTrainer.generalized_jsd_loss(student, teacher, labels, beta=beta)
    other = GKDTrainer.generalized_jsd_loss(student, teacher, labels, beta=1.0 - beta)
    assert abs(float(ours) - float(theirs)) < 1e-6 and abs(float(ours) - float(other)) > 1e-3  # control: the other KL


def test_at_time_by_hand():
    from grpo_edu.studies.distillation import at_time

    evals = [(0.0, 0.5), (2.0, 0.6), (4.0, 0.7)]
    assert [at_time(evals, s) for s in (0.0, 1.9, 2.0, 5.0)] == [0.5, 0.5, 0.6, 0.7]


def test_the_study_runs_tiny_and_its_control_moves_nothing(tmp_path, capsys):
    """One case at the tiny size (numbers meaningless): the table, the teacher cached and loaded again, and the
    control (the student its own teacher) ends exactly at the reference's accuracy."""
    from grpo_edu.studies import distillation as study

    case = "default world, RL teacher"
    res = study.run(seeds=1, size="tiny", cases=[case], cache=tmp_path, progress=False)
    rec = res["cases"][case]
    assert set(rec["runs"]) == set(study.CASES[case][2]) and len(list(tmp_path.glob("teacher-rl-*.pt"))) == 1
    for runs in rec["runs"].values():
        assert runs[0]["tokens"] > 0 and runs[0]["seconds"] > 0 and 0 <= runs[0]["acc_equal_time"] <= 1
    assert res["own_teacher"]["all"] == res["own_teacher"]["reference"] == rec["reference"]["all"]
    again = study.run(seeds=1, size="tiny", cases=[case], cache=tmp_path, progress=False)
    assert again["cases"][case]["teacher"] == rec["teacher"]  # the cached teacher, loaded
    text = study.report(res)
    assert "verdicts" in text and "distillation beats GRPO" in text and "control" in text
    with pytest.raises(ValueError, match="unknown cases"):
        study.run(seeds=1, size="tiny", cases=["nowhere"], cache=tmp_path)
    with pytest.raises(SystemExit):
        study.main(["--help"])
    assert capsys.readouterr().out.startswith("usage: ")


def test_at_equal_tokens_and_time_the_study_reads_each_arm_within_the_least(tmp_path):
    """Each run's accuracy at equal tokens is its last evaluation within the fewest tokens any arm of its seed
    generated (the same for seconds): recomputed here from the runs' own evaluations."""
    from grpo_edu.studies import distillation as study

    case = "default world, RL teacher"
    res = study.run(seeds=1, size="tiny", cases=[case], cache=tmp_path, progress=False, references=_tiny_refs())
    runs = {arm: r[0] for arm, r in res["cases"][case]["runs"].items()}
    fewest, fastest = (min(r[k] for r in runs.values()) for k in ("tokens", "seconds"))
    for r in runs.values():
        assert r["evals_tokens"][0] == (0.0, r["evals"][0][1]) and r["evals_tokens"][-1][0] == r["tokens"]
        assert r["acc_equal_tokens"] == max((t, a) for t, a in r["evals_tokens"] if t <= fewest)[1]
        assert r["acc_equal_time"] == [a for s, a in r["evals"] if s <= fastest][-1]
    assert [c["measure"] for c in res["claims"]].count("acc_equal_tokens") == 1  # one world ran


def _tiny_refs():
    from grpo_edu import ModelConfig, TinyGPT

    refs = {}
    for world in ("default", "spread"):
        torch.manual_seed(0)
        refs[world] = TinyGPT(ModelConfig(d_model=16, n_layers=1, n_heads=2, max_seq_len=12))
    return refs


def test_the_study_verdicts_are_pinned(tmp_path, monkeypatch):
    """The study as a regime: every claim's verdict at the tiny size (2 seeds, tiny references) equals the one
    pinned in tests/regime_verdicts.json ("distillation"), as tests/test_regime_verdicts.py pins the regimes'.
    ``GRPO_EDU_PIN_VERDICTS=1`` rewrites it."""
    import json
    import os
    from pathlib import Path

    from grpo_edu.studies import distillation as study

    monkeypatch.setenv("GRPO_EDU_CACHE", str(tmp_path))
    res = study.run(seeds=2, size="tiny", cache=tmp_path, progress=False, references=_tiny_refs())
    got = [[f"[{c['case']}] {c['claim']} ({c['measure']})", c["verdict"]] for c in res["claims"]]
    assert len(got) == len(study.COMPARISONS) and all(v in ("holds", "fails here", "depends") for _, v in got)
    pins_path = Path(__file__).with_name("regime_verdicts.json")
    pins = json.loads(pins_path.read_text())
    if os.environ.get("GRPO_EDU_PIN_VERDICTS"):
        pins["distillation"] = got
        pins_path.write_text(json.dumps(pins, indent=1, sort_keys=True) + "\n")
        pytest.skip(f"pinned {len(got)} verdicts of distillation")
    assert "distillation" in pins, "no pinned verdicts for distillation: run with GRPO_EDU_PIN_VERDICTS=1"
    assert got == pins["distillation"], "distillation: a verdict or a claim changed (re-pin with the reason)"


def test_the_stored_result_is_the_studys_own():
    """The stored 3-seed result notebook 14 reads: the full size, every case and comparison, its verdicts those
    `verdicts` computes from its own runs, the control unmoved, and its equal-token reads inside each run."""
    from grpo_edu.studies import distillation as study

    res = study.stored()
    assert res["size"] == "full" and res["seeds"] == 3 and set(res["cases"]) == set(study.CASES)
    assert res["claims"] == study.verdicts(res) and len(res["claims"]) == len(study.COMPARISONS)
    assert res["own_teacher"]["all"] == res["own_teacher"]["reference"]
    for rec in res["cases"].values():
        for runs in rec["runs"].values():
            assert len(runs) == 3 and all(r["acc_equal_tokens"] in [a for _, a in r["evals_tokens"]] for r in runs)
