"""parse_reply_directives: media, voice, reply targets, silence (§4.22 and the seeds' forms)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clawpi.reply import StreamingDirectiveParser, is_silent_reply_text, parse_reply_directives
from clawpi.reply.directives import is_valid_media_source


def test_media_line_gives_url_and_is_removed() -> None:
    d = parse_reply_directives("Here you go\nMEDIA: https://x.example/y.png\nEnjoy")
    assert d.media_urls == ["https://x.example/y.png"]
    assert d.media_url == "https://x.example/y.png"
    assert d.text == "Here you go\nEnjoy"


def test_media_line_inside_fence_is_text() -> None:
    text = "```\nMEDIA: https://x.example/y.png\n```"
    d = parse_reply_directives(text)
    assert d.media_urls == []
    assert d.text == text


def test_two_urls_on_one_line() -> None:
    d = parse_reply_directives("MEDIA: https://a.example/1.png `https://a.example/2.jpg`")
    assert d.media_urls == ["https://a.example/1.png", "https://a.example/2.jpg"]
    assert d.text == ""


def test_case_insensitive_and_indented() -> None:
    assert parse_reply_directives("  media: ./out/chart.png").media_urls == ["./out/chart.png"]


@pytest.mark.parametrize(
    "source",
    [
        "../etc/passwd",
        "./a/../../secret.txt",
        "http://insecure.example/x.png",
        "https://127.0.0.1/x.png",
        "https://localhost/x.png",
        "https://10.0.0.5/x.png",
        "ftp://x.example/y",
        "no_extension",
    ],
)
def test_invalid_media_stays_as_text(source: str) -> None:
    d = parse_reply_directives(f"MEDIA: {source}")
    assert d.media_urls == []
    assert d.text == f"MEDIA: {source}"
    assert not is_valid_media_source(source)


@pytest.mark.parametrize(
    "source",
    ["https://cdn.example.com/a.png", "/tmp/out.png", "./chart.png", "~/pics/a.jpg", "report.pdf"],
)
def test_valid_media_sources(source: str) -> None:
    assert is_valid_media_source(source)


def test_seed_media_tag() -> None:
    d = parse_reply_directives("Look [[media:https://cdn.example.com/a.png]] nice")
    assert d.media_urls == ["https://cdn.example.com/a.png"]
    assert d.text == "Look nice"


@pytest.mark.parametrize("tag", ["[[audio_as_voice]]", "[[voice]]", "[[ Voice ]]"])
def test_voice_flag(tag: str) -> None:
    d = parse_reply_directives(f"Say hi {tag}\nMEDIA: https://x.example/a.ogg")
    assert d.audio_as_voice
    assert d.text == "Say hi"
    assert d.media_urls == ["https://x.example/a.ogg"]


def test_reply_to_id_trimmed() -> None:
    d = parse_reply_directives("[[reply_to: 123 ]] hello")
    assert (d.reply_to_id, d.reply_to_tag, d.reply_to_current, d.text) == (
        "123",
        True,
        False,
        "hello",
    )


def test_seed_reply_tag() -> None:
    assert parse_reply_directives("[[reply:abc]] ok").reply_to_id == "abc"


def test_reply_to_current_uses_current_message_id() -> None:
    d = parse_reply_directives("[[reply_to_current]] hi", current_message_id="m1")
    assert (d.reply_to_id, d.reply_to_current, d.text) == ("m1", True, "hi")


def test_last_reply_tag_wins() -> None:
    d = parse_reply_directives("[[reply_to:1]] a [[reply_to:2]] b", current_message_id="m")
    assert d.reply_to_id == "2"
    assert d.text == "a b"


def test_tag_glued_to_a_word_is_not_parsed() -> None:
    d = parse_reply_directives("word[[reply_to:1]] z")
    assert d.reply_to_id is None
    assert d.text == "word[[reply_to:1]] z"


def test_directives_in_code_are_left_alone() -> None:
    d = parse_reply_directives("Write `[[audio_as_voice]]` to get voice")
    assert not d.audio_as_voice
    assert d.text == "Write `[[audio_as_voice]]` to get voice"


def test_whitespace_normalised_after_stripping() -> None:
    d = parse_reply_directives("a  [[voice]]  b\n\n\n\n\nc  ")
    assert d.text == "a b\n\nc"


def test_code_indentation_is_not_normalised() -> None:
    text = "```py\ndef f():\n        return  1\n```"
    d = parse_reply_directives(text + "\n[[voice]]")
    assert d.audio_as_voice
    assert d.text == text


def test_silent_reply_detected() -> None:
    assert parse_reply_directives("NO_REPLY").is_silent
    assert parse_reply_directives("  NO_REPLY \n").is_silent
    assert not parse_reply_directives("NO_REPLY is a token").is_silent
    assert parse_reply_directives("SHH", silent_token="SHH").is_silent
    assert is_silent_reply_text("NO_REPLY.")
    assert is_silent_reply_text("All done. NO_REPLY")
    assert not is_silent_reply_text("I said NO_REPLYING")


def test_streaming_parser_holds_a_cut_tag() -> None:
    parser = StreamingDirectiveParser(current_message_id="m9")
    first = parser.consume("Hello there [[reply_to_cur")
    assert first is not None
    assert first.text == "Hello there"
    second = parser.consume("rent]] and more")
    assert second is not None
    assert second.reply_to_id == "m9"
    assert second.text == "and more"
    assert parser.consume("", final=True) is None
    parser.consume("tail [[unfinished")
    tail = parser.consume("", final=True)
    assert tail is not None
    assert tail.text == "[[unfinished"


def _silent_by_pattern(text: str, token: str) -> bool:
    """The silent-reply rule as the reference writes it: two regular expressions."""
    stripped = text.strip()
    if stripped == token:
        return True
    quoted = re.escape(token)
    return bool(
        re.match(rf"^{quoted}(?=$|[^\w])", stripped)
        or re.search(rf"(?:^|[^\w]){quoted}\W*$", stripped)
    )


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.sampled_from(["NO_REPLY", "SHH!", "x", "_", "é", "٣", " ", ".", "!\n", "-"])),
    st.sampled_from(["NO_REPLY", "SHH!", "!"]),
)
def test_the_silent_check_reads_only_the_ends_and_agrees_with_the_patterns(
    parts: list[str], token: str
) -> None:
    text = "".join(parts)
    assert is_silent_reply_text(text, token) == _silent_by_pattern(text, token)
