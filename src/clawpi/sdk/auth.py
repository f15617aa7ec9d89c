"""`AuthStorage`: API keys from runtime overrides, `auth.json`, the environment, or a fallback.

`auth.json` is pi's format (`{"openai": {"type": "api_key", "key": "..."}}`), created with mode
0600 in a 0700 directory. Keys are only ever returned to the code that makes the request; they
are never written to session files or logs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clawpi.ai.env_keys import env_vars_for, get_env_api_key
from clawpi.sdk.config_values import resolve_config_value
from clawpi.sdk.json_file import locked, read_json_object, update_json_file, write_json_atomic

AUTH_FILE = "auth.json"
_FILE_MODE = 0o600
_DIR_MODE = 0o700

FallbackResolver = Callable[[str], str | None]


class AuthStorage:
    """Resolves a provider's credential in pi's order: override, file, environment, fallback."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._overrides: dict[str, str] = {}
        self._fallback: FallbackResolver | None = None
        if self.path is not None:
            self._ensure_file()

    @classmethod
    def for_agent_dir(cls, agent_dir: Path | str) -> AuthStorage:
        return cls(Path(agent_dir) / AUTH_FILE)

    @classmethod
    def in_memory(cls, keys: dict[str, str] | None = None) -> AuthStorage:
        storage = cls()
        for provider, key in (keys or {}).items():
            storage.set_runtime_api_key(provider, key)
        return storage

    def _ensure_file(self) -> None:
        assert self.path is not None
        directory = self.path.parent
        if not directory.exists():
            directory.mkdir(parents=True, mode=_DIR_MODE)
        with locked(self.path):
            if not self.path.exists():
                write_json_atomic(self.path, {}, mode=_FILE_MODE)

    def _read(self) -> dict[str, Any]:
        return read_json_object(self.path) if self.path is not None else {}

    # -- writes ----------------------------------------------------------------------------

    def set_runtime_api_key(self, provider: str, key: str) -> None:
        """A key for this process only (e.g. `--api-key`); wins over everything else."""
        self._overrides[provider] = key

    def set_fallback_resolver(self, resolver: FallbackResolver | None) -> None:
        """Last resort, e.g. a models.json provider's `apiKey`."""
        self._fallback = resolver

    def set_api_key(self, provider: str, key: str) -> None:
        self._update(lambda data: data.__setitem__(provider, {"type": "api_key", "key": key}))

    def remove(self, provider: str) -> None:
        self._update(lambda data: data.pop(provider, None))

    def _update(self, change: Callable[[dict[str, Any]], object]) -> None:
        if self.path is None:
            raise RuntimeError("in-memory AuthStorage has no file; use set_runtime_api_key")
        update_json_file(self.path, lambda data: _discard(change(data)), mode=_FILE_MODE)

    # -- reads -----------------------------------------------------------------------------

    def list_providers(self) -> list[str]:
        return sorted(set(self._read()) | set(self._overrides))

    def get_api_key(self, provider: str) -> str | None:
        override = self._overrides.get(provider)
        if override:
            return override
        entry = self._read().get(provider)
        if isinstance(entry, dict):
            key = _key_from_entry(entry)
            if key:
                return key
        from_env = get_env_api_key(provider)
        if from_env:
            return from_env
        if self._fallback is not None:
            return self._fallback(provider)
        return None

    def has_auth(self, provider: str) -> bool:
        try:
            return self.get_api_key(provider) is not None
        except Exception:  # a failing `!command` means no usable credential
            return False

    def describe_missing(self, provider: str) -> str:
        """What would give `provider` a credential, for error messages."""
        names = env_vars_for(provider)
        options = [f"set {' or '.join(names)}"] if names else []
        if self.path is not None:
            options.append(
                f'add {{"{provider}": {{"type": "api_key", "key": "..."}}}} to {self.path}'
            )
        options.append("or pass --api-key")
        return f"No API key for provider {provider!r}: " + ", ".join(options)


def _key_from_entry(entry: dict[str, Any]) -> str | None:
    kind = entry.get("type")
    if kind == "api_key":
        key = entry.get("key")
        return resolve_config_value(key) if isinstance(key, str) and key else None
    if kind == "oauth":
        access = entry.get("access")
        expires = entry.get("expires")
        fresh = not isinstance(expires, (int, float)) or time.time() * 1000 < expires
        return access if isinstance(access, str) and access and fresh else None
    return None


def _discard(_: object) -> None:
    return None


def file_mode(path: Path) -> int:
    return os.stat(path).st_mode & 0o777
