"""An attempt's clocks: the run deadline (with one compaction grace) and the LLM idle watchdog.

The idle watchdog is armed only while a model call is in flight (from `turn_start` to the
assistant's `message_end`), so a long tool never counts as a silent model.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

RUN_TIMEOUT_MESSAGE = "request timed out"
COMPACTION_WAIT_TIMEOUT_S = 60.0


def idle_timeout_message(idle_ms: int) -> str:
    return f"LLM idle timeout ({idle_ms // 1000}s): no response from model"


def should_flag_compaction_timeout(
    *, is_timeout: bool, is_compaction_pending_or_retrying: bool, is_compaction_in_flight: bool
) -> bool:
    """A timeout counts as "during compaction" only if compaction was pending or running."""
    return is_timeout and (is_compaction_pending_or_retrying or is_compaction_in_flight)


class AttemptTimers:
    def __init__(
        self,
        *,
        timeout_ms: int,
        idle_timeout_ms: int,
        abort: Callable[[str], None],
        is_compacting: Callable[[], bool],
        compaction_grace_ms: int = 0,
    ) -> None:
        self.timeout_ms = timeout_ms
        self.idle_timeout_ms = idle_timeout_ms
        self._abort = abort
        self._is_compacting = is_compacting
        self._grace_ms = compaction_grace_ms
        self.timed_out = False
        self.idle_timed_out = False
        self.timed_out_during_compaction = False
        self._armed = False
        self._last = time.monotonic()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        if self.timeout_ms > 0:
            self._tasks.append(asyncio.create_task(self._deadline()))
        if self.idle_timeout_ms > 0:
            self._tasks.append(asyncio.create_task(self._idle_watch()))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    def on_event(self, event: Any) -> None:
        """Feed every session event: arms, touches and disarms the idle watchdog."""
        kind = event.get("type")
        self._last = time.monotonic()
        if kind == "turn_start":
            self._armed = True
        elif (
            kind == "message_end" and (event.get("message") or {}).get("role") == "assistant"
        ) or kind in ("agent_end", "auto_compaction_start"):
            self._armed = False

    async def _deadline(self) -> None:
        await asyncio.sleep(self.timeout_ms / 1000)
        if self._grace_ms > 0 and self._is_compacting():
            await asyncio.sleep(self._grace_ms / 1000)  # one grace period for a running compaction
        self.timed_out = True
        self.timed_out_during_compaction = self._is_compacting()
        self._abort(RUN_TIMEOUT_MESSAGE)

    async def _idle_watch(self) -> None:
        limit = self.idle_timeout_ms / 1000
        step = min(max(limit / 4, 0.01), 1.0)
        while True:
            await asyncio.sleep(step)
            if self._armed and time.monotonic() - self._last > limit:
                self.timed_out = True
                self.idle_timed_out = True
                self._abort(idle_timeout_message(self.idle_timeout_ms))
                return
