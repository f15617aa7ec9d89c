from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from clawpi.ai.partial_json import StreamingJsonParser, parse_streaming_json
from tests.strategies import fragments


def test_empty_and_whitespace_give_empty_object() -> None:
    assert parse_streaming_json("") == {}
    assert parse_streaming_json("   \n") == {}


def test_complete_json_parses_strictly() -> None:
    assert parse_streaming_json('{"path": "a.txt", "limit": 5}') == {"path": "a.txt", "limit": 5}


def test_truncated_string_value_is_closed() -> None:
    assert parse_streaming_json('{"command": "ls -la /tm') == {"command": "ls -la /tm"}


def test_key_without_value_is_dropped() -> None:
    assert parse_streaming_json('{"a": 1, "b":') == {"a": 1}
    assert parse_streaming_json('{"a": 1, "bb') == {"a": 1}


def test_nested_containers_are_closed() -> None:
    assert parse_streaming_json('{"edits": [{"oldText": "x", "newText": "y"}, {"old') == {
        "edits": [{"oldText": "x", "newText": "y"}, {}]
    }


def test_cut_escape_sequences_are_dropped() -> None:
    assert parse_streaming_json('{"a": "line\\') == {"a": "line"}
    assert parse_streaming_json('{"a": "x\\u00') == {"a": "x"}


def test_cut_literal_drops_the_member() -> None:
    assert parse_streaming_json('{"a": "ok", "b": tru') == {"a": "ok"}


def test_non_object_json_gives_empty_object() -> None:
    assert parse_streaming_json("[1, 2]") == {}
    assert parse_streaming_json("not json at all") == {}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=10,
)


@given(st.dictionaries(st.text(max_size=6), json_values, max_size=4), st.data())
def test_every_prefix_parses_to_an_object_and_the_whole_round_trips(
    value: dict[str, object], data: st.DataObject
) -> None:
    text = json.dumps(value)
    cut = data.draw(st.integers(min_value=0, max_value=len(text)))
    assert isinstance(parse_streaming_json(text[:cut]), dict)
    assert parse_streaming_json(text) == value


def test_integers_beyond_64_bits_stay_exact_whole_and_truncated() -> None:
    big = -9223372036854775809
    assert parse_streaming_json(f'{{"n": {big}}}') == {"n": big}
    assert parse_streaming_json(f'{{"n": {big}, "s": "ab') == {"n": big, "s": "ab"}


JSONISH = [
    "{", "}", "[", "]", '"', "\\", "u", "d83d", "\\ud83d", "\\ude00", "\\u00e9", "\\u12", ":",
    ",", " ", "a", "1", "-2.5e3", "12345678901234567890", "true", "nul", "\\n", "\n", '\\"',
    '"k": ', '"content": "', "NaN", "\x00clawpi open string\x00", "\\u0000clawpi open string",
]  # fmt: skip

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=12,
)  # fmt: skip


@st.composite
def streamed_texts(draw: st.DrawFn) -> list[str]:
    if draw(st.booleans()):
        text = json.dumps(draw(st.dictionaries(st.text(max_size=5), json_values, max_size=4)))
        text = text if draw(st.booleans()) else json.dumps(json.loads(text), ensure_ascii=False)
    else:
        text = "".join(draw(st.lists(st.sampled_from(JSONISH), max_size=40)))
    return fragments(draw, text, 30)


@settings(max_examples=400, deadline=None)
@given(streamed_texts())
def test_feeding_fragments_gives_the_parse_of_the_whole_text_at_every_step(
    fragments: list[str],
) -> None:
    parser = StreamingJsonParser()
    seen = ""
    for fragment in fragments:
        seen += fragment
        assert parser.feed(fragment) == parse_streaming_json(seen)
        assert parser.text == seen


def test_a_long_string_value_is_decoded_once_not_per_fragment() -> None:
    content = 'line "one" \\ é 😀\n' * 2000
    text = json.dumps({"path": "a.py", "content": content})
    parser = StreamingJsonParser()
    for at in range(0, len(text), 16):
        arguments = parser.feed(text[at : at + 16])
    assert arguments == {"path": "a.py", "content": content}
    # the open string was decoded a fragment at a time, and that work kept: not redone per delta
    assert parser._decoded_to > len(text) - 100
