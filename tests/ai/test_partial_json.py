from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from clawpi.ai.partial_json import parse_streaming_json


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
