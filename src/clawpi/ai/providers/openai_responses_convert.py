"""Context -> OpenAI Responses API request body (pure; no SDK, no I/O).

Assistant turns are replayed as the items the API produced: reasoning items verbatim from the
thinking signature (so encrypted reasoning carries over with `store: false`), text as `message`
items with their ids and phase, tool calls as `function_call` items with `call_id` and item id.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, cast

import orjson

from clawpi.ai.models import Model
from clawpi.ai.stream import StreamOptions
from clawpi.ai.text import sanitize_surrogates
from clawpi.ai.thinking import base_max_tokens, clamp_level, effective_level
from clawpi.ai.transform import transform_messages
from clawpi.ai.types import (
    AssistantMessage,
    Context,
    Tool,
    ToolResultMessage,
    UserContent,
    UserMessage,
)

MAX_ID_LENGTH = 64
JUICE_OFF_TEXT = "# Juice: 0 !important"
"""Appended as a developer message to turn reasoning off on gpt-5 models (no `none` effort)."""
IMAGE_ONLY_RESULT_TEXT = "(see attached image)"
ENCRYPTED_REASONING = "reasoning.encrypted_content"
_TEXT_PHASES = ("commentary", "final_answer")
_UNSAFE_ID_CHARS = re.compile(r"[^a-zA-Z0-9_-]")


# -- ids -------------------------------------------------------------------------------------


def normalize_tool_call_id(call_id: str, model: Model, source: AssistantMessage) -> str:
    """Make another model's tool-call id valid here: `call_id|item_id`, item id starting `fc`.

    Each part keeps only [a-zA-Z0-9_-], is cut to 64 characters and loses trailing underscores
    (some Responses servers reject them).
    """
    call, sep, item = call_id.partition("|")
    call = _clean_id_part(call)
    if not sep:
        return call
    item = _UNSAFE_ID_CHARS.sub("_", item)
    if not item.startswith("fc"):
        item = f"fc_{item}"
    return f"{call}|{_clean_id_part(item)}"


def _clean_id_part(part: str) -> str:
    return _UNSAFE_ID_CHARS.sub("_", part)[:MAX_ID_LENGTH].rstrip("_")


def encode_text_signature(item_id: str, phase: str | None) -> str:
    """A text block's signature: the message item id, or versioned JSON when it has a phase."""
    if phase:
        return orjson.dumps({"v": 1, "id": item_id, "phase": phase}).decode()
    return item_id


def parse_text_signature(signature: str | None) -> tuple[str | None, str | None]:
    """(item id, phase) from a text signature in either form; (None, None) when absent."""
    if not signature:
        return None, None
    if signature.startswith("{"):
        try:
            data = orjson.loads(signature)
        except orjson.JSONDecodeError:
            return signature, None
        if isinstance(data, dict) and data.get("v") == 1 and isinstance(data.get("id"), str):
            phase = data.get("phase")
            return data["id"], phase if phase in _TEXT_PHASES else None
    return signature, None


def _message_id(signature_id: str | None, index: int, block: int) -> str:
    if not signature_id:
        # one id per text block: OpenAI rejects an input that repeats an item id
        return f"msg_{index}" if block == 0 else f"msg_{index}_{block}"
    if len(signature_id) > MAX_ID_LENGTH:
        digest = hashlib.blake2b(signature_id.encode(), digest_size=12).hexdigest()
        return f"msg_{digest}"
    return signature_id


# -- messages --------------------------------------------------------------------------------


def convert_messages(
    model: Model, context: Context, *, owner: object | None = None
) -> list[dict[str, Any]]:
    """The request's `input`: system prompt, then every message as Responses input items."""
    items: list[dict[str, Any]] = []
    system_prompt = context.get("systemPrompt")
    if system_prompt:
        items.append(
            {
                "role": "developer" if model.reasoning else "system",
                "content": sanitize_surrogates(system_prompt),
            }
        )
    messages = transform_messages(
        context.get("messages") or [], model, normalize_tool_call_id, owner=owner
    )
    images_ok = model.supports_images
    index = 0
    for message in messages:
        role = message.get("role")
        if role == "user":
            user_item = _user_item(cast(UserMessage, message), images_ok)
            if user_item is None:
                continue
            items.append(user_item)
        elif role == "assistant":
            assistant_items = _assistant_items(cast(AssistantMessage, message), model, index)
            if not assistant_items:
                continue
            items.extend(assistant_items)
        elif role == "toolResult":
            items.append(_tool_result_item(cast(ToolResultMessage, message), images_ok))
        else:
            continue  # a custom message kind the model never sees
        index += 1
    return items


def _user_item(message: UserMessage, images_ok: bool) -> dict[str, Any] | None:
    content = message.get("content")
    if isinstance(content, str):
        parts: list[dict[str, Any]] = [{"type": "input_text", "text": sanitize_surrogates(content)}]
    else:
        parts = _input_parts(content or [], images_ok)
        if not parts:
            return None
    return {"role": "user", "content": parts}


def _input_parts(content: list[UserContent], images_ok: bool) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in content:
        kind = block.get("type")
        if kind == "text":
            parts.append({"type": "input_text", "text": sanitize_surrogates(block["text"])})  # type: ignore[typeddict-item]
        elif kind == "image" and images_ok:
            parts.append(_image_part(block))
    return parts


def _image_part(block: Any) -> dict[str, Any]:
    return {
        "type": "input_image",
        "detail": "auto",
        "image_url": f"data:{block['mimeType']};base64,{block['data']}",
    }


def _assistant_items(message: AssistantMessage, model: Model, index: int) -> list[dict[str, Any]]:
    # Same provider and API but another model: OpenAI pairs fc_ item ids with the reasoning items
    # that produced them, so those ids are left out rather than replayed without their reasoning.
    other_model = (
        message.get("model") != model.id
        and message.get("provider") == model.provider
        and message.get("api") == model.api
    )
    items: list[dict[str, Any]] = []
    text_blocks = 0
    for block in message.get("content", []):
        kind = block.get("type")
        data: Any = block
        if kind == "thinking":
            reasoning = _reasoning_item(data.get("thinkingSignature"))
            if reasoning is not None:
                items.append(reasoning)
        elif kind == "text":
            item_id, phase = parse_text_signature(data.get("textSignature"))
            text_item: dict[str, Any] = {
                "type": "message",
                "role": "assistant",
                "content": [
                    {
                        "type": "output_text",
                        "text": sanitize_surrogates(data.get("text", "")),
                        "annotations": [],
                    }
                ],
                "status": "completed",
                "id": _message_id(item_id, index, text_blocks),
            }
            text_blocks += 1
            if phase:
                text_item["phase"] = phase
            items.append(text_item)
        elif kind == "toolCall":
            call_id, _, item_id = str(data["id"]).partition("|")
            call_item: dict[str, Any] = {"type": "function_call"}
            if item_id and not (other_model and item_id.startswith("fc_")):
                call_item["id"] = item_id
            call_item["call_id"] = call_id
            call_item["name"] = data["name"]
            call_item["arguments"] = orjson.dumps(data.get("arguments") or {}).decode()
            items.append(call_item)
    # A reasoning item must be followed by the item it led to; after an abort or a cut-off
    # turn there may be none, and the API rejects the dangling reasoning with a 400.
    while items and items[-1].get("type") == "reasoning":
        items.pop()
    return items


def _reasoning_item(signature: str | None) -> dict[str, Any] | None:
    """The reasoning item stored in a thinking signature; None if it is missing or not ours."""
    if not signature or not signature.startswith("{"):
        return None
    try:
        item = orjson.loads(signature)
    except orjson.JSONDecodeError:
        return None
    if isinstance(item, dict) and item.get("type") == "reasoning":
        return item
    return None


def _tool_result_item(message: ToolResultMessage, images_ok: bool) -> dict[str, Any]:
    content = message.get("content") or []
    text = "\n".join(
        sanitize_surrogates(block["text"])  # type: ignore[typeddict-item]
        for block in content
        if block.get("type") == "text"
    )
    images = [block for block in content if block.get("type") == "image"]
    output: str | list[dict[str, Any]]
    if images and images_ok:
        # The Responses API takes images inside the function output itself.
        output = [{"type": "input_text", "text": text}] if text else []
        output.extend(_image_part(block) for block in images)
    elif images and not text:
        output = IMAGE_ONLY_RESULT_TEXT
    else:
        output = text
    return {
        "type": "function_call_output",
        "call_id": message["toolCallId"].partition("|")[0],
        "output": output,
    }


def convert_tools(tools: list[Tool]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "name": tool["name"],
            "description": tool.get("description", ""),
            "parameters": tool.get("parameters") or {"type": "object", "properties": {}},
            "strict": False,
        }
        for tool in tools
    ]


# -- request ---------------------------------------------------------------------------------


def build_request(model: Model, context: Context, options: StreamOptions) -> dict[str, Any]:
    """The complete `POST /responses` body for one streamed turn.

    Besides the common options it reads `options.extra["service_tier"]` ("flex", "priority", ...)
    and `options.extra["reasoning_summary"]` ("auto", "concise", "detailed").
    """
    items = convert_messages(model, context, owner=options.history_owner)
    body: dict[str, Any] = {"model": model.id, "input": items, "stream": True, "store": False}
    retention = options.cache_retention or "short"
    if options.session_id and retention != "none":
        body["prompt_cache_key"] = options.session_id
    if retention == "long" and "api.openai.com" in model.base_url:
        body["prompt_cache_retention"] = "24h"
    body["max_output_tokens"] = base_max_tokens(model, options.max_tokens)
    if options.temperature is not None:
        body["temperature"] = options.temperature
    extra = options.extra
    service_tier = extra.get("service_tier")
    if service_tier is not None:
        body["service_tier"] = service_tier
    tools = context.get("tools")
    if tools:
        body["tools"] = convert_tools(tools)
    if options.tool_choice is not None:
        body["tool_choice"] = options.tool_choice
    if model.reasoning:
        level = effective_level(options.reasoning)
        summary = extra.get("reasoning_summary")
        if level is not None or summary:
            effort = clamp_level(level, model) if level is not None else "medium"
            body["reasoning"] = {"effort": effort, "summary": summary or "auto"}
            body["include"] = [ENCRYPTED_REASONING]
        elif model.id.startswith("gpt-5"):
            items.append(
                {"role": "developer", "content": [{"type": "input_text", "text": JUICE_OFF_TEXT}]}
            )
    return body
