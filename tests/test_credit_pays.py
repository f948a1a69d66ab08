"""Where a critic's credit pays (issue 32): each arm is PPO with the one thing it names switched, the
junk world is the arithmetic task with junk in half its demonstrations, and the verdicts are the paired rule."""

import pytest
import torch

from grpo_edu.algorithms.critic import Critic
from grpo_edu.measure.credit import ExactCritic
from grpo_edu.studies import credit_pays as cp


def _setup_with_critic(name, task, tiny_policy):
    algorithm = cp.make_arm(name, task)
    return algorithm, algorithm.functions, algorithm.make_critic(tiny_policy) if algorithm.name == "ppo" else None


def test_each_arm_is_ppo_with_the_one_thing_it_names(tiny_policy):
    task, _ = cp.world_setup("default", "cpu")
    ppo, _, learned = _setup_with_critic("learned critic (PPO)", task, tiny_policy)
    assert isinstance(learned, Critic)
    for name, (algo, switch, baseline) in cp.ARMS.items():
        algorithm, plugged, critic = _setup_with_critic(name, task, tiny_policy)
        assert algorithm.name == algo
        if algo == "ppo":  # every field as PPO's but the one switched
            diff = {k for k, v in algorithm.config.to_dict().items() if v != ppo.config.to_dict()[k]}
            assert diff == set(switch), name
            assert isinstance(critic, ExactCritic) == (baseline in ("exact", "exact_prompt")), name
            assert critic.prompt_only == (baseline == "exact_prompt") if isinstance(critic, ExactCritic) else True
            assert set(plugged) == ({"gae"} if baseline == "batch_mean" else set()), name  # its functions=
    assert cp.ARMS["V*(s_t), lam 0"][1] == {"lam": 0.0} and ppo.config.lam == 1.0  # control: PPO's own lambda is 1


def test_the_junk_world_is_the_task_with_junk_and_a_reference_trained_to_the_end():
    task, p = cp.world_setup("junk", "cpu")
    default_task, d = cp.world_setup("default", "cpu")
    assert task.junk == cp.JUNK and default_task.junk == 0.0
    assert p.sft.target_accuracy == 1.0 and p.sft.max_steps == cp.JUNK_SFT_STEPS  # no early stop
    assert p.model.max_seq_len >= task.prompt_length + task.max_answer_length
    assert (p.seed, p.sequences_per_step) == (d.seed, d.sequences_per_step)
    _, s = cp.world_setup("spread", "cpu")
    assert s.world == "spread" and d.world == "default"


def test_bad_names_are_one_line():
    with pytest.raises(ValueError, match="unknown world 'nope'"):
        cp.world_setup("nope")
    with pytest.raises(ValueError, match="unknown arm 'nope'"):
        cp.make_arm("nope", None)
    with pytest.raises(SystemExit):
        cp.main(["--seeds", "0"])


def test_verdicts_are_the_paired_rule_by_hand():
    runs = {n: [{"sampled": 0.5}, {"sampled": 0.5}] for n in cp.ARMS}
    runs["V*(s_t), lam 0"] = [{"sampled": 0.55}, {"sampled": 0.53}]  # +0.05, +0.03 over the prompt value: holds
    runs["learned critic (PPO)"] = [{"sampled": 0.51}, {"sampled": 0.49}]  # +0.01, -0.01 over the batch mean
    v = cp.verdicts({"worlds": {"w": {"runs": runs}}})["w"]
    assert v["per-token credit"]["diff"] == pytest.approx([0.05, 0.03]) and v["per-token credit"]["verdict"] == "holds"
    assert v["the learned critic"]["verdict"] == "depends"
    assert v["PPO over GRPO"]["diff"] == pytest.approx([0.01, -0.01]) and v["PPO over GRPO"]["verdict"] == "depends"
    runs["learned critic (PPO)"] = [{"sampled": 0.5}, {"sampled": 0.49}]  # <= 0 on both: fails here
    assert cp.verdicts({"worlds": {"w": {"runs": runs}}})["w"]["the learned critic"]["verdict"] == "fails here"


def test_a_tiny_run_fills_every_world_arm_and_seed(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_EDU_CACHE", str(tmp_path))
    torch.manual_seed(0)
    res = cp.run_credit_pays("cpu", seeds=1, worlds=("default", "junk"), tiny=True, progress=False)
    for w in ("default", "junk"):
        assert set(res["worlds"][w]["runs"]) == set(cp.ARMS) and all(
            len(r) == 1 for r in res["worlds"][w]["runs"].values()
        )
        assert len(res["worlds"][w]["reading"]["ev"]) == len(res["worlds"][w]["reading"]["oracle_ev"])
    assert len(res["worlds"]["junk"]["reading"]["ev"]) == len(res["worlds"]["default"]["reading"]["ev"]) + 1
    text = cp.format_result(res)
    assert "exact per-token credit beats the exact prompt value" in text and "junk [" in text


def _writes(policy, token_id):
    """``policy`` made to write ``token_id`` at every position (a hook on its head sets the logits)."""

    def force(module, inputs, out):
        logits = torch.full_like(out, -30.0)
        logits[..., token_id] = 30.0
        return logits

    policy.head.register_forward_hook(force)
    return policy


def test_junk_rates_count_the_answers_that_write_junk(tiny_policy):
    import copy

    task, _ = cp.world_setup("junk", "cpu")
    tok = task.tokenizer
    always = cp.junk_rates(_writes(copy.deepcopy(tiny_policy), tok.stoi["="]), task, n=16, seed=0, temperature=0.0)
    assert always["junk"] == 1.0 and always["accuracy"] == 0.0 and always["n"] == 16
    never = cp.junk_rates(_writes(tiny_policy, tok.eos_id), task, n=16, seed=0, temperature=0.0)  # control: no junk
    assert never["junk"] == 0.0 and never["right_without"] == never["accuracy"] == 0.0
