"""Typed values out of OpenClaw's config.

`finite_number` and `finite_int` read leniently: anything else is None, for the caller's default.
The `optional_*` readers are strict, for the parts a wrong type cannot be read around (a model's
definition, its headers): a value of the wrong type is a `ConfigError` that names its place in
the config; a missing or null value is None."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from clawpi.ai.mapping import is_mapping
from clawpi.errors import ConfigError


def finite_number(value: Any) -> float | None:
    """`value` when it is a number (not a bool) and neither NaN nor infinite (a dict config
    can hold those, and `int()` of them raises)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if float("-inf") < value < float("inf") else None


def finite_int(value: Any) -> int | None:
    """`finite_number`, its whole part."""
    number = finite_number(value)
    return None if number is None else int(number)


def _wrong(where: str, wanted: str, value: Any) -> ConfigError:
    try:  # shown as the config file spells it
        shown = orjson.dumps(value).decode()
    except TypeError:
        shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return ConfigError(f"Config {where} must be {wanted}, not {shown}: fix it in the config")


def optional_mapping(value: Any, where: str) -> Mapping[str, Any] | None:
    if value is None or is_mapping(value):
        return value
    raise _wrong(where, "an object", value)


def optional_str(value: Any, where: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise _wrong(where, "a string", value)


def optional_bool(value: Any, where: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise _wrong(where, "true or false", value)


def optional_number(value: Any, where: str, *, minimum: float = float("-inf")) -> float | None:
    """A finite number (not a bool) of at least `minimum`."""
    if value is None:
        return None
    number = finite_number(value)
    if number is None or number < minimum:
        wanted = "a number" if minimum == float("-inf") else f"a number of at least {minimum:g}"
        raise _wrong(where, wanted, value)
    return number


def string_map(value: Any, where: str) -> dict[str, str] | None:
    """An object of strings (e.g. HTTP headers)."""
    mapping = optional_mapping(value, where)
    if mapping is None:
        return None
    for key, item in mapping.items():
        if not isinstance(item, str):
            raise _wrong(f"{where}.{key}", "a string", item)
    return dict(mapping)


def object_list(
    value: Any, where: str, wanted: str = "a list of objects"
) -> list[Mapping[str, Any]] | None:
    """A list of objects (`wanted` names them in the error)."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise _wrong(where, wanted, value)
    return [optional_mapping(item, f"{where}[{i}]") or {} for i, item in enumerate(value)]


def string_list(value: Any, where: str, choices: tuple[str, ...] | None = None) -> list[str] | None:
    """A list of strings, each one of `choices` when given."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise _wrong(where, "a list of strings", value)
    wanted = "a string" if choices is None else " or ".join(repr(choice) for choice in choices)
    for index, item in enumerate(value):
        if not isinstance(item, str) or (choices is not None and item not in choices):
            raise _wrong(f"{where}[{index}]", wanted, item)
    return list(value)
