"""A learned reward model r_phi, and a task that pays its proxy reward: a reward that can be gamed.

The exact checker of the arithmetic task cannot be gamed. A learned reward model can, and
that is the seed's reason for the KL penalty ("reward hacking: generating gibberish that
scores high"). Here is one, small and imperfect by construction:

    labels    (q, a, y = 1[a is the right answer])   a sampled at temperature 1 from pi_ref
    r_phi     an MLP on one-hot tokens (prompt and completion, position by position)
    loss      binary cross-entropy of sigmoid(r_phi(q, a)) against y
    proxy     R_proxy(q, a) = sigmoid(r_phi(q, a)), paid at the last completion token

An MLP on one-hot positions cannot add: it learns which answers *look* right to it near the
reference's samples, so it is right on most of them (most are wrong, and look it) and wrong
where the policy has never been. RL moves the policy to where it has never been.

    rm, info = train_reward_model(reference, task, RewardModelConfig(n_labels=16384))
    proxy = ProxyTask(task, rm)          # train(algorithm, task=proxy): RL against r_phi
    # evaluate(policy, proxy) is still the exact (gold) accuracy: only training sees r_phi
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn

from ..rollout import sample_batch


@dataclass
class RewardModelConfig:
    n_labels: int = 16384  # labelled samples drawn from the reference (prompts x 1 at temperature 1)
    hidden: int = 128  # width of the MLP's two hidden layers
    epochs: int = 30  # passes over the training labels
    lr: float = 1e-3  # Adam learning rate
    batch_size: int = 256  # labels per Adam step
    val_frac: float = 0.1  # share of the labels held out to measure r_phi's accuracy
    temperature: float = 1.0  # sampling temperature of the labelled completions
    seed: int = 0  # sampling of the labels, the split, the initialisation and the batches

    def __post_init__(self):
        for name, lo in (("n_labels", 2), ("hidden", 1), ("epochs", 1), ("batch_size", 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"RewardModelConfig.{name} must be an integer >= {lo}, got {v!r}")
        for name in ("lr", "temperature"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise ValueError(f"RewardModelConfig.{name} must be a number > 0, got {v!r}")
        if isinstance(self.val_frac, bool) or not isinstance(self.val_frac, (int, float)) or not 0 < self.val_frac < 1:
            raise ValueError(f"RewardModelConfig.val_frac must be in (0, 1), got {self.val_frac!r}")


class RewardModel(nn.Module):
    """r_phi(q, a): one logit per (prompt, completion), from one-hot tokens.

    x = [onehot(q_1) .. onehot(q_P), onehot(a_1) * m_1 .. onehot(a_L) * m_L]   (P + L) x V
    r_phi = W3 relu(W2 relu(W1 x))                                              a scalar

    with ``m_t`` the completion mask (tokens after EOS contribute nothing) and ``L`` the
    task's ``max_answer_length`` (shorter completions are padded with zeros).
    """

    def __init__(self, prompt_length: int, answer_length: int, vocab_size: int, hidden: int = 128):
        super().__init__()
        self.prompt_length, self.answer_length, self.vocab_size = prompt_length, answer_length, vocab_size
        self.net = nn.Sequential(
            nn.Linear((prompt_length + answer_length) * vocab_size, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, 1),
        )

    def features(self, prompt_ids: torch.Tensor, completion_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``x`` above, ``[B, (P + L) V]`` (completions cut or zero-padded to ``L`` tokens)."""
        B, P, L, V = prompt_ids.shape[0], self.prompt_length, self.answer_length, self.vocab_size
        if prompt_ids.shape != (B, P):
            raise ValueError(f"prompt_ids must be [B, {P}], got {tuple(prompt_ids.shape)}")
        if completion_ids.shape != mask.shape or completion_ids.shape[0] != B:
            raise ValueError(
                f"completion_ids and mask must both be [{B}, T], got "
                f"{tuple(completion_ids.shape)} and {tuple(mask.shape)}"
            )
        ids = torch.zeros(B, L, dtype=torch.long, device=prompt_ids.device)
        m = torch.zeros(B, L, device=prompt_ids.device)
        T = min(L, completion_ids.shape[1])
        ids[:, :T], m[:, :T] = completion_ids[:, :T], mask[:, :T].float()
        q = nn.functional.one_hot(prompt_ids, V).float()
        a = nn.functional.one_hot(ids, V).float() * m[:, :, None]
        return torch.cat([q.reshape(B, -1), a.reshape(B, -1)], dim=1)

    def forward(self, prompt_ids, completion_ids, mask) -> torch.Tensor:
        """``[B]`` logits r_phi(q, a)."""
        return self.net(self.features(prompt_ids, completion_ids, mask)).squeeze(1)


@torch.no_grad()
def label_samples(reference, task, n: int, seed: int = 0, temperature: float = 1.0, batch: int = 512) -> dict:
    """``n`` completions sampled from ``reference`` (one per training prompt), labelled by
    the exact checker: ``{"prompt_ids", "completion_ids" [n, L], "mask", "labels" [n]}``."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    device = next(reference.parameters()).device
    rng, gen = np.random.default_rng(seed), torch.Generator(device=device).manual_seed(seed)
    L, parts = task.max_answer_length, {"prompt_ids": [], "completion_ids": [], "mask": [], "labels": []}
    for start in range(0, n, batch):
        ro, scores, _ = sample_batch(reference, task, min(batch, n - start), 1, rng, gen, temperature)
        pad = L - ro.completion_ids.shape[1]
        parts["prompt_ids"].append(ro.prompt_ids)
        parts["completion_ids"].append(nn.functional.pad(ro.completion_ids, (0, pad)))
        parts["mask"].append(nn.functional.pad(ro.mask, (0, pad)))
        wrong, right = task.reward_values
        parts["labels"].append((scores.sum(1) - wrong) / (right - wrong))
    return {k: torch.cat(v) for k, v in parts.items()}


def train_reward_model(reference, task, config: RewardModelConfig | None = None, progress: bool = True):
    """Label ``config.n_labels`` reference samples, fit ``RewardModel`` by BCE, and measure it.

    Returns ``(model, info)``; info, MEASURED on the held-out labels: "val_accuracy"
    (sigmoid(r_phi) > 0.5 vs the label), "always_wrong" (the accuracy of answering "wrong"
    every time: the bar r_phi has to beat), "positive_rate" (share of right answers among
    all labels), "val_loss" (BCE) and "n_train".
    """
    from ..progress import progress_bar as tqdm

    cfg = config or RewardModelConfig()
    data = label_samples(reference, task, cfg.n_labels, cfg.seed, cfg.temperature)
    n = cfg.n_labels
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(cfg.seed))
    n_val = max(1, int(round(cfg.val_frac * n)))
    val, tr = perm[:n_val], perm[n_val:]
    if len(tr) == 0:
        raise ValueError(f"n_labels={n} leaves no training labels with val_frac={cfg.val_frac}")
    torch.manual_seed(cfg.seed)
    device = next(reference.parameters()).device
    model = RewardModel(task.prompt_length, task.max_answer_length, task.tokenizer.vocab_size, cfg.hidden).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    x = model.features(data["prompt_ids"], data["completion_ids"], data["mask"])  # computed once
    y = data["labels"].to(device)
    bce = nn.functional.binary_cross_entropy_with_logits
    gen = torch.Generator().manual_seed(cfg.seed + 1)
    for _ in tqdm(range(cfg.epochs), desc="reward model", disable=not progress, leave=False):
        for idx in tr[torch.randperm(len(tr), generator=gen)].split(cfg.batch_size):
            loss = bce(model.net(x[idx]).squeeze(1), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    with torch.no_grad():
        logits = model.net(x[val]).squeeze(1)
        info = {
            "val_accuracy": float(((logits > 0).float() == y[val]).float().mean()),
            "always_wrong": float((y[val] == 0).float().mean()),
            "positive_rate": float(y.mean()),
            "val_loss": float(bce(logits, y[val])),
            "n_train": len(tr),
        }
    return model, info


class ProxyTask:
    """The task with its training reward replaced by ``sigmoid(r_phi)``; everything else
    (problems, prompts, held-out split, the exact checker behind ``rewards`` and thus
    ``evaluate``) is the wrapped task's.

    ``token_scores`` pays ``sigmoid(r_phi(q, a))`` at the last completion token (0 for an
    empty row), whatever ``kind`` asks: a reward model only knows its one number. A measurement
    at each evaluation is ``train``'s own hook, ``train(..., on_evaluate=f)``, not this task's.
    """

    def __init__(self, task, reward_model: RewardModel):
        if reward_model.prompt_length != task.prompt_length or reward_model.answer_length != task.max_answer_length:
            raise ValueError(
                f"reward_model was built for prompts of {reward_model.prompt_length} and answers of "
                f"{reward_model.answer_length} tokens; the task has {task.prompt_length} and {task.max_answer_length}"
            )
        self.task, self.reward_model = task, reward_model

    def __getattr__(self, name):  # sample, encode_prompts, eval_problems, tokenizer, rewards, ...: the task's
        if name in ("task", "reward_model"):
            raise AttributeError(name)
        return getattr(self.task, name)

    def __repr__(self) -> str:
        return f"ProxyTask({self.task!r})"

    @torch.no_grad()
    def proxy_rewards(self, problems, completion_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``[B]`` proxy rewards ``sigmoid(r_phi(q, a))`` in (0, 1)."""
        prompts = self.task.encode_prompts(problems).to(completion_ids.device)
        return torch.sigmoid(self.reward_model(prompts, completion_ids, mask))

    def token_scores(self, problems, completion_ids, mask, kind: str = "outcome") -> torch.Tensor:
        if kind not in ("outcome", "process"):
            raise ValueError(f"kind must be 'outcome' or 'process', got {kind!r}")
        B, T = completion_ids.shape
        scores = torch.zeros(B, T, dtype=torch.float32, device=completion_ids.device)
        has = mask > 0
        if T == 0 or not bool(has.any()):
            return scores
        last = T - 1 - has.flip(dims=[1]).long().argmax(dim=1)
        rows = torch.nonzero(has.any(dim=1)).squeeze(1)
        scores[rows, last[rows]] = self.proxy_rewards(problems, completion_ids, mask)[rows]
        return scores


def exploits(proxy: ProxyTask, policy, n_prompts: int = 256, k: int = 5, seed: int = 0) -> list[dict]:
    """The ``k`` sampled completions (temperature 1) that r_phi scores highest among those the
    exact checker rejects: ``{"prompt", "completion", "answer", "proxy"}`` each."""
    ro, scores, problems, gold = _sampled_and_checked(proxy, policy, n_prompts, seed)
    r = scores.sum(1).masked_fill(gold > 0, -math.inf)
    out = []
    for i in torch.argsort(r, descending=True)[:k].tolist():
        if math.isfinite(float(r[i])):
            text = ro.texts[i] + ("" if ro.truncated[i] else "<eos>")
            p = problems[i]
            out.append({"prompt": p.prompt, "completion": text, "answer": p.answer, "proxy": float(r[i])})
    return out


def exploit_rate(proxy: ProxyTask, policy, n_prompts: int = 512, seed: int = 0, threshold: float = 0.5) -> float:
    """The share of ``n_prompts`` sampled completions (temperature 1, one per prompt) that r_phi rates
    right (``sigmoid(r_phi) > threshold``) while the exact checker rejects them: how often ``policy``
    writes what `exploits` lists. Measured on the reference too, it is the control for a policy's rate."""
    _, scores, _, gold = _sampled_and_checked(proxy, policy, n_prompts, seed)
    return float(((scores.sum(1) > threshold) & (gold == 0)).float().mean())


def _sampled_and_checked(proxy: ProxyTask, policy, n_prompts: int, seed: int):
    """One completion (temperature 1) to each of ``n_prompts`` prompts, scored by r_phi (``scores``: sigmoid(r_phi)
    on the last token) and by the exact checker (``gold``): ``(rollout, scores, problems, gold)``."""
    device = next(policy.parameters()).device
    rng, gen = np.random.default_rng(seed), torch.Generator(device=device).manual_seed(seed)
    ro, scores, problems = sample_batch(policy, proxy, n_prompts, 1, rng, gen)
    return ro, scores, problems, proxy.task.rewards(problems, ro.texts, (~ro.truncated).tolist())
