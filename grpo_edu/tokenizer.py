"""Character tokenizer for the arithmetic world: the world's own (`envs.tokenizer`), re-exported
here for the library's users (``from grpo_edu.tokenizer import CharTokenizer``). The
environments sit below the library and import nothing of it.

    >>> tok = CharTokenizer()
    >>> tok.encode("23+58=", add_bos=True)
    [1, 5, 6, 13, 8, 11, 16]
"""

from envs.tokenizer import BOS, CHARS, EOS, PAD, SPECIALS, CharTokenizer

__all__ = ["BOS", "CHARS", "EOS", "PAD", "SPECIALS", "CharTokenizer"]
