"""The arithmetic world: problems, held-out split and rewards (the MDP is token_mdp.py).

A task is a distribution over problems such as ``23+58=``, each with one right answer.
The policy writes the answer one token at a time and gets a *sparse* reward: 1.0 when
the whole answer (followed by ``<eos>``) is exactly right, else 0.0.

The format, for 2-digit addition with reversed answers (the default)::

    prompt      <bos> 2 3 + 5 8 =      operands zero-padded to max_digits, so every prompt
                                       of a task has the same length (no left padding)
    completion  1 8 <eos>              81 without leading zeros, least significant digit
                                       first ("reversed": the digit the carry decides last
                                       comes last, which makes addition easy to learn)

Subtraction is sampled with ``a >= b``, so no answer is ever negative.

Held-out problems are chosen by a hash of the problem, not by luck: a problem is held
out when ``crc32("a op b") % 1000 < heldout_per_mille``. Training never samples one;
evaluation uses only them.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from envs.tokenizer import CharTokenizer

OPS = ("+", "-", "*")
MAX_DIGITS = 6
EVAL_SEED = 1_000_003  # fixed: the eval set never depends on a training seed
_ENUMERATE_LIMIT = 20_000  # tasks with at most this many problems are enumerated exactly
Triple = tuple[int, str, int]
FILLER = "="  # the filler token of ArithmeticTask(filler=k): never part of an answer


@dataclass(frozen=True)
class Problem:
    """One problem: ``prompt`` is what the policy sees, ``answer`` what it must write
    (without ``<eos>``), ``value`` the true result of ``a op b``."""

    a: int
    b: int
    op: str
    prompt: str
    answer: str
    value: int


def _apply(a: int, op: str, b: int) -> int:
    return a + b if op == "+" else a - b if op == "-" else a * b


def _check_int(name: str, value, lo: int, hi: int | None = None) -> int:
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    if not ok or value < lo or (hi is not None and value > hi):
        allowed = f"an integer in {lo}..{hi}" if hi is not None else f"an integer >= {lo}"
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    return int(value)


def check_completions(problems, completion_ids, mask) -> tuple[int, int]:
    """``(B, T)`` of ``completion_ids``, after checking it and ``mask`` are both ``[B, T]`` and
    there is one problem per completion (a ValueError naming what does not fit)."""
    if completion_ids.dim() != 2 or mask.shape != completion_ids.shape:
        raise ValueError(
            f"completion_ids and mask must both be [B, T], got {tuple(completion_ids.shape)} and {tuple(mask.shape)}"
        )
    B, T = completion_ids.shape
    if len(problems) != B:
        raise ValueError(f"got {len(problems)} problems for {B} completions")
    return B, T


def _as_generator(rng) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return np.random.default_rng(int(rng))
    raise TypeError(f"rng must be a numpy.random.Generator or an int seed, got {rng!r}")


class ArithmeticTask:
    """A distribution over arithmetic problems, with a fixed held-out split and rewards.

    Args:
        digits: operands are uniform in ``[0, 10**digits - 1]`` (1..6). Ignored when
            ``mixed_digits`` is given.
        ops: which operators to use, a subset of ``("+", "-", "*")``; one is picked
            uniformly per problem.
        reverse: write the answer least significant digit first.
        mixed_digits: ``(lo, hi)``: each operand first draws its own length L uniformly
            from ``lo..hi``, then a uniform L-digit number (0..9 when L = 1), so problems
            differ in difficulty. Prompts are padded to ``max_digits = hi``.
        eval_size: how many held-out problems ``eval_problems()`` returns (>= 1).
        heldout_per_mille: how many problems in 1000 are held out (1..999).
        reward_values: the training reward (wrong, right) that ``token_scores`` hands out,
            (0, 1) by default; accuracy always counts a right answer as 1.
        filler: 0 (the default) or the most filler tokens ``=`` a demonstration writes
            after its answer, before ``<eos>``. With ``filler > 0`` the length of an answer
            is up to the policy: the checker ignores every ``=`` in a completion (``81==``,
            ``8=1`` and ``81`` all score as ``81``), the completion budget grows by
            ``filler`` tokens (``max_answer_length``) and ``demonstration(p)``, the SFT
            target, appends between 0 and ``filler`` of them (how many: a hash of the
            problem). Only the final answer is rewarded, so the length of what the policy
            writes is free: the regime where the aggregation modes' length biases exist.
        filler_budget: None (the default: ``filler``) or how many filler tokens the
            completion budget leaves room for, 0..``filler``. Below ``filler`` the longest
            demonstrations do not fit: a completion that runs past ``max_answer_length``
            without ``<eos>`` is truncated and scores as wrong (TRL's
            ``max_completion_length``), so long answers are more often wrong.
        junk: 0.0 (the default) or the share of SFT demonstrations, 0..1, that carry one junk
            token ``=`` in the answer, before, between or after its digits (``18`` written ``=18``,
            ``1=8`` or ``18=``; which problems and where: a hash of the problem). The checker reads
            ``=`` as a wrong token, so an answer with junk scores 0: a flaw the reference learns from
            its data and shows the moment it writes it (notebook 08 part 2's junk world, where a critic
            can read the answer so far). The completion budget grows by one token. Needs ``filler=0`` (filler makes ``=`` harmless).
    """

    def __init__(
        self,
        digits: int = 2,
        ops: Sequence[str] = ("+",),
        reverse: bool = True,
        mixed_digits: tuple[int, int] | None = None,
        eval_size: int = 500,
        heldout_per_mille: int = 100,
        reward_values: tuple[float, float] = (0.0, 1.0),
        filler: int = 0,
        filler_budget: int | None = None,
        junk: float = 0.0,
    ):
        self.digits = _check_int("digits", digits, 1, MAX_DIGITS)
        self.ops: tuple[str, ...] = tuple(ops) if isinstance(ops, (str, list, tuple)) else ()
        if not self.ops or any(op not in OPS for op in self.ops) or len(set(self.ops)) < len(ops):
            raise ValueError(f"ops must be distinct operators from {OPS} (at least one), got {ops!r}")
        if not isinstance(reverse, (bool, np.bool_)):
            raise ValueError(f"reverse must be True or False, got {reverse!r}")
        self.reverse = bool(reverse)
        if mixed_digits is not None:
            if not isinstance(mixed_digits, (list, tuple)) or len(mixed_digits) != 2:
                raise ValueError(
                    f"mixed_digits must be None or a pair (lo, hi) with 1 <= lo <= hi <= "
                    f"{MAX_DIGITS}, got {mixed_digits!r}"
                )
            lo = _check_int("mixed_digits[0] (lo)", mixed_digits[0], 1, MAX_DIGITS)
            hi = _check_int("mixed_digits[1] (hi)", mixed_digits[1], lo, MAX_DIGITS)
            mixed_digits = (lo, hi)
        self.mixed_digits: tuple[int, int] | None = mixed_digits
        self.eval_size = _check_int("eval_size", eval_size, 1)
        self.heldout_per_mille = _check_int("heldout_per_mille", heldout_per_mille, 1, 999)
        if (
            not isinstance(reward_values, (list, tuple))
            or len(reward_values) != 2
            or not all(isinstance(v, (int, float)) and np.isfinite(v) for v in reward_values)
            or not reward_values[1] > reward_values[0]
        ):
            raise ValueError(
                f"reward_values must be a pair (wrong, right) of finite numbers with right > wrong, "
                f"got {reward_values!r}"
            )
        self.reward_values = (float(reward_values[0]), float(reward_values[1]))
        self.filler = _check_int("filler", filler, 0, 16)
        budget = self.filler if filler_budget is None else _check_int("filler_budget", filler_budget, 0, self.filler)
        ok = isinstance(junk, (int, float, np.floating)) and not isinstance(junk, bool) and 0.0 <= junk <= 1.0
        if not ok:
            raise ValueError(f"junk must be a share in [0, 1], got {junk!r}")
        if junk and self.filler:
            raise ValueError(
                f"junk needs filler=0 (filler makes '{FILLER}' harmless), got junk={junk}, filler={self.filler}"
            )
        self.junk = float(junk)

        self.tokenizer = CharTokenizer()
        self.max_digits = mixed_digits[1] if mixed_digits else self.digits
        self.prompt_length = 1 + 2 * self.max_digits + 2  # <bos> a op b =
        d = self.max_digits
        answer_digits = {"+": d + 1, "-": d, "*": 2 * d}
        self.max_answer_length = max(answer_digits[op] for op in self.ops) + 1 + budget + (self.junk > 0)  # + <eos>
        self.filler_id = self.tokenizer.stoi[FILLER]
        self.config = {
            "digits": self.digits,
            "ops": list(self.ops),
            "reverse": self.reverse,
            "mixed_digits": list(mixed_digits) if mixed_digits else None,
            "eval_size": self.eval_size,
            "heldout_per_mille": self.heldout_per_mille,
            "reward_values": list(self.reward_values),
        }
        if self.filler:  # only when set, so the default task's config (and cache key) is unchanged
            self.config["filler"] = self.filler
        if budget != self.filler:
            self.config["filler_budget"] = budget
        if self.junk:
            self.config["junk"] = self.junk
        self._eval: list[Problem] | None = None

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.config.items())
        return f"ArithmeticTask({args})"

    # ---------------------------------------------------------------- problems
    def make_problem(self, a: int, b: int, op: str = "+") -> Problem:
        """Build the problem ``a op b`` in this task's format (for worked examples)."""
        if op not in self.ops:
            raise ValueError(f"op must be one of this task's ops {self.ops}, got {op!r}")
        top = 10**self.max_digits - 1
        a = _check_int("a", a, 0, top)
        b = _check_int("b", b, 0, top)
        if op == "-" and a < b:
            raise ValueError(f"for '-' a must be >= b (answers are never negative), got {a}-{b}")
        return self._problem(a, op, b)

    def _problem(self, a: int, op: str, b: int) -> Problem:
        d, value = self.max_digits, _apply(a, op, b)
        answer = str(value)[::-1] if self.reverse else str(value)
        return Problem(a, b, op, f"{a:0{d}d}{op}{b:0{d}d}=", answer, value)

    def is_heldout(self, problem: Problem) -> bool:
        """True when the problem belongs to the evaluation split (a hash, not luck)."""
        return self._heldout(problem.a, problem.op, problem.b)

    def _heldout(self, a: int, op: str, b: int) -> bool:
        return zlib.crc32(f"{a}{op}{b}".encode()) % 1000 < self.heldout_per_mille

    def _draw_operands(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.mixed_digits is None:
            return rng.integers(0, 10**self.max_digits, size=n)
        lo, hi = self.mixed_digits
        length = rng.integers(lo, hi + 1, size=n)
        low = np.where(length == 1, 0, 10 ** (length - 1))
        return rng.integers(low, 10**length)

    def _draw(self, rng: np.random.Generator, n: int) -> list[Triple]:
        """n problems from the task distribution, held-out ones included."""
        op_idx = rng.integers(len(self.ops), size=n)
        a, b = self._draw_operands(rng, n), self._draw_operands(rng, n)
        out = []
        for i, x, y in zip(op_idx.tolist(), a.tolist(), b.tolist(), strict=True):
            op = self.ops[i]
            out.append((y, op, x) if op == "-" and x < y else (x, op, y))
        return out

    def sample(self, n: int, rng) -> list[Problem]:
        """n training problems (never held out), deterministic for a seed.

        ``rng`` is a ``numpy.random.Generator`` (advanced in place) or an int seed.
        Held-out problems are rejected and redrawn.
        """
        n = _check_int("n", n, 0)
        rng = _as_generator(rng)
        out: list[Problem] = []
        for _ in range(1000):
            if len(out) == n:
                return out
            need = n - len(out)
            for a, op, b in self._draw(rng, need + need // 4 + 8):
                if not self._heldout(a, op, b):
                    out.append(self._problem(a, op, b))
                    if len(out) == n:
                        break
        if len(out) == n:
            return out
        raise RuntimeError(f"{self!r} has (almost) no training problems; lower heldout_per_mille")

    def _operand_values(self) -> range:
        if self.mixed_digits is None:
            return range(10**self.max_digits)
        lo, hi = self.mixed_digits
        return range(0 if lo == 1 else 10 ** (lo - 1), 10**hi)

    def _space_size(self) -> int:
        n = len(self._operand_values())
        return sum(n * (n + 1) // 2 if op == "-" else n * n for op in self.ops)

    def _probability(self, a: int, op: str, b: int) -> float:
        """Probability that ``_draw`` yields ``a op b`` (used to weight the eval draw)."""
        if self.mixed_digits is None:
            p_a = p_b = 10.0**-self.max_digits
        else:
            lo, hi = self.mixed_digits
            per_length = [10 if L == 1 else 9 * 10 ** (L - 1) for L in range(lo, hi + 1)]
            p_a = 1 / ((hi - lo + 1) * per_length[len(str(a)) - lo])
            p_b = 1 / ((hi - lo + 1) * per_length[len(str(b)) - lo])
        both_orders = 2.0 if op == "-" and a != b else 1.0
        return both_orders * p_a * p_b / len(self.ops)

    def eval_problems(self) -> list[Problem]:
        """``eval_size`` distinct held-out problems, the same for every training seed.

        Drawn from the task distribution with a fixed internal seed and cached. When the
        held-out space has fewer than ``eval_size`` problems, all of them are returned
        (in a fixed order). Small tasks are enumerated exactly; large ones are sampled.
        """
        if self._eval is None:
            rng = np.random.default_rng(EVAL_SEED)
            expected_heldout = self._space_size() * self.heldout_per_mille / 1000
            if self._space_size() <= _ENUMERATE_LIMIT or expected_heldout < 4 * self.eval_size:
                values = self._operand_values()
                pool = [
                    (a, op, b)
                    for op in self.ops
                    for a in values
                    for b in values
                    if (op != "-" or a >= b) and self._heldout(a, op, b)
                ]
                p = np.array([self._probability(*t) for t in pool])
                k = min(self.eval_size, len(pool))
                idx = rng.choice(len(pool), size=k, replace=False, p=p / p.sum())
                chosen = [pool[i] for i in idx.tolist()]
            else:
                seen: dict[Triple, None] = {}  # an ordered set
                for _ in range(1000):
                    seen.update((t, None) for t in self._draw(rng, 20 * self.eval_size) if self._heldout(*t))
                    if len(seen) >= self.eval_size:
                        break
                else:
                    raise RuntimeError(f"{self!r} has too few held-out problems; lower eval_size")
                chosen = list(seen)[: self.eval_size]
            self._eval = [self._problem(a, op, b) for a, op, b in chosen]
        return list(self._eval)

    def encode_prompts(self, problems: Sequence[Problem]) -> torch.Tensor:
        """``[n, prompt_length]`` LongTensor: ``<bos>`` then the prompt characters."""
        rows = [self.tokenizer.encode(p.prompt, add_bos=True) for p in problems]
        if any(len(r) != self.prompt_length for r in rows):
            raise ValueError(f"every prompt must have {self.prompt_length} tokens for {self!r}")
        return torch.tensor(rows, dtype=torch.long).reshape(len(rows), self.prompt_length)

    def target_ids(self, problem: Problem) -> list[int]:
        """The token ids the policy should write: the answer digits, then ``<eos>``."""
        return self.tokenizer.encode(problem.answer, add_eos=True)

    def demonstration(self, problem: Problem) -> str:
        """The SFT target text (before ``<eos>``): the answer, then, with ``filler > 0``,
        between 0 and ``filler`` filler tokens (a hash of the problem says how many); with
        ``junk > 0``, on that share of the problems, one ``=`` before, between or after the answer's
        digits (a hash says where)."""
        if self.junk:
            h = zlib.crc32(f"junk {problem.a}{problem.op}{problem.b}".encode())
            if h % 10_000 >= round(self.junk * 10_000):
                return problem.answer
            k = (h // 10_000) % (len(problem.answer) + 1)  # before the first digit .. after the last
            return problem.answer[:k] + FILLER + problem.answer[k:]
        if not self.filler:
            return problem.answer
        n = zlib.crc32(f"filler {problem.a}{problem.op}{problem.b}".encode()) % (self.filler + 1)
        return problem.answer + FILLER * n

    def _strip_filler(self, completion_ids: torch.Tensor, mask: torch.Tensor):
        """``(ids, mask)`` with every filler token removed from each row and the rest moved
        left (the checker of ``filler > 0`` reads the answer without them)."""
        keep = (mask > 0) & (completion_ids != self.filler_id)
        order = torch.argsort((~keep).to(torch.int8), dim=1, stable=True)  # kept tokens first, in order
        ids = torch.gather(completion_ids, 1, order)
        kept = keep.sum(dim=1, keepdim=True)
        new_mask = (torch.arange(ids.shape[1], device=ids.device)[None, :] < kept).to(mask.dtype)
        return ids.masked_fill(new_mask == 0, self.tokenizer.pad_id), new_mask

    # ---------------------------------------------------------------- rewards
    def outcome_reward(self, problem: Problem, completion: str, terminated: bool = True) -> float:
        """1.0 when ``completion`` (decoded text, up to ``<eos>``) is exactly the answer.

        Anything else (a wrong digit, a leading zero, junk, the empty string) is 0.0, and
        so is a completion that never wrote ``<eos>`` (``terminated=False``). Text that
        still contains the marker ``"<eos>"`` is cut there. Decoded text has lost any
        stray special token; the id-level functions below count one as a mistake.
        """
        if not terminated:
            return 0.0
        text = completion.split("<eos>", 1)[0]
        if self.filler:
            text = text.replace(FILLER, "")
        return 1.0 if text == problem.answer else 0.0

    def rewards(
        self,
        problems: Sequence[Problem],
        completions: Sequence[str],
        terminated: Sequence[bool] | torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``[B]`` float tensor of outcome rewards; ``terminated=None`` means all ended with EOS."""
        if terminated is None:
            terminated = [True] * len(problems)
        elif isinstance(terminated, torch.Tensor):
            terminated = terminated.tolist()
        if not len(problems) == len(completions) == len(terminated):
            raise ValueError(
                f"problems, completions and terminated must have the same length, got "
                f"{len(problems)}, {len(completions)}, {len(terminated)}"
            )
        r = [self.outcome_reward(p, c, bool(t)) for p, c, t in zip(problems, completions, terminated, strict=True)]
        return torch.tensor(r, dtype=torch.float32)

    def token_scores(
        self,
        problems: Sequence[Problem],
        completion_ids: torch.Tensor,
        mask: torch.Tensor,
        kind: str = "outcome",
    ) -> torch.Tensor:
        """Per-token task scores ``r_phi(q, a_{<=t})``, a ``[B, T]`` float tensor.

        ``completion_ids`` ``[B, T]`` holds the completion tokens (padded after EOS);
        ``mask`` ``[B, T]`` is 1 up to and including EOS. With ``y`` the target tokens
        (answer digits then EOS, ``K = len(answer) + 1`` of them) and
        ``ok_t = 1[a_s == y_s and mask_s = 1 for all s <= t]``:

        - ``kind="outcome"``: ``r_t = R(q, a)`` at the last masked token, 0 elsewhere,
          where ``R = ok_{K-1}`` is the outcome reward (0 for an all-zero mask row),
          mapped to ``reward_values`` = (wrong, right), (0, 1) by default; (-1, 1) makes
          plain REINFORCE push wrong answers down too. (Accuracy and ``rewards`` always
          count right answers as 1 and wrong as 0.)
        - ``kind="process"``: ``r_t = ok_t / K``: credit for each correct token of the
          correct prefix. ``sum_t r_t`` is the fraction of the target written right from
          the start, and equals 1 (up to float rounding) exactly when ``R = 1``.

        With ``filler > 0`` the outcome is read with the filler tokens removed, and still
        paid at the last masked token; ``kind="process"`` is refused (its per-token credit
        assumes the answer starts at the first token).
        """
        if kind not in ("outcome", "process"):
            raise ValueError(f"kind must be 'outcome' or 'process', got {kind!r}")
        if kind == "process" and self.filler:
            raise ValueError(f"kind='process' needs a task without filler; {self!r} has filler={self.filler}")
        B, T = check_completions(problems, completion_ids, mask)
        device = completion_ids.device
        targets = [self.target_ids(p) for p in problems]
        K = torch.tensor([len(t) for t in targets], device=device)
        # the targets as one tensor, padded with -1 (never matches): one tensor build, not B slice writes
        y = torch.tensor([t[:T] + [-1] * (T - len(t[:T])) for t in targets], dtype=torch.long).reshape(B, T).to(device)
        ids, checked = self._strip_filler(completion_ids, mask) if self.filler else (completion_ids, mask)
        ok = ((ids == y) & (checked > 0)).long().cumprod(dim=1)  # ok_t
        if kind == "process":
            return ok.float() / K[:, None].float()
        scores = torch.zeros(B, T, dtype=torch.float32, device=device)
        if T == 0:
            return scores
        wrong, right = self.reward_values
        outcome = wrong + (right - wrong) * (ok.sum(dim=1) == K).float()
        has = mask > 0
        last = T - 1 - has.flip(dims=[1]).long().argmax(dim=1)  # last masked position
        rows = torch.nonzero(has.any(dim=1)).squeeze(1)
        scores[rows, last[rows]] = outcome[rows]
        return scores

    def rewards_from_ids(self, problems: Sequence[Problem], completion_ids: torch.Tensor) -> torch.Tensor:
        """``[B]`` outcome rewards straight from completion token ids (mask derived from EOS)."""
        is_eos = (completion_ids == self.tokenizer.eos_id).long()
        mask = ((is_eos.cumsum(dim=1) - is_eos) == 0).float()  # 1 up to and including EOS
        wrong, right = self.reward_values
        scores = self.token_scores(problems, completion_ids, mask, "outcome").sum(dim=1)
        return (scores - wrong) / (right - wrong)
