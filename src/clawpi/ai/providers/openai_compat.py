"""Quirks of OpenAI-compatible servers: detected from the provider and base URL, overridable.

One Chat Completions client serves OpenAI and every server that copies its API (Groq, xAI,
Cerebras, Mistral, DeepSeek, z.ai, OpenRouter, Ollama, vLLM, llama.cpp, LM Studio, ...). They
differ in small ways that turn a valid OpenAI request into a 400, so each difference is a flag.
Detection follows pi's table; any field set in `model.compat` wins over detection.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping
from typing import Any, Literal

from clawpi.ai.models import Model

ThinkingFormat = Literal["openai", "zai", "qwen", "qwen-chat-template"]
MaxTokensField = Literal["max_completion_tokens", "max_tokens"]

_ALL_LEVELS_DEFAULT: Mapping[str, str] = types.MappingProxyType(
    dict.fromkeys(("minimal", "low", "medium", "high", "xhigh"), "default")
)
_EMPTY: Mapping[str, Any] = types.MappingProxyType({})


@dataclasses.dataclass(frozen=True, slots=True)
class ResolvedCompat:
    """Every compat flag with a value; see `OpenAICompletionsCompat` for what each one means."""

    supports_store: bool = True
    supports_developer_role: bool = True
    supports_reasoning_effort: bool = True
    reasoning_effort_map: Mapping[str, str] = dataclasses.field(default_factory=lambda: _EMPTY)
    supports_usage_in_streaming: bool = True
    max_tokens_field: MaxTokensField = "max_completion_tokens"
    requires_tool_result_name: bool = False
    requires_assistant_after_tool_result: bool = False
    requires_thinking_as_text: bool = False
    requires_mistral_tool_ids: bool = False
    """Mistral accepts only 9-character alphanumeric tool call ids."""
    thinking_format: ThinkingFormat = "openai"
    open_router_routing: Mapping[str, Any] = dataclasses.field(default_factory=lambda: _EMPTY)
    vercel_gateway_routing: Mapping[str, Any] = dataclasses.field(default_factory=lambda: _EMPTY)
    supports_strict_mode: bool = True


# model.compat key (pi's camelCase) -> ResolvedCompat attribute
_FIELDS: Mapping[str, str] = {
    "supportsStore": "supports_store",
    "supportsDeveloperRole": "supports_developer_role",
    "supportsReasoningEffort": "supports_reasoning_effort",
    "reasoningEffortMap": "reasoning_effort_map",
    "supportsUsageInStreaming": "supports_usage_in_streaming",
    "maxTokensField": "max_tokens_field",
    "requiresToolResultName": "requires_tool_result_name",
    "requiresAssistantAfterToolResult": "requires_assistant_after_tool_result",
    "requiresThinkingAsText": "requires_thinking_as_text",
    "requiresMistralToolIds": "requires_mistral_tool_ids",
    "thinkingFormat": "thinking_format",
    "openRouterRouting": "open_router_routing",
    "vercelGatewayRouting": "vercel_gateway_routing",
    "supportsStrictMode": "supports_strict_mode",
}


def detect_compat(model: Model) -> ResolvedCompat:
    """What pi assumes about a server it knows only by provider name and base URL."""
    provider = model.provider
    url = model.base_url
    is_zai = provider == "zai" or "api.z.ai" in url
    is_mistral = provider == "mistral" or "mistral.ai" in url
    is_xai = provider == "xai" or "api.x.ai" in url
    is_groq = provider == "groq" or "groq.com" in url
    is_chutes = "chutes.ai" in url
    non_standard = (
        is_zai
        or is_mistral
        or is_xai
        or is_chutes
        or provider in ("cerebras", "deepseek", "opencode")
        or "cerebras.ai" in url
        or "deepseek.com" in url
        or "opencode.ai" in url
    )
    return ResolvedCompat(
        supports_store=not non_standard,
        supports_developer_role=not non_standard,
        supports_reasoning_effort=not (is_xai or is_zai or is_mistral),
        reasoning_effort_map=(
            _ALL_LEVELS_DEFAULT if is_groq and model.id == "qwen/qwen3-32b" else _EMPTY
        ),
        max_tokens_field="max_tokens" if (is_mistral or is_chutes) else "max_completion_tokens",
        requires_tool_result_name=is_mistral,
        requires_thinking_as_text=is_mistral,
        requires_mistral_tool_ids=is_mistral,
        thinking_format="zai" if is_zai else "openai",
    )


def resolve_compat(model: Model) -> ResolvedCompat:
    """Detection, with every field the model's `compat` sets taking precedence."""
    detected = detect_compat(model)
    explicit: Mapping[str, Any] | None = model.compat
    if not explicit:
        return detected
    overrides = {
        attribute: explicit[key]
        for key, attribute in _FIELDS.items()
        if explicit.get(key) is not None
    }
    return dataclasses.replace(detected, **overrides) if overrides else detected
