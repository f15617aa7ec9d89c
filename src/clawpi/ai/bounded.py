"""The process-wide caches' one eviction rule: a dict keeps insertion order, so when it is
full the entry stored first goes (cheaper than an LRU, and enough for caches whose keys are a
handful of configs, schemas or paths)."""

from __future__ import annotations

from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


def remember(cache: dict[K, V], key: K, value: V, limit: int) -> V:
    """Store `value` under `key` (dropping the oldest entry when `cache` holds `limit`) and
    return it."""
    if key not in cache and len(cache) >= limit:
        del cache[next(iter(cache))]
    cache[key] = value
    return value
