"""Context -> Anthropic Messages request body: pure data conversion, no I/O.

Kept apart from the streaming code so the request rules (message merging, cache markers,
thinking configuration, beta flags) can be read and tested on their own.
"""

from __future__ import annotations

import re
from typing import Any, cast

from clawpi.ai.models import Model
from clawpi.ai.text import sanitize_surrogates
from clawpi.ai.thinking import base_max_tokens, effective_level, thinking_budget
from clawpi.ai.transform import transform_messages
from clawpi.ai.types import (
    AssistantMessage,
    Context,
    Message,
    ThinkingLevel,
    Tool,
    ToolResultMessage,
    UserContent,
)

ANTHROPIC_HOST = "api.anthropic.com"
DEFAULT_BASE_URL = "https://api.anthropic.com"
OAUTH_TOKEN_MARKER = "sk-ant-oat"
CLAUDE_CODE_IDENTITY = "You are Claude Code, Anthropic's official CLI for Claude."
IMAGE_ONLY_PLACEHOLDER = "(see attached image)"
MIN_THINKING_BUDGET = 1024

BETA_FINE_GRAINED_TOOL_STREAMING = "fine-grained-tool-streaming-2025-05-14"
BETA_INTERLEAVED_THINKING = "interleaved-thinking-2025-05-14"
BETA_CLAUDE_CODE = "claude-code-20250219"
BETA_OAUTH = "oauth-2025-04-20"

_MAX_TOOL_CALL_ID = 64
_BAD_ID_CHARS = re.compile(r"[^a-zA-Z0-9_-]")
_ADAPTIVE_MARKERS = ("opus-4-6", "opus-4.6", "opus-4-7", "opus-4.7", "sonnet-4-6", "sonnet-4.6")
# the effort each adaptive model accepts above "high" (pi's thinkingLevelMap for xhigh)
_XHIGH_EFFORT = {"opus-4-6": "max", "opus-4.6": "max", "opus-4-7": "xhigh", "opus-4.7": "xhigh"}
_EFFORT = {"minimal": "low", "low": "low", "medium": "medium", "high": "high"}


def normalize_tool_call_id(call_id: str, model: Model, source: AssistantMessage) -> str:
    """Anthropic accepts tool-use ids of `[a-zA-Z0-9_-]{1,64}` only."""
    return _BAD_ID_CHARS.sub("_", call_id)[:_MAX_TOOL_CALL_ID]


def is_oauth_token(api_key: str) -> bool:
    """Claude Pro/Max OAuth access tokens authenticate with a Bearer header, not x-api-key."""
    return OAUTH_TOKEN_MARKER in api_key


def uses_bearer_auth(model: Model, api_key: str) -> bool:
    return is_oauth_token(api_key) or model.provider == "github-copilot"


def supports_adaptive_thinking(model: Model) -> bool:
    """Opus 4.6+/Sonnet 4.6 decide their own thinking depth (`thinking: {type: adaptive}`)."""
    return any(marker in model.id for marker in _ADAPTIVE_MARKERS)


def beta_features(model: Model, api_key: str) -> list[str]:
    """The `anthropic-beta` flags pi sends for this model and credential."""
    interleaved = not supports_adaptive_thinking(model)  # built into the adaptive models
    if model.provider == "github-copilot":
        return [BETA_INTERLEAVED_THINKING] if interleaved else []
    features = [BETA_FINE_GRAINED_TOOL_STREAMING]
    if interleaved:
        features.append(BETA_INTERLEAVED_THINKING)
    if is_oauth_token(api_key):
        features[:0] = [BETA_CLAUDE_CODE, BETA_OAUTH]
    return features


def cache_control(base_url: str, retention: str | None) -> dict[str, str] | None:
    """The prompt-cache marker: none, 5-minute ephemeral, or 1 hour on Anthropic's own API."""
    retention = retention or "short"
    if retention == "none":
        return None
    marker = {"type": "ephemeral"}
    if retention == "long" and ANTHROPIC_HOST in base_url:
        marker["ttl"] = "1h"
    return marker


def build_request(
    model: Model,
    context: Context,
    *,
    max_tokens: int | None = None,
    reasoning: ThinkingLevel | None = None,
    thinking_budgets: Any = None,
    temperature: float | None = None,
    cache_retention: str | None = None,
    metadata: Any = None,
    tool_choice: Any = None,
    oauth: bool = False,
    history_owner: object | None = None,
) -> dict[str, Any]:
    """The `/v1/messages` body (without `stream`) for `context` on `model`."""
    marker = cache_control(model.base_url, cache_retention)
    body: dict[str, Any] = {
        "model": model.id,
        "messages": convert_messages(
            context.get("messages", []), model, marker, owner=history_owner
        ),
        "max_tokens": base_max_tokens(model, max_tokens),
    }

    system: list[dict[str, Any]] = []
    if oauth:
        system.append({"type": "text", "text": CLAUDE_CODE_IDENTITY})
    prompt = context.get("systemPrompt")
    if prompt:
        system.append({"type": "text", "text": sanitize_surrogates(prompt)})
    if system:
        if marker is not None:
            for block in system:
                block["cache_control"] = dict(marker)
        body["system"] = system

    level = effective_level(reasoning)
    thinking_on = level is not None and model.reasoning
    if thinking_on:
        assert level is not None
        if supports_adaptive_thinking(model):
            body["thinking"] = {"type": "adaptive"}
            body["output_config"] = {"effort": adaptive_effort(level, model)}
        else:
            total, budget = thinking_budget(model, level, body["max_tokens"], thinking_budgets)
            body["max_tokens"] = total
            body["thinking"] = {"type": "enabled", "budget_tokens": budget or MIN_THINKING_BUDGET}
    elif temperature is not None:
        body["temperature"] = temperature  # Anthropic rejects temperature with thinking on

    tools = context.get("tools")
    if tools:
        body["tools"] = convert_tools(tools)
    if metadata:
        user_id = metadata.get("user_id")
        if isinstance(user_id, str):
            body["metadata"] = {"user_id": user_id}
    if tool_choice:
        body["tool_choice"] = {"type": tool_choice} if isinstance(tool_choice, str) else tool_choice
    return body


def adaptive_effort(level: ThinkingLevel, model: Model) -> str:
    """Thinking level -> `output_config.effort`; only some models go beyond `high`."""
    if level == "xhigh":
        for marker, effort in _XHIGH_EFFORT.items():
            if marker in model.id:
                return effort
        return "high"
    return _EFFORT.get(level, "high")


def convert_tools(tools: list[Tool]) -> list[dict[str, Any]]:
    """Tools with their JSON Schema as `input_schema` (always an object schema)."""
    converted = []
    for tool in tools:
        schema = dict(tool.get("parameters") or {})
        schema["type"] = "object"
        schema.setdefault("properties", {})
        converted.append(
            {
                "name": tool["name"],
                "description": tool.get("description", ""),
                "input_schema": schema,
            }
        )
    return converted


def convert_messages(
    messages: list[Message],
    model: Model,
    marker: dict[str, str] | None,
    *,
    owner: object | None = None,
) -> list[dict[str, Any]]:
    """History -> Anthropic `messages` (see pi-mono §1.8 for the rules)."""
    history = transform_messages(messages, model, normalize_tool_call_id, owner=owner)
    out: list[dict[str, Any]] = []
    images_ok = model.supports_images
    i = 0
    while i < len(history):
        message = history[i]
        role = message.get("role")
        if role == "user":
            converted = _user_message(message.get("content", ""), images_ok)
            if converted is not None:
                out.append(converted)
        elif role == "assistant":
            blocks = _assistant_blocks(cast(AssistantMessage, message))
            if blocks:
                out.append({"role": "assistant", "content": blocks})
        elif role == "toolResult":
            results = []
            while i < len(history) and history[i].get("role") == "toolResult":
                results.append(_tool_result(cast(ToolResultMessage, history[i])))
                i += 1
            out.append({"role": "user", "content": results})
            continue
        i += 1
    if marker is not None and out and out[-1]["role"] == "user":
        _mark_last_block(out[-1], marker)
    return out


def _user_message(content: Any, images_ok: bool) -> dict[str, Any] | None:
    if isinstance(content, str):
        if not content.strip():
            return None
        return {"role": "user", "content": sanitize_surrogates(content)}
    blocks: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type")
        if kind == "text":
            text = part.get("text", "")
            if text.strip():
                blocks.append({"type": "text", "text": sanitize_surrogates(text)})
        elif kind == "image" and images_ok:
            blocks.append(_image(part))
    if not blocks:
        return None
    return {"role": "user", "content": blocks}


def _assistant_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in message.get("content", []):
        kind = block.get("type")
        item: Any = block
        if kind == "text":
            text = item.get("text", "")
            if text.strip():
                blocks.append({"type": "text", "text": sanitize_surrogates(text)})
        elif kind == "thinking":
            signature = item.get("thinkingSignature") or ""
            if item.get("redacted"):
                if signature:
                    blocks.append({"type": "redacted_thinking", "data": signature})
                continue
            thinking = item.get("thinking", "")
            if not thinking.strip():
                continue
            if signature.strip():
                blocks.append(
                    {
                        "type": "thinking",
                        "thinking": sanitize_surrogates(thinking),
                        "signature": signature,
                    }
                )
            else:  # e.g. from an aborted stream: Anthropic would reject an unsigned thinking block
                blocks.append({"type": "text", "text": sanitize_surrogates(thinking)})
        elif kind == "toolCall":
            blocks.append(
                {
                    "type": "tool_use",
                    "id": item.get("id", ""),
                    "name": item.get("name", ""),
                    "input": item.get("arguments") or {},
                }
            )
    return blocks


def _tool_result(result: ToolResultMessage) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "tool_use_id": result["toolCallId"],
        "content": _tool_result_content(result.get("content", [])),
        "is_error": bool(result.get("isError")),
    }


def _tool_result_content(content: list[UserContent]) -> str | list[dict[str, Any]]:
    """Text-only results collapse to one string; image-only ones get a leading text part."""
    if not any(part.get("type") == "image" for part in content):
        return sanitize_surrogates("\n".join(cast(Any, part).get("text", "") for part in content))
    blocks: list[dict[str, Any]] = []
    for part in content:
        if part.get("type") == "text":
            blocks.append({"type": "text", "text": sanitize_surrogates(cast(Any, part)["text"])})
        else:
            blocks.append(_image(part))
    if not any(block["type"] == "text" for block in blocks):
        blocks.insert(0, {"type": "text", "text": IMAGE_ONLY_PLACEHOLDER})
    return blocks


def _image(part: Any) -> dict[str, Any]:
    return {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": part.get("mimeType", ""),
            "data": part.get("data", ""),
        },
    }


def _mark_last_block(message: dict[str, Any], marker: dict[str, str]) -> None:
    """Cache everything up to the newest user turn (pi's conversation-history breakpoint)."""
    content = message["content"]
    if isinstance(content, str):
        message["content"] = [{"type": "text", "text": content, "cache_control": dict(marker)}]
    elif content and content[-1].get("type") in ("text", "image", "tool_result"):
        content[-1] = {**content[-1], "cache_control": dict(marker)}
