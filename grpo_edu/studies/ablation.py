"""Why RL from one reference learns fast and from another slowly: one difference at a time.

`grpo-edu ablate` trains, for every row and every seed, a reference policy (SFT) and then
REINFORCE and GRPO from it for the same number of steps, and prints held-out greedy accuracy
after ``steps`` steps as mean [min, max] over seeds. The first row is the library's
defaults; every other row changes exactly one setting to a common alternative (a tied head,
torch's AdamW defaults, a loss summed over tokens, a reference trained to convergence on few
labels, ...), so each row's distance from the first is the effect of that one setting; the
last two change several at once. The seed sets the SFT initialisation,
the SFT data and the RL sampling together: measured, the reference dominates the spread
(three RL seeds from one reference land within a few points of each other; three
references do not).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from ..algorithms import make_algorithm
from ..train import train
from ..warmstart.presets import make_task, resolve_preset, setup_torch
from ..warmstart.reference import reference_policy


@dataclass(frozen=True)
class Variant:
    """One row of the ablation: a name, the one difference in words, and the overrides."""

    name: str
    what: str
    model: dict = field(default_factory=dict)  # ModelConfig overrides
    sft: dict = field(default_factory=dict)  # SFTConfig overrides (the reference)
    rl: dict = field(default_factory=dict)  # config overrides for every algorithm
    grpo: dict = field(default_factory=dict)  # config overrides for GRPO only
    share_prompts: bool = True  # False: every row runs its own copy of its prompt (train's share_prompts)


LABELLED_300 = dict(n_examples=300, target_accuracy=1.0, max_steps=300, eval_every=50)
OLD_SFT = dict(grad_clip=1.0, adam_betas=(0.9, 0.999), weight_decay=0.01, **LABELLED_300)
OLD_MODEL = dict(tie_embeddings=True, scaled_residual_init=True)

ROWS = (
    Variant("defaults", "the library's defaults"),
    Variant(
        "prompts not shared",
        "every row runs its own copy of its prompt (train(share_prompts=False)): the same math, other rounding",
        share_prompts=False,
    ),
    Variant("tied head", "output head = token embedding (tied)", model=dict(tie_embeddings=True)),
    Variant("head bias", "untied head with a bias", model=dict(head_bias=True)),
    Variant(
        "scaled residual init",
        "GPT-2's 0.02/sqrt(2L) init of residual projections",
        model=dict(scaled_residual_init=True),
    ),
    Variant("SFT grad clip 1.0", "SFT clips the gradient norm at 1.0", sft=dict(grad_clip=1.0)),
    Variant("SFT weight decay", "SFT AdamW weight decay 0.01 (torch's default)", sft=dict(weight_decay=0.01)),
    Variant("SFT betas .999", "SFT AdamW betas (0.9, 0.999) (torch's default)", sft=dict(adam_betas=(0.9, 0.999))),
    Variant("RL betas .99", "RL AdamW betas (0.9, 0.99)", rl=dict(adam_betas=(0.9, 0.99))),
    Variant(
        "loss sum/B",
        "per-token losses summed over tokens / B",
        rl=dict(loss_type="constant", max_length=1),
    ),
    Variant(
        "GRPO sequence_mean",
        "GRPO loss: mean per completion, then over completions",
        grpo=dict(loss_type="sequence_mean"),
    ),
    Variant("GRPO std 1/(G-1)", "group std with Bessel's correction", grpo=dict(unbiased_std=True)),
    Variant("SFT to 30%", "reference stopped at 30% greedy held-out accuracy", sft=dict(target_accuracy=0.3)),
    Variant("300 labels", "reference = SFT to convergence on 300 labelled problems", sft=LABELLED_300),
    Variant(
        "five slow settings",
        "five of the alternatives at once (head bias, SFT to 30%, RL betas .99, sum/B, 1/(G-1))",
        model=dict(head_bias=True),
        sft=dict(target_accuracy=0.3),
        rl=dict(adam_betas=(0.9, 0.99), loss_type="constant", max_length=1),
        grpo=dict(unbiased_std=True),
    ),
    Variant(
        "tied + 300 labels",
        "tied head, scaled init, 300 labels with SFT clip, decay and betas .999, GRPO sequence_mean, at once",
        model=OLD_MODEL,
        sft=OLD_SFT,
        grpo=dict(loss_type="sequence_mean"),
    ),
)


def run_variant(variant: Variant, preset, task, seed: int, steps: int, algorithms, progress: bool) -> dict:
    """One reference (SFT seed ``seed``) and one RL run per algorithm from it."""
    model = replace(preset.model, **variant.model)
    sft = replace(preset.sft, seed=seed, **variant.sft)
    ref, info = reference_policy(
        task=task, model_config=model, sft_config=sft, device=preset.device, progress=progress, return_info=True
    )
    out = {"seed": seed, "reference_accuracy": info["accuracy"], "sft_steps": info["steps"]}
    for name in algorithms:
        config = {**variant.rl, **(variant.grpo if name == "grpo" else {})}
        algo, label = make_algorithm(name, **config), f"{variant.name} / {name}"
        h = train(algo, task, ref, preset=preset, steps=steps, seed=seed, progress=progress, name=label,
                  share_prompts=variant.share_prompts)  # fmt: skip
        out[name] = {
            "final_accuracy": h.final_accuracy,
            "steps_to_90": h.first_reaching(0.9, "step"),
            "curve": [round(e["accuracy"], 4) for e in h.evals],
        }
    return out


def run_ablation(
    preset="cpu", rows=ROWS, seeds=(0, 1, 2), steps: int = 60, algorithms=("reinforce", "grpo"), progress: bool = True
) -> dict:
    """Every row x seed: a reference, then each algorithm for ``steps`` steps from it."""
    preset = resolve_preset(preset)
    setup_torch(preset, 0)
    task = make_task(preset)
    t0 = time.perf_counter()
    result = {
        "preset": preset.name,
        "steps": steps,
        "seeds": list(seeds),
        "algorithms": list(algorithms),
        "sequences_per_step": preset.sequences_per_step,
        "rows": [],
    }
    for v in rows:
        runs = [run_variant(v, preset, task, s, steps, algorithms, progress) for s in seeds]
        result["rows"].append({"name": v.name, "what": v.what, "runs": runs})
    result["seconds"] = time.perf_counter() - t0
    return result
