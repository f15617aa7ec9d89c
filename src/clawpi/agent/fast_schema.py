"""A compiled fast path for the tool schemas most tools use.

Validation runs on every tool call, so for schemas built only from common keywords (type,
properties, required, additionalProperties, items, enum, const, numeric and length bounds, and
annotations) coercion and validation compile once into one closure per schema node that does
both in a single pass, with exactly the semantics of the general path in `clawpi.ai.validation`
(AJV-style coercion, then JSON Schema). Any other keyword keeps a schema on the general path, and
a failing fast check falls through to it too, so error messages always come from one place.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from clawpi.ai.validation import clone_json, coerce_type, matches_type

INVALID: Any = object()
"""What a compiled node returns for a value it rejects."""

_ANNOTATIONS = frozenset(
    (
        "title",
        "description",
        "default",
        "examples",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$schema",
    )
)
_FAST_KEYWORDS = (
    frozenset(
        (
            "type",
            "properties",
            "required",
            "additionalProperties",
            "items",
            "enum",
            "const",
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "exclusiveMaximum",
            "minLength",
            "maxLength",
            "minItems",
            "maxItems",
        )
    )
    | _ANNOTATIONS
)

_Node = Callable[[Any], Any]


def _json_equal(a: Any, b: Any) -> bool:
    """JSON equality: true is not 1, and containers compare element-wise."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict | list) or isinstance(b, dict | list):
        return False
    return bool(a == b)


def compile_schema(schema: Any) -> _Node | None:
    """A coerce-and-check closure for `schema`, or None when it needs the general path."""
    if schema is True or (isinstance(schema, Mapping) and not (schema.keys() - _ANNOTATIONS)):
        return clone_json
    if not isinstance(schema, Mapping) or schema.keys() - _FAST_KEYWORDS:
        return None
    types = schema.get("type")
    kinds: list[str] | None = None
    if types is not None:
        kinds = list(types) if isinstance(types, list) else [types]
        if not all(isinstance(kind, str) for kind in kinds):
            return None
    properties: dict[str, _Node] = {}
    for name, sub in (schema.get("properties") or {}).items():
        node = compile_schema(sub)
        if node is None:
            return None
        properties[name] = node
    extra_schema = schema.get("additionalProperties", True)
    extra: _Node | bool
    if isinstance(extra_schema, bool):
        extra = extra_schema
    else:
        compiled = compile_schema(extra_schema)
        if compiled is None:
            return None
        extra = compiled
    items_schema = schema.get("items")
    items: _Node | None = None
    if items_schema is not None:
        items = compile_schema(items_schema)
        if items is None:
            return None
    required = tuple(schema.get("required") or ())
    checks = _scalar_checks(schema)
    if checks is None:
        return None

    def run(value: Any) -> Any:
        if kinds is not None:
            value = coerce_type(value, kinds)
            if not any(matches_type(value, kind) for kind in kinds):
                return INVALID
        if isinstance(value, dict):
            for name in required:
                if name not in value:
                    return INVALID
            out = {}
            for key, item in value.items():
                node = properties.get(key)
                if node is None:
                    if extra is False:
                        return INVALID
                    if extra is True:
                        out[key] = clone_json(item)
                        continue
                    node = extra
                new = node(item)
                if new is INVALID:
                    return INVALID
                out[key] = new
            value = out
        elif isinstance(value, list):
            if items is not None:
                out_items = []
                for item in value:
                    new = items(item)
                    if new is INVALID:
                        return INVALID
                    out_items.append(new)
                value = out_items
            else:
                value = clone_json(value)
        for check in checks:
            if not check(value):
                return INVALID
        return value

    return run


def _scalar_checks(schema: Mapping[str, Any]) -> list[Callable[[Any], bool]] | None:
    checks: list[Callable[[Any], bool]] = []
    if "enum" in schema:
        options = schema["enum"]
        if not isinstance(options, list):
            return None
        checks.append(lambda v: any(_json_equal(v, option) for option in options))
    if "const" in schema:
        const = schema["const"]
        checks.append(lambda v: _json_equal(v, const))
    bounds: list[tuple[Callable[[Any, Any], bool], float]] = []
    for key, test in (
        ("minimum", operator.ge),
        ("maximum", operator.le),
        ("exclusiveMinimum", operator.gt),
        ("exclusiveMaximum", operator.lt),
    ):
        if key in schema:
            bound = schema[key]
            if isinstance(bound, bool) or not isinstance(bound, int | float):
                return None
            bounds.append((test, bound))
    if bounds:
        checks.append(
            lambda v: not matches_type(v, "number") or all(test(v, bound) for test, bound in bounds)
        )
    for key, kind, low in (
        ("minLength", str, True),
        ("maxLength", str, False),
        ("minItems", list, True),
        ("maxItems", list, False),
    ):
        if key in schema:
            limit = schema[key]
            if isinstance(limit, bool) or not isinstance(limit, int):
                return None
            checks.append(_length_check(kind, limit, low))
    return checks


def _length_check(kind: type[Any], limit: int, low: bool) -> Callable[[Any], bool]:
    def check(value: Any) -> bool:
        if not isinstance(value, kind):
            return True
        return len(value) >= limit if low else len(value) <= limit

    return check
