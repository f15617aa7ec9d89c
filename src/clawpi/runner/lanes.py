"""Lanes: one session's turns strictly in order, and a global cap on runs at once.

A run first waits for its session lane (`session:<key>`, one at a time), then for the global
lane (`main` by default, `agents.defaults.maxConcurrent` at once). `CommandQueue` is the
in-process `RunQueue`: a caller waits for a slot and then runs its task in its own asyncio task,
so context variables, cancellation and tracebacks behave as if there were no queue.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from clawpi.ai.abort import AbortSignal
from clawpi.runner.config import agent_defaults, positive_int
from clawpi.runner.run_queue import (
    CommandLaneAbortError,
    CommandLaneClearedError,
    GatewayDrainingError,
    RunQueue,
)

T = TypeVar("T")

logger = logging.getLogger("clawpi.runner.lanes")

SESSION_LANE_PREFIX = "session:"
MAIN_LANE = "main"
SUBAGENT_LANE = "subagent"
DEFAULT_MAX_CONCURRENT = 4
DEFAULT_SUBAGENT_MAX_CONCURRENT = 8
WARN_AFTER_MS = 2_000


def resolve_session_lane(key: str | None) -> str:
    """`session:<key>`; a blank key is the `main` session; an already prefixed key stays."""
    cleaned = (key or "").strip() or MAIN_LANE
    return cleaned if cleaned.startswith(SESSION_LANE_PREFIX) else SESSION_LANE_PREFIX + cleaned


def resolve_global_lane(lane: str | None = None) -> str:
    """The global lane a run waits in after its session lane: the given name or `main`."""
    return (lane or "").strip() or MAIN_LANE


def resolve_lane_max_concurrent(config: Mapping[str, Any] | None, lane: str) -> int | None:
    """The configured cap of a global lane: `agents.defaults.maxConcurrent` (4) for `main`,
    `agents.defaults.subagents.maxConcurrent` (8) for `subagent`; None for other lanes."""
    defaults = agent_defaults(config)
    if lane == MAIN_LANE:
        return positive_int(defaults.get("maxConcurrent")) or DEFAULT_MAX_CONCURRENT
    if lane == SUBAGENT_LANE:
        sub = defaults.get("subagents")
        value = sub.get("maxConcurrent") if isinstance(sub, Mapping) else None
        return positive_int(value) or DEFAULT_SUBAGENT_MAX_CONCURRENT
    return None


def _is_probe_lane(lane: str) -> bool:
    return lane.startswith(("auth-probe:", "session:probe-"))


@dataclass(eq=False)
class _Waiter:
    future: asyncio.Future[tuple[int, int]]
    enqueued_at: float


@dataclass
class _Lane:
    name: str
    max_concurrent: int = 1
    waiting: deque[_Waiter] = field(default_factory=deque)
    active: set[int] = field(default_factory=set)
    generation: int = 0
    configured: bool = False
    """Its cap was set: kept when idle (a session's lane, made on demand, is not)."""


def _resolve(
    future: asyncio.Future[Any], value: Any = None, error: BaseException | None = None
) -> bool:
    """Settle a future if still pending; False if it was done or its loop is gone."""
    if future.done():
        return False
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)
    except RuntimeError:
        return False
    return True


class CommandQueue:
    """The in-process `RunQueue`: FIFO lanes, each with its own concurrency cap."""

    def __init__(self, *, warn_after_ms: int = WARN_AFTER_MS) -> None:
        self._lanes: dict[str, _Lane] = {}
        self._tokens = itertools.count(1)
        self._changes: list[asyncio.Future[None]] = []
        self._draining = False
        self.warn_after_ms = warn_after_ms

    # -- configuration and introspection

    def _lane(self, name: str) -> _Lane:
        lane = self._lanes.get(name)
        if lane is None:
            lane = self._lanes[name] = _Lane(name)
        return lane

    def set_max_concurrent(self, lane: str, max_concurrent: int) -> None:
        state = self._lane(resolve_global_lane(lane))
        state.max_concurrent = max(1, int(max_concurrent))
        state.configured = True
        self._pump(state)

    def lane_names(self) -> list[str]:
        """The lanes known now: those with a cap set, and those with work queued or running.
        A session's lane is let go once idle, so a gateway serving many sessions does not
        keep one per session it has ever seen."""
        return list(self._lanes)

    def max_concurrent(self, lane: str) -> int:
        state = self._lanes.get(resolve_global_lane(lane))  # asking makes no lane
        return _Lane.max_concurrent if state is None else state.max_concurrent

    def queue_size(self, lane: str) -> int:
        state = self._lanes.get(resolve_global_lane(lane))
        return 0 if state is None else len(state.waiting) + len(state.active)

    def active_count(self, lane: str) -> int:
        state = self._lanes.get(resolve_global_lane(lane))
        return 0 if state is None else len(state.active)

    def total_queue_size(self) -> int:
        return sum(len(s.waiting) + len(s.active) for s in self._lanes.values())

    @property
    def draining(self) -> bool:
        return self._draining

    def set_draining(self, draining: bool = True) -> None:
        """While draining, new tasks are rejected with `GatewayDrainingError`."""
        self._draining = draining

    # -- running

    async def run(
        self,
        lane: str,
        task: Callable[[], Awaitable[T]],
        *,
        abort_signal: AbortSignal | None = None,
    ) -> T:
        name = resolve_global_lane(lane)
        if self._draining:
            raise GatewayDrainingError(
                f"Not accepting new work in lane {name!r}: the gateway is draining for a restart",
                name,
            )
        if abort_signal is not None and abort_signal.aborted:
            raise CommandLaneAbortError(f"Aborted before it started (lane {name!r})", name)
        state = self._lane(name)
        if not state.waiting and len(state.active) < state.max_concurrent:
            token = next(self._tokens)  # a free slot and nobody ahead: no future to wait on
            state.active.add(token)
            return await self._run_holding(state, name, task, token, state.generation)
        waiter = _Waiter(asyncio.get_running_loop().create_future(), time.monotonic())
        state.waiting.append(waiter)
        remove_listener = (
            abort_signal.add_listener(lambda: self._abort_waiter(state, waiter))
            if abort_signal is not None
            else None
        )
        self._pump(state)
        try:
            token, generation = await waiter.future
        except asyncio.CancelledError:
            self._forget_waiter(state, waiter)
            raise
        finally:
            if remove_listener is not None:
                remove_listener()
        waited_ms = (time.monotonic() - waiter.enqueued_at) * 1000
        if waited_ms >= self.warn_after_ms:
            logger.warning(
                "lane wait exceeded: lane=%s waited=%dms queued_behind=%d",
                name,
                waited_ms,
                len(state.waiting),
            )
        return await self._run_holding(state, name, task, token, generation)

    async def _run_holding(
        self,
        state: _Lane,
        name: str,
        task: Callable[[], Awaitable[T]],
        token: int,
        generation: int,
    ) -> T:
        try:
            return await task()
        except Exception as exc:
            if not _is_probe_lane(name):
                logger.warning("lane task failed: lane=%s error=%s", name, exc)
            raise
        finally:
            self._release(state, token, generation)

    def _forget_waiter(self, state: _Lane, waiter: _Waiter) -> None:
        """The caller went away while waiting: leave the line, or give back a slot that was
        granted in the same instant."""
        try:
            state.waiting.remove(waiter)
        except ValueError:
            future = waiter.future
            if future.done() and not future.cancelled() and future.exception() is None:
                token, generation = future.result()
                self._release(state, token, generation)

    def _abort_waiter(self, state: _Lane, waiter: _Waiter) -> None:
        try:
            state.waiting.remove(waiter)
        except ValueError:
            return
        _resolve(
            waiter.future,
            error=CommandLaneAbortError(f"Aborted while queued in lane {state.name!r}", state.name),
        )
        self._notify()

    def _pump(self, state: _Lane) -> None:
        while state.waiting and len(state.active) < state.max_concurrent:
            waiter = state.waiting.popleft()
            token = next(self._tokens)
            state.active.add(token)
            if not _resolve(waiter.future, (token, state.generation)):
                state.active.discard(token)

    def _release(self, state: _Lane, token: int, generation: int) -> None:
        if generation == state.generation:
            state.active.discard(token)
            self._pump(state)
        self._forget_if_idle(state)
        self._notify()

    def _forget_if_idle(self, state: _Lane) -> None:
        """Drop an idle lane that has no settings (its next task makes it anew). A lane only
        falls idle when its last task ends (a waiter waits only behind a running task), so
        this runs on release. Whoever still holds the object (a task releasing late, after a
        reset) changes only that object."""
        idle = not (state.waiting or state.active or state.configured)
        if idle and self._lanes.get(state.name) is state:
            del self._lanes[state.name]

    def _notify(self) -> None:
        changes, self._changes = self._changes, []
        for future in changes:
            _resolve(future)

    async def _wait_change(self, deadline: float) -> bool:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._changes.append(future)
        try:
            await asyncio.wait_for(future, remaining)
        except TimeoutError:
            return False
        finally:
            if future in self._changes:
                self._changes.remove(future)
        return True

    # -- maintenance

    def clear(self, lane: str) -> int:
        state = self._lanes.get(resolve_global_lane(lane))
        if state is None:
            return 0
        waiting, state.waiting = list(state.waiting), deque()
        for waiter in waiting:
            _resolve(
                waiter.future,
                error=CommandLaneClearedError(f"Lane {state.name!r} was cleared", state.name),
            )
        self._notify()
        return len(waiting)

    def reset_all_lanes(self) -> None:
        """After an in-process restart: forget running tasks (their late completions no longer
        count against the cap) and start the queued ones."""
        for state in list(self._lanes.values()):
            state.generation += 1
            state.active.clear()
            self._pump(state)
            self._forget_if_idle(state)
        self._notify()

    async def wait_for_active_tasks(self, timeout_ms: int) -> bool:
        deadline = time.monotonic() + max(0, timeout_ms) / 1000
        watched = [(s, s.generation, t) for s in self._lanes.values() for t in list(s.active)]
        while True:
            if not any(s.generation == g and t in s.active for s, g, t in watched):
                return True
            if not await self._wait_change(deadline):
                return False

    async def drain(self, timeout_ms: int) -> bool:
        self._draining = True
        deadline = time.monotonic() + max(0, timeout_ms) / 1000
        while self.total_queue_size():
            if not await self._wait_change(deadline):
                return False
        return True


_default_queue: CommandQueue | None = None


def default_run_queue() -> CommandQueue:
    """The process-wide queue the runner uses unless given another `RunQueue`."""
    global _default_queue
    if _default_queue is None:
        _default_queue = CommandQueue()
    return _default_queue


async def enqueue_in_lanes(
    session_key: str | None,
    task: Callable[[], Awaitable[T]],
    *,
    config: Mapping[str, Any] | None = None,
    lane: str | None = None,
    abort_signal: AbortSignal | None = None,
    queue: RunQueue | None = None,
) -> T:
    """Run `task` after its session's earlier turns, within the global lane's cap."""
    run_queue: RunQueue = queue if queue is not None else default_run_queue()
    session_lane = resolve_session_lane(session_key)
    global_lane = resolve_global_lane(lane)
    cap = resolve_lane_max_concurrent(config, global_lane)
    if cap is not None:
        run_queue.set_max_concurrent(global_lane, cap)

    async def in_global_lane() -> T:
        return await run_queue.run(global_lane, task, abort_signal=abort_signal)

    return await run_queue.run(session_lane, in_global_lane, abort_signal=abort_signal)
