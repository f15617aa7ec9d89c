"""BlockChunker: natural breaks, fences kept whole or reopened, whitespace rules (§4.20)."""

from __future__ import annotations

import pytest

from clawpi.reply import BlockChunker


def feed(chunker: BlockChunker, text: str, step: int = 1) -> list[str]:
    blocks: list[str] = []
    for i in range(0, len(text), step):
        chunker.append(text[i : i + step])
        blocks += chunker.drain()
    return blocks + chunker.drain(force=True)


def test_paragraph_preference_splits_at_blank_line() -> None:
    chunker = BlockChunker(min_chars=10, max_chars=200)
    chunker.append("First paragraph here.\n\nSecond one, still going")
    assert chunker.drain() == ["First paragraph here."]
    assert chunker.buffered_text == "Second one, still going"
    assert chunker.drain(force=True) == ["Second one, still going"]
    assert not chunker.has_buffered()


def test_falls_back_to_newline_then_sentence() -> None:
    chunker = BlockChunker(min_chars=10, max_chars=200)
    chunker.append("line one is long\nline two")
    assert chunker.drain() == ["line one is long"]
    sentence = BlockChunker(min_chars=10, max_chars=200)
    sentence.append("One sentence here. Another starts")
    assert sentence.drain() == ["One sentence here."]
    assert sentence.buffered_text == "Another starts"


def test_newline_preference_ignores_sentences() -> None:
    chunker = BlockChunker(min_chars=5, max_chars=200, break_preference="newline")
    chunker.append("Short. Sentences. Here. No newline yet")
    assert chunker.drain() == []
    chunker.append("\nnext")
    assert chunker.drain() == ["Short. Sentences. Here. No newline yet"]


def test_waits_below_min_chars() -> None:
    chunker = BlockChunker(min_chars=50, max_chars=100)
    chunker.append("Tiny.\n\nAlso tiny.")
    assert chunker.drain() == []
    assert chunker.drain(force=True) == ["Tiny.\n\nAlso tiny."]


def test_sentence_end_waits_for_following_whitespace() -> None:
    chunker = BlockChunker(min_chars=3, max_chars=100, break_preference="sentence")
    chunker.append("Pi is 3.")
    assert chunker.drain() == []
    chunker.append("14 roughly. And")
    assert chunker.drain() == ["Pi is 3.14 roughly."]


def test_long_run_without_breaks_splits_at_whitespace_then_hard() -> None:
    chunker = BlockChunker(min_chars=5, max_chars=20)
    blocks = feed(chunker, "aaaa bbbb cccc dddd eeee ffff")
    assert all(len(b) <= 20 for b in blocks)
    assert " ".join(blocks).split() == ["aaaa", "bbbb", "cccc", "dddd", "eeee", "ffff"]
    hard = feed(BlockChunker(min_chars=5, max_chars=10), "x" * 35)
    assert hard == ["x" * 10, "x" * 10, "x" * 10, "x" * 5]


def test_never_splits_inside_a_fence_that_fits() -> None:
    code = "```python\nprint(1)\n\nprint(2)\n```"
    text = "Intro text here.\n\n" + code + "\n\nAfter."
    blocks = feed(BlockChunker(min_chars=5, max_chars=200), text)
    assert code in blocks
    assert all(b.count("```") % 2 == 0 for b in blocks)


def test_forced_split_reopens_fence_with_same_info_string() -> None:
    lines = "\n".join(f"value_{i} = {i}" for i in range(30))
    text = f"```python title=x.py\n{lines}\n```\nDone."
    chunker = BlockChunker(min_chars=20, max_chars=120)
    blocks = feed(chunker, text, step=7)
    fenced = [b for b in blocks if "value_" in b]
    assert len(fenced) > 2
    for block in fenced:
        assert block.startswith("```python title=x.py\n")
        assert block.endswith("```")
        assert len(block) <= 120
    body = [line for b in fenced for line in b.split("\n") if line.startswith("value_")]
    assert body == lines.split("\n")
    assert blocks[-1] == "Done."


def test_tilde_fence_is_respected() -> None:
    text = "Before block.\n~~~\na\n\nb\n~~~\nafter"
    blocks = feed(BlockChunker(min_chars=5, max_chars=100), text)
    assert "~~~\na\n\nb\n~~~" in blocks


def test_flush_on_paragraph_emits_short_paragraphs_at_once() -> None:
    chunker = BlockChunker(min_chars=500, max_chars=1000, flush_on_paragraph=True)
    chunker.append("Hi.\n\nHow are")
    assert chunker.drain() == ["Hi."]
    chunker.append(" you?\n\n")
    assert chunker.drain() == ["How are you?"]


def test_whitespace_trimmed_at_boundaries() -> None:
    chunker = BlockChunker(min_chars=5, max_chars=100)
    chunker.append("First part.   \n\n\n   \nSecond part ")
    assert chunker.drain() == ["First part."]
    assert chunker.drain(force=True) == ["Second part"]


def test_defaults_and_channel_limit_clamp() -> None:
    chunker = BlockChunker()
    assert (chunker.min_chars, chunker.max_chars) == (800, 1200)
    clamped = BlockChunker(min_chars=3000, max_chars=9000)
    assert clamped.max_chars == 4000
    assert clamped.min_chars == 3000
    small = BlockChunker(min_chars=900, max_chars=1200, text_limit=500)
    assert (small.min_chars, small.max_chars) == (500, 500)


def test_bad_preference_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="break_preference"):
        BlockChunker(break_preference="word")  # type: ignore[arg-type]


def test_reset_drops_buffer() -> None:
    chunker = BlockChunker(min_chars=5, max_chars=50)
    chunker.append("```py\nx = 1\n")
    chunker.reset()
    chunker.append("plain text. more")
    assert chunker.drain(force=True) == ["plain text. more"]


def test_one_big_delta_is_cut_like_many_small_ones() -> None:
    text = ("Sentence number one is here. " * 40 + "\n\n") * 5
    whole = feed(BlockChunker(min_chars=100, max_chars=300), text, step=len(text))
    assert all(len(b) <= 300 for b in whole)
    assert " ".join(whole).split() == text.split()
