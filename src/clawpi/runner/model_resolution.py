"""Which `Model` a run uses and how much of its context window it may fill (OpenClaw §4.3)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal

from clawpi.ai.models import Model, model_cost_from_dict
from clawpi.runner.config import DEFAULT_CONTEXT_TOKENS, agent_defaults, get_path
from clawpi.sdk.registry import ModelRegistry

CONTEXT_WINDOW_HARD_MIN_TOKENS = 16_000
CONTEXT_WINDOW_WARN_BELOW_TOKENS = 32_000
_DEFAULT_API = "openai-responses"

ContextWindowSource = Literal["modelsConfig", "model", "default", "agentContextTokens"]


@dataclasses.dataclass(frozen=True, slots=True)
class ContextWindowInfo:
    tokens: int
    source: ContextWindowSource


@dataclasses.dataclass(frozen=True, slots=True)
class ContextWindowGuard:
    tokens: int
    should_warn: bool
    should_block: bool


def _normalise(provider: str) -> str:
    return provider.strip().lower()


def _config_providers(config: Mapping[str, Any]) -> Mapping[str, Any]:
    providers = get_path(config, "models.providers", {})
    return providers if isinstance(providers, Mapping) else {}


def _find_provider(
    config: Mapping[str, Any], provider: str
) -> tuple[str, Mapping[str, Any]] | None:
    wanted = _normalise(provider)
    for name, entry in _config_providers(config).items():
        if _normalise(str(name)) == wanted and isinstance(entry, Mapping):
            return str(name), entry
    return None


def resolve_model(
    provider: str, model_id: str, registry: ModelRegistry, config: Mapping[str, Any]
) -> tuple[Model | None, str | None]:
    """(model, None) or (None, "Unknown model: p/m")."""
    found = registry.find(provider, model_id)
    if found is None and _normalise(provider) != provider:
        found = registry.find(_normalise(provider), model_id)
    configured = _find_provider(config, provider)
    if found is not None:
        if configured is not None:
            found = _apply_provider_overrides(found, configured[1])
        return found, None
    if configured is not None:
        name, entry = configured
        models = entry.get("models") if isinstance(entry.get("models"), list) else []
        for raw in models or []:
            if isinstance(raw, Mapping) and raw.get("id") == model_id:
                return _model_from_config(name, entry, raw), None
        first = models[0] if models and isinstance(models[0], Mapping) else {}
        return _model_from_config(
            name,
            entry,
            {
                "id": model_id,
                "contextWindow": first.get("contextWindow", DEFAULT_CONTEXT_TOKENS),
                "maxTokens": first.get("maxTokens", DEFAULT_CONTEXT_TOKENS),
            },
        ), None
    if model_id.startswith("mock-"):
        return Model(
            id=model_id,
            api=_DEFAULT_API,
            provider=provider,
            context_window=DEFAULT_CONTEXT_TOKENS,
            max_tokens=DEFAULT_CONTEXT_TOKENS,
        ), None
    return None, f"Unknown model: {provider}/{model_id}"


def _apply_provider_overrides(model: Model, entry: Mapping[str, Any]) -> Model:
    changes: dict[str, Any] = {}
    if isinstance(entry.get("baseUrl"), str):
        changes["base_url"] = entry["baseUrl"]
    if isinstance(entry.get("headers"), Mapping):
        changes["headers"] = {**(model.headers or {}), **entry["headers"]}
    return model.replace(**changes) if changes else model


def _model_from_config(provider: str, entry: Mapping[str, Any], raw: Mapping[str, Any]) -> Model:
    compat = {**(entry.get("compat") or {}), **(raw.get("compat") or {})} or None
    headers = {**(entry.get("headers") or {}), **(raw.get("headers") or {})} or None
    return Model(
        id=str(raw["id"]),
        name=str(raw.get("name") or raw["id"]),
        api=str(raw.get("api") or entry.get("api") or _DEFAULT_API),
        provider=provider,
        base_url=str(raw.get("baseUrl") or entry.get("baseUrl") or ""),
        reasoning=bool(raw.get("reasoning", False)),
        input=tuple(raw.get("input") or ("text",)),
        cost=model_cost_from_dict(raw.get("cost") or {}),
        context_window=int(raw.get("contextWindow") or DEFAULT_CONTEXT_TOKENS),
        max_tokens=int(raw.get("maxTokens") or DEFAULT_CONTEXT_TOKENS),
        headers=headers,
        compat=compat,  # type: ignore[arg-type]
    )


def _positive_int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if value != value or value in (float("inf"), float("-inf")) or value <= 0:
        return None
    return int(value)


def resolve_context_window_info(model: Model, config: Mapping[str, Any]) -> ContextWindowInfo:
    """models config -> the model's own window -> default; then capped by agents.defaults.contextTokens."""
    info: ContextWindowInfo | None = None
    configured = _find_provider(config, model.provider)
    if configured is not None:
        for raw in configured[1].get("models") or []:
            if isinstance(raw, Mapping) and raw.get("id") == model.id:
                tokens = _positive_int(raw.get("contextWindow"))
                if tokens is not None:
                    info = ContextWindowInfo(tokens, "modelsConfig")
    if info is None:
        tokens = _positive_int(model.context_window)
        info = (
            ContextWindowInfo(tokens, "model")
            if tokens
            else ContextWindowInfo(DEFAULT_CONTEXT_TOKENS, "default")
        )
    cap = _positive_int(agent_defaults(config).get("contextTokens"))
    if cap is not None and cap < info.tokens:
        info = ContextWindowInfo(cap, "agentContextTokens")
    return info


def evaluate_context_window_guard(tokens: int) -> ContextWindowGuard:
    return ContextWindowGuard(
        tokens=tokens,
        should_warn=0 < tokens < CONTEXT_WINDOW_WARN_BELOW_TOKENS,
        should_block=0 < tokens < CONTEXT_WINDOW_HARD_MIN_TOKENS,
    )
