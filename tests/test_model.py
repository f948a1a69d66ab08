import pytest
import torch

from grpo_edu.model import KVCache, ModelConfig, TinyGPT, ValueModel, count_parameters


def test_shapes_and_parameter_count():
    cfg = ModelConfig(vocab_size=17, d_model=64, n_layers=2, n_heads=4, max_seq_len=12)
    m = TinyGPT(cfg)
    x = torch.randint(0, 17, (3, 7))
    assert m(x).shape == (3, 7, 17)
    # hand count: embeddings 17*64 + 12*64; per block 2 LN (2*128) + qkv (64*192+192)
    # + proj (64*64+64) + mlp (64*256+256 + 256*64+64); final LN 128; untied head 64*17, no bias
    per_block = 2 * 128 + (64 * 192 + 192) + (64 * 64 + 64) + (64 * 256 + 256 + 256 * 64 + 64)
    trunk = 17 * 64 + 12 * 64 + 2 * per_block + 128
    assert count_parameters(m) == trunk + 64 * 17
    v = ValueModel(cfg)
    assert v(x).shape == (3, 7)
    assert count_parameters(v) == trunk + 64 + 1  # same trunk + scalar head


def test_tied_head_and_head_bias():
    small = dict(d_model=16, n_layers=1, n_heads=2)
    untied = count_parameters(TinyGPT(ModelConfig(**small)))
    tied = TinyGPT(ModelConfig(tie_embeddings=True, **small))
    assert count_parameters(tied) == untied - 16 * 17  # the head is the token embedding
    x = torch.randint(0, 17, (2, 5))
    h = tied.trunk(x)
    torch.testing.assert_close(tied(x), h @ tied.trunk.tok_emb.weight.T)
    biased = TinyGPT(ModelConfig(head_bias=True, **small))
    assert count_parameters(biased) == untied + 17 and torch.equal(biased.head.bias, torch.zeros(17))


def test_residual_init_scaling():
    cfg = dict(d_model=64, n_layers=8, n_heads=4)
    torch.manual_seed(0)
    plain = TinyGPT(ModelConfig(**cfg)).trunk.blocks[0].attn.proj.weight.std().item()
    torch.manual_seed(0)
    scaled = TinyGPT(ModelConfig(scaled_residual_init=True, **cfg)).trunk.blocks[0].attn.proj.weight.std().item()
    assert abs(plain - 0.02) < 0.002 and abs(scaled - 0.02 / 4) < 0.0005  # 0.02 / sqrt(2 * 8)


def test_causality(tiny_policy):
    x = torch.randint(0, 17, (2, 8))
    y = x.clone()
    y[:, 5:] = (y[:, 5:] + 1) % 17
    a, b = tiny_policy(x), tiny_policy(y)
    torch.testing.assert_close(a[:, :5], b[:, :5])
    assert not torch.allclose(a[:, 5:], b[:, 5:])


def test_kv_cache_matches_full_forward(tiny_policy):
    x = torch.randint(0, 17, (3, 9))
    full = tiny_policy(x)
    cache = tiny_policy.new_cache()
    parts = [tiny_policy(x[:, :4], cache)]  # prefill
    parts += [tiny_policy(x[:, t : t + 1], cache) for t in range(4, 7)]  # one token at a time
    parts.append(tiny_policy(x[:, 7:9], cache))  # two tokens after a cached prefix
    torch.testing.assert_close(torch.cat(parts, dim=1), full, atol=1e-5, rtol=1e-5)
    assert isinstance(cache, KVCache) and cache.length == 9


def test_critic_from_policy_copies_trunk(tiny_policy):
    critic = ValueModel.from_policy(tiny_policy)
    for (n1, p1), (n2, p2) in zip(tiny_policy.trunk.named_parameters(), critic.trunk.named_parameters()):
        assert n1 == n2 and torch.equal(p1, p2) and p1.data_ptr() != p2.data_ptr()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(d_model=30, n_heads=4), "divisible"),
        (dict(n_layers=0), "n_layers"),
        (dict(vocab_size=-1), "vocab_size"),
        (dict(tie_embeddings="yes"), "tie_embeddings"),
        (dict(tie_embeddings=True, head_bias=True), "head_bias"),
    ],
)
def test_bad_config(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ModelConfig(**kwargs)


def test_too_long_and_bad_tokens_are_clear_errors(tiny_policy):
    with pytest.raises(ValueError, match="max_seq_len=12"):
        tiny_policy(torch.zeros(1, 13, dtype=torch.long))
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 17\)"):
        tiny_policy(torch.tensor([[1, 17]]))
    with pytest.raises(ValueError, match=r"\[B, T\]"):
        tiny_policy(torch.zeros(4, dtype=torch.long))
