"""Tool parameter schemas reduced to the JSON Schema subset Gemini accepts.

Gemini answers 400 ("Unknown name ... Cannot find field") for schema keywords outside its subset,
and tool schemas written for other providers (TypeBox, pydantic) use them freely. Local `$ref`s
are inlined, literal unions become enums, null variants are dropped; constraints Gemini rejects
are removed. Property *names* are never touched, only keywords. The input is never mutated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

GEMINI_UNSUPPORTED_SCHEMA_KEYWORDS = frozenset(
    {
        "patternProperties",
        "additionalProperties",
        "$schema",
        "$id",
        "$ref",
        "$defs",
        "definitions",
        "examples",
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "pattern",
        "format",
        "minItems",
        "maxItems",
        "uniqueItems",
        "minProperties",
        "maxProperties",
    }
)
_META_KEYS = ("description", "title", "default")
_REF_PREFIXES = ("#/$defs/", "#/definitions/")


def clean_schema_for_gemini(schema: Any) -> Any:
    """A copy of `schema` that Gemini's function declarations accept."""
    if not isinstance(schema, Mapping):
        return schema
    return _clean(schema, _defs_of(schema, {}), frozenset())


def _defs_of(schema: Mapping[str, Any], inherited: Mapping[str, Any]) -> Mapping[str, Any]:
    found: dict[str, Any] = {}
    for key in ("definitions", "$defs"):
        table = schema.get(key)
        if isinstance(table, Mapping):
            found.update(table)
    return {**inherited, **found} if found else inherited


def _clean(node: Any, defs: Mapping[str, Any], seen_refs: frozenset[str]) -> Any:
    if isinstance(node, list):
        return [_clean(item, defs, seen_refs) for item in node]
    if not isinstance(node, Mapping):
        return node
    defs = _defs_of(node, defs)
    ref = node.get("$ref")
    if isinstance(ref, str):
        return _resolve_ref(node, ref, defs, seen_refs)
    for union_key in ("anyOf", "oneOf"):
        variants = node.get(union_key)
        if isinstance(variants, list):
            simplified = _simplify_union(node, [_clean(v, defs, seen_refs) for v in variants])
            if simplified is not None:
                return simplified
    out: dict[str, Any] = {}
    is_union = isinstance(node.get("anyOf"), list) or isinstance(node.get("oneOf"), list)
    for key, value in node.items():
        if key in GEMINI_UNSUPPORTED_SCHEMA_KEYWORDS:
            continue
        if key == "const":
            out["enum"] = [value]
        elif key == "type":
            if is_union:
                continue  # the variants carry the types
            out["type"] = _non_null_type(value)
        elif key == "properties" and isinstance(value, Mapping):
            out[key] = {name: _clean(sub, defs, seen_refs) for name, sub in value.items()}
        elif key in ("items", "anyOf", "oneOf", "allOf", "prefixItems", "not"):
            out[key] = _clean(value, defs, seen_refs)
        else:
            out[key] = value
    for union_key in ("anyOf", "oneOf"):
        if isinstance(out.get(union_key), list):
            out[union_key] = [v for v in out[union_key] if not _is_null_schema(v)]
    return out


def _resolve_ref(
    node: Mapping[str, Any], ref: str, defs: Mapping[str, Any], seen_refs: frozenset[str]
) -> dict[str, Any]:
    target = None
    if ref not in seen_refs:
        for prefix in _REF_PREFIXES:
            if ref.startswith(prefix):
                name = ref[len(prefix) :].replace("~1", "/").replace("~0", "~")
                target = defs.get(name)
    result: dict[str, Any] = {}
    if isinstance(target, Mapping):
        cleaned = _clean(target, defs, seen_refs | {ref})
        if isinstance(cleaned, dict):
            result.update(cleaned)
    _copy_meta(node, result)
    return result  # an unresolvable or recursive ref degrades to "any value"


def _simplify_union(node: Mapping[str, Any], variants: list[Any]) -> dict[str, Any] | None:
    """A single schema for a literal-only union or an `X | null`, else None."""
    non_null = [v for v in variants if not _is_null_schema(v)]
    literals: list[Any] = []
    common_type: str | None = None
    for variant in non_null:
        if not isinstance(variant, Mapping):
            literals = []
            break
        enum = variant.get("enum")
        if not isinstance(enum, list) or len(enum) != 1:
            literals = []
            break
        kind = _non_null_type(variant.get("type"))
        if not isinstance(kind, str) or (common_type is not None and kind != common_type):
            literals = []
            break
        common_type = kind
        literals.append(enum[0])
    result: dict[str, Any] | None = None
    if literals and common_type is not None:
        result = {"type": common_type, "enum": literals}
    elif len(non_null) == 1 and len(variants) > 1 and isinstance(non_null[0], Mapping):
        result = dict(non_null[0])
    if result is not None:
        _copy_meta(node, result)
    return result


def _non_null_type(value: Any) -> Any:
    if isinstance(value, list) and all(isinstance(t, str) for t in value):
        kinds = [t for t in value if t != "null"]
        return kinds[0] if len(kinds) == 1 else kinds
    return value


def _is_null_schema(node: Any) -> bool:
    if not isinstance(node, Mapping):
        return False
    enum = node.get("enum")
    if isinstance(enum, list) and len(enum) == 1 and enum[0] is None:
        return True
    kind = node.get("type")
    return kind == "null" or kind == ["null"]


def _copy_meta(source: Mapping[str, Any], target: dict[str, Any]) -> None:
    for key in _META_KEYS:
        if key in source:
            target[key] = source[key]
