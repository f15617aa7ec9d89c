"""A fact about a list that grows between calls, found by looking only at what is new.

A session's history on its next turn is its last history plus a few messages: the same objects,
in the same order. Reading every message on every turn costs a cache miss or more per message
once a session is long (those messages were last touched a turn ago). So the fact found last
time is kept per owner (a session), with the list it was found in; a list that starts with those
very objects (compared by identity, in C, without reading them) has the same fact for that part,
and only its new tail is read. An item that is an equal copy rather than the same object (the
session keeps its own copy of a message it saves) is compared by value, and matches too.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class PrefixMemo(Generic[T]):
    """`examine(items)` per owner, reading only the items added since the owner's last call.

    For facts that add up: `combine(examine(a), examine(b))` must equal `examine(a + b)`, and
    `combine` must not change its arguments. Items must not be changed in place between calls
    (a list whose items were replaced, not mutated, is read in full again).
    """

    def __init__(self, examine: Callable[[Sequence[Any]], T], combine: Callable[[T, T], T]) -> None:
        self._examine = examine
        self._combine = combine
        self._seen: weakref.WeakKeyDictionary[Any, tuple[list[Any], T]] = (
            weakref.WeakKeyDictionary()
        )

    def __call__(self, owner: object | None, items: Sequence[Any]) -> T:
        if owner is None:
            return self._examine(items)
        current = list(items)
        seen = self._seen.get(owner)
        if seen is None:
            fact = self._examine(current)
        else:
            previous, fact = seen
            count = len(previous)
            if len(current) >= count and current[:count] == previous:
                if len(current) > count:
                    fact = self._combine(fact, self._examine(current[count:]))
            else:
                fact = self._examine(current)
        self._seen[owner] = (current, fact)
        return fact
