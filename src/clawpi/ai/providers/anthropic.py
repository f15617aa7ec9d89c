"""The `anthropic-messages` API: Claude (and Anthropic-compatible servers) via the official SDK.

The request is built by `anthropic_convert`; this module sends it through the SDK and turns the
raw Messages stream events into clawpi's event protocol through the builder. The SDK's own stream
reads the SSE (pings, `event: error` frames) and hands each event over as the JSON dict the
server sent: a typed event model built per event cost more than everything else done per delta.
A field of another type than the API's counts as missing.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx2
import orjson

from clawpi.ai.builder import AssistantMessageBuilder
from clawpi.ai.models import Model, calculate_cost, token_count
from clawpi.ai.providers._common import describe_sdk_error, shared_client, typed
from clawpi.ai.providers.anthropic_convert import (
    DEFAULT_BASE_URL,
    beta_features,
    build_request,
    is_oauth_token,
    uses_bearer_auth,
)
from clawpi.ai.stream import (
    ApiProvider,
    StreamOptions,
    missing_key_message,
    register_api_provider,
    resolve_api_key,
)
from clawpi.ai.types import AssistantMessageEvent, Context, StopReason, Usage
from clawpi.errors import ClawpiError, ConfigError

API = "anthropic-messages"

# Anthropic stop_reason -> clawpi stop reason (pi's mapping); None means "ends in an error".
STOP_REASONS: dict[str, StopReason | None] = {
    "end_turn": "stop",
    "max_tokens": "length",
    "tool_use": "toolUse",
    "pause_turn": "stop",  # the server paused a long turn; resubmitting continues it
    "stop_sequence": "stop",
    "refusal": None,
    "sensitive": None,
}
_STOP_ERRORS = {
    "refusal": "The model refused to answer (stop_reason: refusal)",
    "sensitive": "The response was stopped by Anthropic's safety filters (stop_reason: sensitive)",
}
REDACTED_THINKING_TEXT = "[Reasoning redacted]"
_SNIPPET = 200


class AnthropicStreamError(ClawpiError):
    """The stream broke the Messages protocol, or the server reported an error inside it."""


def _client(model: Model, api_key: str) -> anthropic.AsyncAnthropic:
    base_url = model.base_url or DEFAULT_BASE_URL
    bearer = uses_bearer_auth(model, api_key)

    def factory() -> anthropic.AsyncAnthropic:
        if bearer:
            return anthropic.AsyncAnthropic(auth_token=api_key, base_url=base_url, max_retries=0)
        # Anthropic documents API keys in `x-api-key`; the SDK would send them as a Bearer token.
        return anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url,
            max_retries=0,
            default_headers={"x-api-key": api_key, "Authorization": anthropic.Omit()},  # type: ignore[dict-item]
        )

    return shared_client((API, base_url, api_key, bearer), factory)


def _request_headers(model: Model, options: StreamOptions, api_key: str) -> dict[str, str]:
    headers: dict[str, str] = {}
    betas = beta_features(model, api_key)
    if betas:
        headers["anthropic-beta"] = ",".join(betas)
    if model.headers:
        headers.update(model.headers)
    if options.headers:
        headers.update(options.headers)
    return headers


async def stream_anthropic(
    model: Model, context: Context, options: StreamOptions
) -> AsyncIterator[AssistantMessageEvent]:
    """Stream one assistant turn from the Messages API (`POST /v1/messages`, `stream: true`)."""
    api_key = resolve_api_key(model, options.api_key)
    if not api_key:
        raise ConfigError(missing_key_message(model))
    client = _client(model, api_key)
    body = build_request(
        model,
        context,
        max_tokens=options.max_tokens,
        reasoning=options.reasoning,
        thinking_budgets=options.thinking_budgets,
        temperature=options.temperature,
        cache_retention=options.cache_retention,
        metadata=options.metadata,
        tool_choice=options.tool_choice,
        oauth=is_oauth_token(api_key),
        history_owner=options.history_owner,
    )
    if options.on_payload is not None:
        replaced = options.on_payload(body, model)
        if replaced is not None:
            body = replaced
    sdk_stream = await client.post(
        "/v1/messages",
        body={**body, "stream": True},
        options={"headers": _request_headers(model, options, api_key)},
        cast_to=object,  # each event as sent: no SDK model built per event
        stream=True,
        stream_cls=anthropic.AsyncStream[object],
    )
    builder = AssistantMessageBuilder(model)
    message = builder.message
    usage = message["usage"]
    # Anthropic content_block index -> (our content index, block kind)
    blocks: dict[int, tuple[int, str]] = {}
    stop_reason: str | None = None
    async with sdk_stream:
        yield builder.start()
        try:
            async for event in sdk_stream:
                if not isinstance(event, dict):
                    continue
                kind = event.get("type")
                if kind == "content_block_delta":
                    entry = blocks.get(typed(event.get("index"), int, -1))
                    delta = typed(event.get("delta"), dict, _NOTHING)
                    if entry is None:
                        continue
                    delta_kind = delta.get("type")
                    field = _DELTA_FIELDS.get(delta_kind) if isinstance(delta_kind, str) else None
                    value = typed(delta.get(field or ""), str, None)
                    if value is None:
                        continue
                    if delta_kind == "text_delta":
                        yield builder.text_delta(entry[0], value)
                    elif delta_kind == "input_json_delta":
                        yield builder.tool_call_delta(entry[0], value)
                    elif delta_kind == "thinking_delta":
                        yield builder.thinking_delta(entry[0], value)
                    else:
                        builder.set_thinking_signature(entry[0], value, append=True)
                elif kind == "content_block_start":
                    index = typed(event.get("index"), int, None)
                    block = typed(event.get("content_block"), dict, None)
                    if index is None or block is None or index in blocks:
                        continue  # (a repeated start of a block still open is ignored)
                    started = _start_block(builder, block)
                    if started is not None:
                        blocks[index] = (len(message["content"]) - 1, block["type"])
                        yield started
                elif kind == "content_block_stop":
                    entry = blocks.pop(typed(event.get("index"), int, -1), None)
                    if entry is not None:
                        yield _end_block(builder, *entry)
                elif kind == "message_start":
                    start = typed(event.get("message"), dict, _NOTHING)
                    response_id = typed(start.get("id"), str, None)
                    if response_id:
                        message["responseId"] = response_id
                    _apply_usage(model, usage, start.get("usage"), initial=True)
                elif kind == "message_delta":
                    _apply_usage(model, usage, event.get("usage"), initial=False)
                    delta = typed(event.get("delta"), dict, _NOTHING)
                    reason = typed(delta.get("stop_reason"), str, None)
                    if reason:
                        stop_reason = reason
        except anthropic.APIStatusError as exc:
            if exc.status_code >= 400:
                raise
            # an `event: error` frame inside a 200 stream (e.g. overloaded_error mid-answer)
            yield builder.error(_stream_error_text(exc))
            return
        except json.JSONDecodeError as exc:
            snippet = exc.doc[:_SNIPPET] if isinstance(exc.doc, str) else ""
            raise AnthropicStreamError(
                f"Anthropic stream sent an event whose data is not JSON: {snippet!r}"
            ) from exc
        except httpx2.TransportError as exc:
            raise AnthropicStreamError(
                f"Connection error: the Anthropic stream was cut off mid-response ({exc})"
            ) from exc
        if stop_reason is not None and not builder.open_tool_calls():
            # a server that forgot content_block_stop: close what it left open, in order
            for index, kind in sorted(blocks.values()):
                yield _end_block(builder, index, kind)
        yield _finish(builder, stop_reason)


def _finish(builder: AssistantMessageBuilder, stop_reason: str | None) -> AssistantMessageEvent:
    open_calls = builder.open_tool_calls()
    if open_calls:
        call: Any = builder.message["content"][open_calls[0]]
        return builder.error(
            f"Anthropic stream ended inside tool call {call['name']!r} ({call['id']}): "
            "its arguments never completed"
        )
    if stop_reason is None:
        return builder.error(
            "Connection error: the Anthropic stream ended before the response was complete "
            "(no stop_reason received)"
        )
    if stop_reason not in STOP_REASONS:
        return builder.error(f"Unhandled stop reason: {stop_reason}")
    mapped = STOP_REASONS[stop_reason]
    if mapped is None:
        return builder.error(_STOP_ERRORS[stop_reason])
    return builder.done(mapped)


def _start_block(
    builder: AssistantMessageBuilder, block: dict[str, Any]
) -> AssistantMessageEvent | None:
    kind = block.get("type")
    if kind == "text":
        return builder.start_text()
    if kind == "thinking":
        return builder.start_thinking()
    if kind == "redacted_thinking":
        event = builder.start_thinking(typed(block.get("data"), str, ""), redacted=True)
        thinking: Any = builder.message["content"][-1]
        thinking["thinking"] = REDACTED_THINKING_TEXT
        return event
    if kind == "tool_use":
        call_id, name = typed(block.get("id"), str, ""), typed(block.get("name"), str, "")
        event = builder.start_tool_call(call_id, name)
        initial = block.get("input")
        if isinstance(initial, dict) and initial:  # a proxy that sends the whole input up front
            call: Any = builder.message["content"][-1]
            call["arguments"] = initial
        return event
    return None  # server tool blocks (web search, code execution) are not part of the turn


def _end_block(builder: AssistantMessageBuilder, index: int, kind: str) -> AssistantMessageEvent:
    if kind == "text":
        return builder.end_text(index)
    if kind == "tool_use":
        raw = builder.tool_call_json(index)
        call: Any = builder.message["content"][index]
        if not raw.strip():
            return builder.end_tool_call(index, call["arguments"] or {})
        try:
            arguments = orjson.loads(raw)
        except orjson.JSONDecodeError:
            arguments = None
        if not isinstance(arguments, dict):
            raise AnthropicStreamError(
                f"Anthropic tool call {call['name']!r} ({call['id']}) ended with arguments that "
                f"are not a complete JSON object: {raw[:_SNIPPET]!r}"
            )
        return builder.end_tool_call(index, arguments)
    return builder.end_thinking(index)


def _apply_usage(model: Model, usage: Usage, raw: Any, *, initial: bool) -> None:
    """message_start sets every count; message_delta overwrites only the ones it carries."""
    if raw is None:
        return
    for key, attr in (
        ("input", "input_tokens"),
        ("output", "output_tokens"),
        ("cacheRead", "cache_read_input_tokens"),
        ("cacheWrite", "cache_creation_input_tokens"),
    ):
        value = raw.get(attr) if isinstance(raw, dict) else None
        if value is not None:
            usage[key] = token_count(value)  # type: ignore[literal-required]
        elif initial:
            usage[key] = 0  # type: ignore[literal-required]
    usage["totalTokens"] = (
        usage["input"] + usage["output"] + usage["cacheRead"] + usage["cacheWrite"]
    )
    calculate_cost(model, usage)  # kept current so an aborted turn still reports its cost


_NOTHING: dict[str, Any] = {}
_DELTA_FIELDS = {
    "text_delta": "text",
    "input_json_delta": "partial_json",
    "thinking_delta": "thinking",
    "signature_delta": "signature",
}
"""The field holding each delta kind's text."""


def _stream_error_text(exc: anthropic.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, (dict, list)):
        return orjson.dumps(body).decode()
    return str(body or exc.message)


register_api_provider(
    ApiProvider(api=API, stream=stream_anthropic, describe_error=describe_sdk_error)
)
