"""Merging small reply blocks so a chat is not flooded with one-line messages.

Blocks are held until they add up to `min_chars`, until the next one would push the merged
message past `max_chars`, or until no block arrived for `idle_ms`; then they go out joined by a
blank line. A block with media is never merged: what is held goes first, then the media block.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any

from clawpi.reply.delivery import OrderedDelivery
from clawpi.reply.payloads import ReplyPayload

DEFAULT_COALESCE_MIN_CHARS = 800
DEFAULT_COALESCE_MAX_CHARS = 1200
DEFAULT_COALESCE_IDLE_MS = 1000
MAX_COALESCE_IDLE_MS = 5000


class BlockCoalescer:
    """Feed it block payloads with `enqueue`; it calls `deliver` with merged ones.

    `flush()` sends what is held (call it at the end of the run). The idle timer needs a
    running event loop; without one, only the size rules apply.
    """

    def __init__(
        self,
        deliver: Callable[[ReplyPayload], Any],
        min_chars: int = DEFAULT_COALESCE_MIN_CHARS,
        max_chars: int = DEFAULT_COALESCE_MAX_CHARS,
        idle_ms: int = DEFAULT_COALESCE_IDLE_MS,
        joiner: str = "\n\n",
    ) -> None:
        self._deliver = deliver
        self.max_chars = max(1, int(max_chars))
        self.min_chars = max(1, min(int(min_chars), self.max_chars))
        self.idle_ms = max(0, min(int(idle_ms), MAX_COALESCE_IDLE_MS))
        self.joiner = joiner
        self._held: list[ReplyPayload] = []
        self._held_chars = 0
        self._timer: asyncio.TimerHandle | None = None
        self._delivery = OrderedDelivery()

    def enqueue(self, payload: ReplyPayload) -> None:
        if payload.media_urls or payload.is_reasoning or payload.is_error:
            self.flush()
            self._send(payload)
            return
        text = payload.text or ""
        if not text.strip():
            return
        if self._held and self._held_chars + len(self.joiner) + len(text) > self.max_chars:
            self.flush()
        self._held.append(payload)
        self._held_chars += len(text) + (len(self.joiner) if len(self._held) > 1 else 0)
        if self._held_chars >= self.min_chars:
            self.flush()
        else:
            self._arm_timer()

    def flush(self) -> None:
        self._cancel_timer()
        if not self._held:
            return
        held, self._held, self._held_chars = self._held, [], 0
        first = held[0]
        merged = dataclasses.replace(
            first,
            text=self.joiner.join(p.text or "" for p in held),
            audio_as_voice=any(p.audio_as_voice for p in held),
        )
        self._send(merged)

    def has_held(self) -> bool:
        return bool(self._held)

    async def wait_for_deliveries(self) -> None:
        await self._delivery.wait()

    def _send(self, payload: ReplyPayload) -> None:
        self._delivery.call(self._deliver, payload, "coalesced block")

    def _arm_timer(self) -> None:
        self._cancel_timer()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._timer = loop.call_later(self.idle_ms / 1000, self.flush)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
