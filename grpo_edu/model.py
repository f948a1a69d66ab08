"""TinyGPT: a decoder-only pre-LayerNorm transformer in one short file, and its critic.

    tokens [B, T] -> embed + position -> L x (x + attn(ln(x)); x + mlp(ln(x))) -> ln -> head

`TinyGPT` returns logits ``[B, T, V]`` from its own output head (``tie_embeddings=True`` shares
the token embedding instead).
`ValueModel` is the critic of PPO: the same trunk (same size by default: that is the
point, the critic costs as much as the policy) with a scalar head, ``V(s_t)`` ``[B, T]``.

Incremental decoding uses a `KVCache`: pass one to ``forward`` and the keys and values of
the new tokens are appended to it, so each new token attends to the cached prefix without
recomputing it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class ModelConfig:
    vocab_size: int = 17  # tokens: <pad> <bos> <eos> 0-9 + - * =
    d_model: int = 64  # width of the residual stream
    n_layers: int = 2  # transformer blocks
    n_heads: int = 4  # attention heads; d_model must be divisible by it
    max_seq_len: int = 16  # context length: prompt + completion
    mlp_ratio: int = 4  # hidden width of the MLP = mlp_ratio * d_model
    tie_embeddings: bool = False  # output head shares the token embedding matrix (measured: slows RL)
    head_bias: bool = False  # untied head only: a bias per vocabulary entry
    scaled_residual_init: bool = False  # GPT-2: residual projections start at std 0.02/sqrt(2L)

    def __post_init__(self):
        for name in ("tie_embeddings", "head_bias", "scaled_residual_init"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"ModelConfig.{name} must be True or False, got {getattr(self, name)!r}")
        if self.tie_embeddings and self.head_bias:
            raise ValueError("ModelConfig.head_bias=True needs tie_embeddings=False (a tied head has no bias)")
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "max_seq_len", "mlp_ratio"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"ModelConfig.{name} must be a positive integer, got {value!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"ModelConfig.d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")

    def to_dict(self) -> dict:
        return asdict(self)


class _GatherRows(torch.autograd.Function):
    """``x.index_select(0, index)``, whose backward adds each row's gradient into its source row with
    ``index_add_`` on a contiguous copy of the gradient: autograd's own backward runs the same
    ``index_add_`` on the gradient as it comes (a slice of the cache's concatenation), about ten times
    slower on a CPU at these sizes. The same numbers."""

    @staticmethod
    def forward(ctx, x, index):
        ctx.save_for_backward(index)
        ctx.rows = x.shape[0]
        return x.index_select(0, index)

    @staticmethod
    def backward(ctx, grad):
        (index,) = ctx.saved_tensors
        grad = grad.contiguous()
        return grad.new_zeros((ctx.rows, *grad.shape[1:])).index_add_(0, index, grad), None


def gather_rows(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """The rows ``index`` of ``x`` (rows may repeat), ``x.index_select(0, index)``, differentiable."""
    if torch.is_grad_enabled() and x.requires_grad:
        return _GatherRows.apply(x, index)
    return x.index_select(0, index)


class KVCache:
    """Keys and values of every layer for the tokens seen so far: ``[B, H, S, Dh]`` each.

    Each new token's keys and values are appended (``torch.cat``: a new tensor each time, which
    autograd follows). Without grad (sampling), ``reserve(n)`` keeps them instead in buffers of
    ``n`` positions written in place, so a token costs its own keys and values, not a copy of the
    whole prefix (the same numbers)."""

    def __init__(self, n_layers: int):
        self.keys: list[torch.Tensor | None] = [None] * n_layers
        self.values: list[torch.Tensor | None] = [None] * n_layers
        self.capacity: int | None = None
        self._buffers: list[tuple | None] = [None] * n_layers  # (keys, values) of `capacity` positions

    def reserve(self, capacity: int) -> "KVCache":
        """Write what comes without grad into buffers of ``capacity`` positions (see the class)."""
        self.capacity = capacity
        return self

    @property
    def length(self) -> int:
        return 0 if self.keys[0] is None else self.keys[0].shape[2]

    def layer_length(self, layer: int) -> int:
        return 0 if self.keys[layer] is None else self.keys[layer].shape[2]

    def select_rows(self, index: torch.Tensor) -> "KVCache":
        """Keep the rows ``index`` of every layer (rows may repeat: a prompt computed once
        is shared by the ``G`` completions of its group). Differentiable."""
        if all(b is not None for b in self._buffers):  # reserved buffers: gather them whole, free room included
            lengths = [self.layer_length(i) for i in range(len(self.keys))]
            self._buffers = [(k.index_select(0, index), v.index_select(0, index)) for k, v in self._buffers]
            self.keys = [k[:, :, :n] for (k, _), n in zip(self._buffers, lengths, strict=True)]
            self.values = [v[:, :, :n] for (_, v), n in zip(self._buffers, lengths, strict=True)]
            return self
        self.keys = [None if k is None else gather_rows(k, index) for k in self.keys]
        self.values = [None if v is None else gather_rows(v, index) for v in self.values]
        self._buffers = [None] * len(self.keys)
        return self

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        past_k, past_v = self.keys[layer], self.values[layer]
        if self.capacity is not None and not torch.is_grad_enabled():  # in place, into the buffers
            S, end = self.layer_length(layer), self.layer_length(layer) + k.shape[2]
            if self._buffers[layer] is None:  # the first token, or after select_rows: a buffer, the past copied
                shape = (k.shape[0], k.shape[1], max(self.capacity, end), k.shape[3])
                self._buffers[layer] = (k.new_empty(shape), v.new_empty(shape))
                if past_k is not None:
                    self._buffers[layer][0][:, :, :S], self._buffers[layer][1][:, :, :S] = past_k, past_v
            buf_k, buf_v = self._buffers[layer]
            buf_k[:, :, S:end], buf_v[:, :, S:end] = k, v
            k, v = buf_k[:, :, :end], buf_v[:, :, :end]
        elif past_k is not None:
            k = torch.cat([past_k, k], dim=2)
            v = torch.cat([past_v, v], dim=2)
        self.keys[layer], self.values[layer] = k, v
        return k, v


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        # the causal mask as a bias: 0 where position i may see position j (j <= i), -inf elsewhere
        hidden = torch.ones(cfg.max_seq_len, cfg.max_seq_len, dtype=torch.bool).triu(diagonal=1)
        self.register_buffer(
            "mask_bias", torch.zeros(hidden.shape).masked_fill(hidden, float("-inf")), persistent=False
        )

    def forward(self, x, cache: KVCache | None = None, layer: int = 0, last: int | None = None):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        # [B, T, C] -> [B, H, T, Dh]
        q, k, v = (t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in (q, k, v))
        past = 0
        if cache is not None:
            past = cache.layer_length(layer)
            k, v = cache.update(layer, k, v)
        if last is not None:  # every position's keys and values, the queries of the last `last` only
            q = q[:, :, T - last :]
        Tq = q.shape[2]
        if x.dtype in (torch.bfloat16, torch.float16):  # a sampler copy in low precision (sampler.py): a
            # fused kernel, as a serving engine runs it, with the softmax in fp32 (the written-out one
            # below would round each weight and the normaliser to the low precision)
            mask = None if Tq == 1 else self.mask_bias[past + T - Tq : past + T, : past + T] == 0
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            return self.proj(y.transpose(1, 2).reshape(B, Tq, C))
        # y = softmax(q k^T / sqrt(Dh) + mask) v over the past + T keys: att [B, H, Tq, past + T]
        att = (q * (1.0 / math.sqrt(C // self.n_heads))) @ k.transpose(2, 3)
        if Tq > 1:  # new position i sees the cached prefix and the new positions up to i
            att = att + self.mask_bias[past + T - Tq : past + T, : past + T]
        # the softmax written out (the max only shifts: no gradient through it), normalised after
        # the product: at these lengths (<= 12 keys) this is faster on a CPU than torch.softmax or
        # F.scaled_dot_product_attention, equal to float rounding (tests/test_speedrun.py)
        att = (att - att.amax(dim=-1, keepdim=True).detach()).exp()
        y = (att @ v) / att.sum(dim=-1, keepdim=True)
        return self.proj(y.transpose(1, 2).reshape(B, Tq, C))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, cfg.mlp_ratio * cfg.d_model),
            nn.GELU(),
            nn.Linear(cfg.mlp_ratio * cfg.d_model, cfg.d_model),
        )

    def forward(self, x, cache=None, layer=0, last=None):
        a = self.attn(self.ln1(x), cache, layer, last)
        x = x + a if last is None else x[:, x.shape[1] - last :] + a
        return x + self.mlp(self.ln2(x))


class Trunk(nn.Module):
    """Embeddings + blocks + final LayerNorm: ``[B, T]`` ids -> ``[B, T, d_model]``."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.config = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.max_seq_len, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.apply(self._init)
        for name, p in self.named_parameters():  # GPT-2: scale residual projections
            if cfg.scaled_residual_init and name.endswith(("proj.weight", "mlp.2.weight")):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * cfg.n_layers))

    @staticmethod
    def _init(m):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, 0.02)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, 0.0, 0.02)

    def forward(self, idx: torch.Tensor, cache: KVCache | None = None, last: int | None = None) -> torch.Tensor:
        """``[B, T]`` ids -> ``[B, T, d_model]``; with ``last``, the outputs of the last ``last``
        positions only, ``[B, last, d_model]`` (the cache still gets every position's keys and values:
        the last block skips the rest, as a prompt run once needs only its last position's output)."""
        if idx.dim() != 2:
            raise ValueError(f"expected token ids of shape [B, T], got {tuple(idx.shape)}")
        B, T = idx.shape
        if last is not None and not (isinstance(last, int) and 1 <= last <= T):
            raise ValueError(f"last must be None or an integer in [1, {T}], got {last!r}")
        start = cache.length if cache is not None else 0
        if start + T > self.config.max_seq_len:
            raise ValueError(
                f"sequence of {start + T} tokens is longer than the model's context "
                f"max_seq_len={self.config.max_seq_len}"
            )
        if idx.numel():
            lo, hi = (int(v) for v in idx.aminmax())  # one reduction for both bounds
            if lo < 0 or hi >= self.config.vocab_size:
                raise ValueError(f"token ids must lie in [0, {self.config.vocab_size}), got min {lo}, max {hi}")
        pos = torch.arange(start, start + T, device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(pos)
        for i, block in enumerate(self.blocks):
            x = block(x, cache, i, last if i == len(self.blocks) - 1 else None)
        return self.ln_f(x)


class TinyGPT(nn.Module):
    """The policy pi_theta: ``forward(idx [B, T], cache=None, last=None) -> logits [B, T, V]``
    (``[B, last, V]`` with ``last``: the logits of the last positions only)."""

    def __init__(self, config: ModelConfig | None = None):
        super().__init__()
        self.config = config or ModelConfig()
        self.trunk = Trunk(self.config)
        self.head = None
        if not self.config.tie_embeddings:
            self.head = nn.Linear(self.config.d_model, self.config.vocab_size, bias=self.config.head_bias)
            nn.init.normal_(self.head.weight, 0.0, 0.02)
            if self.head.bias is not None:
                nn.init.zeros_(self.head.bias)

    def forward(self, idx: torch.Tensor, cache: KVCache | None = None, last: int | None = None) -> torch.Tensor:
        h = self.trunk(idx, cache, last)
        if self.head is not None:
            return self.head(h)
        return h @ self.trunk.tok_emb.weight.T  # tied embeddings: [B, T, V]

    def new_cache(self) -> KVCache:
        return KVCache(self.config.n_layers)

    @property
    def device(self) -> torch.device:
        return self.trunk.tok_emb.weight.device


class ValueModel(nn.Module):
    """The critic V_phi(s_t): ``forward(idx [B, T]) -> values [B, T]``.

    Same trunk as the policy (same size by default), with a scalar head per position.
    ``V[:, t]`` is the value of the state "prefix up to and including token t".
    """

    def __init__(self, config: ModelConfig | None = None):
        super().__init__()
        self.config = config or ModelConfig()
        self.trunk = Trunk(self.config)
        self.head = nn.Linear(self.config.d_model, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, idx: torch.Tensor, cache: KVCache | None = None, last: int | None = None) -> torch.Tensor:
        return self.head(self.trunk(idx, cache, last)).squeeze(-1)

    def new_cache(self) -> KVCache:
        return KVCache(self.config.n_layers)

    @classmethod
    def from_policy(cls, policy: TinyGPT) -> "ValueModel":
        """A critic initialised from the policy's trunk (common practice in RLHF)."""
        critic = cls(policy.config).to(policy.device)
        critic.trunk.load_state_dict(policy.trunk.state_dict())
        return critic


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def forward_flops(config: ModelConfig, rows: int, new_tokens: int, past: int = 0, last: int | None = None) -> int:
    """FLOPs (two per multiply-add) of one `TinyGPT` forward over ``rows`` sequences of
    ``new_tokens`` positions after ``past`` cached ones (outputs of the ``last`` ones only, if given),
    counted from the shapes:

        per layer and position: 2 d (3d + d + 2 m d)   (qkv, out, the MLP's two products)
                                + 2 * 2 d c            (q k^T and att v over the c keys it sees)
        per position:           2 d V                   (the output head)

    with ``c = past + j + 1`` at the j-th new position (causal); with ``last``, the last layer
    computes keys and values (3d of qkv) at every position and the rest at the last ``last`` ones.
    LayerNorm, GELU, softmax, biases and the embeddings' lookups (O(d) per position, a few percent)
    are not counted. A backward costs about twice its forward (a product for the input's gradient
    and one for the weights' of each forward product)."""
    d, m, T = config.d_model, config.mlp_ratio, new_tokens
    out = T if last is None else last

    def keys(queries):  # keys seen by the last `queries` new positions of a row, summed
        return sum(past + j + 1 for j in range(T - queries, T))

    layer = 2 * T * d * (4 * d + 2 * m * d) + 4 * d * keys(T)
    final = 2 * T * d * 3 * d + 2 * out * d * (d + 2 * m * d) + 4 * d * keys(out)
    return rows * ((config.n_layers - 1) * layer + final + 2 * out * d * config.vocab_size)
