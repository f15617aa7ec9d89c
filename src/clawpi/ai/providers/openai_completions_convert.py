"""Context -> Chat Completions request body, following pi's rules (pi-mono.md §1.6, §1.8).

Pure functions over plain dicts: no SDK, no I/O, so the request a model receives can be read
and tested on its own.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Any, cast

import orjson

from clawpi.ai.models import Model
from clawpi.ai.providers.openai_compat import ResolvedCompat
from clawpi.ai.stream import StreamOptions
from clawpi.ai.text import sanitize_surrogates
from clawpi.ai.thinking import base_max_tokens, clamp_level, effective_level
from clawpi.ai.transform import transform_messages
from clawpi.ai.types import (
    AssistantMessage,
    Context,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserContent,
)

REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")
"""Delta fields servers stream thinking in; the one used becomes the block's signature."""
TOOL_RESULT_IMAGES_TEXT = "Attached image(s) from tool result:"
IMAGE_ONLY_RESULT_TEXT = "(see attached image)"
ASSISTANT_BRIDGE_TEXT = "I have processed the tool results."
OPENAI_TOOL_CALL_ID_MAX = 40
MISTRAL_TOOL_CALL_ID_LENGTH = 9

_UNSAFE_ID_CHARS = re.compile(r"[^a-zA-Z0-9_-]")
_NON_ALNUM = re.compile(r"[^a-zA-Z0-9]")


def tool_call_id_normalizer(
    compat: ResolvedCompat,
) -> Callable[[str, Model, AssistantMessage], str]:
    """How ids of tool calls written by another model are rewritten for this server (one
    function per rule, the same on every request: the transform keeps its work per rule)."""
    return _mistral_call_id if compat.requires_mistral_tool_ids else _openai_call_id


def _mistral_call_id(call_id: str, _model: Model, _source: AssistantMessage) -> str:
    return mistral_tool_call_id(call_id)


def _openai_call_id(call_id: str, model: Model, _source: AssistantMessage) -> str:
    if "|" in call_id:  # OpenAI Responses ids are "call_id|item_id"; keep the call id
        head = call_id.split("|", 1)[0]
        return _UNSAFE_ID_CHARS.sub("_", head)[:OPENAI_TOOL_CALL_ID_MAX]
    if model.provider == "openai":
        return call_id[:OPENAI_TOOL_CALL_ID_MAX]
    return call_id


def mistral_tool_call_id(call_id: str) -> str:
    """Exactly 9 alphanumerics, derived deterministically so results still match their call."""
    plain = _NON_ALNUM.sub("", call_id)
    if len(plain) == MISTRAL_TOOL_CALL_ID_LENGTH:
        return plain
    digest = hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()
    return digest[:MISTRAL_TOOL_CALL_ID_LENGTH]


def build_request(
    model: Model, context: Context, options: StreamOptions, compat: ResolvedCompat
) -> dict[str, Any]:
    """The JSON body of a streaming `POST /chat/completions`."""
    messages = context.get("messages") or []
    params: dict[str, Any] = {
        "model": model.id,
        "messages": convert_messages(model, context, compat, owner=options.history_owner),
        "stream": True,
    }
    if compat.supports_usage_in_streaming:
        params["stream_options"] = {"include_usage": True}
    if compat.supports_store:
        params["store"] = False
    params[compat.max_tokens_field] = base_max_tokens(model, options.max_tokens)
    if options.temperature is not None:
        params["temperature"] = options.temperature
    tools = context.get("tools")
    if tools:
        params["tools"] = convert_tools(tools, compat)
    elif _has_tool_history(messages):
        params["tools"] = []  # proxies in front of Anthropic reject tool history without tools
    if options.tool_choice is not None:
        params["tool_choice"] = options.tool_choice
    _add_thinking(params, model, options, compat)
    if compat.open_router_routing and "openrouter.ai" in model.base_url:
        params["provider"] = dict(compat.open_router_routing)
    if compat.vercel_gateway_routing and "ai-gateway.vercel.sh" in model.base_url:
        gateway = {
            key: compat.vercel_gateway_routing[key]
            for key in ("only", "order")
            if compat.vercel_gateway_routing.get(key)
        }
        if gateway:
            params["providerOptions"] = {"gateway": gateway}
    return params


def _add_thinking(
    params: dict[str, Any], model: Model, options: StreamOptions, compat: ResolvedCompat
) -> None:
    level = effective_level(options.reasoning)
    fmt = compat.thinking_format
    if not model.reasoning:
        return
    if fmt in ("zai", "qwen"):
        params["enable_thinking"] = level is not None
    elif fmt == "qwen-chat-template":
        params["chat_template_kwargs"] = {"enable_thinking": level is not None}
    elif level is not None and compat.supports_reasoning_effort:
        effort = clamp_level(level, model)
        params["reasoning_effort"] = compat.reasoning_effort_map.get(effort, effort)


def convert_tools(tools: list[Tool], compat: ResolvedCompat) -> list[dict[str, Any]]:
    converted = []
    for tool in tools:
        function: dict[str, Any] = {
            "name": tool["name"],
            "description": tool.get("description", ""),
            "parameters": tool.get("parameters") or {"type": "object", "properties": {}},
        }
        if compat.supports_strict_mode:
            function["strict"] = False  # strict would demand every optional field be nullable
        converted.append({"type": "function", "function": function})
    return converted


def _has_tool_history(messages: list[Message]) -> bool:
    for message in messages:
        role = message.get("role")
        if role == "toolResult":
            return True
        if role == "assistant" and any(
            block.get("type") == "toolCall" for block in cast(Any, message).get("content", [])
        ):
            return True
    return False


# -- messages ---------------------------------------------------------------------------------


def convert_messages(
    model: Model, context: Context, compat: ResolvedCompat, *, owner: object | None = None
) -> list[dict[str, Any]]:
    """Chat Completions `messages` for the context (system prompt first)."""
    out: list[dict[str, Any]] = []
    system_prompt = context.get("systemPrompt")
    if system_prompt:
        role = "developer" if model.reasoning and compat.supports_developer_role else "system"
        out.append({"role": role, "content": sanitize_surrogates(system_prompt)})

    history = transform_messages(
        context.get("messages") or [], model, tool_call_id_normalizer(compat), owner=owner
    )
    images_ok = model.supports_images
    last_role: str | None = None
    i = 0
    while i < len(history):
        message = history[i]
        role = message.get("role")
        if (
            compat.requires_assistant_after_tool_result
            and last_role == "toolResult"
            and role == "user"
        ):
            out.append({"role": "assistant", "content": ASSISTANT_BRIDGE_TEXT})
        if role == "user":
            converted = _convert_user(cast(Any, message).get("content"), images_ok)
            if converted is not None:
                out.append(converted)
            last_role = "user"
            i += 1
        elif role == "assistant":
            assistant = _convert_assistant(cast(AssistantMessage, message), compat)
            if assistant is not None:
                out.append(assistant)
            last_role = "assistant"
            i += 1
        elif role == "toolResult":
            images: list[dict[str, Any]] = []
            while i < len(history) and history[i].get("role") == "toolResult":
                result = cast(ToolResultMessage, history[i])
                out.append(_convert_tool_result(result, compat))
                if images_ok:
                    images.extend(
                        _image_part(cast(ImageContent, part))
                        for part in result.get("content", [])
                        if part.get("type") == "image"
                    )
                i += 1
            if images:
                if compat.requires_assistant_after_tool_result:
                    out.append({"role": "assistant", "content": ASSISTANT_BRIDGE_TEXT})
                out.append(
                    {
                        "role": "user",
                        "content": [{"type": "text", "text": TOOL_RESULT_IMAGES_TEXT}, *images],
                    }
                )
                last_role = "user"
            else:
                last_role = "toolResult"
        else:  # a role this API has no place for
            i += 1
    if model.provider == "openrouter" and model.id.startswith("anthropic/"):
        _mark_anthropic_cache_point(out)
    return out


def _image_part(image: ImageContent) -> dict[str, Any]:
    return {
        "type": "image_url",
        "image_url": {"url": f"data:{image['mimeType']};base64,{image['data']}"},
    }


def _convert_user(content: Any, images_ok: bool) -> dict[str, Any] | None:
    if isinstance(content, str):
        return {"role": "user", "content": sanitize_surrogates(content)}
    parts: list[dict[str, Any]] = []
    for part in cast(list[UserContent], content or []):
        kind = part.get("type")
        if kind == "text":
            parts.append(
                {"type": "text", "text": sanitize_surrogates(cast(TextContent, part)["text"])}
            )
        elif kind == "image" and images_ok:
            parts.append(_image_part(cast(ImageContent, part)))
    if not parts:
        return None
    return {"role": "user", "content": parts}


def _convert_assistant(message: AssistantMessage, compat: ResolvedCompat) -> dict[str, Any] | None:
    texts: list[str] = []
    thinking: list[ThinkingContent] = []
    calls: list[ToolCall] = []
    for block in message.get("content", []):
        kind = block.get("type")
        if kind == "text":
            text = cast(TextContent, block)["text"]
            if text and text.strip():
                texts.append(sanitize_surrogates(text))
        elif kind == "thinking":
            block_thinking = cast(ThinkingContent, block)
            if block_thinking.get("thinking", "").strip():
                thinking.append(block_thinking)
        elif kind == "toolCall":
            calls.append(cast(ToolCall, block))

    content: Any = "".join(texts) if texts else None
    if content is None and compat.requires_assistant_after_tool_result:
        content = ""
    out: dict[str, Any] = {"role": "assistant", "content": content}
    if thinking:
        if compat.requires_thinking_as_text:
            joined = sanitize_surrogates("\n\n".join(b["thinking"] for b in thinking))
            parts = [{"type": "text", "text": joined}]
            if content:
                parts.append({"type": "text", "text": content})
            out["content"] = parts
        else:
            field = thinking[0].get("thinkingSignature")
            if field in REASONING_FIELDS:  # echo it back under the key it arrived in
                out[field] = sanitize_surrogates("\n".join(b["thinking"] for b in thinking))
    if calls:
        out["tool_calls"] = [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": _json_text(call["arguments"])},
            }
            for call in calls
        ]
        details = [_reasoning_detail(call) for call in calls if call.get("thoughtSignature")]
        details = [detail for detail in details if detail is not None]
        if details:
            out["reasoning_details"] = details
    if not out["content"] and not calls:
        return None  # servers reject an assistant turn with neither content nor tool calls
    return out


def _reasoning_detail(call: ToolCall) -> Any:
    try:
        return orjson.loads(call.get("thoughtSignature", ""))
    except orjson.JSONDecodeError:
        return None


def _json_text(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # lone surrogates or values orjson does not know
        return sanitize_surrogates(json.dumps(value, ensure_ascii=False, default=str))


def _convert_tool_result(result: ToolResultMessage, compat: ResolvedCompat) -> dict[str, Any]:
    text = "\n".join(
        cast(TextContent, part)["text"]
        for part in result.get("content", [])
        if part.get("type") == "text"
    )
    out: dict[str, Any] = {
        "role": "tool",
        "content": sanitize_surrogates(text) if text else IMAGE_ONLY_RESULT_TEXT,
        "tool_call_id": result["toolCallId"],
    }
    if compat.requires_tool_result_name and result.get("toolName"):
        out["name"] = result["toolName"]
    return out


def _mark_anthropic_cache_point(messages: list[dict[str, Any]]) -> None:
    """Anthropic models behind OpenRouter cache only up to a `cache_control` text part."""
    for message in reversed(messages):
        if message["role"] not in ("user", "assistant"):
            continue
        content = message["content"]
        if isinstance(content, str):
            message["content"] = [
                {"type": "text", "text": content, "cache_control": {"type": "ephemeral"}}
            ]
            return
        if isinstance(content, list):
            for part in reversed(content):
                if part.get("type") == "text":
                    part["cache_control"] = {"type": "ephemeral"}
                    return
