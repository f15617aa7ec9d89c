"""Property tests: random Markdown with fences, inline code, think/final tags and directives,
cut into random deltas, through tag stripping, chunking and directive parsing."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clawpi.reply import (
    BlockChunker,
    BlockTagState,
    finish_block_tags,
    parse_reply_directives,
    strip_block_tags,
)
from clawpi.reply.pipeline import BlockReplyPipeline

# Hypothesis' failure report touches a deprecated mypy_extensions name; with warnings as errors
# that would hide the falsifying example behind an INTERNALERROR.
pytestmark = pytest.mark.filterwarnings(
    "ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"
)

HIDDEN = "SECRET"
_FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,}).*$", re.M)

PROPERTY_SETTINGS = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@dataclass
class Doc:
    raw: str = ""
    visible: str = ""
    final_only: str = ""
    words: list[str] = field(default_factory=list)


def _word(n: int) -> str:
    return f"w{n}"


@st.composite
def documents(draw: st.DrawFn) -> Doc:
    doc = Doc()
    counter = 0

    def words(lo: int, hi: int) -> str:
        nonlocal counter
        count = draw(st.integers(lo, hi))
        out: list[str] = []
        for _ in range(count):
            counter += 1
            out.append(_word(counter))
            doc.words.append(out[-1])
            out.append(
                draw(st.sampled_from([" ", " ", " ", ". ", "! ", "\n", "\n\n", ", ", " < "]))
            )
        return "".join(out)

    kinds = draw(
        st.lists(
            st.sampled_from(["prose", "prose", "code", "fence", "think", "final", "directive"]),
            min_size=1,
            max_size=14,
        )
    )
    for index, kind in enumerate(kinds):
        if kind == "prose":
            part = words(1, 25)
            doc.raw += part
            doc.visible += part
        elif kind == "code":
            ticks = draw(st.sampled_from(["`", "``"]))
            inner = draw(st.sampled_from(["<think>", "</think>", "<final>", "x = 1", "a<b"]))
            part = f" {ticks}{inner} {words(0, 2)}".replace("\n", " ") + ticks + " "
            doc.raw += part
            doc.visible += part
        elif kind == "fence":
            marker = draw(st.sampled_from(["```", "````", "~~~"]))
            info = draw(st.sampled_from(["", "python", "js title=a.js"]))
            body_lines = [
                draw(st.sampled_from(["<think>literal</think>", "", "    indented", "x = [1, 2]"]))
                + " "
                + words(0, 3).replace("\n", " ")
                for _ in range(draw(st.integers(0, 12)))
            ]
            part = f"\n{marker}{info}\n" + "\n".join(body_lines) + f"\n{marker}\n"
            doc.raw += part
            doc.visible += part
        elif kind == "think":
            tag = draw(
                st.sampled_from(["think", "thinking", "Thought", "antthinking", 'think mode="x"'])
            )
            name = tag.split()[0]
            hidden = " ".join(f"{HIDDEN}{i}" for i in range(draw(st.integers(1, 8))))
            closed = draw(st.booleans()) or index != len(kinds) - 1
            doc.raw += f"<{tag}>{hidden}" + (f"</{name}>" if closed else "")
        elif kind == "final":
            part = words(1, 10)
            doc.raw += f"<final>{part}</final>"
            doc.visible += part
            doc.final_only += part
        else:
            part = draw(
                st.sampled_from(
                    [
                        " [[audio_as_voice]] ",
                        " [[reply_to_current]] ",
                        "\nMEDIA: https://cdn.example.com/p.png\n",
                        " [[voice]] ",
                    ]
                )
            )
            doc.raw += part
            doc.visible += part
    return doc


def cut(draw: st.DrawFn, text: str) -> list[str]:
    points = sorted(set(draw(st.lists(st.integers(0, len(text)), max_size=40))))
    pieces: list[str] = []
    last = 0
    for p in [*points, len(text)]:
        pieces.append(text[last:p])
        last = p
    return pieces


@st.composite
def cut_documents(draw: st.DrawFn) -> tuple[Doc, list[str]]:
    doc = draw(documents())
    if draw(st.booleans()):
        return doc, list(doc.raw)
    return doc, cut(draw, doc.raw)


def strip_all(deltas: list[str], enforce: bool = False) -> list[str]:
    state = BlockTagState()
    out = [strip_block_tags(d, state, enforce_final_tag=enforce) for d in deltas]
    out.append(finish_block_tags(state, enforce_final_tag=enforce))
    return out


def squash(text: str) -> str:
    return re.sub(r"\s+", "", _FENCE_LINE.sub("", text))


def fences_balanced(block: str) -> bool:
    open_marker = ""
    for match in _FENCE_LINE.finditer(block):
        marker = match.group(1)
        rest = match.group(0).strip()[len(marker) :]
        if not open_marker:
            open_marker = marker
        elif marker[0] == open_marker[0] and len(marker) >= len(open_marker) and not rest.strip():
            open_marker = ""
    return not open_marker


@PROPERTY_SETTINGS
@given(cut_documents())
def test_visible_text_is_exact_and_never_contains_thinking(case: tuple[Doc, list[str]]) -> None:
    doc, deltas = case
    visible = "".join(strip_all(deltas))
    assert HIDDEN not in visible
    assert visible == doc.visible


@PROPERTY_SETTINGS
@given(cut_documents())
def test_final_enforcement_shows_only_final_content(case: tuple[Doc, list[str]]) -> None:
    doc, deltas = case
    visible = "".join(strip_all(deltas, enforce=True))
    assert HIDDEN not in visible
    assert visible == doc.final_only


@PROPERTY_SETTINGS
@given(
    cut_documents(),
    st.integers(20, 300),
    st.integers(0, 200),
    st.sampled_from(["paragraph", "newline", "sentence"]),
    st.booleans(),
)
def test_blocks_respect_limits_fences_and_lose_or_repeat_nothing(
    case: tuple[Doc, list[str]], min_chars: int, extra: int, preference: str, per_paragraph: bool
) -> None:
    doc, deltas = case
    max_chars = max(60, min_chars + extra)
    chunker = BlockChunker(min_chars, max_chars, preference, per_paragraph)  # type: ignore[arg-type]
    blocks: list[str] = []
    for visible in strip_all(deltas):
        chunker.append(visible)
        blocks += chunker.drain()
    blocks += chunker.drain(force=True)
    for block in blocks:
        assert block.strip()
        assert block == block.rstrip()
        assert HIDDEN not in block
        assert len(block) <= max_chars or _FENCE_LINE.fullmatch(block.split("\n")[0]) is not None
        assert fences_balanced(block), block
    assert squash("\n".join(blocks)) == squash(doc.visible)


@PROPERTY_SETTINGS
@given(cut_documents())
def test_directives_never_reach_the_user_and_words_arrive_once(case: tuple[Doc, list[str]]) -> None:
    doc, deltas = case
    chunker = BlockChunker(40, 160)
    payload_texts: list[str] = []
    media: list[str] = []
    for visible in strip_all(deltas):
        chunker.append(visible)
        for block in chunker.drain():
            parsed = parse_reply_directives(block, current_message_id="m1")
            payload_texts.append(parsed.text)
            media += parsed.media_urls
    for block in chunker.drain(force=True):
        parsed = parse_reply_directives(block, current_message_id="m1")
        payload_texts.append(parsed.text)
        media += parsed.media_urls
    joined = "\n".join(payload_texts)
    assert HIDDEN not in joined
    outside_code = re.sub(r"`[^`\n]*`", "", _strip_fenced(joined))
    assert "[[voice]]" not in outside_code
    assert "[[audio_as_voice]]" not in outside_code
    assert "MEDIA:" not in outside_code
    assert len(media) == doc.raw.count("MEDIA: https://")
    tokens = re.findall(r"\bw\d+\b", joined)
    assert len(tokens) == len(set(tokens))
    assert sorted(tokens, key=lambda t: int(t[1:])) == tokens
    assert set(tokens) == set(doc.words)


@PROPERTY_SETTINGS
@given(cut_documents(), st.integers(20, 200), st.integers(0, 200), st.booleans())
def test_deferred_pipeline_keeps_every_block_invariant(
    case: tuple[Doc, list[str]], min_chars: int, extra: int, per_paragraph: bool
) -> None:
    doc, deltas = case
    max_chars = max(60, min_chars + extra)
    chunker = BlockChunker(min_chars, max_chars, flush_on_paragraph=per_paragraph)
    pipeline = BlockReplyPipeline(chunker)
    blocks: list[str] = []
    for delta in deltas:
        blocks += pipeline.push(delta)
    blocks += pipeline.flush()
    assert not pipeline.has_buffered()
    for block in blocks:
        assert HIDDEN not in block
        assert len(block) <= max_chars or _FENCE_LINE.fullmatch(block.split("\n")[0]) is not None
        assert fences_balanced(block), block
    assert squash("\n".join(blocks)) == squash(doc.visible)


def _strip_fenced(text: str) -> str:
    return re.sub(r"(?ms)^ {0,3}(`{3,}|~{3,}).*?^ {0,3}\1[`~]*\s*$", "", text)


@PROPERTY_SETTINGS
@given(
    st.lists(
        st.sampled_from([*"ab \n`~>/{}[]*_-:|\\\"'\t", "```", "~~~", "think", "final"]),
        max_size=60,
    ).map("".join)
)
def test_text_without_a_tag_opener_passes_the_tag_stripper_unchanged(text: str) -> None:
    """`strip_thinking_tags` returns such text at once; the full scan agrees, whatever
    fences, inline code and stray closers the text holds."""
    from clawpi.reply.tags import strip_thinking_tags

    state = BlockTagState()
    scanned = strip_block_tags(text, state) + finish_block_tags(state)
    assert scanned == text == strip_thinking_tags(text)
    state.reset()
    assert state == BlockTagState()
