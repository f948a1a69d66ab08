"""Helpers the measurements share: progress bars, seeded generators, flat gradients."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import torch


def progress_bar(iterable, progress: bool, desc: str):
    """``tqdm`` over ``iterable`` (nothing shown when ``progress`` is False)."""
    from ..progress import progress_bar as tqdm

    return tqdm(iterable, desc=desc, disable=not progress, leave=False)


def rngs(seed: int, device):
    """A numpy Generator (problems) and a torch Generator on ``device`` (sampling), both seeded."""
    return np.random.default_rng(seed), torch.Generator(device=device).manual_seed(seed)


@contextmanager
def trainable(model):
    """The parameters, requiring grad inside the block (a reference may have them frozen)."""
    params = list(model.parameters())
    saved = [p.requires_grad for p in params]
    try:
        yield [p.requires_grad_(True) for p in params]
    finally:
        for p, s in zip(params, saved, strict=True):
            p.requires_grad_(s)


def flat_grad(output, params, retain_graph=False) -> torch.Tensor:
    """d output / d params as one flat vector (zeros for unused parameters)."""
    gs = torch.autograd.grad(output, params, retain_graph=retain_graph, allow_unused=True)
    return torch.cat([(torch.zeros_like(p) if g is None else g).flatten() for g, p in zip(gs, params, strict=True)])


def spread(values, spec=".4f") -> str:
    """``mean [min, max]`` of a list (one value: just the value)."""
    vals = [v for v in values if v is not None]
    if len(vals) == 1:
        return format(vals[0], spec)
    return f"{format(sum(vals) / len(vals), spec)} [{format(min(vals), spec)}, {format(max(vals), spec)}]"


def reach(values, spec="d") -> str:
    """``min-max`` over seeds of where a target was first reached; ``never`` / ``k of n seeds``."""
    hit = [v for v in values if v is not None]
    if not hit:
        return "never"
    text = format(min(hit), spec) if min(hit) == max(hit) else f"{format(min(hit), spec)}-{format(max(hit), spec)}"
    return text if len(hit) == len(values) else f"{text} ({len(hit)}/{len(values)})"


def plain(x):
    """``x`` with numpy and torch numbers and arrays as Python numbers and lists, dicts, lists and tuples
    kept: a result that JSON can store (`grpo_edu.studies.stored_runs`)."""
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(plain(v) for v in x)
    if isinstance(x, (np.ndarray, np.generic, torch.Tensor)):
        return x.tolist()
    return x
