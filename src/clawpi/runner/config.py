"""OpenClaw's config shape (`agents.defaults.*`, `models.providers.*`, `auth.*`, `channels.*`, ...)
read with defaults, from a dict or a JSON file. Unknown keys are ignored, never rejected."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import orjson

from clawpi.ai.bounded import remember
from clawpi.ai.mapping import is_mapping
from clawpi.errors import ConfigError
from clawpi.runner.config_fields import finite_number
from clawpi.runner.workspace import from_caller_cwd

DEFAULT_PROVIDER = "anthropic"
DEFAULT_MODEL = "claude-opus-4-6"
DEFAULT_CONTEXT_TOKENS = 200_000
DEFAULT_TIMEOUT_SECONDS = 600
DEFAULT_MAX_CONCURRENT = 4
DEFAULT_LLM_IDLE_TIMEOUT_S = 60
MAX_TIMER_MS = 2_147_000_000

ConfigInput = Mapping[str, Any] | str | os.PathLike[str] | None


CONFIG_CACHE_SIZE = 16
SETTLE_NS = 100_000_000
"""A config file modified this recently is read again next time: a second edit within the same
clock tick, of the same size, would leave its stamp as it was."""
_config_files: dict[str, tuple[tuple[int, int, int], dict[str, Any]]] = {}


def load_config(config: ConfigInput) -> dict[str, Any]:
    """A config dict from a dict, a JSON file path, or None (empty config).

    A file is parsed again only when it changed (its mtime, size or inode): a gateway passing
    its config path with every message pays one stat, not a read and a parse. A relative path
    is the caller's, not the workspace's a run is in (`from_caller_cwd`). The nested values of
    a file's config are shared between calls: read them, never change them.
    """
    if config is None:
        return {}
    if is_mapping(config):
        return dict(config)
    path = str(from_caller_cwd(config))
    try:
        stat = os.stat(path)
    except FileNotFoundError as exc:
        raise ConfigError(f"Config file not found: {path}") from exc
    stamp = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
    cached = _config_files.get(path)
    if cached is not None and cached[0] == stamp:
        return dict(cached[1])
    data = _read_config_file(path)
    if time.time_ns() - stat.st_mtime_ns > SETTLE_NS:
        remember(_config_files, path, (stamp, data), CONFIG_CACHE_SIZE)
    return dict(data)


def _read_config_file(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            data = orjson.loads(handle.read())
    except FileNotFoundError as exc:
        raise ConfigError(f"Config file not found: {path}") from exc
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"Config file {path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"Config file {path} must hold a JSON object")
    return data


def config_key(value: Any) -> bytes | None:
    """Config data as a cache key (its JSON, keys sorted); None when JSON cannot hold it (an
    integer beyond 64 bits, a key that is not a string): then the caller does not cache."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS, default=str)
    except TypeError:
        return None


def get_path(config: Mapping[str, Any], dotted: str, default: Any = None) -> Any:
    """`get_path(cfg, "agents.defaults.timeoutSeconds", 600)`; missing or null -> default."""
    current: Any = config
    for part in dotted.split("."):
        if not is_mapping(current):
            return default
        current = current.get(part)
        if current is None:
            return default
    return current


_NO_DEFAULTS: Mapping[str, Any] = MappingProxyType({})


def agent_defaults(config: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """`agents.defaults`: empty when missing or not an object. Read several times a run."""
    agents = config.get("agents") if config else None
    defaults = agents.get("defaults") if is_mapping(agents) else None
    return defaults if is_mapping(defaults) else _NO_DEFAULTS


DEFAULT_RESERVE_TOKENS_FLOOR = 20_000
"""OpenClaw's floor for the tokens compaction keeps free (`compaction.reserveTokensFloor`)."""


def compaction_config(config: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """`agents.defaults.compaction`: empty when missing or not an object."""
    block = agent_defaults(config).get("compaction")
    return block if is_mapping(block) else _NO_DEFAULTS


def compaction_settings(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """pi's compaction settings for a run: on unless `enabled` is false, reserving at least
    OpenClaw's floor (never under 16,384 tokens), keeping `keepRecentTokens` (20,000) recent.
    A value that is not a positive number counts as unset."""
    block = compaction_config(config)
    floor = positive_number(block.get("reserveTokensFloor", DEFAULT_RESERVE_TOKENS_FLOOR))
    keep = positive_number(block.get("keepRecentTokens"))
    return {
        "enabled": block.get("enabled", True) is not False,
        "reserveTokens": max(16_384, int(floor or 0)),
        "keepRecentTokens": int(keep or 20_000),
    }


def positive_number(value: Any) -> float | None:
    """`value` when it is a finite number above 0 (not a bool), else None (unset)."""
    number = finite_number(value)
    return number if number is not None and number > 0 else None


LARGEST_COUNT = 2**53
"""Counts (tokens, characters, runs) above this all mean "no limit"; JSON numbers stop here."""


def positive_int(value: Any) -> int | None:
    """A config count: a number of 1 or more (its whole part, capped at `LARGEST_COUNT`);
    anything else (0, -1, 0.5, a string, null, NaN) is None, for the caller's default."""
    number = positive_number(value)
    return min(int(number), LARGEST_COUNT) if number is not None and number >= 1 else None


def resolve_timeout_ms(config: Mapping[str, Any], timeout_ms: int | None) -> int:
    """The run override when positive, else `agents.defaults.timeoutSeconds` (default 600 s)."""
    if timeout_ms is not None and timeout_ms > 0:
        return min(int(timeout_ms), MAX_TIMER_MS)
    seconds = agent_defaults(config).get("timeoutSeconds")
    if not isinstance(seconds, (int, float)) or seconds <= 0:
        seconds = DEFAULT_TIMEOUT_SECONDS
    return min(max(int(seconds * 1000), 1000), MAX_TIMER_MS)


def resolve_llm_idle_timeout_ms(config: Mapping[str, Any], trigger: str | None = None) -> int:
    """`agents.defaults.llm.idleTimeoutSeconds` (default 60 s, 0 disables; cron runs default off)."""
    value = get_path(config, "agents.defaults.llm.idleTimeoutSeconds")
    if value is None:
        value = 0 if trigger == "cron" else DEFAULT_LLM_IDLE_TIMEOUT_S
    if not isinstance(value, (int, float)) or value <= 0:
        return 0
    return min(int(value * 1000), MAX_TIMER_MS)


def configured_fallbacks(config: Mapping[str, Any]) -> list[str]:
    model = agent_defaults(config).get("model")
    if is_mapping(model):
        fallbacks = model.get("fallbacks")
        if isinstance(fallbacks, list):
            return [str(item) for item in fallbacks if isinstance(item, str) and item.strip()]
    return []


def configured_primary(config: Mapping[str, Any]) -> tuple[str, str]:
    model = agent_defaults(config).get("model")
    primary = model.get("primary") if is_mapping(model) else model
    if isinstance(primary, str) and "/" in primary:
        provider, _, model_id = primary.partition("/")
        if provider.strip() and model_id.strip():
            return provider.strip(), model_id.strip()
    return DEFAULT_PROVIDER, DEFAULT_MODEL
