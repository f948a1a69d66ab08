import copy
import dataclasses

import pytest
import torch

from grpo_edu import functional as Fn
from grpo_edu.algorithms import (
    ALGORITHMS,
    GRPO,
    PPO,
    BaselineConfig,
    GRPOConfig,
    PPOConfig,
    ReinforceBaseline,
    ReinforceConfig,
    make_algorithm,
)
from grpo_edu.algorithms.grpo_extras import informative_groups
from grpo_edu.rollout import expand, generate
from grpo_edu.train import update


def _batch(task, policy, n_prompts=8, G=4, seed=0):
    probs = task.sample(n_prompts, seed)
    ro = generate(
        policy,
        task.encode_prompts(probs),
        group_size=G,
        max_new_tokens=task.max_answer_length,
        generator=torch.Generator().manual_seed(seed),
        tokenizer=task.tokenizer,
    )
    return ro, task.token_scores(expand(probs, G), ro.completion_ids, ro.mask)


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_every_algorithm_updates_the_policy(name, task, tiny_policy):
    ref = copy.deepcopy(tiny_policy)
    algo = make_algorithm(name, group_size=4) if name == "grpo" else make_algorithm(name)
    algo.setup(tiny_policy, ref, generator=torch.Generator().manual_seed(0))
    before = [p.detach().clone() for p in tiny_policy.parameters()]
    G = algo.config.group_size
    ro, scores = _batch(task, tiny_policy, G=G)
    scores[::2, 0] = 1.0  # make sure some rewards differ
    stats = update(algo, ro, scores)
    assert stats["updates"] == algo.config.epochs * algo.config.minibatches
    for k in ("loss", "entropy", "grad_norm", "completion_length"):
        assert k in stats and stats[k] == stats[k], k  # present and not NaN
    assert ("kl" in stats) == (getattr(algo.config, "beta", 0) > 0)  # pi_ref is run (and its KL logged) only when used
    assert any(not torch.equal(a, b) for a, b in zip(before, tiny_policy.parameters()))
    for p in ref.parameters():
        assert not p.requires_grad  # the reference is frozen
    assert ("value_loss" in stats) == (algo.critic is not None) == (name in ("baseline", "ppo"))


@pytest.mark.parametrize("name", ["grpo", "ppo"])
def test_shared_prompts_change_no_number_of_an_update(name, task, tiny_policy):
    """Prompt sharing (rollout's default) runs each prompt once for its G rows, in the policy's,
    the reference's and the critic's forward: one update on the same batch gives the same
    statistics and the same weights, to float rounding, as every row running its own."""
    ro, scores = _batch(task, tiny_policy, G=4)
    scores[::2, 0] = 1.0
    out = {}
    for share in (True, False):
        policy, ref = copy.deepcopy(tiny_policy), copy.deepcopy(tiny_policy)
        algo = make_algorithm(name, group_size=4)
        algo.setup(policy, ref, generator=torch.Generator().manual_seed(0))
        batch = dataclasses.replace(ro, share_prompts=share)  # every teacher-forced pass as the rollout says
        out[share] = update(algo, batch, scores), [p.detach().clone() for p in policy.parameters()]
    (on, w_on), (off, w_off) = out[True], out[False]
    for k in ("loss", "grad_norm", "kl", "clip_ratio") + (("value_loss",) if name == "ppo" else ()):
        assert on[k] == pytest.approx(off[k], rel=1e-4, abs=1e-6), k
    for a, b in zip(w_on, w_off, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-4)


def test_same_interface_one_line_differs(task, tiny_policy):
    """The advantage is where the rungs differ: hand-check each on one batch."""
    ro, scores = _batch(task, tiny_policy, n_prompts=2, G=4)
    scores = torch.zeros_like(ro.mask)
    last = ro.mask.sum(1).long() - 1
    R = torch.tensor([1.0, 0, 0, 0, 1, 1, 0, 0])
    scores[torch.arange(8), last] = R
    rf = make_algorithm("reinforce")
    torch.testing.assert_close(rf.prepare(ro, scores).advantages, R[:, None] * ro.mask)  # G_t = R (gamma 1)
    bm = ReinforceBaseline(baseline="batch_mean")
    batch = bm.prepare(ro, scores)
    torch.testing.assert_close(batch.advantages, (R[:, None] - 0.375) * ro.mask)  # mean 3/8
    assert batch.stats == {"baseline": 0.375}
    rm = ReinforceBaseline(baseline="running_mean", running_mean_decay=0.5)
    assert rm.prepare(ro, scores).stats["baseline"] == 0.375  # the first batch starts the average
    assert rm.prepare(ro, scores * 0).stats["baseline"] == 0.375  # b is the average *before* this batch
    assert rm.prepare(ro, scores * 0).stats["baseline"] == 0.1875  # 0.5 * 0.375 + 0.5 * 0
    g = GRPO(group_size=4, beta=0.0)
    adv = g.prepare(ro, scores).advantages
    # group 1: r = [1,0,0,0], mean 0.25, population std sqrt(0.1875) = 0.4330
    s1 = 0.1875**0.5
    torch.testing.assert_close(adv[:4], torch.tensor([0.75, -0.25, -0.25, -0.25]) / (s1 + 1e-4))
    torch.testing.assert_close(adv[4:], torch.tensor([0.5, 0.5, -0.5, -0.5]) / (0.5 + 1e-4))
    loo = GRPO(group_size=4, leave_one_out=True, scale_rewards="none", beta=0.0).prepare(ro, scores).advantages
    # RLOO: r_i - mean of the other three: 1 - 0 = 1, 0 - 1/3 = -1/3; 1 - 1/3, 0 - 2/3
    torch.testing.assert_close(loo, torch.tensor([1.0, -1 / 3, -1 / 3, -1 / 3, 2 / 3, 2 / 3, -2 / 3, -2 / 3]))


def test_each_rung_owns_its_line():
    """Each rung's file holds its whole algorithm, written one way: its advantage and its loss are
    calls into the functional core written there, ending in the one shared tail
    (`Fn.regularized_loss`); its config is flat (no rung inherits another's), every field has one
    description (the string on the line below it, which autodoc shows; no trailing comment too),
    and its allowed range is given in the config's own ``__post_init__``."""
    import ast
    import inspect
    import textwrap
    from dataclasses import fields

    from grpo_edu.algorithms import ALGORITHMS, baseline, grpo, ppo, reinforce

    assert "Fn.policy_gradient_loss" in inspect.getsource(reinforce.Reinforce.loss)
    assert "Fn.baseline_advantages" in inspect.getsource(baseline.ReinforceBaseline.prepare)
    assert "Fn.gae" in inspect.getsource(ppo.PPO.prepare)
    assert "Fn.group_advantages" in inspect.getsource(grpo.GRPO.prepare)
    grpo_loss = inspect.getsource(grpo.GRPO.loss)
    for piece in ("POLICY_LOSSES[cfg.policy_loss]", "Fn.kl_estimate", "Fn.regularized_loss"):
        assert piece in grpo_loss, piece  # GRPO's objective (its row), KL term and aggregation are in grpo.py
    assert grpo.POLICY_LOSSES[grpo.GRPOConfig().policy_loss].function == "clipped_surrogate_loss"  # PPO's clip
    for cls in ALGORITHMS.values():
        assert cls.__mro__[1].__name__ == "Algorithm", cls  # no rung inherits another
        assert cls.Config.__mro__ == (cls.Config, object), cls.Config  # flat config
        loss = inspect.getsource(cls.loss)
        assert "Fn.regularized_loss(" in loss and "aggregate_loss" not in loss, cls  # the one tail
        src = textwrap.dedent(inspect.getsource(cls.Config))
        body = ast.parse(src).body[0].body
        described = {
            a.target.id
            for a, b in zip(body, body[1:])
            if isinstance(a, ast.AnnAssign) and isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant)
        }
        names = [f.name for f in fields(cls.Config)]
        assert described == set(names), (cls.Config.__name__, set(names) - described)
        for line in src.splitlines():  # one description per field: the string, not a comment as well
            if any(line.strip().startswith(f"{n}:") for n in names):
                assert "#" not in line, line
        post_init = ast.parse(textwrap.dedent(inspect.getsource(cls.Config.__post_init__)))
        ruled = {k.arg for c in ast.walk(post_init) if isinstance(c, ast.Call) for k in c.keywords}
        assert set(names) - {"adam_betas"} <= ruled, (cls.Config.__name__, set(names) - {"adam_betas"} - ruled)
    for module in (reinforce, baseline, ppo, grpo):  # readable top to bottom (a line of code, a line of text)
        assert len(inspect.getsource(module).splitlines()) <= 240, module.__name__  # grpo.py: 236 with Clip-Cov, KL-Cov


def test_kl_in_reward_changes_sequence_reward(task, tiny_policy):
    ref = copy.deepcopy(tiny_policy)
    with torch.no_grad():
        ref.trunk.ln_f.weight.mul_(0.5)  # make pi_ref differ from pi
    ro, scores = _batch(task, tiny_policy, G=4)
    algo = GRPO(group_size=4, kl_placement="reward", beta=0.1).setup(tiny_policy, ref)
    batch = algo.prepare(ro, scores)
    log_ratio = Fn.masked_sum(ro.logprobs - batch.ref_logp, ro.mask, dim=1)
    torch.testing.assert_close(batch.rewards, scores.sum(1) - 0.1 * log_ratio, atol=1e-5, rtol=0)
    algo2 = GRPO(group_size=4, kl_placement="loss", beta=0.1).setup(tiny_policy, ref)
    torch.testing.assert_close(algo2.prepare(ro, scores).rewards, scores.sum(1))


def test_mask_truncated_completions(task, tiny_policy):
    ro, scores = _batch(task, tiny_policy, G=4)
    ro.truncated[:3] = True
    algo = GRPO(group_size=4, mask_truncated_completions=True).setup(tiny_policy, copy.deepcopy(tiny_policy))
    batch = algo.prepare(ro, scores)
    assert batch.mask[:3].sum() == 0
    keep = ~ro.truncated
    torch.testing.assert_close(batch.mask[keep], ro.mask[keep])
    assert batch.mask[~keep].sum() == 0


def test_dynamic_sampling_keeps_informative_groups():
    keep = informative_groups(torch.tensor([1.0, 1.0, 0.0, 1.0, 0.0, 0.0]), 2)
    assert keep.tolist() == [False, False, True, True, False, False]


def test_non_finite_loss_is_named(task, tiny_policy):
    algo = make_algorithm("reinforce").setup(tiny_policy, None)
    ro, scores = _batch(task, tiny_policy, G=1)
    scores[0, 0] = float("nan")
    with pytest.raises(FloatingPointError, match="advantages is nan"):
        update(algo, ro, scores)


def test_update_before_setup_and_bad_shapes(task, tiny_policy):
    ro, scores = _batch(task, tiny_policy, G=1)
    with pytest.raises(RuntimeError, match="setup"):
        update(make_algorithm("reinforce"), ro, scores)
    algo = make_algorithm("reinforce").setup(tiny_policy)
    with pytest.raises(ValueError, match="scores must have"):
        update(algo, ro, scores[:, :1])
    with pytest.raises(ValueError, match="multiple of group_size"):
        update(GRPO(group_size=3).setup(tiny_policy), ro.select(torch.arange(4)), scores[:4])


@pytest.mark.parametrize(
    "cls, kwargs, match",
    [
        (PPOConfig, dict(lr=0), "PPOConfig.lr"),
        (PPOConfig, dict(eps_low=1.5), "eps_low"),
        (PPOConfig, dict(lam=2), "lam"),
        (GRPOConfig, dict(group_size=1), "group_size"),
        (GRPOConfig, dict(scale_rewards="std"), "scale_rewards"),
        (GRPOConfig, dict(loss_type="mean"), "loss_type"),
        (GRPOConfig, dict(kl_placement="both"), "kl_placement"),
        (GRPOConfig, dict(kl_estimator="k4"), "kl_estimator"),
        (GRPOConfig, dict(beta=-0.1), "beta"),
        (GRPOConfig, dict(epochs=0), "epochs"),
        (GRPOConfig, dict(leave_one_out="yes"), "leave_one_out"),
        (GRPOConfig, dict(adam_betas=(0.9, 1.5)), "adam_betas"),
        (ReinforceConfig, dict(gamma=1.5), "ReinforceConfig.gamma"),
        (BaselineConfig, dict(baseline="median"), "BaselineConfig.baseline"),
        (PPOConfig, dict(value_clip=0), "value_clip"),
    ],
)
def test_bad_config_values_are_named(cls, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cls(**kwargs)


def test_practitioner_names():
    from grpo_edu.hf.names import from_trl

    assert GRPOConfig(**from_trl(GRPOConfig, {"loss_type": "dr_grpo"})).loss_type == "constant"  # TRL's, via the bridge
    with pytest.raises(ValueError, match=r"GRPOConfig.loss_type must be one of \['constant'"):
        GRPOConfig(loss_type="dr_grpo")  # the config takes grpo_edu's names only
    assert GRPOConfig(kl_placement="loss").kl_kind == "k3"
    assert GRPOConfig(kl_placement="reward").kl_kind == "k1"
    assert PPO().config.kl_placement == "reward"  # PPO for LMs: KL penalty in the reward
    with pytest.raises(ValueError, match="unknown algorithm"):
        make_algorithm("dpo")


def test_an_algorithm_given_a_function_uses_it_and_a_plain_one_does_not(task, tiny_policy):
    """Replacements travel with the algorithm (``functions=``): the algorithm given one calls it, an
    algorithm built without, in the same process, calls the core's; nothing global changes."""
    original, calls = Fn.group_advantages, []

    def spy(rewards, group_size, scale="group", eps=1e-6, unbiased=False, leave_one_out=False):
        calls.append(group_size)
        adv, st = original(rewards, group_size, scale, eps, unbiased, leave_one_out)
        return torch.full_like(adv, 0.5), st  # every advantage 1/2: visible in the batch

    ro, scores = _batch(task, tiny_policy, G=4)
    mine = make_algorithm("grpo", functions={"group_advantages": spy}, group_size=4, beta=0.0)
    plain = make_algorithm("grpo", group_size=4, beta=0.0)
    for algo in (mine, plain):
        algo.setup(tiny_policy, None)
    a_mine, a_plain = mine.prepare(ro, scores).advantages, plain.prepare(ro, scores).advantages
    assert calls == [4] and torch.equal(a_mine, torch.full_like(a_mine, 0.5))
    expected, _ = original(scores.sum(1), 4, eps=GRPOConfig().adv_eps)
    torch.testing.assert_close(a_plain, expected)  # the plain one: the core's group advantage
    assert mine.fn.group_advantages is spy and plain.fn is Fn and Fn.group_advantages is original
    assert mine.fn.masked_sum is Fn.masked_sum  # a name not replaced is the core's


def test_replacements_reach_the_loss_the_critic_and_the_logged_kl(task, tiny_policy):
    """A replaced function is used wherever the run calls it: the loss (clipped surrogate), the
    critic's step (value loss) and the KL the loop logs (kl_estimate), not only prepare."""
    from grpo_edu.algorithms import PPO

    seen = set()

    def spying(name):
        library = getattr(Fn, name)

        def call(*args, **kwargs):
            seen.add(name)
            return library(*args, **kwargs)

        return call

    names = ("clipped_surrogate_loss", "value_loss", "kl_estimate", "gae")
    ro, scores = _batch(task, tiny_policy, G=1)
    ppo = PPO(functions={n: spying(n) for n in names}, kl_placement="loss").setup(
        copy.deepcopy(tiny_policy), copy.deepcopy(tiny_policy), generator=torch.Generator().manual_seed(0)
    )
    update(ppo, ro, scores)
    assert seen == set(names)


@pytest.mark.parametrize(
    "functions, match",
    [
        ({"not_a_function": lambda x: x}, "not functions of grpo_edu.functional"),
        ({"group_advantages": 3}, "must be callable"),
        ({"group_advantages": lambda rewards, group_size, scale="group", eps=1e-6, unbiased=False: None},
         "no parameter leave_one_out"),
        (["group_advantages"], "functions must be a dict"),
    ],
)  # fmt: skip
def test_a_replacement_the_library_cannot_call_is_refused_up_front(functions, match):
    """The library calls every core function with its full signature: a replacement that lacks a
    parameter is refused when the algorithm is built, naming it, not deep in training."""
    with pytest.raises(ValueError, match=match):
        make_algorithm("grpo", functions=functions)


def test_train_callback_watches_each_step_and_changes_nothing(task, tiny_policy, cpu_preset):
    """train(..., callback=f) calls f once per step, after the step (and its evaluation), with the
    step's metrics, rollout, scores, problems and the policy; the history is the same as without
    it (control: a run without a callback), and a callback that raises stops the run."""
    from dataclasses import replace

    from grpo_edu import train

    preset = replace(cpu_preset, sequences_per_step=32, eval_every=2)
    seen = []

    def watch(s):
        seen.append((s.step, s.metrics is s.history.steps[-1], s.rollout.batch_size, tuple(s.scores.shape),
                     len(s.problems), s.policy is policy, s.evaluated))  # fmt: skip

    def run(callback=None):
        return train(GRPO(group_size=4), task, tiny_policy, policy, preset, steps=3, progress=False, callback=callback)

    policy = copy.deepcopy(tiny_policy)
    h = run(watch)
    assert [x[0] for x in seen] == [1, 2, 3]
    assert all(x[1] and x[2] == 32 and x[3][0] == 32 and x[4] == 32 and x[5] for x in seen)
    assert [x[6] for x in seen] == [False, True, True]  # eval_every=2, and the last step is evaluated
    assert [e["step"] for e in h.evals] == [0, 2, 3]
    policy = copy.deepcopy(tiny_policy)
    plain = run()
    strip = lambda hist: [{k: v for k, v in st.items() if k != "seconds"} for st in hist.steps]  # noqa: E731
    assert strip(plain) == strip(h) and [e["accuracy"] for e in plain.evals] == [e["accuracy"] for e in h.evals]

    def stop(s):
        raise KeyboardInterrupt(f"stop at {s.step}")

    policy = copy.deepcopy(tiny_policy)
    with pytest.raises(KeyboardInterrupt, match="stop at 1"):
        run(stop)
    with pytest.raises(ValueError, match="callback must be None or a function"):
        run("not a function")


def test_on_evaluate_sees_every_evaluation_with_each_answer(task, tiny_policy, cpu_preset):
    """train(..., on_evaluate=f) calls f after every evaluation (step 0, every eval_every steps, the
    last step), before that step's callback, with the accuracy and, per held-out problem, the answer
    and whether it was right: the numbers `evaluate` gives for that policy (checked by hand at the
    end, where the policy is the final one). The history is the same as without it (the control)."""
    from dataclasses import replace

    from grpo_edu import evaluate, train

    preset = replace(cpu_preset, sequences_per_step=32, eval_every=2)
    order, seen = [], []

    def on_evaluate(e):
        order.append(("eval", e.step))
        seen.append(e)
        assert e.history.evals[-1]["step"] == e.step and e.history.evals[-1]["accuracy"] == e.accuracy

    def run(**hooks):
        policy = copy.deepcopy(tiny_policy)
        h = train(GRPO(group_size=4), task, tiny_policy, policy, preset, steps=3, progress=False, **hooks)
        return h, policy

    h, policy = run(on_evaluate=on_evaluate, callback=lambda s: order.append(("step", s.step)))
    assert [e.step for e in seen] == [e["step"] for e in h.evals] == [0, 2, 3]  # the last included
    assert order == [("eval", 0), ("step", 1), ("eval", 2), ("step", 2), ("eval", 3), ("step", 3)]
    problems = task.eval_problems()
    for e in seen:
        assert e.problems == problems and len(e.completions) == len(problems) == e.correct.numel()
        assert e.accuracy == int(e.correct.sum()) / len(problems)  # the accuracy is the mean of the answers
    last = seen[-1]
    acc, correct = evaluate(policy, task, return_correct=True)  # by hand: the final policy, evaluated again
    assert last.policy is policy and acc == last.accuracy and torch.equal(correct, last.correct)
    right = task.rewards(problems, last.completions)  # each answer, checked again
    assert torch.equal(right, last.correct)
    plain, _ = run()
    strip = lambda hist: [{k: v for k, v in st.items() if k != "seconds"} for st in hist.steps]  # noqa: E731
    assert strip(plain) == strip(h) and [e["accuracy"] for e in plain.evals] == [e["accuracy"] for e in h.evals]
    with pytest.raises(ValueError, match="on_evaluate must be None or a function"):
        run(on_evaluate=3)
