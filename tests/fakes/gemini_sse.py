"""Gemini `streamGenerateContent?alt=sse` responses, shaped as the Gemini API sends them.

https://ai.google.dev/api/generate-content#method:-models.streamgeneratecontent: each SSE event
is a bare `data: <GenerateContentResponse JSON>` line (no `event:` name) ended by CRLF CRLF.
Parts carry `text` (with `thought: true` for thought summaries), `functionCall {name, args, id}`
and an optional base64 `thoughtSignature`; the last chunk has `finishReason` and the usage.
Errors are Google's JSON envelope `{"error": {"code", "message", "status"}}`.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from tests.fakes.http_server import FakeResponse

MODEL_VERSION = "gemini-2.5-flash"
RESPONSE_ID = "c2FtcGxlLXJlc3BvbnNlLWlk"


def signature(seed: str) -> str:
    """A realistic thought signature: base64 of opaque bytes (with + and / in it)."""
    return base64.b64encode(seed.encode() + b"\xfb\xff\xfe").decode()


def frame(data: dict[str, Any] | str) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"data: {text}\r\n\r\n".encode()


def chunk(
    *parts: dict[str, Any],
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
) -> bytes:
    candidate: dict[str, Any] = {"content": {"parts": list(parts), "role": "model"}, "index": 0}
    if finish_reason is not None:
        candidate["finishReason"] = finish_reason
    data: dict[str, Any] = {
        "candidates": [candidate],
        "modelVersion": MODEL_VERSION,
        "responseId": RESPONSE_ID,
    }
    if usage is not None:
        data["usageMetadata"] = usage
    return frame(data)


def text(value: str, sig: str | None = None) -> dict[str, Any]:
    part: dict[str, Any] = {"text": value}
    if sig is not None:
        part["thoughtSignature"] = sig
    return part


def thought(value: str, sig: str | None = None) -> dict[str, Any]:
    return {**text(value, sig), "thought": True}


def function_call(
    name: str,
    args: dict[str, Any] | None = None,
    call_id: str | None = None,
    sig: str | None = None,
) -> dict[str, Any]:
    call: dict[str, Any] = {"name": name}
    if args is not None:
        call["args"] = args
    if call_id is not None:
        call["id"] = call_id
    part: dict[str, Any] = {"functionCall": call}
    if sig is not None:
        part["thoughtSignature"] = sig
    return part


def usage(
    prompt: int,
    candidates: int,
    thoughts: int | None = None,
    cached: int | None = None,
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": candidates,
        "totalTokenCount": prompt + candidates + (thoughts or 0),
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}],
    }
    if thoughts is not None:
        data["thoughtsTokenCount"] = thoughts
    if cached is not None:
        data["cachedContentTokenCount"] = cached
    return data


def stream(*frames: bytes, **kwargs: Any) -> FakeResponse:
    return FakeResponse.sse(frames, **kwargs)


def text_stream(*pieces: str, finish_reason: str = "STOP", **kwargs: Any) -> FakeResponse:
    frames = [chunk(text(p)) for p in pieces[:-1]]
    frames.append(chunk(text(pieces[-1]), finish_reason=finish_reason, usage=usage(10, 5)))
    return stream(*frames, **kwargs)


def error(
    status: int, message: str, status_name: str, headers: dict[str, str] | None = None
) -> FakeResponse:
    body = {"error": {"code": status, "message": message, "status": status_name}}
    return FakeResponse.json_body(status, body, headers)
