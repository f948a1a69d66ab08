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

The package, one concern per module: `export` (the model and tokenizer), `data` (dataset
and reward), `names` (TRL's loss names and the one translation to grpo_edu's knobs), `knobs` (the
config map), `trainer` (GRPOTrainer runs), `launch` (several processes), `rank_parity` (N ranks
against one), `bench` (speed), `_common` (the optional imports).
"""

from ._common import INSTALL, MissingExtraError, missing_extra, quiet, require_extra
from .bench import bench_trl, format_bench_trl
from .data import reward_fn, task_dataset
from .export import from_hf, hf_tokenizer, to_hf
from .knobs import KNOB_MAP, NO_COUNTERPART, NoCounterpart, format_knob_map, trl_config
from .names import TRL_LOSS_TYPES, from_trl
from .trainer import make_trainer, train_trl

__all__ = [
    "INSTALL", "KNOB_MAP", "MissingExtraError", "NO_COUNTERPART", "NoCounterpart", "bench_trl", "format_bench_trl",
    "format_knob_map", "from_hf", "hf_tokenizer", "make_trainer", "missing_extra", "quiet", "require_extra",
    "reward_fn", "task_dataset", "to_hf", "train_trl", "trl_config", "TRL_LOSS_TYPES", "from_trl",
]  # fmt: skip


def __getattr__(name):  # PEP 562: the head-bias classes are built on first use
    if name in ("GPT2HeadBiasConfig", "GPT2LMHeadModelWithBias"):
        from .export import head_bias_classes

        return head_bias_classes()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
