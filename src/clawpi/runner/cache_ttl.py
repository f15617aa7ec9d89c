"""Cache-TTL bookkeeping: when this session last warmed the provider's prompt cache.

After each attempt the runner appends a custom session entry (`openclaw.cache-ttl`, OpenClaw's
name, so session files stay interchangeable). Context pruning reads the newest one: while the
cache is still warm, rewriting old tool results would throw the cached prefix away for nothing.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Protocol

from clawpi.session.context import iso_to_ms

CACHE_TTL_CUSTOM_TYPE = "openclaw.cache-ttl"
LEGACY_CACHE_TTL_CUSTOM_TYPES = frozenset({CACHE_TTL_CUSTOM_TYPE, "dna.cache-ttl"})
"""Entry types read back; older forks wrote the same data under another prefix."""

_ANTHROPIC_CACHE_PROVIDERS = frozenset({"anthropic"})
_ANTHROPIC_ROUTERS = frozenset({"openrouter"})


class CacheTtlSessionLog(Protocol):
    """The two session-manager calls the bookkeeping needs (SessionManager has them)."""

    def append_custom_entry(self, custom_type: str, data: Any = None) -> str: ...
    def get_entries(self) -> list[Any]: ...


def is_cache_ttl_eligible_provider(provider: str | None, model_id: str | None) -> bool:
    """True where Anthropic-style prompt caching applies: Anthropic itself, or OpenRouter
    serving an `anthropic/*` model."""
    name = (provider or "").strip().lower()
    if name in _ANTHROPIC_CACHE_PROVIDERS:
        return True
    model = (model_id or "").strip().lower()
    return name in _ANTHROPIC_ROUTERS and model.startswith("anthropic/")


def _now_ms() -> int:
    return int(time.time() * 1000)


def append_cache_ttl_timestamp(
    session: CacheTtlSessionLog,
    *,
    provider: str,
    model_id: str,
    timestamp: int | None = None,
) -> str:
    """Record a cache touch (milliseconds since the epoch, now by default); the entry id."""
    data = {
        "timestamp": _now_ms() if timestamp is None else int(timestamp),
        "provider": provider,
        "modelId": model_id,
    }
    return session.append_custom_entry(CACHE_TTL_CUSTOM_TYPE, data)


def cache_ttl_timestamp_of(entry: Mapping[str, Any]) -> int | None:
    """The touch time an entry records, or None when it is not a cache-TTL entry."""
    if (
        entry.get("type") != "custom"
        or entry.get("customType") not in LEGACY_CACHE_TTL_CUSTOM_TYPES
    ):
        return None
    data = entry.get("data")
    if isinstance(data, Mapping):
        value = data.get("timestamp")
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            return int(value)
    # a hand-edited or truncated entry: fall back to when the entry itself was written
    stamped = entry.get("timestamp")
    return iso_to_ms(stamped) if isinstance(stamped, str) else None


def read_last_cache_ttl_timestamp(session: CacheTtlSessionLog) -> int | None:
    """The newest recorded cache touch in the session, or None if there is none."""
    for entry in reversed(session.get_entries()):
        if isinstance(entry, Mapping):
            found = cache_ttl_timestamp_of(entry)
            if found is not None:
                return found
    return None
