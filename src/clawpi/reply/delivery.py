"""Calling reply callbacks in event order, whether they are plain functions or coroutines."""

from __future__ import annotations

import asyncio
import collections
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)


class OrderedDelivery:
    """Runs callbacks in event order; async callbacks are awaited one after another."""

    def __init__(self) -> None:
        self._queue: collections.deque[Awaitable[Any]] = collections.deque()
        self._task: asyncio.Task[None] | None = None

    def call(self, callback: Callable[[Any], Any] | None, value: Any, what: str) -> None:
        if callback is None:
            return
        try:
            result = callback(value)
        except Exception:
            log.warning("%s callback failed", what, exc_info=True)
            return
        if inspect.isawaitable(result):
            self._queue.append(result)
            if self._task is None or self._task.done():
                self._task = asyncio.get_running_loop().create_task(self._run())

    def call_noarg(self, callback: Callable[[], Any] | None, what: str) -> None:
        if callback is not None:
            self.call(lambda _: callback(), None, what)

    async def _run(self) -> None:
        while self._queue:
            awaitable = self._queue.popleft()
            try:
                await awaitable
            except Exception:
                log.warning("reply callback failed", exc_info=True)

    async def wait(self) -> None:
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)
