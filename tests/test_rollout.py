import copy

import pytest
import torch

from envs import ArithmeticTask
from grpo_edu.model import ValueModel
from grpo_edu.rollout import (
    Rollout,
    completion_values,
    decode_rows,
    generate,
    reference_logprobs,
    sequence_logprobs,
    shared_prompts,
)

TASK = ArithmeticTask(digits=2)


def _prompts(n=4, seed=0):
    return TASK.encode_prompts(TASK.sample(n, seed))


def test_rollout_shapes_groups_and_mask(tiny_policy):
    ro = generate(
        tiny_policy,
        _prompts(3),
        group_size=4,
        max_new_tokens=4,
        generator=torch.Generator().manual_seed(0),
        tokenizer=TASK.tokenizer,
    )
    B = 12
    assert ro.batch_size == B and ro.prompt_ids.shape == (B, 7)
    assert ro.group_ids.tolist() == [0] * 4 + [1] * 4 + [2] * 4
    assert torch.equal(ro.prompt_ids[0], ro.prompt_ids[3])  # consecutive rows share a prompt
    assert len(ro.texts) == B
    for i in range(B):
        ids, m = ro.completion_ids[i].tolist(), ro.mask[i].tolist()
        n = int(sum(m))
        assert m == [1.0] * n + [0.0] * (len(m) - n)  # 1 up to and including EOS, 0 after
        if not ro.truncated[i]:
            assert ids[n - 1] == TASK.tokenizer.eos_id and 2 not in ids[: n - 1]
        assert all(t == 0 for t in ids[n:])  # pad after EOS
        assert ro.texts[i] == TASK.tokenizer.decode(ids)
    assert torch.all(ro.logprobs[ro.mask == 0] == 0) and torch.all(ro.logprobs[ro.mask == 1] <= 0)


def test_decode_rows_decodes_each_distinct_row_once():
    """The texts of ``tokenizer.decode`` row by row, each distinct row decoded once."""
    calls = []

    class Counting:
        def decode(self, row):
            calls.append(tuple(row))
            return TASK.tokenizer.decode(row)

    ids = torch.tensor([[4, 5, 2, 0], [4, 5, 2, 0], [6, 2, 0, 0], [4, 5, 2, 0], [3, 3, 3, 3]])
    assert decode_rows(Counting(), ids) == [TASK.tokenizer.decode(r) for r in ids.tolist()]
    assert sorted(calls) == sorted({tuple(r) for r in ids.tolist()})  # 3 distinct rows, 3 calls (not 5)


def test_sampling_and_the_reference_return_ordinary_tensors(tiny_policy):
    """Sampling and the reference's log-probs run in inference mode; what they return is an ordinary
    tensor: a loss may save it for its backward, a learner may write into it (neither works on a tensor
    made in inference mode)."""
    ro = generate(tiny_policy, _prompts(3), group_size=4, max_new_tokens=4, generator=torch.Generator().manual_seed(0))
    ref = copy.deepcopy(tiny_policy).requires_grad_(False)
    with torch.no_grad():
        ref_logp = reference_logprobs(ref, ro, beta=0.04, kl_placement="loss")
    for t in (ro.prompt_ids, ro.completion_ids, ro.mask, ro.logprobs, ro.group_ids, ro.truncated, ref_logp):
        assert not t.is_inference()
    assert torch.equal(ref_logp, sequence_logprobs(ref, ro))  # the same numbers as outside inference mode
    (sequence_logprobs(tiny_policy, ro) * ro.mask * ref_logp).sum().backward()  # the mul saves both for backward
    ro.mask[0, 0] = 1.0  # in place


def test_teacher_forced_logprobs_equal_sampling_logprobs(reference):
    for temperature in (1.0, 0.7):
        ro = generate(
            reference,
            _prompts(16),
            group_size=4,
            max_new_tokens=4,
            temperature=temperature,
            generator=torch.Generator().manual_seed(1),
            tokenizer=TASK.tokenizer,
        )
        lp = sequence_logprobs(reference, ro)
        torch.testing.assert_close(lp, ro.logprobs, atol=1e-5, rtol=0)


def test_cached_generation_equals_uncached(reference):
    kw = dict(group_size=8, max_new_tokens=4, tokenizer=TASK.tokenizer)
    a = generate(reference, _prompts(16), generator=torch.Generator().manual_seed(2), use_cache=True, **kw)
    b = generate(reference, _prompts(16), generator=torch.Generator().manual_seed(2), use_cache=False, **kw)
    assert torch.equal(a.completion_ids, b.completion_ids)
    torch.testing.assert_close(a.logprobs, b.logprobs, atol=1e-5, rtol=0)


def test_shared_prompt_generation_samples_the_same_tokens(reference):
    kw = dict(group_size=8, max_new_tokens=4, tokenizer=TASK.tokenizer)
    a = generate(reference, _prompts(16), generator=torch.Generator().manual_seed(3), **kw)
    b = generate(reference, _prompts(16), generator=torch.Generator().manual_seed(3), share_prompts=False, **kw)
    assert torch.equal(a.completion_ids, b.completion_ids) and torch.equal(a.mask, b.mask)
    torch.testing.assert_close(a.logprobs, b.logprobs, atol=1e-6, rtol=0)


def _grads(model, ro, share, weights):
    model.zero_grad()
    lp = sequence_logprobs(model, ro, share_prompts=share)
    (lp * weights).sum().backward()
    return lp.detach(), [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("rows", ["all", "minibatch"])
def test_shared_prompt_teacher_forcing_equals_the_full_forward(reference, rows):
    """Each distinct prompt run once, its KV cache handed to its G rows: the same log-probs,
    and the same gradient (it flows back through the shared prompt), up to float rounding."""
    reference = copy.deepcopy(reference).requires_grad_(True)  # a copy: another test may have frozen it
    ro = generate(reference, _prompts(16), group_size=8, max_new_tokens=4, generator=torch.Generator().manual_seed(4))
    if rows == "minibatch":  # a shuffled half, as a minibatch sees it: groups broken up
        ro = ro.select(torch.randperm(ro.batch_size, generator=torch.Generator().manual_seed(0))[:64])
    prompts, inverse = shared_prompts(ro)
    assert prompts.shape[0] <= 16 and torch.equal(prompts[inverse], ro.prompt_ids)
    weights = torch.randn(ro.mask.shape, generator=torch.Generator().manual_seed(5))
    lp_full, g_full = _grads(reference, ro, False, weights)
    lp_shared, g_shared = _grads(reference, ro, True, weights)
    torch.testing.assert_close(lp_shared, lp_full, atol=1e-5, rtol=0)
    for a, b in zip(g_shared, g_full, strict=True):  # relative to the gradient's norm: sums cancel
        assert float((a - b).norm()) <= 1e-5 * float(b.norm()) + 1e-8
    v = ValueModel.from_policy(reference)
    torch.testing.assert_close(completion_values(v, ro), completion_values(v, ro, share_prompts=False))


def test_nothing_shared_with_one_row_per_prompt(tiny_policy):
    ro = generate(tiny_policy, _prompts(6), group_size=1, max_new_tokens=4, generator=torch.Generator().manual_seed(0))
    assert shared_prompts(ro) is None  # REINFORCE's 512 x 1: the plain forward, unchanged
    one = generate(tiny_policy, _prompts(2), group_size=4, max_new_tokens=1, generator=torch.Generator().manual_seed(0))
    assert one.completion_ids.shape[1] == 1  # T = 1: only the prompt's last position predicts
    torch.testing.assert_close(sequence_logprobs(tiny_policy, one), one.logprobs, atol=1e-5, rtol=0)


def test_same_seed_same_rollout(tiny_policy):
    a = generate(tiny_policy, _prompts(), group_size=2, generator=torch.Generator().manual_seed(5))
    b = generate(tiny_policy, _prompts(), group_size=2, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a.completion_ids, b.completion_ids)


def test_greedy_and_top_k(tiny_policy):
    g1 = generate(tiny_policy, _prompts(), temperature=0)
    g2 = generate(tiny_policy, _prompts(), temperature=0)
    assert torch.equal(g1.completion_ids, g2.completion_ids)
    # top_k=1 sampling is greedy decoding
    k1 = generate(tiny_policy, _prompts(), top_k=1, generator=torch.Generator().manual_seed(0))
    T = min(g1.completion_ids.shape[1], k1.completion_ids.shape[1])
    assert torch.equal(g1.completion_ids[:, :T], k1.completion_ids[:, :T])


def test_select_and_concat(tiny_policy):
    ro = generate(tiny_policy, _prompts(2), group_size=3, generator=torch.Generator().manual_seed(0))
    sub = ro.select(torch.tensor([0, 4]))
    assert sub.batch_size == 2 and torch.equal(sub.completion_ids, ro.completion_ids[[0, 4]])
    both = Rollout.concat([ro, ro])
    assert both.batch_size == 12 and both.group_ids.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]


def test_values_shape(tiny_policy):
    ro = generate(tiny_policy, _prompts(2), group_size=2, generator=torch.Generator().manual_seed(0))
    v = completion_values(ValueModel(tiny_policy.config), ro)
    assert v.shape == ro.mask.shape


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(group_size=0), "group_size"),
        (dict(max_new_tokens=0), "max_new_tokens"),
        (dict(temperature=-1.0), "temperature"),
        (dict(top_k=0), "top_k"),
        (dict(max_new_tokens=6), "exceeds the model's context"),
    ],
)
def test_bad_generate_arguments(tiny_policy, kwargs, match):
    with pytest.raises(ValueError, match=match):
        generate(tiny_policy, _prompts(), **kwargs)
