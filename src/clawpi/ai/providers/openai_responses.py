"""The `openai-responses` API: OpenAI's Responses endpoint through the official `openai` SDK.

Output items map one to one onto content blocks: a `reasoning` item becomes a thinking block
whose signature is the whole item as JSON (encrypted reasoning included, so it can be replayed
verbatim next turn), a `message` item a text block signed with its item id (and phase), a
`function_call` item a tool call with id `call_id|item_id`.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any

import openai
import orjson
from openai.resources.responses import AsyncResponses

from clawpi.ai.builder import AssistantMessageBuilder
from clawpi.ai.models import Model
from clawpi.ai.providers._common import describe_sdk_error, shared_client
from clawpi.ai.providers.openai_responses_convert import build_request, encode_text_signature
from clawpi.ai.stream import (
    ApiProvider,
    StreamOptions,
    missing_key_message,
    register_api_provider,
    resolve_api_key,
)
from clawpi.ai.types import (
    AssistantMessageEvent,
    Context,
    DoneEvent,
    ErrorEvent,
    StopReason,
    Usage,
)
from clawpi.errors import ClawpiError

API = "openai-responses"

_SDK_ARGUMENTS = frozenset(
    name
    for name in inspect.signature(AsyncResponses.create).parameters
    if name not in ("self", "extra_headers", "extra_query", "extra_body", "timeout")
)
"""Body fields `responses.create()` takes by name; anything else goes through `extra_body`."""

_TERMINAL_EVENTS = frozenset(("response.completed", "response.incomplete", "response.failed"))
_SERVICE_TIER_PRICE = {"flex": 0.5, "priority": 2.0}
_SNIPPET = 200
_SUMMARY_SEPARATOR = "\n\n"


class ResponsesStreamError(ClawpiError):
    """The server's event stream broke the Responses protocol or reported a failure."""


def _client(model: Model, api_key: str) -> openai.AsyncOpenAI:
    base_url = model.base_url or None
    return shared_client(
        (API, base_url, api_key),
        lambda: openai.AsyncOpenAI(api_key=api_key, base_url=base_url, max_retries=0),
    )


async def stream_openai_responses(
    model: Model, context: Context, options: StreamOptions
) -> AsyncIterator[AssistantMessageEvent]:
    """Stream one turn from a Responses API server; raises on failure (the wrapper reports it)."""
    api_key = resolve_api_key(model, options.api_key)
    if not api_key:
        raise ResponsesStreamError(missing_key_message(model))
    body = build_request(model, context, options)
    if options.on_payload is not None:
        replaced = options.on_payload(body, model)
        if replaced is not None:
            body = replaced
    named = {key: value for key, value in body.items() if key in _SDK_ARGUMENTS}
    extra_body = {key: value for key, value in body.items() if key not in _SDK_ARGUMENTS}
    named["stream"] = True
    headers = _headers(model.headers, options.headers)
    response_stream = await _client(model, api_key).responses.create(
        **named, extra_headers=headers, extra_body=extra_body or None
    )
    builder = AssistantMessageBuilder(model)
    final: DoneEvent | ErrorEvent | None = None
    try:
        yield builder.start()
        events: AsyncIterable[Any] = response_stream
        index = -1
        kind: str | None = None  # the open block's item type
        summary_parts = 0
        etype = "(no event yet)"
        try:
            async for event in events:
                etype = event.type
                if etype == "response.output_text.delta" or etype == "response.refusal.delta":
                    if kind == "message":
                        yield builder.text_delta(index, event.delta)
                elif etype == "response.function_call_arguments.delta":
                    if kind == "function_call":
                        yield builder.tool_call_delta(index, event.delta)
                elif (
                    etype == "response.reasoning_summary_text.delta"
                    or etype == "response.reasoning_text.delta"
                ):
                    if kind == "reasoning":
                        yield builder.thinking_delta(index, event.delta)
                elif etype == "response.reasoning_summary_part.added":
                    if kind == "reasoning":
                        if summary_parts:
                            yield builder.thinking_delta(index, _SUMMARY_SEPARATOR)
                        summary_parts += 1
                elif etype == "response.output_item.added":
                    if kind is not None:  # the server skipped output_item.done
                        yield _close_block(builder, index, kind, None)
                        kind = None
                    item = event.item
                    item_type = item.type
                    if item_type == "message":
                        yield builder.start_text(
                            encode_text_signature(item.id, item.phase) if item.id else None
                        )
                    elif item_type == "reasoning":
                        yield builder.start_thinking()
                        summary_parts = 0
                    elif item_type == "function_call":
                        yield builder.start_tool_call(f"{item.call_id}|{item.id}", item.name)
                    else:
                        continue  # hosted tools, MCP, ...: nothing the caller can replay
                    kind = item_type
                    index = len(builder.message["content"]) - 1
                    if item_type == "function_call" and item.arguments:
                        yield builder.tool_call_delta(index, item.arguments)
                elif etype == "response.output_item.done":
                    if kind is not None and event.item.type == kind:
                        yield _close_block(builder, index, kind, event.item)
                        kind = None
                elif etype in _TERMINAL_EVENTS:
                    response = event.response
                    _read_usage(builder.message["usage"], getattr(response, "usage", None))
                    if kind is not None:
                        yield _close_block(builder, index, kind, None)
                        kind = None
                    final = _finish(builder, response, etype, options)
                    async for _ in events:  # let the body end so the connection is reused
                        pass
                    break
                elif etype == "error":
                    raise ResponsesStreamError(f"Error Code {event.code}: {event.message}")
                elif etype == "response.created":
                    response_id = getattr(event.response, "id", None)
                    if response_id:
                        builder.message["responseId"] = response_id
        except json.JSONDecodeError as exc:
            raise ResponsesStreamError(
                f"{API}: the server sent an event whose data is not JSON: {exc.doc[:_SNIPPET]!r}"
            ) from exc
        except (AttributeError, TypeError) as exc:
            raise ResponsesStreamError(
                f"{API}: malformed event from the server ({exc}); last event type: {etype}"
            ) from exc
    finally:
        await response_stream.close()
    if final is None:
        raise ResponsesStreamError(
            f"{API}: the stream ended before response.completed (connection closed early?)"
        )
    yield final


def _headers(
    model_headers: Mapping[str, str] | None, option_headers: Mapping[str, str] | None
) -> dict[str, str] | None:
    if not model_headers and not option_headers:
        return None
    return {**(model_headers or {}), **(option_headers or {})}


def _close_block(
    builder: AssistantMessageBuilder, index: int, kind: str, item: Any
) -> AssistantMessageEvent:
    """End the open block; the finished item (when the server sent one) is authoritative."""
    block: Any = builder.message["content"][index]
    if kind == "message":
        if item is not None:
            parts = item.content or ()
            text = "".join(
                (part.text if part.type == "output_text" else part.refusal) or "" for part in parts
            )
            if parts and text != block["text"]:
                block["text"] = text
            if item.id:
                block["textSignature"] = encode_text_signature(item.id, item.phase)
        return builder.end_text(index)
    if kind == "reasoning":
        if item is not None:
            texts = [part.text for part in item.summary or ()]
            if not texts:
                texts = [part.text for part in item.content or ()]
            text = _SUMMARY_SEPARATOR.join(texts)
            if text != block["thinking"]:
                block["thinking"] = text
            builder.set_thinking_signature(index, orjson.dumps(item.to_dict()).decode())
        return builder.end_thinking(index)
    # function_call
    if item is not None:
        if item.call_id:
            block["id"] = f"{item.call_id}|{item.id}"
        if item.name:
            block["name"] = item.name
    raw = item.arguments if item is not None and item.arguments else None
    if raw is None:
        raw = builder.tool_call_json(index)
    return builder.end_tool_call(index, _parse_arguments(raw, block))


def _parse_arguments(raw: str, block: Any) -> dict[str, Any]:
    """Complete arguments or a clear error: a half-received call must never be executed."""
    if not raw.strip():
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise ResponsesStreamError(
            f"{API}: tool call {block['name']!r} ({block['id']}) ended with arguments that are "
            f"not a complete JSON object: {raw[:_SNIPPET]!r}"
        )
    return value


def _finish(
    builder: AssistantMessageBuilder, response: Any, etype: str, options: StreamOptions
) -> DoneEvent | ErrorEvent:
    """The final event from the response's status, with usage and cost filled in."""
    usage = builder.message["usage"]
    status = getattr(response, "status", None) or etype.rpartition(".")[2]
    stop: StopReason
    if status == "completed" or status in ("in_progress", "queued"):
        content = builder.message["content"]
        stop = "toolUse" if any(b["type"] == "toolCall" for b in content) else "stop"
    elif status == "incomplete":
        details = getattr(response, "incomplete_details", None)
        reason = getattr(details, "reason", None)
        if reason == "content_filter":
            return _error(builder, f"{API}: response incomplete: content_filter", options)
        stop = "length"
    elif status in ("failed", "cancelled"):
        error = getattr(response, "error", None)
        if error is not None:
            code = getattr(error, "code", None) or "unknown"
            message = getattr(error, "message", None) or "no message"
            return _error(builder, f"{code}: {message}", options)
        return _error(builder, f"{API}: response {status} (no error details)", options)
    else:
        return _error(builder, f"{API}: unknown response status {status!r}", options)
    done = builder.done(stop)
    _apply_service_tier(usage, getattr(response, "service_tier", None), options)
    return done


def _error(builder: AssistantMessageBuilder, message: str, options: StreamOptions) -> ErrorEvent:
    event = builder.error(message)
    _apply_service_tier(event["error"]["usage"], None, options)
    return event


def _read_usage(usage: Usage, reported: Any) -> None:
    if reported is None:
        return
    details = getattr(reported, "input_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) or 0
    usage["input"] = (reported.input_tokens or 0) - cached
    usage["output"] = reported.output_tokens or 0
    usage["cacheRead"] = cached
    usage["cacheWrite"] = 0
    usage["totalTokens"] = reported.total_tokens or 0


def _apply_service_tier(usage: Usage, reported_tier: str | None, options: StreamOptions) -> None:
    """Flex costs half and priority double the listed prices."""
    tier = reported_tier or options.extra.get("service_tier")
    multiplier = _SERVICE_TIER_PRICE.get(tier) if isinstance(tier, str) else None
    if multiplier is None:
        return
    cost = usage["cost"]
    cost["input"] *= multiplier
    cost["output"] *= multiplier
    cost["cacheRead"] *= multiplier
    cost["cacheWrite"] *= multiplier
    cost["total"] = cost["input"] + cost["output"] + cost["cacheRead"] + cost["cacheWrite"]


register_api_provider(
    ApiProvider(api=API, stream=stream_openai_responses, describe_error=describe_sdk_error)
)
