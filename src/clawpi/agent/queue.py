"""A steering or follow-up queue that never loses a message.

Draining does not forget: drained messages stay "in flight" until the loop delivers them (their
`message_end`). When a run ends without delivering them (abort, error, cancellation) they go back
to the front of the queue in their original order. Only `clear()` throws messages away.
"""

from __future__ import annotations

from collections import deque

from clawpi.agent.config import QueueMode
from clawpi.agent.events import AgentMessage


class MessageQueue:
    __slots__ = ("_in_flight", "_queued", "mode")

    def __init__(self, mode: QueueMode = "one-at-a-time") -> None:
        self.mode: QueueMode = "one-at-a-time"
        self.set_mode(mode)
        self._queued: deque[AgentMessage] = deque()
        self._in_flight: list[AgentMessage] = []

    def set_mode(self, mode: QueueMode) -> None:
        """ "all" drains everything queued at once; "one-at-a-time" one message per turn."""
        if mode not in ("all", "one-at-a-time"):
            raise ValueError(f"queue mode must be 'all' or 'one-at-a-time', not {mode!r}")
        self.mode = mode

    def __len__(self) -> int:
        return len(self._queued)

    @property
    def messages(self) -> list[AgentMessage]:
        """What is queued now (a copy), oldest first."""
        return list(self._queued)

    def push(self, message: AgentMessage) -> None:
        self._queued.append(message)

    def drain(self) -> list[AgentMessage]:
        """The next message (one-at-a-time) or all of them; held in flight until delivered."""
        queued = self._queued
        if not queued:
            return []
        if self.mode == "all":
            taken = list(queued)
            queued.clear()
        else:
            taken = [queued.popleft()]
        self._in_flight.extend(taken)
        return taken

    def commit(self, message: AgentMessage) -> bool:
        """`message` reached the transcript; True when it was one of ours."""
        in_flight = self._in_flight
        for index, candidate in enumerate(in_flight):
            if candidate is message:
                del in_flight[index]
                return True
        return False

    def restore(self) -> None:
        """Put undelivered drained messages back at the front, in their original order."""
        if self._in_flight:
            self._queued.extendleft(reversed(self._in_flight))
            self._in_flight.clear()

    def clear(self) -> list[AgentMessage]:
        """Drop everything queued (and forget what is in flight); returns what was queued."""
        dropped = list(self._queued)
        self._queued.clear()
        self._in_flight.clear()
        return dropped
