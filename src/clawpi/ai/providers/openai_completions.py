"""The `openai-completions` API: OpenAI Chat Completions and every server that copies it.

Requests go through the official `openai` SDK (retries off: clawpi owns retry), streamed by the
SDK's own stream (its SSE reading, `[DONE]`, in-stream errors), with chunks kept as the JSON
dicts the server sent: having the SDK build a `ChatCompletionChunk` model for each of them cost
about 0.23 ms a chunk, ten times everything else done per delta. The chunks drive
`AssistantMessageBuilder`; blocks are sequential, so a delta of another kind (text, thinking, a
new tool call) closes the block before it. Server differences are compat flags
(`openai_compat.py`); the request body is built in `openai_completions_convert.py`.
"""

from __future__ import annotations

import ipaddress
import json
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any, cast
from urllib.parse import urlsplit

import openai
import orjson

from clawpi.ai.builder import AssistantMessageBuilder
from clawpi.ai.models import Model, token_count
from clawpi.ai.providers._common import describe_sdk_error, shared_client, typed
from clawpi.ai.providers.openai_compat import resolve_compat
from clawpi.ai.providers.openai_completions_convert import REASONING_FIELDS, build_request
from clawpi.ai.stream import (
    ApiProvider,
    StreamOptions,
    missing_key_message,
    register_api_provider,
    resolve_api_key,
)
from clawpi.ai.types import AssistantMessageEvent, Context, StopReason, Usage
from clawpi.errors import ClawpiError

API = "openai-completions"
LOCAL_PLACEHOLDER_KEY = "sk-no-key-required"
"""Sent to servers on this machine when no key is configured; local servers ignore it."""

_STOP_REASONS: Mapping[str, StopReason] = {
    "stop": "stop",
    "end": "stop",
    "length": "length",
    "function_call": "toolUse",
    "tool_calls": "toolUse",
}
_PREVIEW = 200


class MissingApiKeyError(ClawpiError):
    """No API key was given or found in the environment for a remote server."""


class ProviderStreamError(ClawpiError):
    """The server reported an error inside the stream, or sent something that is not a chunk."""


def is_loopback_url(url: str) -> bool:
    """Whether `url` points at this machine (localhost, 127.0.0.0/8, ::1)."""
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return False
    if not host:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _api_key(model: Model, options: StreamOptions) -> str:
    key = resolve_api_key(model, options.api_key)
    if key:
        return key
    if is_loopback_url(model.base_url):
        return LOCAL_PLACEHOLDER_KEY
    raise MissingApiKeyError(missing_key_message(model))


def _client(model: Model, api_key: str) -> openai.AsyncOpenAI:
    base_url = model.base_url or None
    return shared_client(
        (API, base_url, api_key),
        lambda: openai.AsyncOpenAI(api_key=api_key, base_url=base_url, max_retries=0),
    )


def _headers(model: Model, options: StreamOptions) -> dict[str, str]:
    headers = dict(model.headers or {})
    if options.headers:
        headers.update(options.headers)
    return headers


async def stream_openai_completions(
    model: Model, context: Context, options: StreamOptions
) -> AsyncIterator[AssistantMessageEvent]:
    """Stream one assistant turn from a Chat Completions endpoint."""
    compat = resolve_compat(model)
    client = _client(model, _api_key(model, options))
    params = build_request(model, context, options, compat)
    if options.on_payload is not None:
        replaced = options.on_payload(params, model)
        if replaced is not None:
            params = replaced
    body: dict[str, Any] = {"model": model.id, "messages": [], **params, "stream": True}
    headers = _headers(model, options)
    response = await client.post(
        "/chat/completions",
        body=body,
        options={"headers": headers} if headers else {},
        cast_to=object,  # the chunks as sent: no SDK model built per chunk
        stream=True,
        stream_cls=openai.AsyncStream[object],
    )
    async with response:
        builder = AssistantMessageBuilder(model)
        yield builder.start()
        reader = _ChunkReader(builder)
        try:
            async for chunk in response:
                for event in reader.read(chunk):
                    yield event
        except json.JSONDecodeError as exc:
            preview = exc.doc[:_PREVIEW]
            raise ProviderStreamError(
                f"{model.provider} sent a stream event that is not JSON: {preview!r}"
            ) from None
        except openai.APIError as exc:
            if isinstance(exc, (openai.APIStatusError, openai.APIConnectionError)):
                raise
            raise ProviderStreamError(_in_stream_error_text(exc)) from None
        try:
            closing = reader.close_block()
        except ProviderStreamError as exc:  # keeps the usage read after the broken call
            yield builder.error(str(exc))
            return
        if closing is not None:
            yield closing
        yield reader.finish()


def _in_stream_error_text(exc: openai.APIError) -> str:
    """The server's own words (OpenRouter and z.ai send `{"error": {...}}` mid-stream)."""
    text = exc.message
    body = exc.body if isinstance(exc.body, Mapping) else {}
    code = body.get("code")
    if code is not None and str(code) not in text:
        text = f"{text} (code {code})"
    metadata = body.get("metadata")
    raw = metadata.get("raw") if isinstance(metadata, Mapping) else None
    if raw:
        text = f"{text}\n{raw}"
    return text


NO_CHUNKS_TEXT = (
    "The server answered without a single completion chunk (an empty or non-SSE body): check "
    "that the provider's baseUrl is an OpenAI-compatible API"
)


class _ChunkReader:
    """Turns chunks into builder events; one open block at a time."""

    __slots__ = ("builder", "finish_reason", "index", "kind", "received", "seen_tools", "tool_key")

    def __init__(self, builder: AssistantMessageBuilder) -> None:
        self.builder = builder
        self.kind: str | None = None  # "text" | "thinking" | "tool" while a block is open
        self.index = -1  # content index of the open block
        self.tool_key: int | None = None  # the server's `index` of the open tool call
        self.seen_tools: set[int] = set()
        self.finish_reason: str | None = None
        self.received = False

    def read(self, chunk: object) -> Iterator[AssistantMessageEvent]:
        """One `chat.completion.chunk` as the server sent it (fields of another type than the
        API's are passed over, as a chunk without them would be)."""
        self.received = True
        if not isinstance(chunk, dict):
            return
        usage = chunk.get("usage")
        if usage is not None:
            _apply_usage(self.builder.message["usage"], usage)
        choices = chunk.get("choices")
        if not choices or not isinstance(choices, list):  # e.g. the final usage-only chunk
            return
        choice = choices[0]
        if not isinstance(choice, dict):
            return
        if usage is None:  # Moonshot reports usage on the choice
            choice_usage = choice.get("usage")
            if choice_usage:
                _apply_usage(self.builder.message["usage"], choice_usage)
        finish_reason = choice.get("finish_reason")
        if finish_reason and isinstance(finish_reason, str):
            self.finish_reason = finish_reason
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            return
        for field in REASONING_FIELDS:  # first non-empty one: some servers send two copies
            reasoning = delta.get(field)
            if reasoning and isinstance(reasoning, str):
                yield from self._thinking(reasoning, field)
                break
        details = delta.get("reasoning_details")
        if details and isinstance(details, list):
            self._reasoning_details(details)
        content = delta.get("content")
        if content:
            if isinstance(content, str):
                yield from self._text(content)
            else:
                yield from self._content_parts(content)
        refusal = delta.get("refusal")  # OpenAI's refusal replaces the answer; keep it visible
        if refusal and isinstance(refusal, str):
            yield from self._text(refusal)
        calls = delta.get("tool_calls")
        if calls and isinstance(calls, list):
            for call in calls:
                if isinstance(call, dict):
                    yield from self._tool_fragment(call)

    # -- blocks ----------------------------------------------------------------------------

    def _text(self, text: str) -> Iterator[AssistantMessageEvent]:
        builder = self.builder
        if self.kind != "text":
            closing = self.close_block()
            if closing is not None:
                yield closing
            yield builder.start_text()
            self.kind = "text"
            self.index = len(builder.message["content"]) - 1
        yield builder.text_delta(self.index, text)

    def _thinking(self, text: str, signature: str | None) -> Iterator[AssistantMessageEvent]:
        builder = self.builder
        if self.kind != "thinking":
            closing = self.close_block()
            if closing is not None:
                yield closing
            yield builder.start_thinking(signature)
            self.kind = "thinking"
            self.index = len(builder.message["content"]) - 1
        yield builder.thinking_delta(self.index, text)

    def _content_parts(self, parts: Any) -> Iterator[AssistantMessageEvent]:
        """Mistral streams `content` as a list of text and thinking chunks."""
        if not isinstance(parts, list):
            return
        for part in parts:
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if kind == "text" and part.get("text"):
                yield from self._text(str(part["text"]))
            elif kind == "thinking":
                inner = part.get("thinking")
                if isinstance(inner, list):
                    text = "".join(
                        str(item.get("text", "")) for item in inner if isinstance(item, dict)
                    )
                else:
                    text = str(inner or "")
                if text:
                    yield from self._thinking(text, None)

    def _tool_fragment(self, call: dict[str, Any]) -> Iterator[AssistantMessageEvent]:
        builder = self.builder
        key = typed(call.get("index"), int)
        call_id = typed(call.get("id"), str)
        function = call.get("function")
        if not isinstance(function, dict):
            function = {}
        name = typed(function.get("name"), str)
        arguments = typed(function.get("arguments"), str)
        if key is None and call_id is None and name is None and arguments is None:
            return  # nothing usable in it: not a call of its own
        block: Any = builder.message["content"][self.index] if self.kind == "tool" else None
        continues = (
            block is not None
            and (key is None or key == self.tool_key)
            and not (call_id and block["id"] and call_id != block["id"])
        )
        if not continues:
            if key is not None and key in self.seen_tools and not call_id:
                raise ProviderStreamError(
                    f"Tool call fragments arrived out of order (index {key} resumed after "
                    "another call began); the arguments cannot be rebuilt"
                )
            closing = self.close_block()
            if closing is not None:
                yield closing
            yield builder.start_tool_call(call_id or "", name or "")
            self.kind = "tool"
            self.index = len(builder.message["content"]) - 1
            self.tool_key = key
            if key is not None:
                self.seen_tools.add(key)
        else:
            if call_id and not block["id"]:
                block["id"] = call_id
            if name:
                block["name"] = name
        if arguments:
            yield builder.tool_call_delta(self.index, arguments)

    def _reasoning_details(self, details: list[Any]) -> None:
        """OpenRouter's encrypted reasoning belongs to a tool call and must be sent back."""
        for detail in details:
            if not isinstance(detail, dict) or detail.get("type") != "reasoning.encrypted":
                continue
            if not detail.get("id") or not detail.get("data"):
                continue
            for block in self.builder.message["content"]:
                if block.get("type") == "toolCall" and cast(Any, block)["id"] == detail["id"]:
                    cast(Any, block)["thoughtSignature"] = orjson.dumps(detail).decode()

    def close_block(self) -> AssistantMessageEvent | None:
        kind = self.kind
        self.kind = None
        if kind == "text":
            return self.builder.end_text(self.index)
        if kind == "thinking":
            return self.builder.end_thinking(self.index)
        if kind == "tool":
            return self._end_tool_call(self.index)
        return None

    def _end_tool_call(self, index: int) -> AssistantMessageEvent:
        builder = self.builder
        block: Any = builder.message["content"][index]
        if not block["id"]:  # some local servers send no ids; results must still pair up
            block["id"] = f"call_{uuid.uuid4().hex[:24]}"
        raw = builder.tool_call_json(index)
        arguments: Any = {}
        if raw.strip():
            try:
                arguments = orjson.loads(raw)
            except orjson.JSONDecodeError:
                arguments = None
        if not isinstance(arguments, dict):
            tail = raw if len(raw) <= _PREVIEW else "…" + raw[-_PREVIEW:]
            raise ProviderStreamError(
                f"Tool call {block['name']!r} ({block['id']}) ended with incomplete or "
                f"invalid JSON arguments: {tail!r}"
            )
        return builder.end_tool_call(index, arguments)

    def finish(self) -> AssistantMessageEvent:
        """The final event, once the stream has ended and the open block is closed."""
        builder = self.builder
        reason = self.finish_reason
        if not self.received:  # pi takes it for an empty answer: the user would get nothing
            return builder.error(NO_CHUNKS_TEXT)
        if reason is None:
            return builder.done("stop")
        stop = _STOP_REASONS.get(reason)
        if stop is not None:
            return builder.done(stop)
        if reason == "content_filter":
            return builder.error("The provider's content filter stopped the response")
        return builder.error(f"Unhandled stop reason: {reason}")


def _field(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _count(obj: Any, name: str) -> int:
    return token_count(_field(obj, name))


def _apply_usage(target: Usage, raw: Any) -> None:
    """pi's accounting: cached prompt tokens are cacheRead, reasoning tokens count as output."""
    cached = _count(_field(raw, "prompt_tokens_details"), "cached_tokens")
    if not cached:
        cached = _count(raw, "prompt_cache_hit_tokens")  # DeepSeek's name for it
    reasoning = _count(_field(raw, "completion_tokens_details"), "reasoning_tokens")
    prompt = _count(raw, "prompt_tokens")
    output = _count(raw, "completion_tokens") + reasoning
    target["input"] = prompt - cached
    target["output"] = output
    target["cacheRead"] = cached
    target["cacheWrite"] = 0
    target["totalTokens"] = target["input"] + output + cached


def describe_error(exc: BaseException) -> str:
    """`describe_sdk_error`, with an empty error body worded as the JS SDK words it.

    pi's overflow detection recognises Cerebras' bodiless 400/413 by that wording.
    """
    if isinstance(exc, openai.APIStatusError):
        try:
            text = exc.response.text
        except Exception:  # a streamed body that was never read
            text = ""
        if not text.strip() and not exc.body:
            return f"{exc.status_code} status code (no body)"
    return describe_sdk_error(exc)


register_api_provider(
    ApiProvider(api=API, stream=stream_openai_completions, describe_error=describe_error)
)
