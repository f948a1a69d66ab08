"""Optional bridge to Hugging Face transformers and TRL: the last step of the course is the
first step of real work.

    model, tok = to_hf(policy)                  # TinyGPT -> GPT2LMHeadModel, same logits
    policy = from_hf(model)                     # and back
    ds = task_dataset(task, n=4096, seed=0)     # prompts "<bos>23+58=" as a datasets.Dataset
    reward = reward_fn(task)                    # TRL reward function, the course's sparse reward
    args = trl_config(GRPOConfig(unbiased_std=True), sequences_per_step=512, max_steps=40)
    trl.GRPOTrainer(model=model, processing_class=tok, reward_funcs=reward,
                    train_dataset=ds, args=args).train()

transformers, tokenizers, datasets and trl are imported inside the functions: the core
package never needs them. Install them with ``pip install -e ".[trl]"``.

The export is exact, not approximate: TinyGPT is a GPT-2 (learned positions, pre-LayerNorm
blocks, eps 1e-5, one fused q|k|v projection) except for two details the config fixes:
its GELU is the exact erf one (``activation_function="gelu"``; GPT-2's default "gelu_new" is
the tanh approximation) and GPT-2's ``Conv1D`` stores weights as ``[in, out]``, the
transpose of ``nn.Linear``. A TinyGPT with an untied head *with a bias* exports to
`GPT2LMHeadModelWithBias`, a GPT2LMHeadModel whose ``lm_head`` has a bias (GPT-2's has
none, and no exact fold of a per-token bias into the weights exists in general); TRL, which
reads ``lm_head.bias``, trains it as is, but a serving engine such as vLLM knows only the
plain architecture: export with ``head_bias=False`` for that.
"""

from __future__ import annotations

import math
import os
import shutil
import statistics
import tempfile
import time
import weakref
from dataclasses import fields

import torch

INSTALL = 'pip install -e ".[trl]"'
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


def _require(module: str):
    """Import an optional dependency or raise an ImportError that says how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"grpo_edu.hf needs the optional package {module.split('.')[0]!r}: install the extra with {INSTALL}"
        ) from exc


# ------------------------------------------------------------------------ the model


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
        cls.__module__ = __name__
    transformers.AutoConfig.register("gpt2_head_bias", GPT2HeadBiasConfig, exist_ok=True)
    transformers.AutoModelForCausalLM.register(GPT2HeadBiasConfig, GPT2LMHeadModelWithBias, exist_ok=True)
    return GPT2HeadBiasConfig, GPT2LMHeadModelWithBias


_LAZY: dict = {}


def __getattr__(name):  # PEP 562: the head-bias classes are built on first use
    if name in ("GPT2HeadBiasConfig", "GPT2LMHeadModelWithBias"):
        if not _LAZY:
            _LAZY.update(zip(("GPT2HeadBiasConfig", "GPT2LMHeadModelWithBias"), _bias_head_class()))
        return _LAZY[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    from .tokenizer import BOS, EOS, PAD, CharTokenizer

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


def _quiet_progress(transformers):
    """Silence transformers' weight loading/saving progress bars (they write to stderr)."""
    import contextlib

    @contextlib.contextmanager
    def ctx():
        log = transformers.utils.logging
        was = log.is_progress_bar_enabled()
        log.disable_progress_bar()
        try:
            yield
        finally:
            if was:
                log.enable_progress_bar()

    return ctx()


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
    from .model import TinyGPT

    if not isinstance(policy, TinyGPT):
        raise ValueError(f"to_hf exports a grpo_edu.model.TinyGPT, got {type(policy).__name__}")
    cfg = policy.config
    unknown = sorted({f.name for f in fields(cfg)} - _MODEL_FIELDS)
    if unknown:
        raise ValueError(f"ModelConfig.{unknown[0]} has no known GPT-2 counterpart: teach grpo_edu.hf.to_hf")
    config_cls, cls = transformers.GPT2Config, transformers.GPT2LMHeadModel
    if cfg.head_bias:
        config_cls, cls = __getattr__("GPT2HeadBiasConfig"), __getattr__("GPT2LMHeadModelWithBias")
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
    from .model import ModelConfig, TinyGPT

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


# ------------------------------------------------------------ the task, as TRL sees it


def _problem_from_prompt(task, prompt: str):
    """``"<bos>23+58="`` -> the task's Problem (the prompt alone determines it)."""
    from .tokenizer import BOS

    text = prompt.removeprefix(BOS).removesuffix("=")
    op = next((o for o in task.ops if o in text), None)
    if op is None:
        raise ValueError(f"prompt {prompt!r} is not a problem of {task!r}")
    a, b = text.split(op)
    return task.make_problem(int(a), int(b), op)


def task_dataset(task, n: int, seed: int = 0):
    """``n`` training problems of ``task`` as a ``datasets.Dataset``: column ``prompt`` is the
    text the model sees (``"<bos>23+58="``), ``answer`` what it must write (without EOS)."""
    datasets = _require("datasets")
    from .tokenizer import BOS

    problems = task.sample(n, seed)
    return datasets.Dataset.from_dict(
        {"prompt": [BOS + p.prompt for p in problems], "answer": [p.answer for p in problems]}
    )


def reward_fn(task, kind: str = "outcome"):
    """A TRL reward function ``(prompts, completions, completion_ids=None, **kw) -> list[float]``.

    It scores exactly as the course trains: ``task.token_scores(...).sum(-1)`` on the
    completion's token ids (TRL passes ``completion_ids``, up to and including EOS), so
    ``kind="outcome"`` is ``ArithmeticTask.outcome_reward`` (a completion without EOS scores
    0; ``reward_values`` apply) and ``kind="process"`` is the fraction of the target written
    right from the start. Called with text only, it encodes the text and assumes an EOS.
    """
    if kind not in ("outcome", "process"):
        raise ValueError(f"kind must be 'outcome' or 'process', got {kind!r}")
    tok = task.tokenizer

    def reward(prompts, completions, completion_ids=None, **kwargs):
        problems = [_problem_from_prompt(task, p) for p in prompts]
        if completion_ids is None:
            completion_ids = [tok.encode(c, add_eos=True) for c in completions]
        T = max(1, max(len(c) for c in completion_ids))
        ids = torch.full((len(problems), T), tok.pad_id, dtype=torch.long)
        for i, c in enumerate(completion_ids):
            ids[i, : len(c)] = torch.as_tensor(list(c), dtype=torch.long)
        is_eos = (ids == tok.eos_id).long()
        mask = ((is_eos.cumsum(1) - is_eos) == 0).float()
        mask *= (torch.arange(T)[None] < torch.tensor([len(c) for c in completion_ids])[:, None]).float()
        return task.token_scores(problems, ids, mask, kind=kind).sum(-1).tolist()

    reward.__name__ = f"arithmetic_{kind}"
    return reward


# --------------------------------------------------------------- the knobs, one by one


class NoCounterpart(ValueError):
    """A grpo_edu knob value that TRL cannot express."""


def _no(knob, msg):
    raise NoCounterpart(f"GRPOConfig.{knob}: {msg}")


def _kl(c, approx):
    if c.kl_placement == "none" or c.beta == 0:
        return {"beta": 0.0}
    if c.kl_placement == "reward":
        _no(
            "kl_placement",
            "'reward' (beta*log-ratio inside the per-token reward) has no TRL counterpart; "
            "TRL adds beta*k3 to the loss: use kl_placement='loss'",
        )
    if c.kl_kind != "k3":
        _no("kl_estimator", f"{c.kl_kind!r} in the loss has no TRL counterpart (TRL uses k3 only)")
    return {"beta": float(c.beta), "use_bias_correction_kl": False}


def _std(c, approx):
    if c.scale_rewards == "none" or c.unbiased_std or "unbiased_std" in approx:
        return {}
    _no(
        "unbiased_std",
        "False (the derivation's 1/G std) has no TRL counterpart: TRL divides by the 1/(G-1) "
        "std; set unbiased_std=True, or pass approximate={'unbiased_std'} to accept advantages "
        "sqrt(G/(G-1)) times smaller in TRL",
    )


def _adv_eps(c, approx):
    if c.scale_rewards == "none" or math.isclose(c.adv_eps, 1e-4) or "adv_eps" in approx:
        return {}
    _no("adv_eps", f"{c.adv_eps} has no TRL counterpart (TRL divides by std + 1e-4)")


def _loss_type(c, approx):
    from .algorithms.base import LOSS_TYPES

    mode = LOSS_TYPES[c.loss_type]
    if mode == "constant" and c.max_length is None and "max_length" not in approx:
        _no(
            "max_length",
            "None with loss_type='constant' divides by each batch's longest completion; TRL's "
            "dr_grpo divides by max_completion_length: set max_length",
        )
    return {"loss_type": {"sequence_mean": "grpo", "token_mean": "bnpo", "constant": "dr_grpo"}[mode]}


def _warmup(c, approx):
    if c.warmup_steps and "warmup_steps" not in approx:
        _no(
            "warmup_steps",
            f"{c.warmup_steps}: HF's warmup starts at lr 0 (ours at lr/w), one update "
            "behind ours; pass approximate={'warmup_steps'} to accept that",
        )
    return {
        "warmup_steps": c.warmup_steps,
        "lr_scheduler_type": "constant_with_warmup" if c.warmup_steps else "constant",
    }


def _entropy(c, approx):
    if c.entropy_coef and c.temperature != 1.0 and "entropy_coef" not in approx:
        _no(
            "entropy_coef", "with temperature != 1: TRL's entropy is that of logits/temperature, ours of the raw logits"
        )
    return {"entropy_coef": float(c.entropy_coef)}


def _leave_one_out(c, approx):
    if c.leave_one_out:
        _no("leave_one_out", "True (the RLOO baseline) has no GRPOTrainer counterpart (TRL has a separate RLOOTrainer)")
    return {}


def _dynamic(c, approx):
    if c.dynamic_sampling:
        _no(
            "dynamic_sampling",
            "True (DAPO: drop groups whose rewards agree, sample more) has no GRPOTrainer counterpart",
        )
    return {}


_ROWS = [  # (ours, TRL, note, convert(config, approximate) -> TRL kwargs)
    ("group_size", "num_generations", "G samples per prompt", lambda c, a: {"num_generations": c.group_size}),
    (
        "epochs",
        "num_iterations",
        "mu; TRL reuses one shuffle of the batch for every pass, we reshuffle",
        lambda c, a: {"num_iterations": c.epochs},
    ),
    (
        "minibatches",
        "steps_per_generation",
        "optimizer steps per pass (gradient_accumulation_steps=1, "
        "per_device_train_batch_size = sequences_per_step / minibatches / GPUs)",
        lambda c, a: {"steps_per_generation": c.minibatches},
    ),
    ("eps_low", "epsilon", "lower clip range", lambda c, a: {"epsilon": float(c.eps_low)}),
    (
        "eps_high",
        "epsilon_high",
        "upper clip range; None = eps_low; > eps_low is clip-higher (DAPO)",
        lambda c, a: {"epsilon_high": None if c.eps_high is None else float(c.eps_high)},
    ),
    ("beta", "beta", "KL coefficient (with kl_placement='loss'; 0 loads no reference model in TRL)", lambda c, a: {}),
    (
        "kl_placement",
        "beta / use_bias_correction_kl=False",
        "'loss' only; 'none' -> beta 0; 'reward' has "
        "no counterpart. TRL multiplies its KL term by the ratio by default (bias correction): set off",
        _kl,
    ),
    ("kl_estimator", "-", "TRL's loss KL is k3 only (None or 'k3' map; k1, k2 do not)", lambda c, a: {}),
    (
        "scale_rewards",
        "scale_rewards",
        "'group' | 'batch' | 'none', same names",
        lambda c, a: {"scale_rewards": c.scale_rewards},
    ),
    ("unbiased_std", "-", "TRL's std is always 1/(G-1): True maps, False (1/G) does not", _std),
    ("adv_eps", "-", "TRL's eps in (r - mean)/(std + eps) is 1e-4, our default", _adv_eps),
    (
        "loss_type",
        "loss_type",
        "sequence_mean/grpo -> 'grpo'; token_mean/dapo/bnpo -> 'bnpo' (mean over "
        "the minibatch's tokens; TRL's 'dapo' divides by the generation batch's tokens / steps_per_generation); "
        "constant/dr_grpo -> 'dr_grpo'",
        _loss_type,
    ),
    (
        "max_length",
        "max_completion_length",
        "dr_grpo's constant; in TRL also the generation limit",
        lambda c, a: {} if c.max_length is None else {"max_completion_length": c.max_length},
    ),
    (
        "mask_truncated_completions",
        "mask_truncated_completions",
        "same",
        lambda c, a: {"mask_truncated_completions": c.mask_truncated_completions},
    ),
    (
        "temperature",
        "temperature",
        "sampling temperature, also applied to the training log-probs",
        lambda c, a: {"temperature": float(c.temperature)},
    ),
    ("entropy_coef", "entropy_coef", "mean token entropy bonus", _entropy),
    ("lr", "learning_rate", "AdamW, weight decay 0", lambda c, a: {"learning_rate": float(c.lr), "weight_decay": 0.0}),
    ("warmup_steps", "warmup_steps", "linear warmup then constant", _warmup),
    (
        "max_grad_norm",
        "max_grad_norm",
        "global L2 gradient clipping",
        lambda c, a: {"max_grad_norm": float(c.max_grad_norm)},
    ),
    (
        "adam_betas",
        "adam_beta1, adam_beta2",
        "AdamW betas",
        lambda c, a: {"adam_beta1": float(c.adam_betas[0]), "adam_beta2": float(c.adam_betas[1])},
    ),
    ("leave_one_out", "-", "RLOO baseline: TRL's RLOOTrainer, not GRPOTrainer", _leave_one_out),
    ("dynamic_sampling", "-", "DAPO dynamic sampling: no GRPOTrainer counterpart", _dynamic),
    ("max_resample", "-", "only used with dynamic_sampling", lambda c, a: {}),
]
KNOB_MAP = tuple((ours, trl, note) for ours, trl, note, _ in _ROWS)
"""(grpo_edu GRPOConfig field, TRL GRPOConfig field(s), note), one row per field."""

NO_COUNTERPART = (
    ("grpo_edu", "kl_placement='reward'", "the derivation's KL inside the per-token reward"),
    ("grpo_edu", "kl_estimator='k1'/'k2' in the loss", "TRL's loss KL is k3"),
    ("grpo_edu", "unbiased_std=False", "the 1/G std of the derivation; TRL uses 1/(G-1)"),
    ("grpo_edu", "adv_eps != 1e-4", "TRL's eps is fixed"),
    ("grpo_edu", "dynamic_sampling=True", "DAPO's refill of all-equal groups"),
    ("grpo_edu", "leave_one_out=True", "the RLOO baseline (TRL: RLOOTrainer)"),
    ("grpo_edu", "max_length=None with loss_type='constant'", "per-batch constant"),
    ("grpo_edu", "warmup_steps > 0", "HF's linear warmup starts at lr 0, one update behind ours"),
    ("grpo_edu", "a fresh minibatch shuffle every epoch", "TRL shuffles a generation batch once for all mu"),
    ("grpo_edu", "pi_old = the sampler's log-probs", "TRL recomputes them with a forward pass when mu > 1"),
    ("TRL", "use_bias_correction_kl=True (default)", "KL term times the ratio: a different KL gradient"),
    ("TRL", "loss_type='dapo' with minibatches > 1", "normalises by the whole generation batch's tokens"),
    ("TRL", "loss_type cispo / sapo / luspo / vespo", "other surrogates"),
    ("TRL", "importance_sampling_level='sequence'", "GSPO's sequence-level ratio"),
    ("TRL", "delta", "two-sided clipping of the ratio (INTELLECT-2)"),
    ("TRL", "top_entropy_quantile", "train only on high-entropy tokens"),
    ("TRL", "off_policy_mask_threshold", "drop off-policy negative sequences (DeepSeek-V3.2)"),
    ("TRL", "use_adaptive_entropy", "entropy coefficient control"),
    ("TRL", "sync_ref_model", "TR-DPO: move the reference towards the policy"),
    ("TRL", "reward_weights, multi_objective_aggregation", "several reward functions"),
    ("TRL", "top_p, top_k, min_p, repetition_penalty", "sampling filters (rollout.generate has top_k)"),
    ("TRL", "use_vllm, vllm_importance_sampling_*", "a serving engine and its sampler mismatch"),
)
"""Settings one side has and the other cannot express: (side, setting, note)."""

_DEFAULTS = dict(bf16=False, fp16=False, report_to="none", save_strategy="no", disable_tqdm=True,
                 gradient_accumulation_steps=1, shuffle_dataset=True, logging_steps=1,
                 remove_unused_columns=False, dataloader_pin_memory=False)  # fmt: skip


_PARITY_CHOICES = {"use_bias_correction_kl", "weight_decay", "lr_scheduler_type"}
"""TRL settings with no grpo_edu knob that the map sets to match grpo_edu; trainer_kwargs may change them."""


def _trl_defaults(trl) -> dict:
    names = trl.GRPOConfig.__dataclass_fields__
    ckpt = "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"
    return {**_DEFAULTS, ckpt: False, "output_dir": os.path.join(tempfile.gettempdir(), "grpo-edu-trl")}


def trl_config(grpo_config, sequences_per_step: int = 512, approximate=(), **trainer_kwargs):
    """Map a `grpo_edu.algorithms.GRPOConfig` to a ``trl.GRPOConfig``, knob by knob (`KNOB_MAP`).

    ``sequences_per_step`` completions per generation (prompts x group_size) on one process
    are split into ``minibatches`` optimizer steps. A knob value TRL cannot express raises
    `NoCounterpart` (a ValueError) naming the knob, unless its name is in ``approximate``
    (then the nearest TRL setting is used). ``trainer_kwargs`` set any other TRL field
    (``max_steps``, ``seed``, ``max_completion_length``, ...); one that contradicts a mapped
    knob raises, except the settings the map only chooses for parity (`_PARITY_CHOICES`:
    ``use_bias_correction_kl=False``, ``weight_decay=0``, a constant ``lr_scheduler_type``). A GRPOConfig field missing from `KNOB_MAP` raises too: nothing is dropped
    silently. Defaults for a small CPU run: fp32, no gradient checkpointing, no reporting,
    no checkpoints, output under the temp dir.
    """
    trl = _require("trl")
    from .algorithms import GRPOConfig

    if not isinstance(grpo_config, GRPOConfig):
        raise ValueError(f"trl_config maps a grpo_edu GRPOConfig, got {type(grpo_config).__name__}")
    approximate = set(approximate)
    known = {row[0] for row in _ROWS}
    for f in fields(grpo_config):
        if f.name not in known:
            raise ValueError(f"GRPOConfig.{f.name} has no row in grpo_edu.hf.KNOB_MAP: add one")
    mapped: dict = {}
    for _, _, _, convert in _ROWS:
        mapped.update(convert(grpo_config, approximate))
    if sequences_per_step % (grpo_config.minibatches * grpo_config.group_size):
        raise ValueError(f"sequences_per_step={sequences_per_step} must be a multiple of minibatches x group_size")
    mapped["per_device_train_batch_size"] = sequences_per_step // grpo_config.minibatches
    for key, value in trainer_kwargs.items():
        if key in mapped and mapped[key] != value and key not in _PARITY_CHOICES:
            raise ValueError(
                f"trl_config: {key}={value!r} contradicts the mapped value {mapped[key]!r}; "
                "change the grpo_edu knob instead"
            )
    if "max_completion_length" not in mapped and "max_completion_length" not in trainer_kwargs:
        raise ValueError(
            "trl_config needs max_completion_length (e.g. task.max_answer_length) or GRPOConfig.max_length"
        )
    kwargs = {**_trl_defaults(trl), **mapped, **trainer_kwargs}
    return trl.GRPOConfig(**kwargs)


def format_knob_map() -> str:
    """`KNOB_MAP` and `NO_COUNTERPART` as a text table."""
    w = max(len(r[0]) for r in KNOB_MAP)
    v = max(len(r[1]) for r in KNOB_MAP)
    lines = [f"{'grpo_edu':<{w}}  {'TRL':<{v}}  note"]
    lines += [f"{o:<{w}}  {t:<{v}}  {n}" for o, t, n in KNOB_MAP]
    lines += ["", "no counterpart on the other side:"]
    lines += [f"  {side:<8}  {what}: {note}" for side, what, note in NO_COUNTERPART]
    return "\n".join(lines)


# ------------------------------------------------------------ training and timing TRL


def quiet():
    """A context that silences the deprecation notices and logger advice transformers, TRL
    and the torch DataLoader print during a small CPU run (errors still raise)."""
    import contextlib
    import warnings

    transformers = _require("transformers")

    @contextlib.contextmanager
    def ctx():
        log = transformers.utils.logging
        level = log.get_verbosity()
        log.set_verbosity_error()
        with warnings.catch_warnings(), _quiet_progress(transformers):
            for category in (FutureWarning, DeprecationWarning, UserWarning):
                warnings.filterwarnings("ignore", category=category)
            os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
            try:
                yield
            finally:
                log.set_verbosity(level)

    return ctx()


def make_trainer(
    policy,
    task,
    grpo_config,
    cycles: int,
    sequences_per_step: int = 512,
    seed: int = 0,
    reward_kind: str = "outcome",
    reference=None,
    callbacks=(),
    approximate=(),
    **trainer_kwargs,
):
    """A ``trl.GRPOTrainer`` that trains an export of ``policy`` for ``cycles`` generations of
    ``sequences_per_step`` completions on fresh training problems of ``task``, with the knobs
    of ``grpo_config`` (`trl_config`). The reference model (``beta > 0``) is an export of
    ``reference`` (default: the policy), saved under a temp dir for TRL to load."""
    trl = _require("trl")
    G = grpo_config.group_size
    steps_per_cycle = grpo_config.epochs * grpo_config.minibatches
    args = trl_config(
        grpo_config,
        sequences_per_step=sequences_per_step,
        approximate=approximate,
        **{
            "max_steps": cycles * steps_per_cycle,
            "seed": seed,
            "max_completion_length": task.max_answer_length,
            **trainer_kwargs,
        },
    )
    with quiet():
        ref_dir = tempfile.mkdtemp(prefix="grpo-edu-ref-")  # removed with the trainer
        to_hf(reference if reference is not None else policy, ref_dir)
        model, tok = to_hf(policy)
        model.config._name_or_path = ref_dir  # TRL builds pi_ref from here
        data = task_dataset(task, cycles * sequences_per_step // G, seed)
        trainer = trl.GRPOTrainer(
            model=model,
            processing_class=tok,
            reward_funcs=reward_fn(task, reward_kind),
            train_dataset=data,
            args=args,
            callbacks=list(callbacks),
        )
    trainer.remove_callback(_require("transformers").PrinterCallback)  # logs stay in state.log_history
    weakref.finalize(trainer, shutil.rmtree, ref_dir, True)
    return trainer


_TRL_METRICS = {
    "reward": "reward",
    "reward_std": "reward_std",
    "kl": "kl",
    "entropy": "entropy",
    "clip_ratio/region_mean": "clip_ratio",
    "completions/mean_length": "completion_length",
    "frac_reward_zero_std": "frac_reward_zero_std",
    "grad_norm": "grad_norm",
    "loss": "loss",
}


def train_trl(
    policy,
    task,
    grpo_config,
    cycles: int,
    sequences_per_step: int = 512,
    seed: int = 0,
    eval_every: int = 5,
    reward_kind: str = "outcome",
    reference=None,
    name: str = "TRL GRPO",
    **trainer_kwargs,
):
    """Train with TRL's GRPOTrainer and record a `grpo_edu.train.History` like `grpo_edu.train`:
    greedy held-out accuracy (``evaluate`` on the model imported back with `from_hf`) every
    ``eval_every`` cycles, training seconds without evaluation, TRL's logged metrics under
    the course's names. Returns ``(history, trainer)``."""
    transformers = _require("transformers")
    from .evaluation import evaluate
    from .train import History

    per_cycle = grpo_config.epochs * grpo_config.minibatches
    hist = History(
        name, {"algorithm": "trl-grpo", **grpo_config.to_dict(), "sequences_per_step": sequences_per_step, "seed": seed}
    )
    clock = {"train": 0.0, "mark": None}

    def record(step):
        t0 = time.perf_counter()
        acc = evaluate(from_hf(trainer.model), task)
        hist.evals.append(
            {"step": step, "samples": step * sequences_per_step, "seconds": clock["train"], "accuracy": acc}
        )
        return time.perf_counter() - t0

    class Eval(transformers.TrainerCallback):
        def on_train_begin(self, args, state, control, **kw):
            record(0)
            clock["mark"] = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            if state.global_step % per_cycle:
                return
            now = time.perf_counter()
            clock["train"] += now - clock["mark"]
            cycle = state.global_step // per_cycle
            if cycle % eval_every == 0 or cycle == cycles:
                record(cycle)
            clock["mark"] = time.perf_counter()

    trainer = make_trainer(
        policy,
        task,
        grpo_config,
        cycles,
        sequences_per_step,
        seed,
        reward_kind,
        reference,
        callbacks=[Eval()],
        **trainer_kwargs,
    )
    with quiet():
        trainer.train()
    steps: dict[int, dict] = {}
    for log in trainer.state.log_history:
        if "step" not in log or "train_runtime" in log:
            continue
        cycle = (log["step"] - 1) // per_cycle + 1
        rec = steps.setdefault(cycle, {"step": cycle, "samples": cycle * sequences_per_step})
        for k, ours in _TRL_METRICS.items():
            if k in log and ours not in rec:
                rec[ours] = float(log[k])
    hist.steps = [steps[k] for k in sorted(steps)]
    return hist, trainer


def _timed(obj, name: str, acc: dict, key: str):
    """Wrap the bound method ``obj.name`` so that its seconds add up in ``acc[key]``."""
    raw = getattr(obj, name)

    def wrapper(*a, **k):
        t0 = time.perf_counter()
        try:
            return raw(*a, **k)
        finally:
            acc[key] += time.perf_counter() - t0

    setattr(obj, name, wrapper)


def _bench_setting(policy, task, cfg, sequences_per_step, repeats, seed):
    """One (epochs, minibatches) setting of `bench_trl`: lists of per-cycle timings.

    Long on purpose: both trainers' cycles are timed in one function, side by side and
    interleaved, so that the same machine noise falls on both (split, the comparison would
    read across two places)."""
    import copy

    import numpy as np

    transformers = _require("transformers")
    from .algorithms import make_algorithm
    from .rollout import expand, generate

    per_cycle = cfg.epochs * cfg.minibatches
    acc = {"sample": 0.0, "reward": 0.0, "prep": 0.0, "mark": 0.0}
    t_trl = []

    def grpo_edu_cycles(share: bool):
        """A function that runs and times one grpo_edu cycle; ``share``: run each prompt once
        (generation and teacher forcing), the library's default; False: the ablation."""
        algo = make_algorithm("grpo", **cfg.to_dict())
        algo.share_prompts = share
        algo.setup(copy.deepcopy(policy), policy, generator=torch.Generator().manual_seed(seed + 1))
        gen, rng, clock, times = torch.Generator().manual_seed(seed), np.random.default_rng(seed), {"prep": 0.0}, []
        _timed(algo, "prepare", clock, "prep")

        def cycle():
            clock["prep"] = 0.0
            t0 = time.perf_counter()
            problems = task.sample(sequences_per_step // cfg.group_size, rng)
            ro = generate(
                algo.policy,
                task.encode_prompts(problems),
                group_size=cfg.group_size,
                max_new_tokens=task.max_answer_length,
                temperature=cfg.temperature,
                generator=gen,
                share_prompts=share,
            )
            t1 = time.perf_counter()
            scores = task.token_scores(expand(problems, cfg.group_size), ro.completion_ids, ro.mask)
            t2 = time.perf_counter()
            algo.update(ro, scores)
            t3 = time.perf_counter()
            times.append(
                {"total": t3 - t0, "sample": t1 - t0, "reward": t2 - t1, "prep": clock["prep"],
                 "update": t3 - t2 - clock["prep"]}
            )  # fmt: skip

        return cycle, times

    ours_cycle, t_ours = grpo_edu_cycles(True)
    unshared_cycle, t_unshared = grpo_edu_cycles(False)

    class Alternate(transformers.TrainerCallback):
        def on_train_begin(self, args, state, control, **kw):
            acc["mark"] = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            if state.global_step % per_cycle:
                return
            total = time.perf_counter() - acc["mark"]
            t_trl.append(
                {
                    "total": total,
                    "sample": acc["sample"],
                    "reward": acc["reward"],
                    "prep": acc["prep"] - acc["sample"] - acc["reward"],
                    "update": total - acc["prep"],
                }
            )
            ours_cycle()  # side by side: one grpo_edu cycle after each TRL cycle, outside TRL's clock
            unshared_cycle()
            acc.update(sample=0.0, reward=0.0, prep=0.0, mark=time.perf_counter())

    trainer = make_trainer(
        policy, task, cfg, repeats + 1, sequences_per_step, seed, callbacks=[Alternate()], logging_steps=per_cycle
    )
    _timed(trainer, "_generate_single_turn", acc, "sample")
    _timed(trainer, "_calculate_rewards", acc, "reward")
    _timed(trainer, "_generate_and_score_completions", acc, "prep")
    with quiet():
        trainer.train()
    return {"grpo_edu": t_ours, "trl": t_trl, "grpo_edu_unshared": t_unshared}


def bench_trl(
    policy=None,
    task=None,
    grpo_config=None,
    sequences_per_step: int = 512,
    settings=((1, 1), (2, 2)),
    repeats: int = 5,
    seed: int = 0,
    threads: int | None = 1,
    preset="cpu",
) -> dict:
    """Seconds per GRPO cycle (sample ``sequences_per_step`` completions + update), grpo_edu
    vs TRL's GRPOTrainer, on the same model (TRL trains its export) and the same knobs
    (``grpo_config``, default ``GRPOConfig(unbiased_std=True)``; the cpu preset's task and
    reference policy by default).

    ``settings`` are (epochs, minibatches) pairs: (1, 1) is mu = 1, (2, 2) the course's
    default. They run side by side: after each TRL cycle (a trainer callback) one grpo_edu
    cycle runs, outside TRL's clock, then one of grpo_edu with ``share_prompts=False`` (every
    row runs its own copy of the prompt, as TRL does: the ablation of the one design
    difference that is not a knob); the first cycle of each is warm-up; each number is the
    median of ``repeats``. A cycle is split into ``sample`` (generation), ``reward`` (the
    same reward, ``task.token_scores``), ``prep`` (advantages and the no-grad log-probs of
    pi_ref and, in TRL with mu > 1, of pi_old; in TRL also the decoding of the completions
    to text, padding and metrics) and ``update`` (the rest: forward/backward/optimizer
    steps and the trainer's bookkeeping).
    """
    from .algorithms import GRPOConfig
    from .presets import make_task, resolve_preset
    from .reference import reference_policy

    preset = resolve_preset(preset)

    old_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        task = task if task is not None else make_task(preset)
        if policy is None:
            policy = reference_policy(preset, task=task, progress=False)
        base = grpo_config or GRPOConfig(unbiased_std=True)
        rows = []
        for epochs, minibatches in settings:
            cfg = type(base)(**{**base.to_dict(), "epochs": epochs, "minibatches": minibatches})
            runs = _bench_setting(policy, task, cfg, sequences_per_step, repeats, seed)
            med = {who: {k: statistics.median(r[k] for r in t[1:]) for k in t[0]} for who, t in runs.items()}
            rows.append(
                {
                    "epochs": epochs,
                    "minibatches": minibatches,
                    **med,
                    "ratio": med["grpo_edu"]["total"] / med["trl"]["total"],
                    "ratio_unshared": med["grpo_edu_unshared"]["total"] / med["trl"]["total"],
                    "cycles": len(runs["trl"]) - 1,
                }
            )
        return {
            "settings": rows,
            "threads": torch.get_num_threads(),
            "sequences_per_step": sequences_per_step,
            "group_size": base.group_size,
            "beta": base.beta,
            "versions": {m: _require(m).__version__ for m in ("trl", "transformers", "torch")},
        }
    finally:
        torch.set_num_threads(old_threads)


def format_bench_trl(result: dict) -> str:
    """The `bench_trl` result as a text table (seconds per cycle, 4 decimals)."""
    r = result
    lines = [
        f"seconds per GRPO cycle ({r['sequences_per_step']} completions, G={r['group_size']}, "
        f"beta={r['beta']}), median of {r['settings'][0]['cycles']}, {r['threads']} thread(s); "
        f"trl {r['versions']['trl']}, transformers {r['versions']['transformers']}, "
        f"torch {r['versions']['torch']}",
        f"{'setting':<31}{'cycle s':>9}{'sample':>9}{'reward':>9}{'prep':>9}{'update':>9}",
    ]
    for row in r["settings"]:
        name = "mu=1" if row["epochs"] == row["minibatches"] == 1 else f"{row['epochs']} ep x {row['minibatches']} mb"
        for who, label in (("grpo_edu", "grpo_edu"), ("grpo_edu_unshared", "grpo_edu unshared"), ("trl", "trl")):
            d = row[who]
            lines.append(
                f"{name + ' ' + label:<31}"
                + "".join(f"{d[k]:>9.4f}" for k in ("total", "sample", "reward", "prep", "update"))
            )
        lines.append(f"{name + ' grpo_edu / TRL':<31}{row['ratio']:>9.4f}")
        lines.append(f"{name + ' grpo_edu unshared / TRL':<31}{row['ratio_unshared']:>9.4f}")
    return "\n".join(lines)
