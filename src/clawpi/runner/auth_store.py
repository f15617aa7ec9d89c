"""`auth-profiles.json`: OpenClaw's store of API keys and tokens plus their usage statistics.

Several gateway processes may mark failures on the same file at once, so every write re-reads
the file under a lock, applies one change and replaces the file atomically: nothing another
writer recorded is lost. Fields clawpi does not know are kept as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawpi.sdk.json_file import read_json_object, update_json_file
from clawpi.session.paths import joined_path

AUTH_PROFILES_FILENAME = "auth-profiles.json"
AUTH_STORE_VERSION = 1
_FILE_MODE = 0o600

_PROVIDER_ALIASES = {
    "z.ai": "zai",
    "z-ai": "zai",
    "opencode-zen": "opencode",
    "qwen": "qwen-portal",
    "bedrock": "amazon-bedrock",
    "aws-bedrock": "amazon-bedrock",
}


def normalize_provider_id(provider: str) -> str:
    """Provider ids compare trimmed, lower-cased and with the common aliases folded."""
    key = provider.strip().lower()
    return _PROVIDER_ALIASES.get(key, key)


def auth_profiles_path(agent_dir: Path | str) -> Path:
    return joined_path(agent_dir, AUTH_PROFILES_FILENAME)


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


@dataclass
class AuthProfileStore:
    """The parsed store: `data` is the whole JSON object, unknown keys included.

    `path` is where it came from; None for a store that lives only in memory.
    """

    data: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None

    def __post_init__(self) -> None:
        self.data.setdefault("version", AUTH_STORE_VERSION)
        if not isinstance(self.data.get("profiles"), dict):
            self.data["profiles"] = {}

    @property
    def profiles(self) -> dict[str, dict[str, Any]]:
        return {
            pid: cred
            for pid, cred in _as_dict(self.data.get("profiles")).items()
            if isinstance(cred, dict)
        }

    def profile(self, profile_id: str) -> dict[str, Any] | None:
        cred = _as_dict(self.data.get("profiles")).get(profile_id)
        return cred if isinstance(cred, dict) else None

    def store_order(self, provider: str) -> list[str] | None:
        """The store-level order for a provider (keys compared normalised), if any."""
        wanted = normalize_provider_id(provider)
        for key, ids in _as_dict(self.data.get("order")).items():
            if normalize_provider_id(key) == wanted and isinstance(ids, list):
                return [i for i in ids if isinstance(i, str)]
        return None

    def usage(self, profile_id: str) -> dict[str, Any]:
        """Usage stats of one profile, read-only view ({} when none)."""
        return _as_dict(_as_dict(self.data.get("usageStats")).get(profile_id))

    def usage_for_update(self, profile_id: str) -> dict[str, Any]:
        """Usage stats of one profile, created on demand for writing."""
        stats = self.data.get("usageStats")
        if not isinstance(stats, dict):
            stats = self.data["usageStats"] = {}
        entry = stats.get(profile_id)
        if not isinstance(entry, dict):
            entry = stats[profile_id] = {}
        return entry

    def last_good(self, provider: str) -> str | None:
        wanted = normalize_provider_id(provider)
        for key, pid in _as_dict(self.data.get("lastGood")).items():
            if normalize_provider_id(key) == wanted and isinstance(pid, str):
                return pid
        return None

    def set_last_good(self, provider: str, profile_id: str) -> None:
        last_good = self.data.get("lastGood")
        if not isinstance(last_good, dict):
            last_good = self.data["lastGood"] = {}
        last_good[normalize_provider_id(provider)] = profile_id


def load_auth_profile_store(agent_dir: Path | str) -> AuthProfileStore:
    """The store of an agent directory; an empty one when the file does not exist yet.

    A file that is not valid JSON raises `ConfigError` naming it: it is never overwritten.
    """
    path = auth_profiles_path(agent_dir)
    return AuthProfileStore(read_json_object(path), path)


def save_auth_profile_store(store: AuthProfileStore) -> None:
    """Write the whole store (under the lock, atomically). Prefer `update_auth_profile_store`
    for changes, which cannot lose a concurrent writer's edits."""
    if store.path is None:
        return
    snapshot = store.data

    def replace(data: dict[str, Any]) -> None:
        data.clear()
        data.update(snapshot)

    update_json_file(store.path, replace, mode=_FILE_MODE)


def update_auth_profile_store(
    store: AuthProfileStore, change: Callable[[AuthProfileStore], None]
) -> AuthProfileStore:
    """Apply `change` to the freshest copy on disk under the file lock, write it back, and
    refresh `store` in place. A store without a path is changed in memory only."""
    if store.path is None:
        change(store)
        return store

    def apply(data: dict[str, Any]) -> None:
        fresh = AuthProfileStore(data, store.path)
        change(fresh)

    store.data = update_json_file(store.path, apply, mode=_FILE_MODE)
    return store
