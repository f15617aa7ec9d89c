"""Thinking levels: clamping, token budgets and the base max-tokens rule shared by providers."""

from __future__ import annotations

from collections.abc import Mapping

from clawpi.ai.models import Model, supports_xhigh
from clawpi.ai.types import ThinkingLevel

DEFAULT_THINKING_BUDGETS: Mapping[str, int] = {
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 16384,
}
DEFAULT_MAX_TOKENS_CAP = 32_000
THINKING_OUTPUT_RESERVE = 1024


def effective_level(level: ThinkingLevel | None) -> ThinkingLevel | None:
    """`off` and None both mean no reasoning."""
    return None if level in (None, "off") else level


def clamp_level(level: ThinkingLevel, model: Model | None = None) -> ThinkingLevel:
    """xhigh becomes high unless the model accepts it."""
    if level == "xhigh" and (model is None or not supports_xhigh(model)):
        return "high"
    return level


def base_max_tokens(model: Model, max_tokens: int | None) -> int:
    """pi's default output budget: the caller's value, else min(model max, 32k)."""
    return max_tokens or min(model.max_tokens, DEFAULT_MAX_TOKENS_CAP)


def thinking_budget(
    model: Model,
    level: ThinkingLevel,
    base: int,
    budgets: Mapping[str, int] | None = None,
) -> tuple[int, int]:
    """(max_tokens, budget_tokens) for budget-style thinking, as pi adjusts them."""
    table = {**DEFAULT_THINKING_BUDGETS, **(budgets or {})}
    clamped = "high" if level == "xhigh" else level
    budget = table.get(clamped, table["medium"])
    max_tokens = min(base + budget, model.max_tokens)
    if max_tokens <= budget:
        budget = max(0, max_tokens - THINKING_OUTPUT_RESERVE)
    return max_tokens, budget
