"""The learned reward model r_phi and the task that pays it (grpo_edu.demos.reward_model)."""

import math

import numpy as np
import pytest
import torch

from envs import ArithmeticTask
from grpo_edu import sample_batch
from grpo_edu.demos.reward_model import (
    ProxyTask,
    RewardModel,
    RewardModelConfig,
    exploit_rate,
    exploits,
    label_samples,
    train_reward_model,
)


@pytest.fixture
def task1():
    return ArithmeticTask(digits=1, eval_size=20)


def constant_model(task, logit: float) -> RewardModel:
    """r_phi = logit everywhere: last layer zero, bias = logit."""
    rm = RewardModel(task.prompt_length, task.max_answer_length, task.tokenizer.vocab_size, hidden=4)
    with torch.no_grad():
        rm.net[-1].weight.zero_()
        rm.net[-1].bias.fill_(logit)
    return rm


def test_features_one_hot_by_hand():
    rm = RewardModel(prompt_length=2, answer_length=3, vocab_size=6, hidden=4)
    x = rm.features(torch.tensor([[1, 5]]), torch.tensor([[3, 2, 4]]), torch.tensor([[1.0, 1.0, 0.0]]))
    assert x.shape == (1, 30)
    hot = torch.nonzero(x[0]).squeeze(1).tolist()
    assert hot == [1, 6 + 5, 12 + 3, 18 + 2]  # q_1 = 1, q_2 = 5, a_1 = 3, a_2 = 2; a_3 is masked out
    # a completion shorter than L is zero-padded, a longer one cut at L
    short = rm.features(torch.tensor([[1, 5]]), torch.tensor([[3]]), torch.tensor([[1.0]]))
    assert torch.nonzero(short[0]).squeeze(1).tolist() == [1, 11, 15]
    long = rm.features(torch.tensor([[1, 5]]), torch.tensor([[3, 2, 4, 1]]), torch.ones(1, 4))
    assert torch.nonzero(long[0]).squeeze(1).tolist() == [1, 11, 15, 20, 28]
    with pytest.raises(ValueError, match="prompt_ids"):
        rm.features(torch.tensor([[1, 5, 1]]), torch.tensor([[3]]), torch.tensor([[1.0]]))
    with pytest.raises(ValueError, match="completion_ids and mask"):
        rm.features(torch.tensor([[1, 5]]), torch.tensor([[3, 2]]), torch.tensor([[1.0]]))


def test_proxy_task_pays_sigmoid_at_the_last_token(task1):
    proxy = ProxyTask(task1, constant_model(task1, math.log(3.0)))  # sigmoid(ln 3) = 3/4
    problems = task1.sample(3, 0)
    ids = torch.tensor([[4, 2, 0], [5, 6, 2], [0, 0, 0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]])
    s = proxy.token_scores(problems, ids, mask)
    expected = torch.tensor([[0.0, 0.75, 0.0], [0.0, 0.0, 0.75], [0.0, 0.0, 0.0]])
    assert torch.allclose(s, expected, atol=1e-6)
    assert torch.allclose(proxy.token_scores(problems, ids, mask, kind="process"), expected, atol=1e-6)
    with pytest.raises(ValueError, match="kind"):
        proxy.token_scores(problems, ids, mask, kind="gold")


def test_proxy_task_delegates_and_its_gold_is_the_checker(task1):
    proxy = ProxyTask(task1, constant_model(task1, 0.0))
    assert proxy.sample(4, 7) == task1.sample(4, 7)
    assert proxy.eval_problems() == task1.eval_problems()
    assert proxy.max_answer_length == task1.max_answer_length and proxy.tokenizer is task1.tokenizer
    p = task1.make_problem(3, 4)
    gold = proxy.rewards([p, p], ["7", "8"])
    assert gold.tolist() == [1.0, 0.0]
    with pytest.raises(ValueError, match="reward_model was built"):
        ProxyTask(ArithmeticTask(digits=2), constant_model(task1, 0.0))
    with pytest.raises(AttributeError):
        _ = proxy.no_such_thing


def test_label_samples_agree_with_the_checker(task1, tiny_policy):
    d = label_samples(tiny_policy, task1, 50, seed=0, batch=16)
    assert d["completion_ids"].shape == (50, task1.max_answer_length) and d["labels"].shape == (50,)
    rng = np.random.default_rng(0)  # label_samples draws its prompts batch by batch from this generator
    problems = [p for n in (16, 16, 16, 2) for p in task1.sample(n, rng)]
    assert torch.equal(d["prompt_ids"], task1.encode_prompts(problems))
    assert torch.equal(d["labels"], task1.rewards_from_ids(problems, d["completion_ids"]))
    with pytest.raises(ValueError, match="n must be"):
        label_samples(tiny_policy, task1, 0)


def test_reward_model_training_measures_itself(task1, tiny_policy):
    rm, info = train_reward_model(
        tiny_policy, task1, RewardModelConfig(n_labels=64, epochs=2, hidden=8), progress=False
    )
    assert info["n_train"] == 64 - round(0.1 * 64)
    assert 0 <= info["val_accuracy"] <= 1 and 0 <= info["always_wrong"] <= 1 and info["val_loss"] > 0
    assert not any(p.requires_grad for p in rm.parameters())
    proxy = ProxyTask(task1, rm)
    ex = exploits(proxy, tiny_policy, n_prompts=32, k=3)
    # an untrained policy gets (almost) every one of 32 prompts wrong: k wrong answers exist to rank, and the
    # checks below must not pass on an empty list
    assert len(ex) == 3, ex
    assert [e["proxy"] for e in ex] == sorted((e["proxy"] for e in ex), reverse=True)
    assert all(e["completion"].split("<eos>")[0] != e["answer"] or not e["completion"].endswith("<eos>") for e in ex)
    # the rate counts the rejected answers r_phi rates right: none when nothing is rated right, every rejected
    # answer when everything is (the checker's rejections counted by hand on the same samples)
    assert exploit_rate(proxy, tiny_policy, n_prompts=32, threshold=1.0) == 0.0
    rng, gen = np.random.default_rng(0), torch.Generator().manual_seed(0)
    ro, _, problems = sample_batch(tiny_policy, proxy, 32, 1, rng, gen)
    rejected = (task1.rewards(problems, ro.texts, (~ro.truncated).tolist()) == 0).float().mean().item()
    assert exploit_rate(proxy, tiny_policy, n_prompts=32, threshold=-1.0) == rejected


def test_exploit_rate_counts_wrong_answers_above_the_threshold(task1, monkeypatch):
    """A hand-made sample, some answers right: the rate counts only the wrong ones r_phi rates above the threshold."""
    import types

    from grpo_edu.demos import reward_model as reward_model_module

    p = task1.make_problem(3, 4)  # answer "7"
    # (completion, sigmoid(r_phi)): two right answers, one rated high and one low, and four wrong ones
    sample = [("7", 0.9), ("7", 0.2), ("8", 0.8), ("1", 0.6), ("9", 0.3), ("", 0.1)]
    texts, proxy_scores = zip(*sample)
    rollout = types.SimpleNamespace(texts=list(texts), truncated=torch.zeros(len(sample), dtype=torch.bool))
    scores = torch.tensor(proxy_scores).unsqueeze(1)  # [B, 1]: the proxy reward on the last token

    def fake_sample_batch(policy, proxy, n_prompts, group_size, rng, gen):
        assert (n_prompts, group_size) == (len(sample), 1)
        return rollout, scores, [p] * len(sample)

    monkeypatch.setattr(reward_model_module, "sample_batch", fake_sample_batch)
    proxy = ProxyTask(task1, constant_model(task1, 0.0))
    policy = torch.nn.Linear(1, 1)  # only its device is read
    assert task1.rewards([p] * len(sample), list(texts)).tolist() == [1, 1, 0, 0, 0, 0]  # the checker, by hand
    # threshold 0.5: the wrong answers rated 0.8 and 0.6 (not the right one rated 0.9): 2 of 6. Without the checker's
    # factor it would count 3, with the right answers instead of the wrong ones 1
    assert exploit_rate(proxy, policy, n_prompts=len(sample), threshold=0.5) == pytest.approx(2 / 6)
    # threshold 0.7: the wrong answer rated 0.8 only (1 of 6; without the checker's factor 2)
    assert exploit_rate(proxy, policy, n_prompts=len(sample), threshold=0.7) == pytest.approx(1 / 6)
    # threshold 0.05: every wrong answer (4 of 6; without the checker's factor 6)
    assert exploit_rate(proxy, policy, n_prompts=len(sample), threshold=0.05) == pytest.approx(4 / 6)


@pytest.mark.parametrize(
    "field,value",
    [("n_labels", 1), ("hidden", 0), ("epochs", 1.5), ("lr", 0), ("val_frac", 1.0), ("temperature", -1)],
)
def test_config_rejects_nonsense(field, value):
    with pytest.raises(ValueError, match=f"RewardModelConfig.{field}"):
        RewardModelConfig(**{field: value})
