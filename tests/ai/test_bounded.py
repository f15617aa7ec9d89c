"""The shared eviction rule of the process-wide caches."""

from __future__ import annotations

from clawpi.ai.bounded import remember


def test_a_full_cache_drops_the_entry_stored_first() -> None:
    cache: dict[str, int] = {}
    for index, key in enumerate("abc"):
        assert remember(cache, key, index, limit=3) == index
    remember(cache, "d", 3, limit=3)
    assert list(cache) == ["b", "c", "d"]


def test_replacing_a_key_in_a_full_cache_drops_nothing() -> None:
    cache = {"a": 0, "b": 1, "c": 2}
    assert remember(cache, "b", 10, limit=3) == 10
    assert cache == {"a": 0, "b": 10, "c": 2}
