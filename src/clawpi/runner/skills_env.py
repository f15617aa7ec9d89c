"""Per-run environment variables configured for skills (`skills.entries.<key>.env`, `apiKey`).

A skill's scripts read their credentials from the environment, so the runner exports the
configured values for the length of a run and takes them back afterwards. Three rules keep
this safe in a process that serves many sessions at once:

* a variable the process already has is never overwritten (the operator's value wins);
* variables that change how programs are loaded or found (PATH, LD_PRELOAD, ...) are refused;
* concurrent runs share a value they both set: it is removed only when the last of them ends.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from clawpi.sdk.resources import split_frontmatter

log = logging.getLogger(__name__)

BLOCKED_ENV_KEYS = frozenset(
    {
        "PATH",
        "HOME",
        "SHELL",
        "IFS",
        "ENV",
        "BASH_ENV",
        "PS4",
        "PROMPT_COMMAND",
        "NODE_OPTIONS",
        "NODE_PATH",
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONSTARTUP",
        "PYTHONINSPECT",
        "PERL5LIB",
        "PERL5OPT",
        "RUBYLIB",
        "RUBYOPT",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "GIT_SSH_COMMAND",
        "GIT_EXEC_PATH",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "OPENSSL_CONF",
    }
)
"""Variables a skill config may not set: they change which code runs or whom TLS trusts."""
BLOCKED_ENV_PREFIXES = ("LD_", "DYLD_", "CLAWPI_", "OPENCLAW_")

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_METADATA_NAMESPACES = ("openclaw", "clawpi", "clawdbot")


def is_blocked_env_key(key: str) -> bool:
    upper = key.upper()
    return upper in BLOCKED_ENV_KEYS or upper.startswith(BLOCKED_ENV_PREFIXES)


@dataclasses.dataclass
class _Held:
    value: str
    holders: int


_lock = threading.Lock()
_held: dict[str, _Held] = {}
"""Variables set by skill overrides and not yet released, with how many runs hold them."""


@dataclasses.dataclass(frozen=True, slots=True)
class SkillEnvTarget:
    """What the override needs to know about one skill."""

    key: str
    """Its key under `skills.entries` (metadata `skillKey`, else the skill's name)."""
    primary_env: str | None = None
    """The variable `apiKey` is exported as."""


def _skill_metadata(file_path: Any) -> Mapping[str, Any]:
    if not isinstance(file_path, str | Path):
        return {}
    try:
        meta, _ = split_frontmatter(Path(file_path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    metadata = meta.get("metadata")
    if not isinstance(metadata, Mapping):
        return {}
    for namespace in _METADATA_NAMESPACES:
        block = metadata.get(namespace)
        if isinstance(block, Mapping):
            return block
    return {}


def skill_env_target(skill: Any) -> SkillEnvTarget | None:
    """Accepts a `clawpi.sdk.resources.Skill`, any object with `name` (and optionally
    `skill_key`, `primary_env`, `file_path`), or a mapping with `name`/`skillKey`/`primaryEnv`.
    Missing fields are read from the skill's SKILL.md front matter (`metadata.openclaw`)."""

    def field(*names: str) -> Any:
        for name in names:
            value = skill.get(name) if isinstance(skill, Mapping) else getattr(skill, name, None)
            if value is not None:
                return value
        return None

    name = field("name")
    key = field("skill_key", "skillKey")
    primary_env = field("primary_env", "primaryEnv")
    if key is None or primary_env is None:
        metadata = _skill_metadata(field("file_path", "filePath"))
        key = key if key is not None else metadata.get("skillKey")
        primary_env = primary_env if primary_env is not None else metadata.get("primaryEnv")
    key = key if isinstance(key, str) and key.strip() else name
    if not isinstance(key, str) or not key.strip():
        return None
    env = primary_env.strip() if isinstance(primary_env, str) and primary_env.strip() else None
    return SkillEnvTarget(key.strip(), env)


def _skill_entries(config: Mapping[str, Any] | None) -> Mapping[str, Any]:
    skills = (config or {}).get("skills")
    entries = skills.get("entries") if isinstance(skills, Mapping) else None
    return entries if isinstance(entries, Mapping) else {}


def _wanted(skills: Iterable[Any], config: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """(variable, value) pairs in order, first skill wins on a clash."""
    entries = _skill_entries(config)
    wanted: dict[str, str] = {}
    for skill in skills:
        target = skill_env_target(skill)
        if target is None:
            continue
        entry = entries.get(target.key)
        if not isinstance(entry, Mapping) or entry.get("enabled") is False:
            continue
        pairs: list[tuple[Any, Any]] = []
        env = entry.get("env")
        if isinstance(env, Mapping):
            pairs.extend(env.items())
        api_key = entry.get("apiKey")
        if isinstance(api_key, str) and api_key.strip() and target.primary_env:
            pairs.append((target.primary_env, api_key.strip()))
        for name, value in pairs:
            if not isinstance(name, str) or not _ENV_NAME.match(name):
                log.warning(
                    "skill %s: ignoring env variable with invalid name %r", target.key, name
                )
                continue
            if not isinstance(value, str | int | float) or isinstance(value, bool):
                log.warning("skill %s: env %s must be a string; ignored", target.key, name)
                continue
            if is_blocked_env_key(name):
                log.warning("skill %s: env %s may not be set by a skill; ignored", target.key, name)
                continue
            wanted.setdefault(name, str(value))
    return list(wanted.items())


def apply_skill_env_overrides(
    skills: Iterable[Any], config: Mapping[str, Any] | None
) -> Callable[[], None]:
    """Export the configured skill variables that are not set yet; returns `restore()`, which
    removes exactly what this call added (once the last concurrent holder releases it).
    Calling `restore` twice is harmless."""
    taken: list[tuple[str, str]] = []
    with _lock:
        for name, value in _wanted(skills, config):
            held = _held.get(name)
            current = os.environ.get(name)
            if held is not None and current == held.value:
                if held.value == value:
                    held.holders += 1
                    taken.append((name, value))
                continue  # another run's skill owns it with a different value: leave it be
            if current is not None:
                continue  # set by the operator (or by someone else since): never override
            os.environ[name] = value
            _held[name] = _Held(value, 1)
            taken.append((name, value))
    done = False

    def restore() -> None:
        nonlocal done
        with _lock:
            if done:
                return
            done = True
            for name, value in taken:
                held = _held.get(name)
                if held is None or held.value != value:
                    continue
                held.holders -= 1
                if held.holders > 0:
                    continue
                del _held[name]
                if os.environ.get(name) == value:
                    del os.environ[name]

    return restore


def active_skill_env_keys() -> dict[str, int]:
    """Variables currently exported by skill overrides, with their holder counts."""
    with _lock:
        return {name: held.holders for name, held in _held.items()}
