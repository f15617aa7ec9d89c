"""Assertions every provider test shares: pi's event-order contract and the final message."""

from __future__ import annotations

from typing import Any

from clawpi.ai.types import AssistantMessage, AssistantMessageEvent
from tests.fakes.http_server import FakeServer, RecordedRequest


def assert_event_order(events: list[AssistantMessageEvent]) -> None:
    """pi-mono §1.3: start first; per block X_start, X_delta*, X_end with consecutive content
    indices; exactly one terminal done/error, last."""
    assert events[0]["type"] == "start"
    assert events[-1]["type"] in ("done", "error")
    assert sum(e["type"] in ("done", "error") for e in events) == 1
    open_block: tuple[str, int] | None = None
    next_index = 0
    for event in events[1:-1]:
        kind, _, phase = event["type"].partition("_")
        index = event["contentIndex"]  # type: ignore[typeddict-item]
        if phase == "start":
            assert open_block is None, f"{event['type']} while block {open_block} is open"
            assert index == next_index
            open_block = (kind, index)
            next_index += 1
        else:
            assert open_block == (kind, index), f"{event['type']} outside its block"
            if phase == "end":
                open_block = None
    if events[-1]["type"] == "done":
        assert open_block is None


def final(events: list[AssistantMessageEvent]) -> AssistantMessage:
    last: Any = events[-1]
    return last["message"] if last["type"] == "done" else last["error"]  # type: ignore[no-any-return]


def only_request(server: FakeServer) -> RecordedRequest:
    assert len(server.requests) == 1
    return server.requests[0]
