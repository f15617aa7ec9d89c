"""Chat Completions streaming frames, shaped as OpenAI documents them, for the fake server.

A streamed chat completion is a series of `chat.completion.chunk` objects, each sent as one SSE
`data:` line, ended by `data: [DONE]`. The first chunk carries `delta.role`, the last content
chunk carries `finish_reason`, and with `stream_options.include_usage` a final chunk with empty
`choices` carries the `usage`. Providers add their own delta fields (`reasoning_content`,
`reasoning`, ...), which `delta(**extra)` passes through.

    frames = completion_frames([role_chunk(), text_chunk("Hi"), finish_chunk("stop"),
                                usage_chunk(10, 2)])
    server.enqueue(FakeResponse.sse(frames))
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tests.fakes.http_server import FakeResponse, sse_frame

CHUNK_ID = "chatcmpl-fake123"
CREATED = 1_700_000_000
DONE_FRAME = b"data: [DONE]\n\n"


def chunk(
    delta: dict[str, Any] | None = None,
    finish_reason: str | None = None,
    *,
    model: str = "fake-model",
    usage: dict[str, Any] | None = None,
    choices: bool = True,
    **extra: Any,
) -> dict[str, Any]:
    """One `chat.completion.chunk`; `choices=False` gives the usage-only chunk shape."""
    body: dict[str, Any] = {
        "id": CHUNK_ID,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "system_fingerprint": "fp_fake",
        "choices": (
            [
                {
                    "index": 0,
                    "delta": delta if delta is not None else {},
                    "logprobs": None,
                    "finish_reason": finish_reason,
                }
            ]
            if choices
            else []
        ),
    }
    if usage is not None:
        body["usage"] = usage
    body.update(extra)
    return body


def role_chunk() -> dict[str, Any]:
    """The opening chunk OpenAI sends: the role and an empty content string."""
    return chunk({"role": "assistant", "content": ""})


def text_chunk(text: str) -> dict[str, Any]:
    return chunk({"content": text})


def reasoning_chunk(text: str, field: str = "reasoning_content") -> dict[str, Any]:
    """Thinking as OpenAI-compatible servers stream it, under `field`."""
    return chunk({"content": None, field: text})


def tool_call_chunk(
    index: int,
    *,
    call_id: str | None = None,
    name: str | None = None,
    arguments: str | None = None,
) -> dict[str, Any]:
    """One `delta.tool_calls` fragment: the first names the call, later ones add arguments."""
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if arguments is not None:
        function["arguments"] = arguments
    call: dict[str, Any] = {"index": index, "function": function}
    if call_id is not None:
        call["id"] = call_id
        call["type"] = "function"
    return chunk({"tool_calls": [call]})


def tool_call_chunks(
    index: int, call_id: str, name: str, argument_parts: Iterable[str]
) -> list[dict[str, Any]]:
    """A whole streamed tool call: the opening fragment, then one chunk per argument part."""
    chunks = [tool_call_chunk(index, call_id=call_id, name=name, arguments="")]
    chunks.extend(tool_call_chunk(index, arguments=part) for part in argument_parts)
    return chunks


def finish_chunk(reason: str | None) -> dict[str, Any]:
    return chunk({}, reason)


def usage(
    prompt_tokens: int,
    completion_tokens: int,
    *,
    cached_tokens: int = 0,
    reasoning_tokens: int = 0,
) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": reasoning_tokens, "audio_tokens": 0},
    }


def usage_chunk(
    prompt_tokens: int,
    completion_tokens: int,
    *,
    cached_tokens: int = 0,
    reasoning_tokens: int = 0,
) -> dict[str, Any]:
    """The final `include_usage` chunk: empty `choices`, the whole request's usage."""
    return chunk(
        choices=False,
        usage=usage(
            prompt_tokens,
            completion_tokens,
            cached_tokens=cached_tokens,
            reasoning_tokens=reasoning_tokens,
        ),
    )


def completion_frames(chunks: Iterable[dict[str, Any] | str], *, done: bool = True) -> list[bytes]:
    """SSE frames for `chunks` (a str is sent verbatim as the data line), then `[DONE]`."""
    frames = [sse_frame(item) for item in chunks]
    if done:
        frames.append(DONE_FRAME)
    return frames


def completion_response(
    chunks: Iterable[dict[str, Any] | str], *, done: bool = True, **kwargs: Any
) -> FakeResponse:
    """A streamed 200 response carrying `chunks`; kwargs go to `FakeResponse.sse`."""
    return FakeResponse.sse(completion_frames(chunks, done=done), **kwargs)


def error_body(
    message: str, *, type: str = "invalid_request_error", code: str | None = None
) -> dict[str, Any]:
    """OpenAI's error object, which the compatible servers copy."""
    return {"error": {"message": message, "type": type, "param": None, "code": code}}
