"""The `openai-responses` API: OpenAI's Responses endpoint through the official `openai` SDK.

Output items map one to one onto content blocks: a `reasoning` item becomes a thinking block
whose signature is the whole item as JSON (encrypted reasoning included, so it can be replayed
verbatim next turn), a `message` item a text block signed with its item id (and phase), a
`function_call` item a tool call with id `call_id|item_id`.

The SDK sends the request (auth, base URL, headers, HTTP errors as its exception types); the
event stream is read with httpx2's SSE parser and orjson, because the SDK's own stream validates
every event against a large pydantic union (about 0.4 ms per event, and seconds of schema
building on the first request of a process).
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx2
import openai
import orjson
from openai.resources.responses import AsyncResponses

from clawpi.ai.builder import AssistantMessageBuilder
from clawpi.ai.models import Model, token_count
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
_MAX_EVENT_BYTES = 64 * 1024 * 1024
"""`response.completed` repeats the whole output, so one event can be far above 1 MiB."""
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
    request = _client(model, api_key).responses.with_streaming_response.create(
        **named,
        extra_headers=_headers(model.headers, options.headers),
        extra_body=extra_body or None,
    )
    builder = AssistantMessageBuilder(model)
    final: DoneEvent | ErrorEvent | None = None
    stream_error: str | None = None
    async with request as raw:  # HTTP errors raise here, before `start`
        http_response = raw.http_response
        yield builder.start()
        index = -1
        kind: str | None = None  # the open block's item type
        summary_parts = 0
        seen_items: set[str] = set()
        open_item: str | None = None  # the open block's item id
        etype = "(none yet)"
        loads = orjson.loads
        events = httpx2.EventSource(http_response, max_event_size=_MAX_EVENT_BYTES).__aiter__()
        try:
            async for sse in events:
                event = loads(sse.data)
                etype = event["type"]
                if etype == "response.output_text.delta" or etype == "response.refusal.delta":
                    if kind == "message":
                        yield builder.text_delta(index, event["delta"])
                elif etype == "response.function_call_arguments.delta":
                    if kind == "function_call":
                        yield builder.tool_call_delta(index, event["delta"])
                elif (
                    etype == "response.reasoning_summary_text.delta"
                    or etype == "response.reasoning_text.delta"
                ):
                    if kind == "reasoning":
                        yield builder.thinking_delta(index, event["delta"])
                elif etype == "response.reasoning_summary_part.added":
                    if kind == "reasoning":
                        if summary_parts:
                            yield builder.thinking_delta(index, _SUMMARY_SEPARATOR)
                        summary_parts += 1
                elif etype == "response.output_item.added":
                    item = event["item"]
                    item_id = item.get("id")
                    if item_id and item_id in seen_items:  # the server repeated itself
                        if item_id != open_item and kind is not None:
                            yield _close_block(builder, index, kind, None)
                            kind = None  # (what the repeat streams is not taken twice)
                        continue
                    if kind is not None:  # the server skipped output_item.done
                        yield _close_block(builder, index, kind, None)
                        kind = None
                    if item_id:
                        seen_items.add(item_id)
                    open_item = item_id
                    item_type = item["type"]
                    if item_type == "message":
                        signature = encode_text_signature(item_id, item.get("phase"))
                        yield builder.start_text(signature if item_id else None)
                    elif item_type == "reasoning":
                        yield builder.start_thinking()
                        summary_parts = 0
                    elif item_type == "function_call":
                        yield builder.start_tool_call(_tool_call_id(item), item["name"])
                    else:
                        continue  # hosted tools, MCP, ...: nothing the caller can replay
                    kind = item_type
                    index = len(builder.message["content"]) - 1
                    if item_type == "function_call" and item.get("arguments"):
                        yield builder.tool_call_delta(index, item["arguments"])
                elif etype == "response.output_item.done":
                    item = event["item"]
                    if kind is not None and item["type"] == kind:
                        yield _close_block(builder, index, kind, item)
                        kind = None
                elif etype in _TERMINAL_EVENTS:
                    response = event["response"]
                    _read_usage(builder.message["usage"], response.get("usage"))
                    if kind is not None:
                        yield _close_block(builder, index, kind, None)
                        kind = None
                    final = _finish(builder, response, etype, options)
                    async for _ in events:  # let the body end so the connection is reused
                        pass
                    break
                elif etype == "error":
                    raise ResponsesStreamError(_error_event_text(event))
                elif etype == "response.created":
                    response_id = event["response"].get("id")
                    if response_id:
                        builder.message["responseId"] = response_id
        except orjson.JSONDecodeError as exc:
            if sse.data.startswith("[DONE]"):
                pass  # an OpenAI-compatible server's end marker; missing completion is checked below
            else:
                raise ResponsesStreamError(
                    f"{API}: the server sent an event whose data is not JSON: {sse.data[:_SNIPPET]!r}"
                ) from exc
        except (KeyError, AttributeError, TypeError) as exc:
            if not (isinstance(event, dict) and isinstance(event.get("error"), dict)):
                raise ResponsesStreamError(
                    f"{API}: malformed server event ({type(exc).__name__}: {exc}); "
                    f"last event type: {etype}"
                ) from exc
            stream_error = _error_event_text(event["error"])  # a bare `{"error": {...}}` frame
        except httpx2.SSEError as exc:
            raise ResponsesStreamError(f"{API}: {exc}") from exc
        except httpx2.TimeoutException as exc:
            raise openai.APITimeoutError(request=http_response.request) from exc
        except httpx2.TransportError as exc:
            raise openai.APIConnectionError(request=http_response.request) from exc
    if stream_error is not None:
        raise ResponsesStreamError(stream_error)
    if final is None:
        raise ResponsesStreamError(
            f"{API}: the stream ended before response.completed (connection closed early?)"
        )
    yield final


def _error_event_text(error: dict[str, Any]) -> str:
    nested = error.get("error")
    if isinstance(nested, dict) and not error.get("message"):
        error = nested
    message = error.get("message") or "no message"
    code = error.get("code")
    return f"Error Code {code}: {message}" if code else str(message)


def _headers(
    model_headers: Mapping[str, str] | None, option_headers: Mapping[str, str] | None
) -> dict[str, str] | None:
    if not model_headers and not option_headers:
        return None
    return {**(model_headers or {}), **(option_headers or {})}


def _close_block(
    builder: AssistantMessageBuilder, index: int, kind: str, item: dict[str, Any] | None
) -> AssistantMessageEvent:
    """End the open block; the finished item (when the server sent one) is authoritative."""
    block: Any = builder.message["content"][index]
    if kind == "message":
        if item is not None:
            parts = item.get("content") or ()
            text = "".join(_part_text(part) for part in parts)
            if parts and text != block["text"]:
                block["text"] = text
            if item.get("id"):
                block["textSignature"] = encode_text_signature(item["id"], item.get("phase"))
        return builder.end_text(index)
    if kind == "reasoning":
        if item is not None:
            texts = [part.get("text") or "" for part in item.get("summary") or ()]
            if not texts:
                texts = [part.get("text") or "" for part in item.get("content") or ()]
            text = _SUMMARY_SEPARATOR.join(texts)
            if text != block["thinking"]:
                block["thinking"] = text
            builder.set_thinking_signature(index, orjson.dumps(item).decode())
        return builder.end_thinking(index)
    # function_call
    raw = builder.tool_call_json(index)
    if item is not None:
        if item.get("call_id"):
            block["id"] = _tool_call_id(item)
        if item.get("name"):
            block["name"] = item["name"]
        raw = item.get("arguments") or raw
    return builder.end_tool_call(index, _parse_arguments(raw, block))


def _tool_call_id(item: dict[str, Any]) -> str:
    """`call_id|item_id`: the call id answers the call, the item id replays it next turn."""
    item_id = item.get("id")
    return f"{item['call_id']}|{item_id}" if item_id else str(item["call_id"])


def _part_text(part: dict[str, Any]) -> str:
    text = part.get("text") if part.get("type") == "output_text" else part.get("refusal")
    return text or ""


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
    builder: AssistantMessageBuilder, response: dict[str, Any], etype: str, options: StreamOptions
) -> DoneEvent | ErrorEvent:
    """The final event from the response's status, with usage and cost filled in."""
    usage = builder.message["usage"]
    status = response.get("status") or etype.rpartition(".")[2]
    stop: StopReason
    if status == "completed" or status in ("in_progress", "queued"):
        content = builder.message["content"]
        stop = "toolUse" if any(b["type"] == "toolCall" for b in content) else "stop"
    elif status == "incomplete":
        reason = (response.get("incomplete_details") or {}).get("reason")
        if reason == "content_filter":
            return _error(builder, f"{API}: response incomplete: content_filter", options)
        stop = "length"
    elif status in ("failed", "cancelled"):
        error = response.get("error")
        if isinstance(error, dict):
            code = error.get("code") or "unknown"
            message = error.get("message") or "no message"
            return _error(builder, f"{code}: {message}", options)
        return _error(builder, f"{API}: response {status} (no error details)", options)
    else:
        return _error(builder, f"{API}: unknown response status {status!r}", options)
    done = builder.done(stop)
    _apply_service_tier(usage, response.get("service_tier"), options)
    return done


def _error(builder: AssistantMessageBuilder, message: str, options: StreamOptions) -> ErrorEvent:
    event = builder.error(message)
    _apply_service_tier(event["error"]["usage"], None, options)
    return event


def _read_usage(usage: Usage, reported: dict[str, Any] | None) -> None:
    if not reported:
        return
    details = reported.get("input_tokens_details")
    cached = token_count(details.get("cached_tokens") if isinstance(details, dict) else None)
    usage["input"] = max(0, token_count(reported.get("input_tokens")) - cached)
    usage["output"] = token_count(reported.get("output_tokens"))
    usage["cacheRead"] = cached
    usage["cacheWrite"] = 0
    usage["totalTokens"] = token_count(reported.get("total_tokens"))


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
