"""BlockReplyPipeline defers work between deltas; these pin that it never defers a block.

The reference is the plain per-delta loop: strip each delta's tags, append the visible text to
the chunker and drain it. The pipeline must give the same blocks after the same deltas, however
the stream is cut (partial tags held back, fenced code, hard cuts at max_chars).
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clawpi.reply import BlockChunker, BlockTagState, finish_block_tags, strip_block_tags
from clawpi.reply.chunker import BreakPreference
from clawpi.reply.pipeline import BlockReplyPipeline
from tests.reply import test_properties as props

pytestmark = pytest.mark.filterwarnings(
    "ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"
)

Timeline = list[tuple[int, str]]
"""(index of the delta after which a block came out, -1 for the final flush; the block)."""


def per_delta(deltas: list[str], chunker: BlockChunker, enforce: bool = False) -> Timeline:
    state = BlockTagState()
    out: Timeline = []
    for i, delta in enumerate(deltas):
        visible = strip_block_tags(delta, state, enforce)
        if visible:
            chunker.append(visible)
        out += [(i, block) for block in chunker.drain()]
    rest = finish_block_tags(state, enforce)
    if rest:
        chunker.append(rest)
    return out + [(-1, block) for block in chunker.drain(force=True)]


def piped(deltas: list[str], chunker: BlockChunker, enforce: bool = False) -> Timeline:
    pipeline = BlockReplyPipeline(chunker, enforce_final_tag=enforce)
    out: Timeline = []
    for i, delta in enumerate(deltas):
        out += [(i, block) for block in pipeline.push(delta)]
    return out + [(-1, block) for block in pipeline.flush()]


def cut(text: str, sizes: list[int]) -> list[str]:
    deltas: list[str] = []
    i = 0
    k = 0
    while i < len(text):
        size = sizes[k % len(sizes)]
        deltas.append(text[i : i + size])
        i += size
        k += 1
    return deltas


def test_block_at_max_chars_comes_out_while_a_partial_tag_is_held_back() -> None:
    # "<thi" could still become <think>, so it is held back while more text arrives; the
    # block that reaches max_chars must come out with that delta, not a later one.
    text = "alpha beta gamma <this is fine> delta epsilon zeta eta theta iota kappa lambda mu"
    for sizes in ([1], [3], [4], [2, 5]):
        deltas = cut(text, sizes)
        for limits in ((10, 30), (5, 20), (15, 25)):
            expected = per_delta(deltas, BlockChunker(*limits, "newline"))
            assert piped(deltas, BlockChunker(*limits, "newline")) == expected, (sizes, limits)


def test_block_after_a_closing_fence_is_not_held_back() -> None:
    code = "\n".join(f"    line_{i} = {i}" for i in range(12))
    text = f"Intro text here.\n\n```python\n{code}\n```\n\nAfter the fence. More words follow. " * 3
    for sizes in ([1], [3], [7], [64], [5, 1, 11]):
        deltas = cut(text, sizes)
        for limits in ((40, 120), (100, 300), (20, 60)):
            expected = per_delta(deltas, BlockChunker(*limits))
            assert piped(deltas, BlockChunker(*limits)) == expected, (sizes, limits)


def _mixed_answer() -> str:
    rng = random.Random(5)
    parts = []
    for n in range(60):
        kind = n % 5
        if kind == 0:
            parts.append("Some prose. with `code()` and more words! ok? " * rng.randint(1, 6))
            parts.append("\n\n")
        elif kind == 1:
            body = "\n".join(f"  x = f({i}, '<think>')" for i in range(rng.randint(2, 20)))
            parts.append(f"~~~~js\n{body}\n~~~~\n\n")
        elif kind == 2:
            parts.append("<think>hidden " * rng.randint(1, 4) + "</think>visible tail. ")
        elif kind == 3:
            parts.append("- item\n" * rng.randint(1, 8) + "\n")
        else:
            parts.append("<final>final words.</final> ``not a fence`` `` ` ``\n")
    return "".join(parts)


@pytest.mark.parametrize("enforce", [False, True])
@pytest.mark.parametrize(
    "limits",
    [(50, 90, "paragraph", False), (200, 400, "sentence", False), (30, 300, "newline", True)],
)
def test_long_mixed_answer_gives_the_per_delta_blocks_at_the_same_deltas(
    enforce: bool, limits: tuple[int, int, BreakPreference, bool]
) -> None:
    text = _mixed_answer()
    for sizes in ([1], [2, 9], [64], [150, 3]):
        deltas = cut(text, sizes)
        expected = per_delta(deltas, BlockChunker(*limits), enforce)
        assert piped(deltas, BlockChunker(*limits), enforce) == expected, sizes


@props.PROPERTY_SETTINGS
@given(props.cut_documents(), st.integers(20, 200), st.integers(0, 200), st.booleans())
def test_pipeline_gives_the_per_delta_blocks_at_the_same_deltas(
    case: tuple[props.Doc, list[str]], min_chars: int, extra: int, per_paragraph: bool
) -> None:
    _, deltas = case
    max_chars = max(60, min_chars + extra)

    def chunker() -> BlockChunker:
        return BlockChunker(min_chars, max_chars, flush_on_paragraph=per_paragraph)

    assert piped(deltas, chunker()) == per_delta(deltas, chunker())
