"""PrefixMemo: a fact about a growing list, read only where the list grew."""

from __future__ import annotations

import gc
import operator
import random
from collections.abc import Sequence
from typing import Any

from clawpi.ai.prefix_memo import PrefixMemo


class Owner:
    """A session stand-in (weakly referenced by the memo)."""


def _recording() -> tuple[PrefixMemo[int], list[list[Any]]]:
    seen: list[list[Any]] = []

    def total(items: Sequence[dict[str, int]]) -> int:
        seen.append(list(items))
        return sum(item["n"] for item in items)

    return PrefixMemo(total, operator.add), seen


def test_a_list_grown_with_the_same_objects_is_read_only_where_it_grew() -> None:
    memo, seen = _recording()
    owner = Owner()
    first = [{"n": 1}, {"n": 2}]
    assert memo(owner, first) == 3
    grown = [*first, {"n": 4}]  # a new list holding the same objects, plus one
    assert memo(owner, grown) == 7
    assert seen[-1] == [{"n": 4}]
    reads = len(seen)
    assert memo(owner, grown) == 7  # nothing new: nothing read
    assert len(seen) == reads


def test_a_replaced_item_makes_it_read_the_whole_list_again() -> None:
    memo, seen = _recording()
    owner = Owner()
    items = [{"n": 1}, {"n": 2}]
    memo(owner, items)
    changed = [{"n": 5}, items[1], {"n": 3}]
    assert memo(owner, changed) == 10
    assert len(seen[-1]) == 3
    shorter = changed[:1]
    assert memo(owner, shorter) == 5
    assert len(seen[-1]) == 1


def test_owners_are_apart_none_is_never_remembered_and_a_gone_owner_is_forgotten() -> None:
    memo, seen = _recording()
    a, b = Owner(), Owner()
    items = [{"n": 1}]
    memo(a, items)
    memo(b, items)
    assert len(seen) == 2  # b did not reuse what a found
    memo(None, items)
    memo(None, items)
    assert len(seen) == 4
    del a
    gc.collect()
    assert len(memo._seen) == 1


def test_the_fact_always_equals_reading_the_whole_list() -> None:
    rng = random.Random(7)
    memo: PrefixMemo[bool] = PrefixMemo(
        lambda items: all(item["role"] != "custom" for item in items), operator.and_
    )
    owner = Owner()
    items: list[dict[str, str]] = []
    for _ in range(300):
        action = rng.random()
        if action < 0.7:
            items = [*items, {"role": rng.choice(["user", "assistant", "custom"])}]
        elif action < 0.85 and items:
            index = rng.randrange(len(items))
            items = [*items[:index], {"role": "user"}, *items[index + 1 :]]
        else:
            items = items[rng.randrange(len(items) + 1) :]
        assert memo(owner, items) == all(item["role"] != "custom" for item in items)


def test_the_callers_list_is_never_kept_so_changing_it_in_place_is_seen() -> None:
    memo: PrefixMemo[bool] = PrefixMemo(
        lambda items: all(item["role"] != "custom" for item in items), operator.and_
    )
    owner = Owner()
    items = [{"role": "user"}, {"role": "assistant"}]
    assert memo(owner, items) is True
    items[0] = {"role": "custom"}  # the caller edits its own list in place
    assert memo(owner, items) is False
