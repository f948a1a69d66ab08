"""Greedy held-out accuracy: the number every learning curve in the course plots."""

from __future__ import annotations

import torch

from .rollout import generate


@torch.no_grad()
def evaluate(
    policy,
    task,
    problems=None,
    batch_size: int = 1000,
    return_correct: bool = False,
    temperature: float = 0.0,
    seed: int = 0,
    return_completions: bool = False,
):
    """Exact-match accuracy of ``policy`` on ``task``'s held-out problems.

    ``accuracy = (1/N) sum_n 1[completion of q_n == answer_n]`` over the fixed held-out set
    ``task.eval_problems()`` (or ``problems``). ``temperature=0`` (default) decodes greedily:
    the number every learning curve plots. ``temperature=1`` samples as RL does (seeded by
    ``seed``): the *sampled* accuracy, the success rate the policy gradient actually sees.
    With ``return_correct`` also returns the per-problem 0/1 tensor; with ``return_completions``
    returns ``(accuracy, correct, completions)``, the completions the texts the policy wrote.
    """
    problems = task.eval_problems() if problems is None else problems
    if not problems:
        raise ValueError("evaluate needs at least one problem")
    correct, texts = [], []
    generator = None
    if temperature > 0:
        generator = torch.Generator(device=next(policy.parameters()).device).manual_seed(seed)
    for i in range(0, len(problems), batch_size):
        chunk = problems[i : i + batch_size]
        ro = generate(
            policy,
            task.encode_prompts(chunk),
            max_new_tokens=task.max_answer_length,
            temperature=temperature,
            generator=generator,
            tokenizer=task.tokenizer,
        )
        correct.append(task.rewards(chunk, ro.texts, terminated=(~ro.truncated).tolist()))
        texts += ro.texts
    correct = torch.cat(correct)
    acc = int(correct.sum()) / len(correct)  # exact (a float32 mean makes 450/500 = 0.89999998)
    if return_completions:
        return acc, correct, texts
    return (acc, correct) if return_correct else acc
