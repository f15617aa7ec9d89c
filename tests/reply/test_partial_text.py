"""The streamed partial text agrees with parsing the whole answer at every delta, and settles
the lines behind it so each delta parses only what is still open."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from clawpi.reply.directives import parse_reply_directives
from clawpi.reply.partial_text import PartialReplyText
from tests.strategies import fragments


def whole(text: str) -> tuple[str, list[str]]:
    """The rule written straight out: hold back a `[[` not closed yet (or a lone trailing `[`
    while the answer has no `[[`), then parse the whole answer."""
    opened = text.rfind("[[")
    if opened >= 0 and "]]" not in text[opened:]:
        text = text[:opened]
    elif opened < 0 and text.endswith("["):
        text = text[:-1]
    parsed = parse_reply_directives(text)
    return parsed.text, parsed.media_urls


def stream(deltas: list[str]) -> list[tuple[tuple[str, list[str]], tuple[str, list[str]]]]:
    """(streamed, whole) after every delta."""
    partial = PartialReplyText()
    seen = ""
    pairs = []
    for delta in deltas:
        partial.append(delta)
        seen += delta
        pairs.append((partial.current(), whole(seen)))
    return pairs


TOKENS = [
    "[[", "]]", "[", "]", "reply_to_current", "voice", "audio_as_voice", "reply_to:", " 12",
    "media:", "MEDIA:", "Media: ", " https://example.com/a.png", " ./a.png", " ../x.png",
    " x.txt", "```", "~~~", "````", "`", "python", "\n", "\n", "\n", "\n\n", "\n\n\n", "  ",
    "\t", " ", " ", "word", "word", "NO_REPLY", ",", "a:", ".", "[[voice]]", "[[media: ./b.png]]",
    "[[reply_to_current]]", "\nMEDIA: ./c.png\n", "\n```\n", "\n~~~\n", "  \n",
]  # fmt: skip


@st.composite
def answers(draw: st.DrawFn) -> list[str]:
    text = "".join(draw(st.lists(st.sampled_from(TOKENS), max_size=60)))
    return fragments(draw, text, 25)


@settings(max_examples=400, deadline=None)
@given(answers())
def test_every_delta_matches_a_parse_of_the_whole_answer(deltas: list[str]) -> None:
    for streamed, expected in stream(deltas):
        assert streamed == expected


def test_a_reply_tag_then_a_long_answer_keeps_only_the_open_line_to_parse() -> None:
    partial = PartialReplyText()
    partial.append("[[reply_to_current]] Here is the plan:\n")
    for i in range(500):
        partial.append(f"step {i}: do the thing")
        partial.append(" properly.\n")
    text, media = partial.current()
    assert text.startswith("Here is the plan:\nstep 0: do the thing properly.")
    assert text.endswith("step 499: do the thing properly.")
    assert media == []
    assert partial.unsettled < 100


def test_a_long_code_block_with_brackets_settles_line_by_line() -> None:
    lines = ["```bash\n"] + [f'if [[ -f "f{i}" ]]; then echo {i}; fi\n' for i in range(300)]
    partial = PartialReplyText()
    for line in lines:
        partial.append(line)
    assert partial.unsettled < 100
    assert partial.current() == whole("".join(lines))


def test_a_directive_not_yet_closed_holds_back_the_rest_until_it_closes() -> None:
    pairs = stream(["Look:\n[[media: ./a", ".png", "]]\nmore text\n", "and [", "[voice]] done"])
    assert [streamed for streamed, _ in pairs] == [expected for _, expected in pairs]
    assert pairs[1][0] == ("Look:", [])
    assert pairs[2][0] == ("Look:\n\nmore text", ["./a.png"])
    assert pairs[4][0][0] == "Look:\n\nmore text\nand done"


def test_a_media_line_between_two_settled_lines_leaves_one_blank_line() -> None:
    deltas = ["Intro [[voice]]\n\n", "MEDIA: ./c.png\n", "\nafter\n", "tail"]
    for streamed, expected in stream(deltas):
        assert streamed == expected
    assert stream(deltas)[-1][0] == ("Intro\n\nafter\ntail", ["./c.png"])


def test_a_directive_glued_to_a_fence_line_opens_the_fence_only_once_taken_out() -> None:
    # "[[voice]]```" is no fence line as written, but "```" is once the tag is out: the text
    # after it is code for the whole parse (its spaces kept), so it must not settle as prose
    deltas = ["[[voice]]```\n", "code  x\n", "more   text\n", "end  "]
    pairs = stream(deltas)
    assert [streamed for streamed, _ in pairs] == [expected for _, expected in pairs]
    assert pairs[-1][0][0] == "```\ncode  x\nmore   text\nend"
