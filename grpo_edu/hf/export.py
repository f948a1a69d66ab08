"""TinyGPT <-> GPT2LMHeadModel with the same weights and logits, and the tokenizer."""

from __future__ import annotations

from dataclasses import fields

import torch

from ._common import _quiet_progress, _require

_SHAPE_FIELDS = (  # (ModelConfig field, GPT2Config field): the same number under two names
    ("vocab_size", "vocab_size"),
    ("max_seq_len", "n_positions"),
    ("d_model", "n_embd"),
    ("n_layers", "n_layer"),
    ("n_heads", "n_head"),
)
_MODEL_FIELDS = {  # ModelConfig fields to_hf knows how to express (a new field must be taught here)
    "vocab_size", "d_model", "n_layers", "n_heads", "max_seq_len", "mlp_ratio",
    "tie_embeddings", "head_bias", "scaled_residual_init",
}  # fmt: skip


def _bias_head_class():
    """The head-bias GPT-2, registered with the Auto classes under model_type "gpt2_head_bias"
    (so ``AutoModelForCausalLM.from_pretrained(path)`` rebuilds it, as TRL does for its
    reference model, once grpo_edu.hf has built it in this process)."""
    transformers = _require("transformers")

    class GPT2HeadBiasConfig(transformers.GPT2Config):
        model_type = "gpt2_head_bias"

    class GPT2LMHeadModelWithBias(transformers.GPT2LMHeadModel):
        """GPT2LMHeadModel whose untied ``lm_head`` has a bias."""

        config_class = GPT2HeadBiasConfig

        def __init__(self, config):
            super().__init__(config)
            if config.tie_word_embeddings:
                raise ValueError("GPT2LMHeadModelWithBias needs tie_word_embeddings=False (a tied head has no bias)")
            self.lm_head = torch.nn.Linear(config.n_embd, config.vocab_size, bias=True)
            self.post_init()

    for cls in (GPT2HeadBiasConfig, GPT2LMHeadModelWithBias):
        cls.__module__ = "grpo_edu.hf"  # where users find them
    transformers.AutoConfig.register("gpt2_head_bias", GPT2HeadBiasConfig, exist_ok=True)
    transformers.AutoModelForCausalLM.register(GPT2HeadBiasConfig, GPT2LMHeadModelWithBias, exist_ok=True)
    return GPT2HeadBiasConfig, GPT2LMHeadModelWithBias


_LAZY: dict = {}


_LAZY: dict = {}


def head_bias_classes() -> dict:
    """``{"GPT2HeadBiasConfig": ..., "GPT2LMHeadModelWithBias": ...}``, built (and registered) once."""
    if not _LAZY:
        _LAZY.update(zip(("GPT2HeadBiasConfig", "GPT2LMHeadModelWithBias"), _bias_head_class(), strict=True))
    return _LAZY


def _gelu_name(policy) -> str:
    acts = {
        type(m).__name__ + ":" + getattr(m, "approximate", "") for m in policy.modules() if isinstance(m, torch.nn.GELU)
    }
    names = {"GELU:none": "gelu", "GELU:tanh": "gelu_pytorch_tanh"}
    if len(acts) != 1 or next(iter(acts)) not in names:
        raise ValueError(f"the policy's MLP activation {sorted(acts)} has no Hugging Face GPT-2 counterpart")
    return names[next(iter(acts))]


def _layernorm_eps(policy) -> float:
    eps = {m.eps for m in policy.modules() if isinstance(m, torch.nn.LayerNorm)}
    if len(eps) != 1:
        raise ValueError(f"LayerNorm eps must be one value to export to GPT-2 (layer_norm_epsilon), got {eps}")
    return eps.pop()


def _weight_pairs(n_layers: int):
    """(TinyGPT name, GPT-2 name, transpose?) for every shared tensor."""
    pairs = [
        ("trunk.tok_emb.weight", "transformer.wte.weight", False),
        ("trunk.pos_emb.weight", "transformer.wpe.weight", False),
        ("trunk.ln_f.weight", "transformer.ln_f.weight", False),
        ("trunk.ln_f.bias", "transformer.ln_f.bias", False),
    ]
    for i in range(n_layers):
        ours, theirs = f"trunk.blocks.{i}.", f"transformer.h.{i}."
        for a, b, t in (
            ("ln1", "ln_1", False),
            ("ln2", "ln_2", False),
            ("attn.qkv", "attn.c_attn", True),
            ("attn.proj", "attn.c_proj", True),
            ("mlp.0", "mlp.c_fc", True),
            ("mlp.2", "mlp.c_proj", True),
        ):
            pairs.append((f"{ours}{a}.weight", f"{theirs}{b}.weight", t))  # Conv1D: [in, out]
            pairs.append((f"{ours}{a}.bias", f"{theirs}{b}.bias", False))
    return pairs


def hf_tokenizer():
    """A ``PreTrainedTokenizerFast`` with the ids of `grpo_edu.tokenizer.CharTokenizer`:
    one token per character, ``<pad>`` 0, ``<bos>`` 1, ``<eos>`` 2, left padding, no
    special token added on encode (prompts carry their ``<bos>``), decode joins characters."""
    transformers, tokenizers = _require("transformers"), _require("tokenizers")
    from ..tokenizer import BOS, EOS, PAD, CharTokenizer

    vocab = CharTokenizer().vocab
    tk = tokenizers.Tokenizer(tokenizers.models.WordLevel({s: i for i, s in enumerate(vocab)}, unk_token=None))
    tk.pre_tokenizer = tokenizers.pre_tokenizers.Split(tokenizers.Regex("."), behavior="isolated")
    tk.decoder = tokenizers.decoders.Fuse()
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tk,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        padding_side="left",
        model_max_length=10**6,
    )


def to_hf(policy, path=None):
    """Export a `TinyGPT` to ``(GPT2LMHeadModel, tokenizer)`` with the same weights and logits.

    ``model(ids).logits == policy(ids)`` (to float rounding) for any ``ids`` ``[B, T]`` with
    ``T <= max_seq_len``. Tied head -> ``tie_word_embeddings=True``; untied -> False; untied
    with a bias -> `GPT2LMHeadModelWithBias`. A config field with no GPT-2 counterpart raises
    ``ValueError`` naming it. Dropout is 0 (TinyGPT has none). The model is on the policy's
    device, float32, in eval mode. With ``path``, model and tokenizer are also saved there
    (``save_pretrained``) and the model remembers it as ``config._name_or_path``: TRL builds
    its reference model (``beta > 0``) from that path, so it needs one.
    """
    transformers = _require("transformers")
    from ..model import TinyGPT

    if not isinstance(policy, TinyGPT):
        raise ValueError(f"to_hf exports a grpo_edu.model.TinyGPT, got {type(policy).__name__}")
    cfg = policy.config
    unknown = sorted({f.name for f in fields(cfg)} - _MODEL_FIELDS)
    if unknown:
        raise ValueError(f"ModelConfig.{unknown[0]} has no known GPT-2 counterpart: teach grpo_edu.hf.to_hf")
    config_cls, cls = transformers.GPT2Config, transformers.GPT2LMHeadModel
    if cfg.head_bias:
        config_cls, cls = head_bias_classes().values()
    hf_cfg = config_cls(
        **{theirs: getattr(cfg, ours) for ours, theirs in _SHAPE_FIELDS},
        n_inner=cfg.mlp_ratio * cfg.d_model,
        activation_function=_gelu_name(policy),
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        layer_norm_epsilon=_layernorm_eps(policy),
        scale_attn_weights=True,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=cfg.tie_embeddings,
        architectures=[cls.__name__],
    )
    model = cls(hf_cfg)
    ours = policy.state_dict()
    sd = {theirs: (ours[o].T if t else ours[o]).detach().clone() for o, theirs, t in _weight_pairs(cfg.n_layers)}
    if not cfg.tie_embeddings:
        sd["lm_head.weight"] = ours["head.weight"].detach().clone()
        if cfg.head_bias:
            sd["lm_head.bias"] = ours["head.bias"].detach().clone()
    missing, unexpected = model.load_state_dict(sd, strict=False)
    missing = [k for k in missing if not (cfg.tie_embeddings and k == "lm_head.weight")]
    if missing or unexpected:
        raise RuntimeError(f"to_hf: weights did not map: missing {missing}, unexpected {unexpected}")
    if cfg.tie_embeddings and model.lm_head.weight.data_ptr() != model.transformer.wte.weight.data_ptr():
        raise RuntimeError("to_hf: the exported head is not tied to the embedding")
    gen = model.generation_config
    gen.bos_token_id, gen.eos_token_id, gen.pad_token_id = 1, 2, 0
    model = model.to(policy.device).eval()
    tok = hf_tokenizer()
    if path is not None:
        with _quiet_progress(transformers):
            model.save_pretrained(path)
        tok.save_pretrained(path)
        model.config._name_or_path = str(path)
    return model, tok


def from_hf(hf_model):
    """Import a GPT-2 causal LM (as `to_hf` makes it) back into a `TinyGPT`, same logits.

    A GPT-2 setting TinyGPT cannot express raises ``ValueError`` naming it (the tanh GELU,
    unscaled attention, cross-attention, an MLP width that is not a multiple of n_embd, ...).
    Dropout is ignored: TinyGPT has none, so logits match the HF model in eval mode.
    """
    _require("transformers")
    from ..model import ModelConfig, TinyGPT

    c = hf_model.config
    if c.model_type not in ("gpt2", "gpt2_head_bias"):
        raise ValueError(f"from_hf imports a GPT-2 (model_type 'gpt2'), got model_type={c.model_type!r}")
    checks = {
        "activation_function": (c.activation_function, "gelu"),
        "scale_attn_weights": (c.scale_attn_weights, True),
        "scale_attn_by_inverse_layer_idx": (c.scale_attn_by_inverse_layer_idx, False),
        "add_cross_attention": (c.add_cross_attention, False),
        "layer_norm_epsilon": (c.layer_norm_epsilon, 1e-5),
    }
    for name, (value, want) in checks.items():
        if value != want:
            raise ValueError(f"GPT2Config.{name}={value!r} has no TinyGPT counterpart (TinyGPT needs {want!r})")
    n_inner = c.n_inner if c.n_inner is not None else 4 * c.n_embd
    if n_inner % c.n_embd:
        raise ValueError(f"GPT2Config.n_inner={n_inner} must be a multiple of n_embd={c.n_embd} (mlp_ratio)")
    bias = getattr(hf_model.lm_head, "bias", None)
    tied = hf_model.lm_head.weight.data_ptr() == hf_model.transformer.wte.weight.data_ptr()
    cfg = ModelConfig(
        **{ours: getattr(c, theirs) for ours, theirs in _SHAPE_FIELDS},
        mlp_ratio=n_inner // c.n_embd,
        tie_embeddings=tied,
        head_bias=bias is not None,
    )
    theirs = hf_model.state_dict()
    sd = {o: (theirs[t].T if tr else theirs[t]).detach().float().clone() for o, t, tr in _weight_pairs(c.n_layer)}
    if not tied:
        sd["head.weight"] = theirs["lm_head.weight"].detach().float().clone()
        if bias is not None:
            sd["head.bias"] = bias.detach().float().clone()
    policy = TinyGPT(cfg)
    policy.load_state_dict(sd, strict=True)
    return policy.to(hf_model.device).eval()
