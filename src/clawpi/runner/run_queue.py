"""The `RunQueue` interface: named FIFO lanes that bound how many runs go at once.

The runner only talks to this protocol, so a gateway that outgrows one process can plug in a
shared implementation (a Redis stream per lane, say) without touching the run loop. The
in-process implementation is `clawpi.runner.lanes.CommandQueue`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from clawpi.ai.abort import AbortSignal
from clawpi.errors import ClawpiError

T = TypeVar("T")


class CommandLaneError(ClawpiError):
    """A queued task never started."""

    def __init__(self, message: str, lane: str) -> None:
        super().__init__(message)
        self.lane = lane


class CommandLaneAbortError(CommandLaneError):
    """The task's abort signal fired while it was still waiting in its lane."""


class CommandLaneClearedError(CommandLaneError):
    """The lane was cleared while the task was still waiting in it."""


class GatewayDrainingError(CommandLaneError):
    """The queue is draining for a restart and takes no new work."""


class RunQueue(Protocol):
    """FIFO lanes with a per-lane concurrency cap. Running tasks are never cancelled by the
    queue itself: only waiting ones can be aborted or cleared."""

    async def run(
        self,
        lane: str,
        task: Callable[[], Awaitable[T]],
        *,
        abort_signal: AbortSignal | None = None,
    ) -> T:
        """Wait for a slot in `lane`, run `task`, return its result (or raise its error)."""
        ...

    def set_max_concurrent(self, lane: str, max_concurrent: int) -> None: ...

    def queue_size(self, lane: str) -> int:
        """Waiting plus running tasks of a lane."""
        ...

    def active_count(self, lane: str) -> int: ...

    def clear(self, lane: str) -> int:
        """Reject every waiting task of a lane with `CommandLaneClearedError`; how many."""
        ...

    async def wait_for_active_tasks(self, timeout_ms: int) -> bool:
        """Wait until the tasks running now have finished; False on timeout."""
        ...

    async def drain(self, timeout_ms: int) -> bool:
        """Stop taking new tasks, then wait for everything queued and running; False on
        timeout."""
        ...
