"""The `google-generative-ai` API: Gemini's `streamGenerateContent` through the google-genai SDK.

Gemini streams whole parts: text and thought-summary text arrive in pieces, a function call
arrives complete in one part. A `thoughtSignature` may sit on any part and must be replayed on
the same part next turn, so it is kept on the block it came with (thinking, text or tool call).
"""

from __future__ import annotations

import base64
import functools
import itertools
import os
import ssl
import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any, cast

import httpx2
import orjson
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from clawpi.ai.builder import AssistantMessageBuilder
from clawpi.ai.models import Model, token_count
from clawpi.ai.providers._common import describe_sdk_error, shared_client
from clawpi.ai.providers.google_convert import build_payload, split_base_url
from clawpi.ai.stream import (
    ApiProvider,
    StreamOptions,
    missing_key_message,
    register_api_provider,
    resolve_api_key,
)
from clawpi.ai.types import AssistantMessageEvent, Context, StopReason
from clawpi.errors import ConfigError

API = "google-generative-ai"

# SDK conveniences that would act behind clawpi's back: calling Python tools on its own, and
# silently re-sending a request when a stream breaks (clawpi owns retry and failover).
_SDK_OVERRIDES = {
    "automaticFunctionCalling": {"disable": True},
    "automaticContinuation": False,
}

_FINISH_REASON_ERRORS = {
    "SAFETY": "the response was blocked by Gemini's safety filters",
    "RECITATION": "the response was stopped for reciting training data",
    "LANGUAGE": "the response used an unsupported language",
    "OTHER": "generation stopped for an unspecified reason",
    "BLOCKLIST": "the response contained a blocklisted term",
    "PROHIBITED_CONTENT": "the response contained prohibited content",
    "SPII": "the response contained sensitive personal information",
    "MALFORMED_FUNCTION_CALL": "the model produced a malformed function call",
    "UNEXPECTED_TOOL_CALL": "the model called a tool that was not offered",
    "TOO_MANY_TOOL_CALLS": "the model made too many tool calls",
    "MISSING_THOUGHT_SIGNATURE": "a replayed function call lacked its thought signature",
    "MALFORMED_RESPONSE": "the model produced a malformed response",
    "IMAGE_SAFETY": "a generated image was blocked by safety filters",
    "IMAGE_PROHIBITED_CONTENT": "a generated image contained prohibited content",
    "IMAGE_RECITATION": "a generated image was stopped for recitation",
    "IMAGE_OTHER": "image generation stopped for an unspecified reason",
    "NO_IMAGE": "the model was expected to produce an image but did not",
    "MODEL_ARMOR": "the response was blocked by Model Armor",
    "CONTINUATION": "the server asked for a continuation request, which clawpi does not follow",
    "FINISH_REASON_UNSPECIFIED": "the server did not say why generation stopped",
}

_tool_call_counter = itertools.count(1)


def describe_google_error(exc: BaseException) -> str:
    """`<status> <body>` for API errors; plain words for an unreadable stream."""
    if isinstance(exc, genai_errors.UnknownApiResponseError):
        return f"Gemini stream sent data that is not valid JSON: {_excerpt(str(exc))}"
    if isinstance(exc, genai_errors.APIError) and not _http_body(exc) and exc.details:
        # an error frame inside a 200 stream: its JSON is the body
        return f"{exc.code} {_excerpt(orjson.dumps(exc.details).decode(), 4000)}"
    return describe_sdk_error(exc)


def _http_body(exc: genai_errors.APIError) -> str:
    try:
        text = getattr(exc.response, "text", "")
    except Exception:  # an httpx response whose body was never read
        return ""
    return text.strip() if isinstance(text, str) else ""


def _excerpt(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One trust store for every client: building it costs ~0.3 s, and the SDK would build a
    new one for each client (one per event loop). Same choice as the SDK's own default."""
    cafile, capath = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
    if cafile or capath:
        return ssl.create_default_context(cafile=cafile, capath=capath)
    return httpx2.create_ssl_context()


def _client(model: Model, api_key: str) -> genai.Client:
    base_url, api_version = split_base_url(model.base_url)

    def create() -> genai.Client:
        tls = {"verify": _ssl_context()}
        return genai.Client(
            api_key=api_key,
            vertexai=False,
            http_options=genai_types.HttpOptions(
                base_url=base_url,
                api_version=api_version,
                retry_options=genai_types.HttpRetryOptions(attempts=1),  # one try: no retries
                client_args=tls,
                async_client_args=tls,
            ),
        )

    return shared_client((API, api_key, base_url, api_version), create)


async def stream_google(
    model: Model, context: Context, options: StreamOptions
) -> AsyncIterator[AssistantMessageEvent]:
    api_key = resolve_api_key(model, options.api_key)
    if not api_key:
        raise ConfigError(missing_key_message(model))
    client = _client(model, api_key)
    payload = build_payload(model, context, options)
    if options.on_payload is not None:
        replaced = options.on_payload(payload, model)
        if replaced is not None:
            payload = replaced
    config: dict[str, Any] = {**(payload.get("config") or {}), **_SDK_OVERRIDES}
    headers = {**(model.headers or {}), **(options.headers or {})}
    if headers:
        config["httpOptions"] = {"headers": headers}
    chunks = await client.aio.models.generate_content_stream(
        model=payload.get("model") or model.id,
        contents=payload.get("contents") or [],
        config=cast(Any, config),
    )
    reader = _ChunkReader(AssistantMessageBuilder(model))
    yield reader.builder.start()
    try:
        async with aclosing(chunks):  # type: ignore[type-var]
            async for chunk in chunks:
                for event in reader.feed(chunk):
                    yield event
    except genai_errors.APIError as exc:
        await _release_response(exc)
        raise
    for event in reader.finish():
        yield event


async def _release_response(exc: genai_errors.APIError) -> None:
    """Close the HTTP response an error frame arrived on.

    The SDK raises an in-stream `{"error": ...}` frame while its own readers are still suspended
    on the open response; closing it here returns the connection now instead of at garbage
    collection (where asyncio would log errors about the abandoned readers).
    """
    response = getattr(getattr(exc, "response", None), "response_stream", None)
    close = getattr(response, "aclose", None)
    if close is not None:
        try:
            await close()
        except Exception:  # the error being raised matters more than a failed close
            pass


NO_CHUNKS_TEXT = (
    "Gemini answered without a single candidate (an empty or unexpected body): check that "
    "the provider's baseUrl is a Gemini API"
)


class _ChunkReader:
    """Turns `GenerateContentResponse` chunks into builder events; blocks are sequential."""

    __slots__ = ("blocked", "builder", "finish_reason", "index", "kind", "received", "tool_ids")

    def __init__(self, builder: AssistantMessageBuilder) -> None:
        self.builder = builder
        self.kind: str | None = None  # "text" / "thinking" while such a block is open
        self.index = -1
        self.finish_reason: str | None = None
        self.blocked: str | None = None
        self.tool_ids: set[str] = set()
        self.received = False

    def feed(self, chunk: genai_types.GenerateContentResponse) -> list[AssistantMessageEvent]:
        events: list[AssistantMessageEvent] = []
        candidates = chunk.candidates
        if candidates:
            self.received = True
            candidate = candidates[0]
            content = candidate.content
            if content is not None and content.parts:
                for part in content.parts:
                    if part.text is not None:
                        self._text_part(part, events)
                    elif part.function_call is not None:
                        self._function_call(part, part.function_call, events)
            reason = candidate.finish_reason
            if reason is not None:
                self.finish_reason = str(getattr(reason, "value", reason))
        feedback = chunk.prompt_feedback
        if feedback is not None and feedback.block_reason is not None:
            blocked = feedback.block_reason
            self.blocked = str(getattr(blocked, "value", blocked))
        meta = chunk.usage_metadata
        if meta is not None:
            usage = self.builder.message["usage"]
            usage["input"] = token_count(meta.prompt_token_count)
            usage["output"] = token_count(meta.candidates_token_count) + token_count(
                meta.thoughts_token_count
            )
            usage["cacheRead"] = token_count(meta.cached_content_token_count)
            usage["cacheWrite"] = 0
            usage["totalTokens"] = usage["input"] + usage["output"]
        return events

    def _text_part(self, part: genai_types.Part, events: list[AssistantMessageEvent]) -> None:
        text = part.text or ""
        raw_signature = part.thought_signature
        signature = base64.b64encode(raw_signature).decode() if raw_signature else None
        kind = "thinking" if part.thought else "text"
        builder = self.builder
        if kind != self.kind:
            if not text and signature is None:
                return
            self._close_block(events)
            start = builder.start_thinking() if kind == "thinking" else builder.start_text()
            self.kind = kind
            self.index = start["contentIndex"]
            events.append(start)
        if signature:  # kept across deltas; only a new non-empty signature replaces it
            if kind == "thinking":
                builder.set_thinking_signature(self.index, signature)
            else:
                block: Any = builder.message["content"][self.index]
                block["textSignature"] = signature
        if text:
            if kind == "thinking":
                events.append(builder.thinking_delta(self.index, text))
            else:
                events.append(builder.text_delta(self.index, text))

    def _function_call(
        self,
        part: genai_types.Part,
        call: genai_types.FunctionCall,
        events: list[AssistantMessageEvent],
    ) -> None:
        self._close_block(events)
        name = call.name or ""
        call_id = call.id
        if not call_id or call_id in self.tool_ids:
            call_id = f"{name or 'call'}_{int(time.time() * 1000)}_{next(_tool_call_counter)}"
        self.tool_ids.add(call_id)
        arguments = call.args if isinstance(call.args, dict) else {}
        raw_signature = part.thought_signature
        signature = base64.b64encode(raw_signature).decode() if raw_signature else None
        builder = self.builder
        start = builder.start_tool_call(call_id, name, signature)
        index = start["contentIndex"]
        events.append(start)
        events.append(builder.tool_call_delta(index, orjson.dumps(arguments).decode()))
        events.append(builder.end_tool_call(index, arguments))

    def _close_block(self, events: list[AssistantMessageEvent]) -> None:
        if self.kind == "text":
            events.append(self.builder.end_text(self.index))
        elif self.kind == "thinking":
            events.append(self.builder.end_thinking(self.index))
        self.kind = None

    def finish(self) -> list[AssistantMessageEvent]:
        events: list[AssistantMessageEvent] = []
        self._close_block(events)
        builder = self.builder
        content = builder.message["content"]
        if self.blocked is not None and not content:
            events.append(builder.error(f"Gemini blocked the prompt (blockReason {self.blocked})"))
            return events
        if not self.received:
            events.append(builder.error(NO_CHUNKS_TEXT))
            return events
        reason = self.finish_reason
        stop: StopReason
        if any(block.get("type") == "toolCall" for block in content):
            stop = "toolUse"
        elif reason is None or reason == "STOP":
            stop = "stop"
        elif reason == "MAX_TOKENS":
            stop = "length"
        else:
            explanation = _FINISH_REASON_ERRORS.get(reason)
            if explanation is None:
                message = f"Gemini stopped with an unknown finishReason {reason!r}"
            else:
                message = f"Gemini stopped with finishReason {reason}: {explanation}"
            events.append(builder.error(message))
            return events
        events.append(builder.done(stop))
        return events


register_api_provider(
    ApiProvider(api=API, stream=stream_google, describe_error=describe_google_error)
)
