"""The active run registry: steer, abort or wait for the run a session has in flight.

A gateway receiving a second message while a turn runs can inject it into that turn
(steering), a `/stop` can abort it, and a `/new` can wait for it to end. The attempt registers
a handle when it starts and clears it in `finally`; a clear with a handle that is no longer the
registered one (a retry registered its own meanwhile) is ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Literal, Protocol

logger = logging.getLogger("clawpi.runner.runs")

WAIT_FOR_RUN_END_TIMEOUT_MS = 15_000
_WAIT_FLOOR_MS = 100
_POLL_DEFAULT_MS = 250
_POLL_FLOOR_MS = 10

AbortMode = Literal["all", "compacting"]


class EmbeddedRunHandle(Protocol):
    """What the registry needs from a running attempt (implemented over `AgentSession`).

    A handle may also offer `is_stopped() -> bool`; when it does, steering is refused only
    once the run has stopped, rather than whenever it is between two streams.
    """

    def queue_message(self, text: str) -> Awaitable[None] | None: ...

    def is_streaming(self) -> bool: ...

    def is_compacting(self) -> bool: ...

    def abort(self) -> Awaitable[None] | None: ...


@dataclass
class ActiveRunRegistry:
    """session id -> handle, plus session key -> session id. One per process by default."""

    runs: dict[str, EmbeddedRunHandle] = field(default_factory=dict)
    session_ids_by_key: dict[str, str] = field(default_factory=dict)
    _waiters: dict[str, list[asyncio.Future[bool]]] = field(default_factory=dict)
    _pending: set[asyncio.Task[None]] = field(default_factory=set)

    def set_active(
        self, session_id: str, handle: EmbeddedRunHandle, session_key: str | None = None
    ) -> None:
        self.runs[session_id] = handle
        if session_key:
            self.session_ids_by_key[session_key] = session_id
        if not session_id.startswith("probe-"):
            logger.debug("run registered: session=%s active=%d", session_id, len(self.runs))

    def clear_active(
        self, session_id: str, handle: EmbeddedRunHandle, session_key: str | None = None
    ) -> bool:
        """Unregister, but only if `handle` is still the registered one; True if it was."""
        if self.runs.get(session_id) is not handle:
            return False
        self._remove(session_id, session_key)
        return True

    def force_detach(self, session_id: str, session_key: str | None = None) -> bool:
        """Unregister whatever handle is there (second phase of an abort that did not end)."""
        if session_id not in self.runs:
            return False
        self._remove(session_id, session_key)
        return True

    def _remove(self, session_id: str, session_key: str | None) -> None:
        del self.runs[session_id]
        keys = [session_key] if session_key else list(self.session_ids_by_key)
        for key in keys:
            if key is not None and self.session_ids_by_key.get(key) == session_id:
                del self.session_ids_by_key[key]
        for waiter in self._waiters.pop(session_id, []):
            if not waiter.done():
                with contextlib.suppress(RuntimeError):
                    waiter.set_result(True)

    def resolve_session_id(self, session_key: str) -> str | None:
        return self.session_ids_by_key.get(session_key)

    def is_active(self, session_id: str) -> bool:
        return session_id in self.runs

    def is_streaming(self, session_id: str) -> bool:
        handle = self.runs.get(session_id)
        return handle is not None and handle.is_streaming()

    def queue_message(self, session_id: str, text: str) -> bool:
        """Steer `text` into the running turn; False when there is none that can take it."""
        handle = self.runs.get(session_id)
        if handle is None or handle.is_compacting():
            return False
        is_stopped = getattr(handle, "is_stopped", None)
        if callable(is_stopped):
            if is_stopped():
                return False
        elif not handle.is_streaming():
            return False
        self._fire_and_forget(handle.queue_message(text), "steering message was not delivered")
        return True

    def _fire_and_forget(self, result: Awaitable[None] | None, failure: str) -> None:
        if result is None:
            return
        task = asyncio.ensure_future(result)
        self._pending.add(task)

        def done(finished: asyncio.Future[None]) -> None:
            self._pending.discard(finished)
            if not finished.cancelled() and finished.exception() is not None:
                logger.warning("%s: %s", failure, finished.exception())

        task.add_done_callback(done)

    def abort(self, session_id: str | None = None, *, mode: AbortMode | None = None) -> bool:
        """Abort one session's run, or every run (`mode="all"`), or the ones compacting."""
        if session_id is not None:
            handle = self.runs.get(session_id)
            if handle is None:
                return False
            self._fire_and_forget(handle.abort(), "abort failed")
            return True
        if mode is None:
            return False
        targets = [h for h in list(self.runs.values()) if mode == "all" or h.is_compacting()]
        for handle in targets:
            self._fire_and_forget(handle.abort(), "abort failed")
        return bool(targets)

    async def wait_for_run_end(
        self, session_id: str, timeout_ms: int = WAIT_FOR_RUN_END_TIMEOUT_MS
    ) -> bool:
        """True once the session's run is cleared (at once if none), False on timeout."""
        if session_id not in self.runs:
            return True
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(session_id, []).append(future)
        try:
            return await asyncio.wait_for(future, max(_WAIT_FLOOR_MS, timeout_ms) / 1000)
        except TimeoutError:
            return False
        finally:
            waiters = self._waiters.get(session_id)
            if waiters and future in waiters:
                waiters.remove(future)
                if not waiters:
                    del self._waiters[session_id]

    async def wait_for_all_runs(
        self, timeout_ms: int = WAIT_FOR_RUN_END_TIMEOUT_MS, poll_ms: int = _POLL_DEFAULT_MS
    ) -> bool:
        """True once no run is active, False on timeout."""
        deadline = time.monotonic() + max(0, timeout_ms) / 1000
        step = max(_POLL_FLOOR_MS, poll_ms) / 1000
        while self.runs:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            await asyncio.sleep(min(step, remaining))
        return True


_registry = ActiveRunRegistry()


def active_run_registry() -> ActiveRunRegistry:
    """The process-wide registry the functions below use."""
    return _registry


def set_active_embedded_run(
    session_id: str, handle: EmbeddedRunHandle, session_key: str | None = None
) -> None:
    _registry.set_active(session_id, handle, session_key)


def clear_active_embedded_run(
    session_id: str, handle: EmbeddedRunHandle, session_key: str | None = None
) -> bool:
    return _registry.clear_active(session_id, handle, session_key)


def force_detach_embedded_run(session_id: str, session_key: str | None = None) -> bool:
    return _registry.force_detach(session_id, session_key)


def queue_embedded_pi_message(session_id: str, text: str) -> bool:
    return _registry.queue_message(session_id, text)


def abort_embedded_pi_run(session_id: str | None = None, *, mode: AbortMode | None = None) -> bool:
    return _registry.abort(session_id, mode=mode)


async def wait_for_embedded_pi_run_end(
    session_id: str, timeout_ms: int = WAIT_FOR_RUN_END_TIMEOUT_MS
) -> bool:
    return await _registry.wait_for_run_end(session_id, timeout_ms)


async def wait_for_active_embedded_runs(
    timeout_ms: int = WAIT_FOR_RUN_END_TIMEOUT_MS, poll_ms: int = _POLL_DEFAULT_MS
) -> bool:
    return await _registry.wait_for_all_runs(timeout_ms, poll_ms)


def is_embedded_pi_run_active(session_id: str) -> bool:
    return _registry.is_active(session_id)


def is_embedded_pi_run_streaming(session_id: str) -> bool:
    return _registry.is_streaming(session_id)


def resolve_active_embedded_run_session_id(session_key: str) -> str | None:
    return _registry.resolve_session_id(session_key)


def get_active_embedded_run_count() -> int:
    return len(_registry.runs)
