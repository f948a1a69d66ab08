import pytest
import torch

from grpo_edu.tokenizer import CharTokenizer


def test_vocabulary_layout():
    tok = CharTokenizer()
    assert tok.vocab[:3] == ["<pad>", "<bos>", "<eos>"]
    assert (tok.pad_id, tok.bos_id, tok.eos_id) == (0, 1, 2)
    assert tok.vocab_size == 17
    assert tok.encode("0") == [3] and tok.encode("9") == [12] and tok.encode("=") == [16]


def test_encode_decode_roundtrip():
    tok = CharTokenizer()
    ids = tok.encode("23+58=", add_bos=True, add_eos=True)
    # <bos>=1, '2'=3+2=5, '3'=6, '+'=13, '5'=8, '8'=11, '='=16, <eos>=2
    assert ids == [1, 5, 6, 13, 8, 11, 16, 2]
    assert tok.decode(ids) == "23+58="
    assert tok.decode(torch.tensor(ids)) == "23+58="


def test_decode_stops_at_eos_and_drops_specials():
    tok = CharTokenizer()
    assert tok.decode([3, 4, 2, 5, 6]) == "01"
    assert tok.decode([3, 4, 2, 5], stop_at_eos=False) == "012"
    assert tok.decode([0, 1, 3]) == "0"


def test_unknown_character_is_named():
    tok = CharTokenizer()
    with pytest.raises(ValueError, match="'x'"):
        tok.encode("1x2")
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([99])


def test_batch_encode_left_and_right_padding():
    tok = CharTokenizer()
    ids, mask = tok.batch_encode(["1", "123"], padding_side="left")
    assert ids.tolist() == [[0, 0, 4], [4, 5, 6]]
    assert mask.tolist() == [[0, 0, 1], [1, 1, 1]]
    ids, mask = tok.batch_encode(["1", "123"], padding_side="right", add_eos=True)
    assert ids.tolist() == [[4, 2, 0, 0], [4, 5, 6, 2]]
    assert mask.tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]
    with pytest.raises(ValueError, match="padding_side"):
        tok.batch_encode(["1"], padding_side="middle")
