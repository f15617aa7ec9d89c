"""PrefixMemo: a fact about a growing list, read only where the list grew; ResumableMemo: a
list-to-list step over a growing list, run again only from where its output can change."""

from __future__ import annotations

import gc
import operator
import random
from collections.abc import Sequence
from typing import Any

import pytest

from clawpi.ai.prefix_memo import Pass, PrefixMemo, ResumableMemo


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


def _pairs(calls: list[tuple[list[Any], int, Any, Any]]) -> ResumableMemo[int]:
    """A step that joins each "q" to the "a" after it; a "q" still waiting stays unsettled.
    Its state counts the pairs made so far, and every pass is recorded in `calls`."""

    def step(items: list[Any], start: int, state: int | None, key: Any) -> Pass[int] | None:
        calls.append((list(items), start, state, key))
        if "reset" in items and start:
            return None  # stands for news that changes earlier output: a whole pass instead
        made = state or 0
        out: list[Any] = []
        settled = settled_out = 0
        index = 0
        while index < len(items):
            settled, settled_out = index, len(out)
            if items[index] == "q" and index + 1 < len(items) and items[index + 1] == "a":
                made += 1
                out.append(f"{key or ''}qa{made}")
                index += 2
                settled, settled_out = index, len(out)
            elif items[index] == "q":
                out.append("q?")
                index += 1
            else:
                made = 0 if items[index] == "reset" else made
                out.append(items[index])
                index += 1
                settled, settled_out = index, len(out)
        return Pass(out, settled, settled_out, made)  # a waiting "q" made no pair yet

    return ResumableMemo(step)


def test_a_step_goes_on_from_its_settled_items_and_redoes_what_was_unsettled() -> None:
    calls: list[tuple[list[Any], int, Any, Any]] = []
    memo = _pairs(calls)
    owner = Owner()
    assert memo(owner, ["x", "q", "a", "q"]) == ["x", "qa1", "q?"]
    assert calls[-1][:3] == (["x", "q", "a", "q"], 0, None)
    # the waiting "q" was not settled: the next pass starts at it, with the count so far
    assert memo(owner, ["x", "q", "a", "q", "a"]) == ["x", "qa1", "qa2"]
    assert calls[-1][:3] == (["q", "a"], 3, 1)
    assert memo(owner, ["x", "q", "a", "q", "a"]) == ["x", "qa1", "qa2"]
    assert calls[-1][:3] == ([], 5, 2)  # nothing new: an empty pass


def test_a_step_that_cannot_go_on_gets_the_whole_list_and_a_new_key_starts_afresh() -> None:
    calls: list[tuple[list[Any], int, Any, Any]] = []
    memo = _pairs(calls)
    owner = Owner()
    memo(owner, ["q", "a"])
    assert memo(owner, ["q", "a", "reset", "q", "a"]) == ["qa1", "reset", "qa1"]
    assert [c[1] for c in calls[-2:]] == [2, 0]  # declined at 2, then a whole pass
    assert memo(owner, ["q", "a", "reset", "q", "a"], key="k") == ["kqa1", "reset", "kqa1"]
    assert calls[-1][1:] == (0, None, "k")


def test_a_changed_prefix_or_a_failed_pass_starts_afresh() -> None:
    calls: list[tuple[list[Any], int, Any, Any]] = []
    memo = _pairs(calls)
    owner = Owner()
    first = {"n": 1}
    memo(owner, [first, "q", "a"])
    memo(owner, [{"n": 2}, "q", "a"])
    assert calls[-1][1:3] == (0, None)
    memo(owner, [{"n": 2}, "q", "a"])  # an equal copy of a settled item still matches
    assert calls[-1][1:3] == (3, 1)

    starts: list[int] = []

    def inverse(items: list[Any], start: int, state: Any, key: Any) -> Pass[None]:
        starts.append(start)
        return Pass([1 / item for item in items], len(items), len(items), None)

    failing: ResumableMemo[None] = ResumableMemo(inverse)
    assert failing(owner, [1, 2]) == [1.0, 0.5]
    with pytest.raises(ZeroDivisionError):
        failing(owner, [1, 2, 0])
    assert failing(owner, [1, 2, 4]) == [1.0, 0.5, 0.25]
    assert starts == [0, 2, 0]  # after the failure, nothing of the earlier pass was trusted


def test_a_resumable_step_without_an_owner_always_reads_the_whole_list() -> None:
    calls: list[tuple[list[Any], int, Any, Any]] = []
    memo = _pairs(calls)
    assert memo(None, ["q", "a"]) == ["qa1"]
    assert memo(None, ["q", "a", "q", "a"]) == ["qa1", "qa2"]
    assert [c[1] for c in calls] == [0, 0]
    assert len(memo._seen) == 0


def test_a_resumed_step_always_equals_a_whole_pass() -> None:
    rng = random.Random(11)
    calls: list[tuple[list[Any], int, Any, Any]] = []
    memo, whole = _pairs(calls), _pairs([])
    owner = Owner()
    items: list[Any] = []
    for _ in range(400):
        action = rng.random()
        if action < 0.75:
            items = [*items, rng.choice(["q", "a", "x", "reset"])]
        elif action < 0.9:
            items = items[: rng.randrange(len(items) + 1)]
        else:
            items = items[rng.randrange(len(items) + 1) :]
        assert memo(owner, items) == whole(None, items)
    assert sum(1 for c in calls if c[1]) > 100  # most passes went on from a settled point


def test_items_settled_by_a_later_one_are_read_again_when_that_one_is_gone() -> None:
    """Each item's output says whether another follows it, so all but the last are settled,
    closed by the last: cut the list back to them and they must be read again."""
    starts: list[int] = []

    def step(items: list[Any], start: int, state: Any, key: Any) -> Pass[None]:
        starts.append(start)
        out = [f"{item}+" for item in items[:-1]] + items[-1:]
        settled = max(len(items) - 1, 0)
        return Pass(out, settled, settled, None, closed_by=1 if items else 0)

    memo: ResumableMemo[None] = ResumableMemo(step)
    owner = Owner()
    assert memo(owner, ["a", "b", "c"]) == ["a+", "b+", "c"]
    assert memo(owner, ["a", "b", "c", "d"]) == ["a+", "b+", "c+", "d"]
    assert starts[-1] == 2  # went on from the last item, which was still there
    assert memo(owner, ["a", "b", "c"]) == ["a+", "b+", "c"]
    assert starts[-1] == 0  # "d", which closed "c", is gone: the whole list again
