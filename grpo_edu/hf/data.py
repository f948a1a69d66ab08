"""The arithmetic task as TRL sees it: a dataset of prompts and a reward function."""

from __future__ import annotations

import torch

from ._common import _require


def _problem_from_prompt(task, prompt: str):
    """``"<bos>23+58="`` -> the task's Problem (the prompt alone determines it)."""
    from ..tokenizer import BOS

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
    from ..tokenizer import BOS

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
