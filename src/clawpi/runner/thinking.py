"""Thinking levels in the runner: user aliases, and falling back to a level the provider accepts
when it rejects ours with "supported values are: ..."."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

from clawpi.ai.types import ThinkingLevel

_ALIASES: Mapping[str, ThinkingLevel] = {
    "off": "off",
    "none": "off",
    "minimal": "minimal",
    "min": "minimal",
    "think": "minimal",
    "low": "low",
    "on": "low",
    "enable": "low",
    "enabled": "low",
    "medium": "medium",
    "mid": "medium",
    "med": "medium",
    "harder": "medium",
    "high": "high",
    "ultra": "high",
    "ultrathink": "high",
    "max": "high",
    "highest": "high",
    "xhigh": "xhigh",
}
_SUPPORTED = re.compile(r"supported values(?: are)?\s*:\s*(.+)", re.IGNORECASE | re.DOTALL)
_QUOTED = re.compile(r"""["'`]([^"'`]+)["'`]""")
_SPLIT = re.compile(r"\s*(?:,|\bor\b|\band\b)\s*", re.IGNORECASE)


def normalize_thinking_level(value: str | None) -> ThinkingLevel | None:
    """A user's spelling of a level (`on`, `ultrathink`, `med`, ...) or None when unknown."""
    if not value:
        return None
    return _ALIASES.get(value.strip().lower())


def pick_fallback_thinking_level(
    message: str | None, attempted: Collection[str], *, provider: str | None = None
) -> ThinkingLevel | None:
    """The first listed level not tried yet, from a provider's "supported values" error."""
    if not message:
        return None
    found = _SUPPORTED.search(message)
    if found is None:
        return None
    listed = found.group(1).splitlines()[0]
    quoted = _QUOTED.findall(listed)
    tokens = quoted or [t.strip(" .;:()[]") for t in _SPLIT.split(listed)]
    for token in tokens:
        level = normalize_thinking_level(token)
        if level is None:
            continue
        if provider == "zai" and level != "off":
            level = "low"  # z.ai thinking is on/off
        if level not in attempted:
            return level
    return None
