"""One abort signal shared by a model stream and every tool of a run.

asyncio cancellation alone cannot reach a subprocess or a blocking SDK read owned by another
task, so the signal also runs listeners (kill a process, close a response) when it fires.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from clawpi.errors import AbortedError


class AbortSignal:
    """Fires once; listeners run synchronously at that moment (or at once if already fired)."""

    __slots__ = ("_aborted", "_event", "_listeners", "_reason")

    def __init__(self) -> None:
        self._aborted = False
        self._reason: str | None = None
        self._listeners: list[Callable[[], None]] = []
        self._event: asyncio.Event | None = None

    @property
    def aborted(self) -> bool:
        return self._aborted

    @property
    def reason(self) -> str | None:
        return self._reason

    def add_listener(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Register `listener`; returns a function that removes it again."""
        if self._aborted:
            listener()
            return lambda: None
        self._listeners.append(listener)

        def remove() -> None:
            try:
                self._listeners.remove(listener)
            except ValueError:
                pass

        return remove

    def throw_if_aborted(self) -> None:
        if self._aborted:
            raise AbortedError(self._reason or "Operation aborted")

    async def wait(self) -> None:
        """Return once the signal has fired."""
        if self._aborted:
            return
        if self._event is None:
            self._event = asyncio.Event()
        await self._event.wait()

    def _fire(self, reason: str | None) -> None:
        if self._aborted:
            return
        self._aborted = True
        self._reason = reason
        listeners, self._listeners = self._listeners, []
        for listener in listeners:
            listener()
        if self._event is not None:
            self._event.set()


class AbortController:
    """Owns an `AbortSignal` and is the only thing that may fire it."""

    __slots__ = ("signal",)

    def __init__(self) -> None:
        self.signal = AbortSignal()

    def abort(self, reason: str | None = None) -> None:
        self.signal._fire(reason)


def any_signal(*signals: AbortSignal | None) -> AbortSignal:
    """A signal that fires when any of `signals` fires (a run's signal plus a timeout's)."""
    controller = AbortController()
    for signal in signals:
        if signal is not None:
            signal.add_listener(_forward(signal, controller))
    return controller.signal


def _forward(source: AbortSignal, target: AbortController) -> Callable[[], None]:
    return lambda: target.abort(source.reason)
