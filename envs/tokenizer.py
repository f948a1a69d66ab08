"""Character tokenizer for the arithmetic world (the world's: ``grpo_edu.tokenizer`` re-exports it).

One token per character: the ten digits, the operators ``+ - *``, ``=``, and three
special tokens ``<pad>``, ``<bos>``, ``<eos>``. The vocabulary is tiny (17 tokens),
which is what lets the course compute the *exact* KL over the vocabulary.

    >>> tok = CharTokenizer()
    >>> tok.encode("23+58=", add_bos=True)
    [1, 5, 6, 13, 8, 11, 16]
    >>> tok.decode([1, 5, 6, 13, 8, 11, 16])
    '23+58='
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"
SPECIALS = (PAD, BOS, EOS)
CHARS = "0123456789+-*="


class CharTokenizer:
    """Maps characters to token ids and back.

    Attributes: ``vocab`` (list of token strings, index = id), ``pad_id``, ``bos_id``,
    ``eos_id``, ``vocab_size``.
    """

    def __init__(self, chars: str = CHARS):
        if len(set(chars)) != len(chars):
            raise ValueError(f"chars must be distinct, got {chars!r}")
        self.vocab: list[str] = list(SPECIALS) + list(chars)
        self.stoi = {s: i for i, s in enumerate(self.vocab)}
        self.pad_id, self.bos_id, self.eos_id = 0, 1, 2

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        """Text -> ids. An unknown character is a ``ValueError`` that names it."""
        ids = []
        for pos, ch in enumerate(text):
            if ch not in self.stoi or ch in SPECIALS:
                raise ValueError(
                    f"unknown character {ch!r} at position {pos} of {text!r}; "
                    f"the tokenizer knows {''.join(self.vocab[len(SPECIALS) :])!r}"
                )
            ids.append(self.stoi[ch])
        if add_bos:
            ids = [self.bos_id] + ids
        if add_eos:
            ids = ids + [self.eos_id]
        return ids

    def decode(self, ids: Sequence[int] | torch.Tensor, stop_at_eos: bool = True) -> str:
        """Ids -> text. Special tokens are dropped; decoding stops at the first EOS."""
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        out = []
        for i in ids:
            i = int(i)
            if not 0 <= i < self.vocab_size:
                raise ValueError(f"token id {i} is outside the vocabulary [0, {self.vocab_size})")
            if i == self.eos_id and stop_at_eos:
                break
            if i >= len(SPECIALS):
                out.append(self.vocab[i])
        return "".join(out)

    def batch_encode(
        self,
        texts: Sequence[str],
        add_bos: bool = False,
        add_eos: bool = False,
        padding_side: str = "left",
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Encode several texts into one ``[B, T]`` LongTensor padded with ``pad_id``.

        Returns ``(ids, attention_mask)`` where the mask is 1 on real tokens. Prompts are
        padded on the left (so that generation continues right after the last real
        token), targets on the right.
        """
        if padding_side not in ("left", "right"):
            raise ValueError(f"padding_side must be 'left' or 'right', got {padding_side!r}")
        rows = [self.encode(t, add_bos=add_bos, add_eos=add_eos) for t in texts]
        if not rows:
            raise ValueError("batch_encode needs at least one text")
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            if not r:
                continue
            sl = slice(width - len(r), width) if padding_side == "left" else slice(0, len(r))
            ids[i, sl] = torch.tensor(r, dtype=torch.long)
            mask[i, sl] = 1
        return ids, mask
