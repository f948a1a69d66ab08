"""A task where thinking can pay: multiplication by one digit, with an optional scratchpad.

The arithmetic world's answers are 3-4 tokens long and their length is fixed by the problem.
Here the policy may write its working before the final answer, and only the answer is
rewarded, so a longer response can be the reason an answer is right (the regime of
DeepSeek-R1-Zero's growing responses, at the size of this course)::

    prompt      <bos> 1 2 3 * 4 =                a zero-padded to ``digits`` digits, b one digit
    direct      2 9 4 <eos>                      492 reversed, as ArithmeticTask writes it
    scratchpad  * 2 1 * 9 0 * 4 0 = 2 9 4 <eos>  per digit of a, least significant first:
                                                 '*', the digit (a_i * b + carry) % 10 and the
                                                 carry it hands on; then '=' and the answer

The checker reads only what follows the last ``=`` (the whole completion when it has none):
``*21*90*40=294``, ``=294``, ``*55*55*55=294`` and ``294`` all score 1 for 123*4. What the
scratchpad says never changes the reward; whether the policy can copy a right answer out of
its own working is what makes the scratchpad pay. A direct answer has to carry from digit to
digit in the model's head; the scratchpad writes every carry down. Problems with b in
{0, 1} (``EASY``) need no carries at all (the answer is 0 or a reversed), so there thinking
cannot pay.

The SFT demonstrations use the scratchpad on a share of the problems (half by default, which
ones: a hash of the problem), so the reference can write both forms and RL has a choice to
make. ``scratchpad="blank"`` is the control where thinking cannot pay anywhere: the same
lengths, the digits of the working replaced by ``-``. ``budget`` caps the completion length
(TRL's ``max_completion_length``): a completion that runs past it is truncated and wrong.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np
import torch

from envs.arithmetic import EVAL_SEED, ArithmeticTask, Problem, _check_int, check_completions

EQUALS = "="  # separates the working from the answer; never part of an answer
EASY = (0, 1)  # multipliers whose product needs no carry: thinking cannot pay there
SCRATCHPADS = ("carries", "blank")
BLANK = "-"  # the blank scratchpad's filler


class ScratchpadTask(ArithmeticTask):
    """``a * b`` with ``a`` of ``digits`` digits and ``b`` of one, reversed answers, and an
    optional scratchpad before ``=`` and the answer (module docstring).

    Args:
        digits: digits of ``a`` (1..4); ``a`` is uniform in ``[0, 10**digits - 1]``, ``b`` in 0..9.
        scratchpad: ``"carries"`` (per digit: ``*``, the product digit, the carry) or
            ``"blank"`` (the same length, ``*--`` per digit: working that carries nothing).
        scratchpad_share: the share of SFT demonstrations (``demonstration(p)``) that write the
            scratchpad, 0..1; which ones is a hash of the problem.
        budget: None (room for the longest scratchpad answer) or the most completion tokens
            (``<eos>`` included) the policy may write, from the longest direct answer
            (``digits + 2``) up. Below the scratchpad length long answers are truncated, wrong.
        eval_size, heldout_per_mille, reward_values: as `ArithmeticTask`.

    Any other `ArithmeticTask` knob (``ops``, ``reverse``, ``mixed_digits``, ``filler``) is a
    ``ValueError``: the scratchpad is defined for reversed products by one digit only.
    """

    def __init__(
        self,
        digits: int = 3,
        scratchpad: str = "carries",
        scratchpad_share: float = 0.5,
        budget: int | None = None,
        eval_size: int = 500,
        heldout_per_mille: int = 100,
        reward_values: tuple[float, float] = (0.0, 1.0),
        **arithmetic,
    ):
        allowed = {"ops": ("*",), "reverse": True, "mixed_digits": None, "filler": 0, "filler_budget": None}
        for name, value in arithmetic.items():
            if name not in allowed:
                raise TypeError(f"ScratchpadTask() got an unexpected keyword argument {name!r}")
            if (tuple(value) if isinstance(value, (list, tuple)) else value) != allowed[name]:
                raise ValueError(
                    f"a scratchpad needs a task that can have one: reversed products a * b with b of one "
                    f"digit (ops=('*',), reverse=True, no mixed_digits, no filler); got {name}={value!r}"
                )
        digits = _check_int("digits", digits, 1, 4)
        super().__init__(
            digits=digits,
            ops=("*",),
            eval_size=eval_size,
            heldout_per_mille=heldout_per_mille,
            reward_values=reward_values,
        )
        if scratchpad not in SCRATCHPADS:
            raise ValueError(f"scratchpad must be one of {SCRATCHPADS}, got {scratchpad!r}")
        self.scratchpad_kind = scratchpad
        ok = isinstance(scratchpad_share, (int, float)) and not isinstance(scratchpad_share, bool)
        if not ok or not 0.0 <= scratchpad_share <= 1.0:
            raise ValueError(f"scratchpad_share must be a number in [0, 1], got {scratchpad_share!r}")
        self.scratchpad_share = float(scratchpad_share)
        self.prompt_length = 1 + digits + 3  # <bos> a * b =
        self.direct_length = digits + 2  # the longest direct answer: digits + 1 of a * 9, then <eos>
        self.scratchpad_length = 3 * digits + 1 + self.direct_length  # working, '=', answer, <eos>
        if budget is not None:
            lo, hi = self.direct_length, self.scratchpad_length
            if not isinstance(budget, (int, np.integer)) or isinstance(budget, bool) or not lo <= budget <= hi:
                raise ValueError(
                    f"budget must be None or an integer in {lo}..{hi}: below {lo} tokens some problems have no "
                    f"answer that fits (the longest direct answer is {digits + 1} digits and <eos>), above {hi} "
                    f"the longest scratchpad answer already fits; got {budget!r}"
                )
            budget = int(budget)
        self.budget = budget
        self.max_answer_length = self.scratchpad_length if budget is None else budget
        self.equals_id = self.tokenizer.stoi[EQUALS]
        self.config = {
            "task": "scratchpad",
            "digits": digits,
            "scratchpad": scratchpad,
            "scratchpad_share": self.scratchpad_share,
            "eval_size": self.eval_size,
            "heldout_per_mille": self.heldout_per_mille,
            "reward_values": list(self.reward_values),
        }
        if budget is not None:  # only when set: the budget-free task's config (and cache key) stays as it is
            self.config["budget"] = budget

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.config.items() if k != "task")
        return f"ScratchpadTask({args})"

    # ---------------------------------------------------------------- problems
    def make_problem(self, a: int, b: int, op: str = "*") -> Problem:
        """The problem ``a * b`` (``b`` one digit) in this task's format."""
        if op != "*":
            raise ValueError(f"op must be '*' for a ScratchpadTask, got {op!r}")
        a = _check_int("a", a, 0, 10**self.digits - 1)
        b = _check_int("b", b, 0, 9)
        return self._problem(a, "*", b)

    def _problem(self, a: int, op: str, b: int) -> Problem:
        value = a * b
        return Problem(a, b, "*", f"{a:0{self.digits}d}*{b}=", str(value)[::-1], value)

    def _draw(self, rng: np.random.Generator, n: int):
        a, b = rng.integers(0, 10**self.digits, size=n), rng.integers(0, 10, size=n)
        return [(x, "*", y) for x, y in zip(a.tolist(), b.tolist(), strict=True)]

    def _space_size(self) -> int:
        return 10**self.digits * 10

    def eval_problems(self) -> list[Problem]:
        """``eval_size`` distinct held-out problems (uniform over the held-out ones), the same
        for every training seed; all of them when there are fewer."""
        if self._eval is None:
            rng = np.random.default_rng(EVAL_SEED)
            pool = [(a, b) for a in range(10**self.digits) for b in range(10) if self._heldout(a, "*", b)]
            k = min(self.eval_size, len(pool))
            idx = rng.choice(len(pool), size=k, replace=False)
            self._eval = [self._problem(pool[i][0], "*", pool[i][1]) for i in idx.tolist()]
        return list(self._eval)

    def difficulty(self, problem: Problem) -> str:
        """``"easy"`` when ``b`` is in `EASY` (no carries: thinking cannot pay), else ``"hard"``."""
        return "easy" if problem.b in EASY else "hard"

    # ---------------------------------------------------------------- the scratchpad
    def scratchpad(self, problem: Problem) -> str:
        """The working this task's demonstrations write (without ``=``): per digit of ``a``,
        least significant first, ``*``, the digit of ``a_i * b + carry`` and the new carry
        (``"blank"``: ``*--`` per digit)."""
        if self.scratchpad_kind == "blank":
            return ("*" + BLANK * 2) * self.digits
        out, carry = [], 0
        for ch in f"{problem.a:0{self.digits}d}"[::-1]:
            v = int(ch) * problem.b + carry
            carry = v // 10
            out.append(f"*{v % 10}{carry}")
        return "".join(out)

    def uses_scratchpad(self, problem: Problem) -> bool:
        """Whether the SFT demonstration of ``problem`` writes the scratchpad (a hash)."""
        h = zlib.crc32(f"scratchpad {problem.a}*{problem.b}".encode()) % 1000
        return h < round(1000 * self.scratchpad_share)

    def demonstration(self, problem: Problem) -> str:
        """The SFT target (before ``<eos>``): ``scratchpad=answer`` or just the answer."""
        if self.uses_scratchpad(problem):
            return self.scratchpad(problem) + EQUALS + problem.answer
        return problem.answer

    @staticmethod
    def form(completion: str) -> str:
        """``"scratchpad"`` when the completion writes ``=`` (some working before its answer), else ``"direct"``."""
        return "scratchpad" if EQUALS in completion.split("<eos>", 1)[0] else "direct"

    @staticmethod
    def final_answer(completion: str) -> str:
        """What the checker reads: the text after the last ``=`` (all of it when there is none)."""
        return completion.split("<eos>", 1)[0].rsplit(EQUALS, 1)[-1]

    # ---------------------------------------------------------------- rewards
    def outcome_reward(self, problem: Problem, completion: str, terminated: bool = True) -> float:
        """1.0 when the text after the last ``=`` (the whole completion without one) is exactly
        the answer and the completion ended with ``<eos>``; whatever comes before is ignored."""
        if not terminated:
            return 0.0
        return 1.0 if self.final_answer(completion) == problem.answer else 0.0

    def token_scores(
        self,
        problems: Sequence[Problem],
        completion_ids: torch.Tensor,
        mask: torch.Tensor,
        kind: str = "outcome",
    ) -> torch.Tensor:
        """``[B, T]``: the outcome reward (mapped to ``reward_values``) at the last masked token.

        A row is right when its masked tokens end with ``<eos>`` and the tokens between the
        last ``=`` before it (the start, without one) and ``<eos>`` are the answer's; a special
        token anywhere before ``<eos>`` is a mistake. ``kind="process"`` is refused: there is no
        per-token target when the policy chooses its own working."""
        if kind != "outcome":
            if kind == "process":
                raise ValueError("kind='process' needs a fixed target per token; a ScratchpadTask has only an outcome")
            raise ValueError(f"kind must be 'outcome' or 'process', got {kind!r}")
        B, T = check_completions(problems, completion_ids, mask)
        tok, wrong, right = self.tokenizer, *self.reward_values
        scores = torch.zeros(B, T, dtype=torch.float32, device=completion_ids.device)
        keep = mask > 0
        for i, (ids, m, p) in enumerate(zip(completion_ids.tolist(), keep.tolist(), problems, strict=True)):
            pos = [t for t, k in enumerate(m) if k]
            if not pos:
                continue
            row = [ids[t] for t in pos]
            ok = row[-1] == tok.eos_id and all(x > tok.eos_id for x in row[:-1])
            if ok:
                body = row[:-1]
                start = len(body) - body[::-1].index(self.equals_id) if self.equals_id in body else 0
                ok = body[start:] == tok.encode(p.answer)
            scores[i, pos[-1]] = right if ok else wrong
        return scores
