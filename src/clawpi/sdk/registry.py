"""`ModelRegistry`: the built-in catalog plus custom providers and models from `models.json`.

`models.json` is pi's format: `{"providers": {"<name>": {"baseUrl", "api", "apiKey", "headers",
"authHeader", "compat", "models": [...], "modelOverrides": {id: {...}}}}}`. A broken file is
reported in `registry.error` and the built-in models stay usable.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from clawpi.ai.models import Model, list_models, model_cost_from_dict
from clawpi.ai.types import THINKING_LEVELS, ThinkingLevel
from clawpi.errors import ConfigError
from clawpi.sdk.auth import AuthStorage
from clawpi.sdk.config_values import resolve_config_value, resolve_headers
from clawpi.sdk.json_file import read_json_object

MODELS_FILE = "models.json"
_PROVIDER_KEYS = ("baseUrl", "compat", "modelOverrides", "models")


@dataclasses.dataclass(frozen=True, slots=True)
class ModelChoice:
    """A model picked by a pattern like `provider/id:high`."""

    model: Model
    thinking_level: ThinkingLevel | None = None


@functools.cache
def _catalog_by_key() -> dict[tuple[str, str], Model]:
    """The built-in catalog by (provider, id), indexed once; each registry copies it."""
    return {(m.provider, m.id): m for m in list_models()}


class ModelRegistry:
    def __init__(self, auth_storage: AuthStorage, models_path: Path | str | None = None) -> None:
        self.auth_storage = auth_storage
        self.models_path = Path(models_path) if models_path is not None else None
        self.error: str | None = None
        self._models: dict[tuple[str, str], Model] = {}
        self._provider_keys: dict[str, str] = {}
        self._auth_header: set[str] = set()
        self.refresh()

    @classmethod
    def for_agent_dir(cls, auth_storage: AuthStorage, agent_dir: Path | str) -> ModelRegistry:
        return cls(auth_storage, Path(agent_dir) / MODELS_FILE)

    def refresh(self) -> None:
        """Reload the catalog and models.json (call after editing the file)."""
        self.error = None
        self._models = dict(_catalog_by_key())
        self._provider_keys = {}
        self._auth_header = set()
        if self.models_path is not None:
            try:
                self._load_custom(read_json_object(self.models_path))
            except ConfigError as exc:
                self.error = str(exc)
        self.auth_storage.set_fallback_resolver(_models_json_keys(self._provider_keys))

    def _load_custom(self, data: dict[str, Any]) -> None:
        providers = data.get("providers", {})
        if not isinstance(providers, dict):
            raise ConfigError(f"{self.models_path}: 'providers' must be an object")
        problems: list[str] = []
        for name, config in providers.items():
            try:
                self._load_provider(str(name), config)
            except ConfigError as exc:
                problems.append(str(exc))
        if problems:
            raise ConfigError(f"{self.models_path}: " + "; ".join(problems))

    def _load_provider(self, name: str, config: Any) -> None:
        if not isinstance(config, dict):
            raise ConfigError(f"provider {name!r} must be an object")
        if not any(key in config for key in _PROVIDER_KEYS):
            raise ConfigError(
                f"provider {name!r} needs at least one of {', '.join(_PROVIDER_KEYS)}"
            )
        builtin = [m for (p, _), m in self._models.items() if p == name]
        custom_models = config.get("models") or []
        if not isinstance(custom_models, list):
            raise ConfigError(f"provider {name!r}: 'models' must be a list")
        api_key = config.get("apiKey")
        if custom_models and not builtin and not api_key:
            raise ConfigError(
                f'provider {name!r} defines models but no "apiKey" (use an environment '
                f'variable name, "!command", or any placeholder for a local server)'
            )
        if isinstance(api_key, str) and api_key:
            self._provider_keys[name] = api_key
        if config.get("authHeader"):
            self._auth_header.add(name)
        headers = config.get("headers")
        base_url = config.get("baseUrl")
        provider_compat = config.get("compat")
        # provider-wide settings apply to every built-in model of that provider
        for model in builtin:
            changes: dict[str, Any] = {}
            if base_url:
                changes["base_url"] = base_url
            if headers:
                changes["headers"] = {**(model.headers or {}), **headers}
            if provider_compat:
                changes["compat"] = {**(model.compat or {}), **provider_compat}
            if changes:
                self._models[(name, model.id)] = model.replace(**changes)
        default_api = config.get("api") or (builtin[0].api if builtin else None)
        for raw in custom_models:
            if not isinstance(raw, dict) or not raw.get("id"):
                raise ConfigError(f"provider {name!r}: every model needs an 'id'")
            api = raw.get("api") or default_api
            url = raw.get("baseUrl") or base_url or (builtin[0].base_url if builtin else None)
            if not api or not url:
                raise ConfigError(
                    f"provider {name!r}, model {raw['id']!r}: set 'api' and 'baseUrl' "
                    "(on the provider or the model)"
                )
            compat = {**(provider_compat or {}), **(raw.get("compat") or {})} or None
            model_headers = {**(headers or {}), **(raw.get("headers") or {})} or None
            self._models[(name, str(raw["id"]))] = Model(
                id=str(raw["id"]),
                name=str(raw.get("name") or raw["id"]),
                api=str(api),
                provider=name,
                base_url=str(url),
                reasoning=bool(raw.get("reasoning", False)),
                input=tuple(raw.get("input") or ("text",)),
                cost=model_cost_from_dict(raw.get("cost") or {}),
                context_window=int(raw.get("contextWindow", 128_000)),
                max_tokens=int(raw.get("maxTokens", 16_384)),
                headers=model_headers,
                compat=cast(Any, compat),
            )
        overrides = config.get("modelOverrides") or {}
        for model_id, partial in overrides.items():
            current = self._models.get((name, model_id))
            if current is None or not isinstance(partial, dict):
                continue
            merged = {**current.to_dict(), **partial}
            self._models[(name, model_id)] = Model.from_dict(merged, provider=name)

    # -- queries ---------------------------------------------------------------------------

    def get_all(self) -> list[Model]:
        return list(self._models.values())

    def get_available(self) -> list[Model]:
        """Models whose provider has a credential."""
        cache: dict[str, bool] = {}
        out = []
        for model in self._models.values():
            if model.provider not in cache:
                cache[model.provider] = self.auth_storage.has_auth(model.provider)
            if cache[model.provider]:
                out.append(model)
        return out

    def find(self, provider: str, model_id: str) -> Model | None:
        return self._models.get((provider, model_id))

    def get_api_key(self, model: Model) -> str | None:
        return self.auth_storage.get_api_key(model.provider)

    def request_headers(self, model: Model, api_key: str | None) -> dict[str, str] | None:
        """Resolved model headers, plus `Authorization: Bearer` for `authHeader` providers."""
        headers = resolve_headers(model.headers) or {}
        if model.provider in self._auth_header and api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        return headers or None

    def resolve(self, pattern: str, provider: str | None = None) -> ModelChoice:
        """`provider/id`, `id`, a glob or a unique partial id, with an optional `:level`."""
        spec, level = _split_thinking(pattern)
        if provider is None and "/" in spec:
            head, _, tail = spec.partition("/")
            if any(p == head for p, _ in self._models):
                provider, spec = head, tail
        candidates = [m for m in self._models.values() if provider in (None, m.provider)]
        exact = [m for m in candidates if m.id == spec]
        if not exact and any(ch in spec for ch in "*?["):
            exact = [m for m in candidates if fnmatch.fnmatchcase(m.id, spec)]
        if not exact:
            exact = [m for m in candidates if spec.lower() in m.id.lower()]
        if not exact:
            where = f" for provider {provider!r}" if provider else ""
            raise ConfigError(
                f"Unknown model {pattern!r}{where}. Run `clawpi models` to list models, or add "
                f"it to {self.models_path or 'models.json'}"
            )
        if len(exact) > 1 and not all(m.id == exact[0].id for m in exact):
            exact.sort(key=lambda m: (len(m.id), m.id))
        if len({m.provider for m in exact}) > 1 and provider is None:
            available = [m for m in exact if self.auth_storage.has_auth(m.provider)]
            exact = available or exact
        return ModelChoice(exact[0], level)


def _split_thinking(pattern: str) -> tuple[str, ThinkingLevel | None]:
    head, sep, tail = pattern.rpartition(":")
    if sep and tail in THINKING_LEVELS:
        return head, tail
    return pattern, None


def _models_json_keys(keys: dict[str, str]) -> Callable[[str], str | None]:
    """models.json keys for the auth storage, over the dict alone: a bound method would tie
    the storage and the registry in a cycle that only the cyclic collector frees."""

    def resolve(provider: str) -> str | None:
        raw = keys.get(provider)
        return resolve_config_value(raw) if raw else None

    return resolve
