"""An attempt's clocks: the run deadline (with one compaction grace) and the LLM idle watchdog.

The idle watchdog is armed only while a model call is in flight (from `turn_start` to the
assistant's `message_end`), so a long tool never counts as a silent model.
"""

from __future__ import annotations

import asyncio
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
    """Timer callbacks on the running loop, not tasks: a turn that ends in time costs two
    handles scheduled and cancelled, with no task switches."""

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
        self._graced = False
        self._deadline: asyncio.TimerHandle | None = None
        self._idle: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        loop = self._loop = asyncio.get_running_loop()
        if self.timeout_ms > 0:
            self._deadline = loop.call_later(self.timeout_ms / 1000, self._on_deadline)
        if self.idle_timeout_ms > 0:
            self._idle = loop.call_later(self.idle_timeout_ms / 1000, self._on_idle_check)

    def stop(self) -> None:
        for handle in (self._deadline, self._idle):
            if handle is not None:
                handle.cancel()
        self._deadline = self._idle = None

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

    def _on_deadline(self) -> None:
        self._deadline = None
        if self._grace_ms > 0 and not self._graced and self._is_compacting():
            self._graced = True  # one grace period for a running compaction
            assert self._loop is not None
            self._deadline = self._loop.call_later(self._grace_ms / 1000, self._on_deadline)
            return
        self.timed_out = True
        self.timed_out_during_compaction = self._is_compacting()
        self._abort(RUN_TIMEOUT_MESSAGE)

    def _on_idle_check(self) -> None:
        """Fires at the earliest moment the model could have been silent too long: then
        either it was (abort), or the check moves to the new earliest moment."""
        self._idle = None
        limit = self.idle_timeout_ms / 1000
        wait = limit
        if self._armed:
            silent = time.monotonic() - self._last
            if silent >= limit:
                self.timed_out = True
                self.idle_timed_out = True
                self._abort(idle_timeout_message(self.idle_timeout_ms))
                return
            wait = limit - silent
        assert self._loop is not None
        self._idle = self._loop.call_later(wait, self._on_idle_check)
