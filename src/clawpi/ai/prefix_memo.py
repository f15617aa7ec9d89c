"""A fact about a list that grows between calls, found by looking only at what is new; and
a list-to-list step over such a list, run again only from where its output can still change.

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
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")
S = TypeVar("S")


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


@dataclass(frozen=True, slots=True)
class Pass(Generic[S]):
    """What one pass of a list-to-list step produced.

    The first `settled` items it read map to exactly `outputs[:settled_outputs]` in any list
    that starts with them and the `closed_by` items after them, and `state` is all the step
    needs to go on from there. `closed_by` is for a step whose output for an item waits on a
    later one: a turn is paired once the next turn starts, so that next turn's first message
    must still be there, unchanged, for the turns before it to stay as they were.
    """

    outputs: list[Any]
    settled: int
    settled_outputs: int
    state: S
    closed_by: int = 0

    def outputs_for(self, items: list[Any]) -> list[Any]:
        """The outputs, or `items` itself when each output is its item unchanged (so a clean
        list comes back as the same list)."""
        out = self.outputs
        if len(out) == len(items) and all(a is b for a, b in zip(out, items, strict=True)):
            return items
        return out


Step = Callable[[list[Any], int, "S | None", Any], "Pass[S] | None"]
"""`step(items, start, state, key)`: a pass over `items`, which sit at index `start` of the
whole list, going on from `state` (None at the start of a list). It returns None when it cannot
go on (something in `items` changes what came before: a new compaction summary), but never when
`start` is 0."""


@dataclass(frozen=True, slots=True)
class _Seen(Generic[S]):
    key: Any
    settled: int
    matched_items: list[Any]
    """The settled items and those that closed them: a list must start with all of these."""
    outputs: list[Any]
    settled_outputs: int
    state: S


class ResumableMemo(Generic[S]):
    """A list-to-list step per owner, run again only from where its last output can change.

    `PrefixMemo`'s counterpart for steps that rewrite a history rather than learn a fact about
    it: a step that maps each message on its own settles every message it reads; one that
    pairs a turn's tool calls with the results after them settles all but the last turn; one
    that carries state from message to message (ids handed out so far) hands that state on.
    On the next call, a list that still starts with the settled items and those that closed
    them (the same objects, or equal ones) keeps the settled outputs, and only its rest is
    passed through the step. `key` is the
    step's parameters: a different key starts afresh. The step must be pure: the same items,
    start, state and key give the same pass.
    """

    def __init__(self, step: Step[S]) -> None:
        self._step = step
        self._seen: weakref.WeakKeyDictionary[Any, _Seen[S]] = weakref.WeakKeyDictionary()

    def __call__(self, owner: object | None, items: Sequence[Any], key: Any = None) -> list[Any]:
        if owner is None:
            return self._whole(items, key).outputs
        # Dropped first: a pass that fails half-way must not leave a state it changed behind.
        seen = self._seen.pop(owner, None)
        current = list(items)
        if seen is not None and seen.key == key:
            matched = len(seen.matched_items)
            if len(current) >= matched and current[:matched] == seen.matched_items:
                count = seen.settled
                part = self._step(current[count:], count, seen.state, key)
                if part is not None:
                    outputs = seen.outputs[: seen.settled_outputs] + part.outputs
                    self._remember(owner, key, current, count, part, outputs)
                    return outputs
        whole = self._whole(current, key)
        self._remember(owner, key, current, 0, whole, whole.outputs)
        return whole.outputs

    def _remember(
        self,
        owner: object,
        key: Any,
        items: list[Any],
        start: int,
        part: Pass[S],
        outputs: list[Any],
    ) -> None:
        """What the pass over `items[start:]` settled, as a state of the whole list."""
        settled = start + part.settled
        settled_outputs = len(outputs) - len(part.outputs) + part.settled_outputs
        matched = items[: settled + part.closed_by]
        self._seen[owner] = _Seen(key, settled, matched, outputs, settled_outputs, part.state)

    def _whole(self, items: Sequence[Any], key: Any) -> Pass[S]:
        whole = self._step(list(items), 0, None, key)
        if whole is None:
            raise RuntimeError("a resumable step declined a pass from the start of its list")
        return whole
