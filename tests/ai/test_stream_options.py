"""`StreamOptions.replace`: the copy a run makes of its options per model call."""

from __future__ import annotations

import dataclasses

import pytest

from clawpi.ai.abort import AbortController
from clawpi.ai.stream import StreamOptions


def test_replace_copies_every_field_and_changes_only_the_named_ones() -> None:
    signal = AbortController().signal
    original = StreamOptions(
        api_key="k1",
        temperature=0.2,
        max_tokens=100,
        reasoning="high",
        thinking_budgets={"high": 9},
        signal=signal,
        headers={"x": "1"},
        session_id="s",
        cache_retention="long",
        metadata={"user_id": "u"},
        tool_choice="auto",
        on_payload=lambda payload, model: None,
        extra={"store": True},
    )
    copy = original.replace(api_key="k2", max_tokens=None)
    assert copy is not original
    assert copy == dataclasses.replace(original, api_key="k2", max_tokens=None)
    assert (original.api_key, original.max_tokens) == ("k1", 100)  # the original is untouched
    assert copy.extra is original.extra and copy.signal is signal  # values shared, not copied
    copy.temperature = 1.0
    assert original.temperature == 0.2


def test_replace_rejects_an_unknown_name_as_dataclasses_replace_does() -> None:
    with pytest.raises(TypeError, match="bogus"):
        StreamOptions().replace(bogus=1)


def test_replace_keeps_a_subclass_and_its_own_fields() -> None:
    @dataclasses.dataclass(slots=True, kw_only=True)
    class Tagged(StreamOptions):
        tag: str = "a"

    copy = Tagged(tag="b", api_key="k").replace(api_key="k2")
    assert type(copy) is Tagged
    assert (copy.tag, copy.api_key) == ("b", "k2")
