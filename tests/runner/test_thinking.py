from __future__ import annotations

from clawpi.runner.thinking import normalize_thinking_level, pick_fallback_thinking_level


def test_quoted_supported_values_give_the_first_untried_level() -> None:
    text = "Unsupported value: 'high'. Supported values are: 'low', 'medium'."
    assert pick_fallback_thinking_level(text, {"high"}) == "low"
    assert pick_fallback_thinking_level(text, {"high", "low"}) == "medium"


def test_all_values_attempted_or_no_list_gives_none() -> None:
    text = "supported values are: 'low', 'medium'"
    assert pick_fallback_thinking_level(text, {"low", "medium"}) is None
    assert pick_fallback_thinking_level("reasoning effort not supported", set()) is None
    assert pick_fallback_thinking_level(None, set()) is None


def test_unquoted_lists_and_aliases() -> None:
    assert (
        pick_fallback_thinking_level("Supported values: low, medium or high", {"low"}) == "medium"
    )
    assert (
        pick_fallback_thinking_level("supported values are: minimal and ultrathink", {"minimal"})
        == "high"
    )
    assert normalize_thinking_level("ON") == "low"
    assert normalize_thinking_level("med") == "medium"
    assert normalize_thinking_level("nonsense") is None


def test_zai_binary_thinking_maps_to_low() -> None:
    assert (
        pick_fallback_thinking_level("supported values are: 'high'", {"off"}, provider="zai")
        == "low"
    )
