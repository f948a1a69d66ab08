"""A kept run: what ``grpo-edu train --out DIR`` writes, and ``grpo-edu sample --from DIR`` reads.

DIR/config.toml     the resolved run (algo, preset, world, seed, steps and every config field):
                    ``grpo-edu train --config DIR/config.toml`` repeats it to the same numbers
DIR/metrics.jsonl   one JSON line per RL step, the names of train.py's History
                    (reward, reward_std, kl, entropy, clip_ratio, completion_length, grad_norm, ...)
DIR/evals.jsonl     one JSON line per held-out evaluation (step, samples, seconds, accuracy)
DIR/policy.pt       the final policy (atomic write; loads with ``weights_only=True``)
DIR/events.out.tfevents.*   the same metrics for TensorBoard, when ``tensorboard`` is installed
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from ..warmstart.checkpoint import load_policy, save_policy, write_text_atomic
from .config_io import write_config

FILES = ("config.toml", "metrics.jsonl", "evals.jsonl", "policy.pt")
TENSORBOARD_NOTE = (
    "no TensorBoard events: tensorboard is not installed (pip install tensorboard, or the [tensorboard] extra)"
)


def _jsonl(rows) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def keep_run(out, run: dict, config: dict, history, policy, task, header: str = "") -> tuple[list[str], str | None]:
    """Write the run to ``out`` (every file replaced atomically); returns the paths it wrote, and
    a one-line note when TensorBoard events could not be written (None when they were)."""
    out = Path(out)
    write_config(out / "config.toml", run, config, header)
    write_text_atomic(out / "metrics.jsonl", _jsonl(history.steps))
    write_text_atomic(out / "evals.jsonl", _jsonl(history.evals))
    info = {"algo": run.get("algo"), "steps": len(history.steps), "final_accuracy": history.final_accuracy}
    save_policy(out / "policy.pt", policy, task, **info)
    wrote = [str(out / f) for f in FILES]
    if importlib.util.find_spec("tensorboard") is None:
        return wrote, TENSORBOARD_NOTE
    from torch.utils.tensorboard import SummaryWriter

    for old in out.glob("events.out.tfevents.*"):  # the run it replaces
        old.unlink()
    with SummaryWriter(log_dir=str(out)) as w:
        for s in history.steps:
            for k, v in s.items():
                if k != "step" and isinstance(v, (int, float)):
                    w.add_scalar(f"train/{k}", v, s["step"])
        for e in history.evals:
            w.add_scalar("eval/accuracy", e["accuracy"], e["step"])
    return [*wrote, *map(str, sorted(out.glob("events.out.tfevents.*")))], None


def sample_from(run_dir, n: int = 10, seed: int = 0, temperature: float = 0.0, device: str = "cpu") -> dict:
    """Load ``run_dir``'s policy, answer ``n`` held-out problems (chosen by ``seed``; greedy at
    temperature 0, else sampled), and say which answers are right."""
    import numpy as np
    import torch

    from ..rollout import generate

    path = Path(run_dir) / "policy.pt"
    if not path.is_file():
        raise FileNotFoundError(f"no policy in {run_dir}: expected {path} (written by grpo-edu train --out DIR)")
    policy, task, state = load_policy(path, device)
    pool = task.eval_problems()
    pick = np.random.default_rng(seed).choice(len(pool), size=min(n, len(pool)), replace=False)
    problems = [pool[i] for i in pick]
    generator = torch.Generator(device=device).manual_seed(seed)
    with torch.no_grad():
        ro = generate(policy, task.encode_prompts(problems).to(device), max_new_tokens=task.max_answer_length,
                      temperature=temperature, generator=generator, tokenizer=task.tokenizer)  # fmt: skip
    right = task.rewards(problems, ro.texts, terminated=(~ro.truncated).tolist())
    rows = [
        {"prompt": p.prompt, "answer": text, "expected": p.answer, "right": bool(r > 0)}
        for p, text, r in zip(problems, ro.texts, right.tolist())
    ]
    return {"path": str(path), "rows": rows, "accuracy": sum(r["right"] for r in rows) / len(rows),
            "temperature": temperature, "seed": seed, "info": {k: state.get(k) for k in ("algo", "steps", "final_accuracy")}}  # fmt: skip


def format_samples(res: dict) -> str:
    info = res["info"]
    lines = [f"policy {res['path']} ({info['algo']}, {info['steps']} RL steps)"]
    lines.append(f"{'prompt':<12} {'answer':<8} {'expected':<8} right?")
    lines += [
        f"{r['prompt']:<12} {r['answer']:<8} {r['expected']:<8} {'right' if r['right'] else 'wrong'}"
        for r in res["rows"]
    ]
    how = "greedy" if res["temperature"] == 0 else f"sampled at temperature {res['temperature']:g}"
    k = sum(r["right"] for r in res["rows"])
    lines.append(
        f"accuracy {k}/{len(res['rows'])} = {res['accuracy']:.3f} ({how}, held-out problems, seed {res['seed']})"
    )
    return "\n".join(lines)
