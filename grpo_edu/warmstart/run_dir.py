"""A kept run's folder: what ``grpo-edu train --out DIR`` (and a study such as
`grpo_edu.studies.gpu_curve`) writes as it trains, and what ``grpo-edu sample --from DIR`` reads.

DIR/config.toml     the resolved run (algo, preset, world, seed, steps and every config field):
                    ``grpo-edu train --config DIR/config.toml`` repeats it to the same numbers
DIR/metrics.jsonl   one JSON line per RL step as it trains, the names of train.py's History
                    (reward, reward_std, kl, entropy, clip_ratio, completion_length, grad_norm, ...)
DIR/evals.jsonl     one JSON line per held-out evaluation (step, samples, seconds, accuracy)
DIR/policy.pt       the final policy (atomic write; loads with ``weights_only=True``)
DIR/events.out.tfevents.*   the same metrics for TensorBoard, when ``tensorboard`` is installed
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from .checkpoint import load_policy, save_policy, write_text_atomic

FILES = ("config.toml", "metrics.jsonl", "evals.jsonl", "policy.pt")
TENSORBOARD_NOTE = (
    "no TensorBoard events: tensorboard is not installed (pip install tensorboard, or the [tensorboard] extra)"
)


def _toml(value) -> str:
    if value is None:
        return '"none"'
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(str(value))


def write_config(path, run: dict, config: dict, header: str = "") -> Path:
    """The resolved run as flat TOML (``run``: the verb's settings, ``config``: every field of the
    algorithm's config), atomically; ``grpo-edu train --config`` reads it back to the same run
    (`grpo_edu.command.config_io.read_config_file`)."""
    lines = [f"# {line}" for line in header.splitlines()]
    lines += [f"{k} = {_toml(v)}" for k, v in run.items()]
    lines += ["", "# the algorithm's config: every field, each also a flag --<name>"]
    lines += [f"{k} = {_toml(v)}" for k, v in config.items()]
    return write_text_atomic(path, "\n".join(lines) + "\n")


class RunLog:
    """``train(..., callback=log)`` streams the run to ``out`` as it trains: config.toml first (atomic),
    then a line of metrics.jsonl (and of evals.jsonl, and TensorBoard scalars) after each step,
    flushed, so ``tail -f`` and ``tensorboard --logdir`` follow it; `close` writes the last
    evaluation and the policy (atomic). A run written again into the same folder replaces it."""

    def __init__(self, out, run: dict, config: dict, header: str = ""):
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        write_config(self.out / "config.toml", run, config, header)
        self.run, self.n_evals, self.tb, self.note = run, 0, None, TENSORBOARD_NOTE
        self.metrics = open(self.out / "metrics.jsonl", "w")  # noqa: SIM115 (closed by close())
        self.evals = open(self.out / "evals.jsonl", "w")  # noqa: SIM115
        for old in self.out.glob("events.out.tfevents.*"):  # the run it replaces
            old.unlink()
        if importlib.util.find_spec("tensorboard") is not None:
            from torch.utils.tensorboard import SummaryWriter

            self.tb, self.note = SummaryWriter(log_dir=str(self.out)), None

    def _new_evals(self, history) -> None:
        for e in history.evals[self.n_evals :]:
            self.evals.write(json.dumps(e) + "\n")
            if self.tb is not None:
                self.tb.add_scalar("eval/accuracy", e["accuracy"], e["step"])
        self.n_evals = len(history.evals)
        self.evals.flush()

    def __call__(self, info) -> None:  # train()'s callback: a StepInfo after each step
        self.metrics.write(json.dumps(info.metrics) + "\n")
        self.metrics.flush()
        if self.tb is not None:
            for k, v in info.metrics.items():
                if k != "step" and isinstance(v, (int, float)):
                    self.tb.add_scalar(f"train/{k}", v, info.step)
        self._new_evals(info.history)

    def close(self, history, policy, task) -> tuple[list[str], str | None]:
        """The evaluations not written yet and the final policy; returns the paths written, and a
        one-line note when no TensorBoard events could be (None when they were)."""
        self._new_evals(history)
        self.metrics.close()
        self.evals.close()
        if self.tb is not None:
            self.tb.close()
        info = {"algo": self.run.get("algo"), "steps": len(history.steps), "final_accuracy": history.final_accuracy}
        save_policy(self.out / "policy.pt", policy, task, **info)
        events = sorted(self.out.glob("events.out.tfevents.*"))
        return [str(self.out / f) for f in FILES] + [str(e) for e in events], self.note


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
        {"prompt": p.prompt, "answer": text, "expected": p.answer, "value": p.value, "right": bool(r > 0)}
        for p, text, r in zip(problems, ro.texts, right.tolist())
    ]
    return {"path": str(path), "rows": rows, "accuracy": sum(r["right"] for r in rows) / len(rows),
            "temperature": temperature, "seed": seed, "reversed": bool(getattr(task, "reverse", False)),
            "info": {k: state.get(k) for k in ("algo", "steps", "final_accuracy")}}  # fmt: skip
