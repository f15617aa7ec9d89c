"""Which `Model` a run uses and how much of its context window it may fill (OpenClaw §4.3)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal, cast

from clawpi.ai.models import InputKind, Model, model_cost_from_dict
from clawpi.runner.config import DEFAULT_CONTEXT_TOKENS, agent_defaults, get_path, positive_int
from clawpi.runner.config_fields import (
    object_list,
    optional_bool,
    optional_mapping,
    optional_number,
    optional_str,
    string_list,
    string_map,
)
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
            found = _apply_provider_overrides(found, configured[1], configured[0])
        return found, None
    if configured is not None:
        name, entry = configured
        models = _provider_models(name, entry)
        for index, raw in enumerate(models):
            if raw.get("id") == model_id:
                return _model_from_config(
                    name, entry, raw, f"models.providers.{name}.models[{index}]"
                ), None
        first = models[0] if models else {}
        return _model_from_config(
            name,
            entry,
            {
                "id": model_id,
                "contextWindow": first.get("contextWindow", DEFAULT_CONTEXT_TOKENS),
                "maxTokens": first.get("maxTokens", DEFAULT_CONTEXT_TOKENS),
            },
            f"models.providers.{name}.models[0]",
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


def _provider_models(provider: str, entry: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """`models.providers.<provider>.models`: a list of objects (missing: none)."""
    where = f"models.providers.{provider}.models"
    return object_list(entry.get("models"), where, "a list of model objects") or []


def _apply_provider_overrides(model: Model, entry: Mapping[str, Any], provider: str) -> Model:
    changes: dict[str, Any] = {}
    where = f"models.providers.{provider}"
    base_url = optional_str(entry.get("baseUrl"), f"{where}.baseUrl")
    if base_url is not None:
        changes["base_url"] = base_url
    headers = string_map(entry.get("headers"), f"{where}.headers")
    if headers is not None:
        changes["headers"] = {**(model.headers or {}), **headers}
    return model.replace(**changes) if changes else model


def _model_from_config(
    provider: str, entry: Mapping[str, Any], raw: Mapping[str, Any], where: str
) -> Model:
    """A model defined in `models.providers.<provider>.models` (its entry at `where`)."""
    top = f"models.providers.{provider}"
    compat = {
        **(optional_mapping(entry.get("compat"), f"{top}.compat") or {}),
        **(optional_mapping(raw.get("compat"), f"{where}.compat") or {}),
    }
    headers = {
        **(string_map(entry.get("headers"), f"{top}.headers") or {}),
        **(string_map(raw.get("headers"), f"{where}.headers") or {}),
    }
    cost = optional_mapping(raw.get("cost"), f"{where}.cost") or {}
    prices = {
        key: optional_number(cost.get(key), f"{where}.cost.{key}", minimum=0)
        for key in ("input", "output", "cacheRead", "cacheWrite", "cache_read", "cache_write")
    }
    window = optional_number(raw.get("contextWindow"), f"{where}.contextWindow", minimum=0)
    max_tokens = optional_number(raw.get("maxTokens"), f"{where}.maxTokens", minimum=0)
    model_id = str(raw["id"])
    kinds = string_list(raw.get("input"), f"{where}.input", ("text", "image")) or ["text"]
    return Model(
        id=model_id,
        name=optional_str(raw.get("name"), f"{where}.name") or model_id,
        api=optional_str(raw.get("api"), f"{where}.api")
        or optional_str(entry.get("api"), f"{top}.api")
        or _DEFAULT_API,
        provider=provider,
        base_url=optional_str(raw.get("baseUrl"), f"{where}.baseUrl")
        or optional_str(entry.get("baseUrl"), f"{top}.baseUrl")
        or "",
        reasoning=bool(optional_bool(raw.get("reasoning"), f"{where}.reasoning")),
        input=cast("tuple[InputKind, ...]", tuple(kinds)),
        cost=model_cost_from_dict({k: v for k, v in prices.items() if v is not None}),
        context_window=int(window or DEFAULT_CONTEXT_TOKENS),
        max_tokens=int(max_tokens or DEFAULT_CONTEXT_TOKENS),
        headers=headers or None,
        compat=compat or None,  # type: ignore[arg-type]
    )


def resolve_context_window_info(model: Model, config: Mapping[str, Any]) -> ContextWindowInfo:
    """models config -> the model's own window -> default; then capped by agents.defaults.contextTokens."""
    info: ContextWindowInfo | None = None
    configured = _find_provider(config, model.provider)
    if configured is not None:
        for raw in _provider_models(*configured):
            if raw.get("id") == model.id:
                tokens = positive_int(raw.get("contextWindow"))
                if tokens is not None:
                    info = ContextWindowInfo(tokens, "modelsConfig")
    if info is None:
        tokens = positive_int(model.context_window)
        info = (
            ContextWindowInfo(tokens, "model")
            if tokens
            else ContextWindowInfo(DEFAULT_CONTEXT_TOKENS, "default")
        )
    cap = positive_int(agent_defaults(config).get("contextTokens"))
    if cap is not None and cap < info.tokens:
        info = ContextWindowInfo(cap, "agentContextTokens")
    return info


def evaluate_context_window_guard(tokens: int) -> ContextWindowGuard:
    return ContextWindowGuard(
        tokens=tokens,
        should_warn=0 < tokens < CONTEXT_WINDOW_WARN_BELOW_TOKENS,
        should_block=0 < tokens < CONTEXT_WINDOW_HARD_MIN_TOKENS,
    )
