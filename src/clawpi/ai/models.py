"""`Model`, the built-in model catalog and cost calculation."""

from __future__ import annotations

import dataclasses
import functools
from importlib import resources
from typing import Any, Literal, TypeAlias, TypedDict

import orjson

from clawpi.ai.types import Usage

InputKind: TypeAlias = Literal["text", "image"]


class OpenAICompletionsCompat(TypedDict, total=False):
    """Quirks of an OpenAI-compatible server; keys as in pi's models.json. Missing = detected."""

    supportsStore: bool
    supportsDeveloperRole: bool
    supportsReasoningEffort: bool
    reasoningEffortMap: dict[str, str]
    supportsUsageInStreaming: bool
    maxTokensField: Literal["max_completion_tokens", "max_tokens"]
    requiresToolResultName: bool
    requiresAssistantAfterToolResult: bool
    requiresThinkingAsText: bool
    thinkingFormat: Literal["openai", "zai", "qwen", "qwen-chat-template"]
    openRouterRouting: dict[str, Any]
    vercelGatewayRouting: dict[str, Any]
    supportsStrictMode: bool


@dataclasses.dataclass(frozen=True, slots=True)
class ModelCost:
    """Prices in US dollars per million tokens."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Model:
    """A model as a provider serves it: where to send requests and what it can take."""

    id: str
    api: str
    provider: str
    base_url: str = ""
    name: str = ""
    reasoning: bool = False
    input: tuple[InputKind, ...] = ("text",)
    cost: ModelCost = ModelCost()
    context_window: int = 128_000
    max_tokens: int = 16_384
    headers: dict[str, str] | None = None
    compat: OpenAICompletionsCompat | None = None

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", self.id)
        if isinstance(self.input, list):
            object.__setattr__(self, "input", tuple(self.input))
        if isinstance(self.cost, dict):
            object.__setattr__(self, "cost", model_cost_from_dict(self.cost))

    @property
    def supports_images(self) -> bool:
        return "image" in self.input

    def replace(self, **changes: Any) -> Model:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, provider: str | None = None) -> Model:
        """Build a model from pi's models.json / catalog shape (camelCase keys)."""
        return cls(
            id=str(data["id"]),
            name=str(data.get("name") or data["id"]),
            api=str(data["api"]),
            provider=str(provider or data["provider"]),
            base_url=str(data.get("baseUrl", "")),
            reasoning=bool(data.get("reasoning", False)),
            input=tuple(data.get("input", ("text",))),
            cost=model_cost_from_dict(data.get("cost") or {}),
            context_window=int(data.get("contextWindow", 128_000)),
            max_tokens=int(data.get("maxTokens", 16_384)),
            headers=dict(data["headers"]) if data.get("headers") else None,
            compat=data.get("compat"),
        )

    def to_dict(self) -> dict[str, Any]:
        """The model in pi's camelCase shape, as models.json and the catalog store it."""
        out: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "api": self.api,
            "provider": self.provider,
            "baseUrl": self.base_url,
            "reasoning": self.reasoning,
            "input": list(self.input),
            "cost": {
                "input": self.cost.input,
                "output": self.cost.output,
                "cacheRead": self.cost.cache_read,
                "cacheWrite": self.cost.cache_write,
            },
            "contextWindow": self.context_window,
            "maxTokens": self.max_tokens,
        }
        if self.headers:
            out["headers"] = dict(self.headers)
        if self.compat:
            out["compat"] = dict(self.compat)
        return out


def model_cost_from_dict(data: dict[str, Any]) -> ModelCost:
    return ModelCost(
        input=float(data.get("input", 0.0)),
        output=float(data.get("output", 0.0)),
        cache_read=float(data.get("cacheRead", data.get("cache_read", 0.0))),
        cache_write=float(data.get("cacheWrite", data.get("cache_write", 0.0))),
    )


@functools.cache
def _catalog() -> dict[str, dict[str, Model]]:
    """Every `models*.json` data file, each `{"providers": {name: [model, ...]}}`."""
    catalog: dict[str, dict[str, Model]] = {}
    data = resources.files("clawpi.ai.data")
    files = sorted(
        (f for f in data.iterdir() if f.name.startswith("models") and f.name.endswith(".json")),
        key=lambda f: f.name,
    )
    for file in files:
        raw = orjson.loads(file.read_bytes())
        for provider, entries in raw.get("providers", {}).items():
            models = catalog.setdefault(provider, {})
            for entry in entries:
                model = Model.from_dict(entry, provider=provider)
                models[model.id] = model
    return catalog


def get_model(provider: str, model_id: str) -> Model | None:
    """The catalog entry for `provider`/`model_id`, or None when the catalog has no such model."""
    return _catalog().get(provider, {}).get(model_id)


def list_models(provider: str | None = None) -> list[Model]:
    """Every catalog model, or those of one provider, in catalog order."""
    catalog = _catalog()
    if provider is not None:
        return list(catalog.get(provider, {}).values())
    return [model for models in catalog.values() for model in models.values()]


def list_providers() -> list[str]:
    return list(_catalog())


def models_are_equal(a: Model | None, b: Model | None) -> bool:
    return a is not None and b is not None and a.id == b.id and a.provider == b.provider


def token_count(value: Any) -> int:
    """A token count a server reported: a non-negative integer, else 0 (a server's usage of
    the wrong type must not reach the sums and prices made of it)."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return 0


def calculate_cost(model: Model, usage: Usage) -> None:
    """Fill `usage["cost"]` from the model's per-million prices (in place, as pi does)."""
    cost = usage["cost"]
    cost["input"] = model.cost.input / 1_000_000 * usage["input"]
    cost["output"] = model.cost.output / 1_000_000 * usage["output"]
    cost["cacheRead"] = model.cost.cache_read / 1_000_000 * usage["cacheRead"]
    cost["cacheWrite"] = model.cost.cache_write / 1_000_000 * usage["cacheWrite"]
    cost["total"] = cost["input"] + cost["output"] + cost["cacheRead"] + cost["cacheWrite"]


_XHIGH_MARKERS = ("gpt-5.2", "gpt-5.3", "gpt-5.4", "opus-4-6", "opus-4.6")


def supports_xhigh(model: Model) -> bool:
    """Whether the model accepts the `xhigh` thinking level instead of clamping it to high."""
    return any(marker in model.id for marker in _XHIGH_MARKERS)
