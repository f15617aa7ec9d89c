"""strip_block_tags: reasoning hidden across any chunk boundary, code left alone (§4.19)."""

from __future__ import annotations

import pytest

from clawpi.reply import BlockTagState, finish_block_tags, strip_block_tags
from clawpi.reply.tags import (
    extract_thinking_from_tagged_text,
    strip_final_tags,
    strip_thinking_tags,
)


def run(parts: list[str], enforce: bool = False) -> str:
    state = BlockTagState()
    out = "".join(strip_block_tags(p, state, enforce_final_tag=enforce) for p in parts)
    return out + finish_block_tags(state, enforce_final_tag=enforce)


def every_split(text: str) -> list[list[str]]:
    return [[text[:i], text[i:]] for i in range(len(text) + 1)]


@pytest.mark.parametrize(
    "tag", ["think", "thinking", "thought", "antthinking", "THINK", "Thinking"]
)
def test_each_thinking_tag_is_hidden(tag: str) -> None:
    assert run([f"Hello <{tag}>secret plan</{tag}>world"]) == "Hello world"


def test_tag_with_attributes_and_spaces() -> None:
    assert run(['A< think type="deep" >hidden</ think >B']) == "AB"


@pytest.mark.parametrize("parts", every_split("Hi <think>secret</think> there"))
def test_think_tag_split_at_every_position(parts: list[str]) -> None:
    assert run(parts) == "Hi  there"


def test_one_char_deltas() -> None:
    assert run(list("a<thinking>x y z</thinking>b")) == "ab"


def test_unclosed_think_hides_the_rest() -> None:
    assert run(["Answer: <think>I should", " not say this", " ever"]) == "Answer: "


def test_stray_close_tag_is_removed() -> None:
    assert run(["done</think> now"]) == "done now"


def test_inline_code_keeps_literal_tags() -> None:
    text = "Use `<think>` to start and ``</think>`` to end"
    assert run([text]) == text
    assert run(list(text)) == text


def test_fenced_code_keeps_literal_tags() -> None:
    text = "```html\n<think>not hidden</think>\n<final>x</final>\n```\nafter <think>gone</think>!"
    expected = "```html\n<think>not hidden</think>\n<final>x</final>\n```\nafter !"
    assert run([text]) == expected
    assert run(list(text)) == expected


def test_partial_tag_is_held_then_released_as_text() -> None:
    state = BlockTagState()
    assert strip_block_tags("a <thi", state) == "a "
    assert state.pending == "<thi"
    assert finish_block_tags(state) == "<thi"


def test_less_than_that_cannot_be_a_tag_passes_at_once() -> None:
    state = BlockTagState()
    assert strip_block_tags("1 < 2 and x<y", state) == "1 < 2 and x<y"
    assert strip_block_tags("<div>", state) == "<div>"


def test_final_tags_stripped_without_enforcement() -> None:
    assert run(["pre <final>answer</final> post"]) == "pre answer post"


def test_final_enforcement_keeps_only_final_content() -> None:
    assert run(["thinking out loud <final>The answer", " is 42.</final> trailing"], True) == (
        "The answer is 42."
    )


def test_final_enforcement_without_final_tag_shows_nothing() -> None:
    state = BlockTagState()
    assert strip_block_tags("no tags at all", state, enforce_final_tag=True) == ""
    assert not state.ever_final


@pytest.mark.parametrize("parts", every_split("x<final>ok</final>y"))
def test_final_tag_split_anywhere(parts: list[str]) -> None:
    assert run(parts, True) == "ok"


def test_state_reset_starts_fresh() -> None:
    state = BlockTagState()
    strip_block_tags("<think>open", state)
    assert state.thinking
    state.reset()
    assert strip_block_tags("visible", state) == "visible"


def test_collects_hidden_reasoning_for_streaming() -> None:
    state = BlockTagState(collect_thinking=True)
    strip_block_tags("a<think>step one", state)
    assert state.take_thinking() == "step one"
    strip_block_tags(" and two</think>b", state)
    assert state.take_thinking() == " and two\n\n"


def test_whole_text_helpers() -> None:
    assert strip_thinking_tags("<think>x</think>Answer") == "Answer"
    assert strip_final_tags("<final>Answer</final>") == "Answer"
    assert extract_thinking_from_tagged_text("<think>one</think>a<think>two</think>") == (
        "one\n\ntwo"
    )
    assert extract_thinking_from_tagged_text("a<think>open") == ""
    assert extract_thinking_from_tagged_text("a<think>open", include_unclosed=True) == "open"
