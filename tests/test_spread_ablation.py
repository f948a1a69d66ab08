"""The spread-world ablation (issue 45): each arm switches one thing; the verdicts, the score-norm
prediction and the stored result (tests/data/spread_ablation), whose first numbers the study reproduces."""

import json
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from envs import ArithmeticTask
from grpo_edu import functional as Fn
from grpo_edu.measure.variance import estimator_advantages, ppo_advantages
from grpo_edu.studies import spread_ablation as sa

STORED = Path(__file__).resolve().parent / "data" / "spread_ablation" / "ablation.json"


def _config(name: str) -> dict:
    return asdict(sa.make_arm(name).config)


@pytest.mark.parametrize("name", [n for n in sa.ARMS if n not in sa.RUNGS])
def test_each_arm_switches_exactly_what_it_names(name):
    base, switch = sa.ARMS[name]
    a, b = _config(name), _config(base)
    assert {k for k in a if a[k] != b[k]} == set(switch)  # the switch, and nothing else, took effect
    assert sa.root(name) == sa.root(base) and sa.root(name) in ("PPO", "GRPO")


def test_the_rungs_differ_from_reinforce_in_more_than_one_thing():
    """The control: PPO and GRPO against REINFORCE switch several things at once (why the arms exist)."""
    r = _config("REINFORCE")
    for rung in ("PPO", "GRPO"):
        c = _config(rung)
        assert len({k for k in r if k in c and r[k] != c[k]} | (set(c) - set(r))) > 3
    assert all(_config(n)["lr"] == r["lr"] for n in sa.RUNGS)  # the learning rate is no confound: no arm


def test_no_clip_never_binds_and_the_default_clip_does():
    torch.manual_seed(0)
    logp, old = torch.randn(64, 4), torch.randn(64, 4)  # ratios from about e^-5 to e^5
    adv = torch.randn(64, 4)
    loss, stats = Fn.clipped_surrogate_loss(logp, old, adv, sa.NO_CLIP["eps_low"], sa.NO_CLIP["eps_high"])
    assert torch.allclose(loss, -torch.exp(logp - old) * adv) and stats["clip_ratio"] == 0.0
    _, default = Fn.clipped_surrogate_loss(logp, old, adv)  # control: eps 0.2 clips many of these tokens
    assert default["clip_ratio"] > 0.3


def test_table_reads_each_arm_against_its_base_by_hand():
    def runs(*accs):
        return [{"accuracy": a, "easy": 1.0, "hard": a, "kl_end": 1.0, "samples_to_target": None} for a in accs]

    res = {
        "REINFORCE": runs(0.99, 0.99, 0.99),
        "GRPO": runs(0.70, 0.75, 0.80),  # gap to REINFORCE: 0.29, 0.24, 0.19 (mean 0.24)
        "GRPO, beta 0": runs(0.90, 0.93, 0.95),  # +0.20, +0.18, +0.15: holds
        "GRPO, no clip": runs(0.69, 0.75, 0.81),  # -0.01, 0, +0.01: depends
        "GRPO, one update": runs(0.60, 0.70, 0.80),  # -0.10, -0.05, 0: fails here
        "GRPO, beta 0, one update": runs(0.93, 0.93, 0.95),  # from "GRPO, beta 0": +0.03, 0, 0: depends
    }
    rows = {r["arm"]: r for r in sa.table(res)}
    assert rows["GRPO, beta 0"]["verdict"] == "holds"
    assert rows["GRPO, beta 0"]["closes"] == pytest.approx(((0.20 + 0.18 + 0.15) / 3) / 0.24)
    assert rows["GRPO, no clip"]["verdict"] == "depends"
    assert rows["GRPO, one update"]["verdict"] == "fails here"
    follow = rows["GRPO, beta 0, one update"]
    assert follow["base"] == "GRPO, beta 0" and follow["diff"] == pytest.approx([0.03, 0.0, 0.0])
    assert rows["GRPO"]["verdict"] == "" and rows["GRPO"]["diff"] is None


def test_predicted_ratio_by_hand():
    # two right answers (|s|^2 = 1), two wrong ones (|s|^2 = 10); V = 0.5 for all
    R, v, s2 = [1.0, 1.0, 0.0, 0.0], [0.5] * 4, [1.0, 1.0, 10.0, 10.0]
    ratio, share = sa.predicted_ratio(R, v, s2)
    # numerator: 2 * 0.25 * 1 + 2 * 0.25 * 10 = 5.5; REINFORCE's: 2 * 1 * 1 = 2
    assert ratio == pytest.approx(5.5 / 2) and share == pytest.approx(5.0 / 5.5)
    # control: the same baseline where wrong answers are no longer: below REINFORCE's variance
    assert sa.predicted_ratio(R, v, [1.0, 1.0, 1.0, 1.0])[0] == pytest.approx(1.0 / 2)
    with pytest.raises(ValueError):
        sa.predicted_ratio([0.0, 0.0], [0.1, 0.1], [1.0, 1.0])  # no right answer: REINFORCE's variance is 0


def test_bad_input_is_a_value_error():
    with pytest.raises(ValueError, match="worlds"):
        sa.run_spread_ablation("cpu", seeds=1, worlds=("moon",), tiny=True)
    with pytest.raises(ValueError, match="unknown arm"):
        sa.make_arm("GRPO, beta 7")


def test_tiny_run_gives_a_row_per_arm_and_its_base():
    res = sa.run_spread_ablation("cpu", seeds=1, worlds=("spread",), arms=["GRPO, beta 0"], tiny=True, progress=False)
    runs = res["worlds"]["spread"]["runs"]
    assert list(runs) == ["GRPO", "GRPO, beta 0"]
    base, arm = runs["GRPO"][0], runs["GRPO, beta 0"][0]
    assert len(base["reward"]) == sa.SIZES["tiny"]["steps"] and base["evals"][-1][1] == 2 * 32
    assert all(k is not None for k in base["kl"]) and all(k is None for k in arm["kl"])  # beta 0: no KL term
    assert 0.0 <= arm["easy"] <= 1.0 and 0.0 <= arm["hard"] <= 1.0 and arm["kl_end"] > 0.0


# ------------------------------------------------------------------ PPO's estimator at the reference
class OddFirstTokenTask(ArithmeticTask):
    """A dense reward a random tiny policy earns about half the time: R = 1 when the first answer token's id
    is odd (so that its gradient estimates are not all zero)."""

    def token_scores(self, problems, completion_ids, mask, kind="outcome"):
        scores = torch.zeros(completion_ids.shape)
        scores[torch.arange(len(problems)), mask.sum(1).long() - 1] = (completion_ids[:, 0] % 2).float()
        return scores


@pytest.fixture(scope="module")
def tiny():
    from grpo_edu.model import ModelConfig, TinyGPT, ValueModel

    torch.manual_seed(0)
    policy = TinyGPT(ModelConfig(vocab_size=17, d_model=16, n_layers=1, n_heads=2, max_seq_len=12)).eval()
    torch.manual_seed(1)
    critic = ValueModel.from_policy(policy)
    for p in critic.parameters():  # V(s_t) away from 0, so that the whitening's mean shift is not nothing
        p.data.add_(0.3 * torch.randn_like(p))
    return policy, OddFirstTokenTask(eval_size=50), critic.eval()


def test_ppo_advantages_are_the_critics_whitened(tiny):
    """At its start (policy = reference: no KL in the reward) PPO's advantage is G_t - V(s_t), less its mean
    over the batch's tokens, over their std (population, eps 1e-8), written out here; the control, the
    critic baseline's own advantage, is not."""
    from grpo_edu.measure.common import rngs
    from grpo_edu.rollout import completion_values, sample_batch

    policy, task, critic = tiny
    ro, scores = sample_batch(policy, task, 64, 1, *rngs(0, "cpu"))[:2]
    with torch.no_grad():
        A = (scores.sum(1, keepdim=True) - completion_values(critic, ro)) * ro.mask  # G_t = R: one reward, at the end
    n = ro.mask.sum()
    mu = A.sum() / n
    sigma = ((((A - mu) * ro.mask) ** 2).sum() / n).sqrt()
    ppo = ppo_advantages(policy, critic, ro, scores)
    assert torch.allclose(ppo, (A - mu) / (sigma + 1e-8) * ro.mask, atol=1e-5)
    assert float((ppo * ro.mask).sum() / n) == pytest.approx(0.0, abs=1e-5)  # the mean shifted away
    assert abs(float(mu)) > 0.05 and not torch.allclose(ppo, A, atol=0.05)  # control: the unwhitened advantage
    unwhitened = ppo_advantages(policy, critic, ro, scores, whiten_advantages=False)  # PPO's config is followed
    assert torch.allclose(unwhitened, A, atol=1e-5)
    with torch.no_grad():
        values = completion_values(critic, ro)
    assert torch.equal(ppo_advantages(policy, critic, ro, scores, values), ppo)  # values handed over: the same
    assert not torch.allclose(ppo_advantages(policy, critic, ro, scores, torch.zeros_like(values)), ppo)  # and used


def test_ppos_estimator_is_measured_on_the_other_estimators_batches(tiny):
    """`gradient_variance`'s "ppo" is PPO's own advantage's gradient, computed here directly with
    `ppo_advantages` on the batches the seed samples; asking for it leaves the batches and the other
    estimators' numbers exactly as they are without it (notebook 05 measures it beside the critic baseline,
    once); and it differs from the critic baseline's, whose advantage it whitens (the control)."""
    from grpo_edu.measure.common import flat_grad, rngs, trainable
    from grpo_edu.measure.variance import gradient_variance, variance_stats
    from grpo_edu.rollout import sample_batch, sequence_logprobs

    policy, task, critic = tiny
    kw = dict(n_batches=4, prompts_per_batch=4, group_size=8, layout="distinct", critic=critic, seed=3, progress=False)
    ours = gradient_variance(policy, task, ("raw", "critic", "ppo"), **kw)
    theirs = gradient_variance(policy, task, ("raw", "critic"), **kw)
    for e in ("raw", "critic"):
        assert ours[e] == theirs[e], e
    rng, gen, grads = *rngs(3, "cpu"), []
    with trainable(policy) as params:
        for _ in range(4):
            ro, scores = sample_batch(policy, task, 32, 1, rng, gen)[:2]
            A = ppo_advantages(policy, critic, ro, scores)
            loss = -(A * sequence_logprobs(policy, ro) * ro.mask).sum(1).mean()
            grads.append(-flat_grad(loss, params))
    direct = variance_stats(torch.stack(grads))
    for k, v in direct.items():
        assert ours["ppo"][k] == pytest.approx(v, rel=1e-6), k
    assert ours["ppo"]["total_variance"] != pytest.approx(ours["critic"]["total_variance"], rel=1e-2)
    with pytest.raises(ValueError, match="needs the policy"):
        estimator_advantages("ppo", ro, scores)


@pytest.mark.parametrize("whiten", [True, False])  # False: the control, PPO's GAE left unwhitened
def test_compare_measures_ppos_own_estimator(tiny, whiten, monkeypatch):
    """`grpo-edu compare`'s PPO row at the reference is PPO's estimator as it trains (its config followed):
    whitened, it differs from the critic baseline's row; unwhitened (GAE at lambda 1, G_t - V(s_t)), it is
    the critic baseline's, up to rounding. Either way it is `gradient_variance`'s "ppo" on compare's batches."""
    from grpo_edu import get_preset, make_algorithm
    from grpo_edu.measure import compare
    from grpo_edu.measure.variance import gradient_variance
    from grpo_edu.model import ModelConfig

    policy, task, critic = tiny
    monkeypatch.setattr(compare, "fit_critic", lambda *a, **k: (critic, {"explained_variance": 0.0}))
    model = ModelConfig(vocab_size=17, d_model=16, n_layers=1, n_heads=2, max_seq_len=12)
    preset = get_preset("cpu", model=model, sequences_per_step=32, eval_every=1)
    algos, configs = ("reinforce", "baseline", "ppo"), {"ppo": {"whiten_advantages": whiten}}
    out = {"algorithms": {a: {"minibatches": make_algorithm(a).config.minibatches} for a in algos}}
    compare.measure_at_reference(out, preset, task, policy, 3, False, algos, 1, configs)
    rows, var = out["algorithms"], out["gradient_variance_distinct"]
    assert compare.own_variance(out, "ppo") == ("32x1", var["ppo"])
    assert rows["ppo"]["relative_variance"] == var["ppo"]["relative_variance"]
    direct = gradient_variance(policy, task, ("raw", "ppo"), n_batches=3, prompts_per_batch=32, group_size=1,
                               layout="distinct", critic=critic, seed=preset.seed, progress=False,
                               ppo_config=configs["ppo"])["ppo"]  # fmt: skip
    assert var["ppo"] == direct
    ppo, base = (var[e]["total_variance"] for e in ("ppo", "critic"))
    if whiten:
        assert ppo != pytest.approx(base, rel=1e-2)
    else:
        assert ppo == pytest.approx(base, rel=1e-4)


def test_records_without_ppos_measurement_say_so():
    """The kept study's measurements at the references predate PPO's own: there PPO's number is the critic
    baseline's, the printout says it is assumed, and `as_comparison` reads PPO's own stats where they exist."""
    stored = json.loads(STORED.read_text())
    ref = stored["reference"]
    assert not any(map(sa.ppo_measured, ref["spread"] + ref["default"]))
    assert all(m["relative_variance"]["ppo"] == m["relative_variance"]["baseline"] for m in ref["spread"])
    assert "PPO: assumed equal to the critic baseline's" in sa.format_reference(ref)
    old = sa.as_comparison(stored, "spread", ref["spread"][0])["algorithms"]["ppo"]["relative_variance_corrected"]
    assert old == ref["spread"][0]["gradients"]["distinct"]["critic"]["relative_variance_corrected"]
    m = {
        **ref["spread"][0],
        "gradients": {**ref["spread"][0]["gradients"], "ppo": {"relative_variance_corrected": 9.5}},
    }
    m["relative_variance"] = {**m["relative_variance"], "ppo": 9.5}
    assert sa.as_comparison(stored, "spread", m)["algorithms"]["ppo"]["relative_variance_corrected"] == 9.5
    assert "ppo 9.500" in sa.format_reference({"spread": [m]}).splitlines()[-2]


# ------------------------------------------------------------------ the stored result notebook 05 reads
@pytest.fixture(scope="module")
def stored():
    return json.loads(STORED.read_text())


def test_stored_result_has_every_arm_of_every_world(stored):
    assert stored["seeds"] == [0, 1, 2] and [stored[k] for k in ("steps", "sequences_per_step")] == [128, 512]
    assert stored["command"] == "python -m grpo_edu.studies.spread_ablation --seeds 3"
    assert set(stored["worlds"]) == set(sa.WORLD_ARMS)
    for world, w in stored["worlds"].items():
        assert list(w["runs"]) == [a for a in sa.ARMS if a in sa.WORLD_ARMS[world]]
        for arm, rs in w["runs"].items():
            assert len(rs) == 3, (world, arm)
            for r in rs:
                assert len(r["reward"]) == 128 and r["evals"][-1][:2] == [128, 128 * 512]
                assert r["accuracy"] == r["evals"][-1][3] and 0.0 <= r["hard"] <= 1.0
        assert w["table"] == json.loads(json.dumps(sa.table(w["runs"])))  # the rows are what table() makes of them
        ref = stored["reference"][world]
        assert [m["seed"] for m in ref] == [0, 1, 2]
        for m in ref:
            assert set(m["relative_variance"]) >= {"reinforce", "baseline", "ppo", "grpo"}
            assert 0.0 <= m["wrong_share"] <= 1.0 and -1.0 < m["critic_ev"] < 1.0


def test_the_study_reproduces_the_stored_first_steps(stored):
    """Two steps of the stored GRPO and REINFORCE runs of the spread world, seed 0, from the same reference:
    the start's accuracy exactly, each step's sampled reward to 4 answers in 512 (float rounding); the
    stored runs of seed 1 differ from it by more (the comparison can tell one run from another)."""
    from grpo_edu import get_preset, make_task, reference_policy

    p = get_preset("cpu", world="spread")
    task = make_task(p)
    reference = reference_policy(p, task=task, progress=False)
    tolerance, other_seed = 4 / 512, []
    for arm in ("GRPO", "REINFORCE"):
        kept = stored["worlds"]["spread"]["runs"][arm]
        run = sa.run_arm(arm, reference, task, p, 0, steps=2, sequences_per_step=512, eval_every=10)
        assert run["evals"][0][3] == kept[0]["evals"][0][3]
        assert max(abs(a - b) for a, b in zip(run["reward"], kept[0]["reward"][:2], strict=True)) < tolerance, arm
        other_seed.append(max(abs(a - b) for a, b in zip(run["reward"], kept[1]["reward"][:2], strict=True)))
    assert max(other_seed) > tolerance, other_seed  # control: another seed's run is farther than the tolerance
