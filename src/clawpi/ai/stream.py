"""`stream()` and `complete()`: one entry point for every provider API.

Providers register a stream function per API name. The built-in ones are imported the first
time a model of that API is used, so `import clawpi` never pays for the vendor SDKs.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Protocol

from clawpi.ai.abort import AbortSignal
from clawpi.ai.env_keys import env_vars_for, get_env_api_key
from clawpi.ai.event_stream import AssistantMessageEventStream
from clawpi.ai.models import Model
from clawpi.ai.types import (
    AssistantMessage,
    AssistantMessageEvent,
    CacheRetention,
    Context,
    ThinkingLevel,
)


@dataclasses.dataclass(slots=True, kw_only=True)
class StreamOptions:
    """Per-request options; every provider reads the ones it understands."""

    api_key: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    reasoning: ThinkingLevel | None = None
    thinking_budgets: Mapping[str, int] | None = None
    signal: AbortSignal | None = None
    headers: Mapping[str, str] | None = None
    session_id: str | None = None
    cache_retention: CacheRetention | None = None
    metadata: Mapping[str, Any] | None = None
    tool_choice: Any = None
    on_payload: Callable[[dict[str, Any], Model], dict[str, Any] | None] | None = None
    """Sees (and may replace) the request body just before it is sent."""
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Provider-specific settings that have no common name."""
    history_owner: object | None = None
    """Something that lives as long as the conversation (an agent session sets its session
    manager): the providers keep, weakly under it, what they made of the history, and on the
    next request transform only what the history gained (see `transform_messages`)."""

    def replace(self, **changes: Any) -> StreamOptions:
        """A copy with `changes` (`dataclasses.replace`, at half its cost: a run makes a few
        of these per model call). Unknown names raise `TypeError`, as there."""
        if type(self) is not StreamOptions or not _OPTION_NAMES.issuperset(changes):
            return dataclasses.replace(self, **changes)
        copy = object.__new__(StreamOptions)
        for name in _OPTION_FIELDS:
            setattr(copy, name, changes[name] if name in changes else getattr(self, name))
        return copy


_OPTION_FIELDS: tuple[str, ...] = tuple(field.name for field in dataclasses.fields(StreamOptions))
_OPTION_NAMES = frozenset(_OPTION_FIELDS)


class StreamFunction(Protocol):
    def __call__(
        self, model: Model, context: Context, options: StreamOptions
    ) -> AsyncIterator[AssistantMessageEvent]: ...


@dataclasses.dataclass(frozen=True, slots=True)
class ApiProvider:
    """How one wire API is spoken: its stream function and how its errors read."""

    api: str
    stream: StreamFunction
    describe_error: Callable[[BaseException], str] | None = None


_BUILTIN_APIS: Mapping[str, str] = {
    "anthropic-messages": "clawpi.ai.providers.anthropic",
    "openai-completions": "clawpi.ai.providers.openai_completions",
    "openai-responses": "clawpi.ai.providers.openai_responses",
    "google-generative-ai": "clawpi.ai.providers.google",
    "faux": "clawpi.testing.faux",
    "function": "clawpi.testing.faux",
}
_registry: dict[str, ApiProvider] = {}


def register_api_provider(provider: ApiProvider) -> None:
    """Make `stream()` send models whose `api` is `provider.api` through `provider`."""
    _registry[provider.api] = provider


def unregister_api_provider(api: str) -> None:
    _registry.pop(api, None)


def get_api_provider(api: str) -> ApiProvider | None:
    provider = _registry.get(api)
    if provider is None and api in _BUILTIN_APIS:
        importlib.import_module(_BUILTIN_APIS[api])  # registers itself on import
        provider = _registry.get(api)
    return provider


def resolve_api_key(model: Model, api_key: str | None) -> str | None:
    """The explicit key, else the provider's environment variable(s)."""
    if api_key:
        return api_key
    key = get_env_api_key(model.provider)
    if key is None and model.api == "openai-completions":
        key = get_env_api_key("openai")
    return key


def missing_key_message(model: Model) -> str:
    names = env_vars_for(model.provider)
    hint = f"set {' or '.join(names)}" if names else "pass api_key=... or configure the provider"
    return f"No API key for provider: {model.provider} ({hint})"


def stream(
    model: Model, context: Context, options: StreamOptions | None = None, **kwargs: Any
) -> AssistantMessageEventStream:
    """Stream one assistant turn. Never raises once called: failures end in an `error` event."""
    if options is None:
        opts = StreamOptions(**kwargs)
    else:
        opts = options.replace(**kwargs) if kwargs else options
    provider = get_api_provider(model.api)
    if provider is None:
        source = _failing(f"No API provider registered for api: {model.api}")
        return AssistantMessageEventStream(
            source, api=model.api, provider=model.provider, model_id=model.id, signal=opts.signal
        )
    return AssistantMessageEventStream(
        provider.stream(model, context, opts),
        api=model.api,
        provider=model.provider,
        model_id=model.id,
        signal=opts.signal,
        describe_error=provider.describe_error,
    )


async def complete(
    model: Model, context: Context, options: StreamOptions | None = None, **kwargs: Any
) -> AssistantMessage:
    """Run `stream()` to the end and return the final assistant message."""
    return await stream(model, context, options, **kwargs).result()


async def _failing(message: str) -> AsyncIterator[AssistantMessageEvent]:
    raise LookupError(message)
    yield  # pragma: no cover - makes this an async generator
