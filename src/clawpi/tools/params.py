"""Reading tool arguments: pi's names, Claude-style aliases, `None` as absent (strict mode)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clawpi.tools.errors import ToolInputError

# Claude Code's parameter names, accepted next to pi's so transcripts and habits carry over.
PARAM_ALIASES: dict[str, str] = {
    "file_path": "path",
    "old_string": "oldText",
    "new_string": "newText",
}


def as_mapping(params: Any, tool: str) -> dict[str, Any]:
    if params is None:
        return {}
    if isinstance(params, Mapping):
        return dict(params)
    dump = getattr(params, "model_dump", None)
    if callable(dump):
        result = dump()
        if isinstance(result, dict):
            return result
    raise ToolInputError(f"{tool}: arguments must be a JSON object, got {type(params).__name__}.")


def normalize_aliases(params: Mapping[str, Any]) -> dict[str, Any]:
    """Map alias keys onto pi's names when the pi name is absent; originals win."""
    result = dict(params)
    for alias, name in PARAM_ALIASES.items():
        if alias in result:
            value = result.pop(alias)
            if result.get(name) is None:
                result[name] = value
    return result


def get_str(
    params: Mapping[str, Any], name: str, tool: str, *, required: bool = False
) -> str | None:
    value = params.get(name)
    if value is None:
        if required:
            raise ToolInputError(f"{tool}: missing required parameter '{name}'.")
        return None
    if not isinstance(value, str):
        raise ToolInputError(
            f"{tool}: parameter '{name}' must be a string, got {type(value).__name__}."
        )
    return value


def require_str(params: Mapping[str, Any], name: str, tool: str) -> str:
    value = get_str(params, name, tool, required=True)
    assert value is not None
    return value


def get_int(
    params: Mapping[str, Any], name: str, tool: str, *, minimum: int | None = None
) -> int | None:
    value = params.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ToolInputError(f"{tool}: parameter '{name}' must be a number.")
    try:
        number = int(float(value))
    except ValueError:
        raise ToolInputError(
            f"{tool}: parameter '{name}' must be a number, got {value!r}."
        ) from None
    if minimum is not None and number < minimum:
        raise ToolInputError(
            f"{tool}: parameter '{name}' must be at least {minimum}, got {number}."
        )
    return number


def get_float(params: Mapping[str, Any], name: str, tool: str) -> float | None:
    value = params.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ToolInputError(f"{tool}: parameter '{name}' must be a number.")
    try:
        return float(value)
    except ValueError:
        raise ToolInputError(
            f"{tool}: parameter '{name}' must be a number, got {value!r}."
        ) from None


def get_bool(params: Mapping[str, Any], name: str, tool: str) -> bool | None:
    value = params.get(name)
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ToolInputError(f"{tool}: parameter '{name}' must be true or false.")
