"""Agent-event fixtures: an emitter that replays event dicts, and builders for pi's events."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from clawpi.ai import stream
from clawpi.ai.types import Context
from clawpi.testing import FauxProvider

Event = dict[str, Any]


class Emitter:
    """The smallest event source: `subscribe(listener) -> unsubscribe`, `emit(event)`."""

    def __init__(self) -> None:
        self.listeners: list[Callable[[Any], Any]] = []

    def subscribe(self, listener: Callable[[Any], Any]) -> Callable[[], None]:
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener)

    def emit(self, event: Event) -> None:
        for listener in list(self.listeners):
            listener(event)

    def replay(self, events: Iterable[Event]) -> None:
        for event in events:
            self.emit(event)


def usage(inp: int = 10, out: int = 5) -> dict[str, Any]:
    return {
        "input": inp,
        "output": out,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": inp + out,
        "cost": {"input": 0.0, "output": 0.0, "cacheRead": 0.0, "cacheWrite": 0.0, "total": 0.0},
    }


def assistant(
    *blocks: dict[str, Any],
    stop: str = "stop",
    error: str | None = None,
    tokens: tuple[int, int] = (10, 5),
) -> Event:
    msg: Event = {
        "role": "assistant",
        "content": list(blocks),
        "api": "faux",
        "provider": "faux",
        "model": "faux-1",
        "usage": usage(*tokens),
        "stopReason": stop,
        "timestamp": 1,
    }
    if error is not None:
        msg["errorMessage"] = error
    return msg


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def thinking(t: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": t}


def tool_call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"type": "toolCall", "id": call_id, "name": name, "arguments": args}


def text_message_events(
    body: str, step: int = 5, *, final: Event | None = None, repeat_end: bool = False
) -> Iterator[Event]:
    """message_start, text_start, text_delta×N, text_end (full content), message_end."""
    partial = assistant()
    yield {"type": "message_start", "message": partial}
    yield {
        "type": "message_update",
        "message": partial,
        "assistantMessageEvent": {"type": "text_start", "contentIndex": 0},
    }
    for i in range(0, len(body), step):
        yield {
            "type": "message_update",
            "message": partial,
            "assistantMessageEvent": {
                "type": "text_delta",
                "contentIndex": 0,
                "delta": body[i : i + step],
            },
        }
    end = {
        "type": "message_update",
        "message": partial,
        "assistantMessageEvent": {"type": "text_end", "contentIndex": 0, "content": body},
    }
    yield end
    if repeat_end:
        yield copy.deepcopy(end)
    done = final if final is not None else assistant(text(body))
    yield {"type": "message_end", "message": done}
    if repeat_end:
        yield {"type": "message_end", "message": copy.deepcopy(done)}


def tool_events(
    name: str, args: dict[str, Any], call_id: str, result: str, is_error: bool = False
) -> list[Event]:
    return [
        {"type": "tool_execution_start", "toolCallId": call_id, "toolName": name, "args": args},
        {
            "type": "tool_execution_update",
            "toolCallId": call_id,
            "toolName": name,
            "args": args,
            "partialResult": {"content": [{"type": "text", "text": result[:3]}], "details": {}},
        },
        {
            "type": "tool_execution_end",
            "toolCallId": call_id,
            "toolName": name,
            "result": {"content": [{"type": "text", "text": result}], "details": {}},
            "isError": is_error,
        },
    ]


async def faux_turn_events(provider: FauxProvider, context: Context) -> list[Event]:
    """One assistant turn from the real `clawpi.ai.stream`, wrapped as the agent loop does."""
    events: list[Event] = []
    async for event in stream(provider.model, context):
        kind = event["type"]
        if kind == "start":
            events.append({"type": "message_start", "message": copy.deepcopy(event["partial"])})
        elif kind == "done":
            events.append({"type": "message_end", "message": event["message"]})
        elif kind == "error":
            events.append({"type": "message_end", "message": event["error"]})
        else:
            partial = copy.deepcopy(event["partial"])  # type: ignore[typeddict-item]
            update = dict(event)
            update["partial"] = partial
            events.append(
                {"type": "message_update", "message": partial, "assistantMessageEvent": update}
            )
    return events
