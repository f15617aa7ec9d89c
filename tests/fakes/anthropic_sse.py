"""Anthropic Messages streaming frames, shaped exactly as Anthropic documents them.

https://docs.anthropic.com/en/docs/build-with-claude/streaming: every frame carries an `event:`
name equal to its JSON `type`; a stream is message_start, (content_block_start,
content_block_delta*, content_block_stop)*, message_delta, message_stop, with `ping` frames
anywhere and `error` frames for failures.
"""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.http_server import FakeResponse, sse_frame


def frame(data: dict[str, Any]) -> bytes:
    return sse_frame(data, event=data["type"])


def message_start(
    *,
    message_id: str = "msg_01XFDUDYJgAACzvnptvVoYEL",
    model: str = "claude-sonnet-4-5",
    input_tokens: int = 25,
    output_tokens: int = 1,
    cache_read: int | None = 0,
    cache_write: int | None = 0,
) -> bytes:
    usage: dict[str, Any] = {"input_tokens": input_tokens, "output_tokens": output_tokens}
    if cache_read is not None:
        usage["cache_read_input_tokens"] = cache_read
    if cache_write is not None:
        usage["cache_creation_input_tokens"] = cache_write
    return frame(
        {
            "type": "message_start",
            "message": {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": model,
                "stop_reason": None,
                "stop_sequence": None,
                "usage": usage,
            },
        }
    )


def ping() -> bytes:
    return frame({"type": "ping"})


def block_start(index: int, block: dict[str, Any]) -> bytes:
    return frame({"type": "content_block_start", "index": index, "content_block": block})


def block_delta(index: int, delta: dict[str, Any]) -> bytes:
    return frame({"type": "content_block_delta", "index": index, "delta": delta})


def block_stop(index: int) -> bytes:
    return frame({"type": "content_block_stop", "index": index})


def text_block(index: int, *chunks: str) -> list[bytes]:
    return [
        block_start(index, {"type": "text", "text": ""}),
        *(block_delta(index, {"type": "text_delta", "text": c}) for c in chunks),
        block_stop(index),
    ]


def thinking_block(index: int, chunks: list[str], signature_parts: list[str]) -> list[bytes]:
    return [
        block_start(index, {"type": "thinking", "thinking": "", "signature": ""}),
        *(block_delta(index, {"type": "thinking_delta", "thinking": c}) for c in chunks),
        *(block_delta(index, {"type": "signature_delta", "signature": s}) for s in signature_parts),
        block_stop(index),
    ]


def redacted_thinking_block(index: int, data: str) -> list[bytes]:
    return [block_start(index, {"type": "redacted_thinking", "data": data}), block_stop(index)]


def tool_use_block(index: int, call_id: str, name: str, json_chunks: list[str]) -> list[bytes]:
    return [
        block_start(index, {"type": "tool_use", "id": call_id, "name": name, "input": {}}),
        *(block_delta(index, {"type": "input_json_delta", "partial_json": c}) for c in json_chunks),
        block_stop(index),
    ]


def message_delta(
    stop_reason: str | None = "end_turn", usage: dict[str, Any] | None = None
) -> bytes:
    return frame(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": usage if usage is not None else {"output_tokens": 15},
        }
    )


def message_stop() -> bytes:
    return frame({"type": "message_stop"})


def error_frame(error_type: str, message: str) -> bytes:
    return frame({"type": "error", "error": {"type": error_type, "message": message}})


def turn(
    *blocks: list[bytes],
    stop_reason: str = "end_turn",
    usage: dict[str, Any] | None = None,
    **start: Any,
) -> list[bytes]:
    """A whole streamed message: start, a ping, the blocks, the final delta and stop."""
    frames = [message_start(**start), ping()]
    for block in blocks:
        frames.extend(block)
    frames.append(message_delta(stop_reason, usage))
    frames.append(message_stop())
    return frames


def stream_response(frames: list[bytes], **kwargs: Any) -> FakeResponse:
    headers = {"request-id": "req_011CSHoEeqs5C35K2UUqR7Fy", **kwargs.pop("headers", {})}
    return FakeResponse.sse(frames, headers=headers, **kwargs)


def error_response(
    status: int, error_type: str, message: str, headers: dict[str, str] | None = None
) -> FakeResponse:
    """A non-2xx answer with Anthropic's error body."""
    body = {"type": "error", "error": {"type": error_type, "message": message}}
    return FakeResponse(
        status=status,
        headers={"content-type": "application/json", **(headers or {})},
        body=json.dumps(body).encode(),
    )
