"""The stream object `stream()` returns: provider events in, a never-raising iterator out.

Providers are plain async generators that may raise; this wrapper turns any failure into the
final `error` event (partial content and usage kept) and implements abort by cancelling the
consuming task only while it is suspended inside the provider, so a pending socket read stops at
once and no per-event task or timer is needed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

from clawpi.ai.abort import AbortSignal
from clawpi.ai.types import AssistantMessage, AssistantMessageEvent, ErrorEvent, empty_usage

ABORTED_MESSAGE = "Request was aborted"


def empty_assistant_message(api: str, provider: str, model_id: str) -> AssistantMessage:
    return {
        "role": "assistant",
        "content": [],
        "api": api,
        "provider": provider,
        "model": model_id,
        "usage": empty_usage(),
        "stopReason": "stop",
        "timestamp": int(time.time() * 1000),
    }


class AssistantMessageEventStream:
    """Async iterator of `AssistantMessageEvent`s ending in exactly one `done` or `error`.

    `await stream.result()` returns the final assistant message, draining the stream if needed.
    """

    __slots__ = (
        "_abort_cancelled",
        "_api",
        "_describe_error",
        "_finished",
        "_in_next",
        "_loop",
        "_model_id",
        "_partial",
        "_provider",
        "_remove_listener",
        "_result",
        "_signal",
        "_source",
        "_task",
    )

    def __init__(
        self,
        source: AsyncIterator[AssistantMessageEvent],
        *,
        api: str,
        provider: str,
        model_id: str,
        signal: AbortSignal | None = None,
        describe_error: Callable[[BaseException], str] | None = None,
    ) -> None:
        self._source = source
        self._api = api
        self._provider = provider
        self._model_id = model_id
        self._signal = signal
        self._describe_error = describe_error or _default_describe_error
        self._partial: AssistantMessage | None = None
        self._result: AssistantMessage | None = None
        self._finished = False
        self._in_next = False
        self._abort_cancelled = False
        self._task: asyncio.Task[object] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._remove_listener = signal.add_listener(self._on_abort) if signal else None

    def __aiter__(self) -> AssistantMessageEventStream:
        return self

    async def __anext__(self) -> AssistantMessageEvent:
        if self._finished:
            raise StopAsyncIteration
        signal = self._signal
        if signal is not None and signal.aborted:
            return await self._finish_with_error(ABORTED_MESSAGE, aborted=True)
        loop = self._loop
        if loop is None:  # asked once: on Python 3.11 every loop lookup is a getpid() call
            loop = self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task(loop)
        self._in_next = True
        try:
            event = await self._source.__anext__()
        except StopAsyncIteration:
            return await self._finish_with_error(
                f"{self._api} stream ended without a final event", aborted=False
            )
        except asyncio.CancelledError:
            if not self._abort_cancelled:
                raise
            self._clear_abort_cancel()
            return await self._finish_with_error(ABORTED_MESSAGE, aborted=True)
        except Exception as exc:  # a stream never raises: failures become the error event
            self._clear_abort_cancel()
            aborted = signal is not None and signal.aborted
            message = ABORTED_MESSAGE if aborted else self._describe_error(exc)
            return await self._finish_with_error(message, aborted=aborted)
        finally:
            self._in_next = False
        if event["type"] == "done":
            if signal is not None and signal.aborted:
                self._partial = event["message"]
                return await self._finish_with_error(ABORTED_MESSAGE, aborted=True)
            self._result = event["message"]
            self._close()
            await self._close_source()
        elif event["type"] == "error":
            self._result = event["error"]
            self._close()
            await self._close_source()
        else:
            self._partial = event["partial"]
        return event

    async def result(self) -> AssistantMessage:
        """The final message (`done.message` or `error.error`), draining remaining events."""
        while not self._finished:
            try:
                await self.__anext__()
            except StopAsyncIteration:
                break
        assert self._result is not None
        return self._result

    async def aclose(self) -> None:
        """Stop early: closes the provider's request and releases the connection."""
        if not self._finished:
            self._close()
            await self._source.aclose()  # type: ignore[attr-defined]

    def _on_abort(self) -> None:
        if self._in_next and self._task is not None and not self._abort_cancelled:
            self._abort_cancelled = True
            self._task.cancel()

    def _clear_abort_cancel(self) -> None:
        if self._abort_cancelled:
            self._abort_cancelled = False
            if self._task is not None:
                self._task.uncancel()

    def _close(self) -> None:
        self._finished = True
        if self._remove_listener is not None:
            self._remove_listener()
            self._remove_listener = None

    async def _close_source(self) -> None:
        """Run the provider's cleanup now, not whenever the garbage collector finds it."""
        try:
            await self._source.aclose()  # type: ignore[attr-defined]
        except Exception:  # a provider failing to close must not mask its final event
            pass

    async def _finish_with_error(self, message: str, *, aborted: bool) -> ErrorEvent:
        partial = self._partial
        if partial is None:
            partial = empty_assistant_message(self._api, self._provider, self._model_id)
        partial["stopReason"] = "aborted" if aborted else "error"
        partial["errorMessage"] = message
        self._result = partial
        self._close()
        try:
            await self._source.aclose()  # type: ignore[attr-defined]
        except Exception:  # closing a broken provider must not mask the error event
            pass
        return {"type": "error", "reason": "aborted" if aborted else "error", "error": partial}


def _default_describe_error(exc: BaseException) -> str:
    text = str(exc).strip()
    return text or type(exc).__name__
