"""Tool parameter schemas cleaned for each provider's dialect of JSON Schema.

All providers: the top level must be one `type: object` (a top-level anyOf/oneOf of objects is
merged into one). Gemini: its keyword subset (the google provider's cleaner, reused). OpenAI
strict mode: closed objects, every property required, optional ones nullable. xAI: the
constraint keywords it rejects are dropped. Anthropic: the top-level rules only.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import orjson

from clawpi.ai.bounded import remember
from clawpi.ai.providers.google_schema import clean_schema_for_gemini

XAI_UNSUPPORTED_KEYWORDS = frozenset(
    {"minLength", "maxLength", "minItems", "maxItems", "minContains", "maxContains"}
)
# Keywords OpenAI's strict mode rejects (structured outputs' supported subset excludes them).
OPENAI_STRICT_UNSUPPORTED_KEYWORDS = frozenset(
    {
        "minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
        "exclusiveMaximum", "multipleOf", "minItems", "maxItems", "uniqueItems",
        "minProperties", "maxProperties", "patternProperties", "default", "examples", "$schema",
    }
)  # fmt: skip


def provider_family(api: str | None, provider: str | None) -> str:
    """`gemini`, `openai`, `anthropic`, `xai` or `other`, from a model's api and provider."""
    api = (api or "").lower()
    provider = (provider or "").lower()
    if api.startswith("google") or provider.startswith("google") or provider == "gemini":
        return "gemini"
    if provider == "xai":
        return "xai"
    if api.startswith("anthropic") or provider == "anthropic":
        return "anthropic"
    if api.startswith(("openai", "azure")) or provider.startswith("openai"):
        return "openai"
    return "other"


def _merge_enum(a: Any, b: Any) -> Any:
    if (
        isinstance(a, Mapping) and isinstance(b, Mapping)
        and isinstance(a.get("enum"), list) and isinstance(b.get("enum"), list)
    ):  # fmt: skip
        merged = dict(a)
        merged["enum"] = list(dict.fromkeys([*a["enum"], *b["enum"]]))
        return merged
    return a


def flatten_top_level(schema: Mapping[str, Any]) -> dict[str, Any]:
    """One `type: object` schema: a top-level union of objects has its properties merged,
    string enums merged, `required` intersected, and stays open unless every variant is
    closed."""
    result = copy.deepcopy(dict(schema))
    variants = None
    for key in ("anyOf", "oneOf"):
        if isinstance(result.get(key), list):
            variants = result.pop(key)
            break
    if variants is not None:
        objects = [
            v for v in variants if isinstance(v, Mapping) and v.get("type", "object") == "object"
        ]
        properties: dict[str, Any] = dict(result.get("properties") or {})
        required_sets = []
        closed = bool(objects)
        for variant in objects:
            for name, sub in (variant.get("properties") or {}).items():
                properties[name] = _merge_enum(properties[name], sub) if name in properties else sub
            required_sets.append(set(variant.get("required") or []))
            if variant.get("additionalProperties") is not False:
                closed = False
        result["properties"] = properties
        common = set.intersection(*required_sets) if required_sets else set()
        common |= set(result.get("required") or [])
        if common:
            result["required"] = [name for name in properties if name in common]
        else:
            result.pop("required", None)
        if closed:
            result["additionalProperties"] = False
    result["type"] = "object"
    result.setdefault("properties", {})
    return result


def _strip(node: Any, keywords: frozenset[str]) -> Any:
    if isinstance(node, list):
        return [_strip(item, keywords) for item in node]
    if not isinstance(node, Mapping):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in keywords:
            continue
        if key == "properties" and isinstance(value, Mapping):
            out[key] = {name: _strip(sub, keywords) for name, sub in value.items()}
        else:
            out[key] = _strip(value, keywords)
    return out


def _nullable(schema: Any) -> Any:
    if not isinstance(schema, dict):
        return schema
    kind = schema.get("type")
    if isinstance(kind, str):
        if kind != "null":
            schema = {**schema, "type": [kind, "null"]}
            if isinstance(schema.get("enum"), list) and None not in schema["enum"]:
                schema["enum"] = [*schema["enum"], None]
        return schema
    if isinstance(kind, list):
        return schema if "null" in kind else {**schema, "type": [*kind, "null"]}
    return {"anyOf": [schema, {"type": "null"}]}


def to_openai_strict(node: Any) -> Any:
    """OpenAI strict function schemas: every object closed with all properties required;
    properties that were optional accept null instead (tools treat null as absent)."""
    if isinstance(node, list):
        return [to_openai_strict(item) for item in node]
    if not isinstance(node, Mapping):
        return node
    out = {key: to_openai_strict(value) for key, value in node.items() if key != "properties"}
    properties = node.get("properties")
    if node.get("type") == "object" or isinstance(properties, Mapping):
        props = properties if isinstance(properties, Mapping) else {}
        required = set(node.get("required") or [])
        out["properties"] = {
            name: to_openai_strict(sub) if name in required else _nullable(to_openai_strict(sub))
            for name, sub in props.items()
        }
        out["required"] = list(props)
        out["additionalProperties"] = False
    return out


_CLEAN_CACHE_SIZE = 512
_clean_cache: dict[tuple[bytes, str | None, str | None, bool], dict[str, Any]] = {}


def clean_tool_schema(
    schema: Mapping[str, Any],
    *,
    api: str | None = None,
    provider: str | None = None,
    strict: bool = False,
) -> dict[str, Any]:
    """The schema to send for a tool to this provider; the input is never mutated.

    Results are cached by content (tools are rebuilt for every run with the same schemas); the
    returned dict is shared, so treat it as read-only.
    """
    try:
        key = (orjson.dumps(schema, option=orjson.OPT_SORT_KEYS), api, provider, strict)
    except TypeError:
        return _clean_tool_schema(schema, api=api, provider=provider, strict=strict)
    cached = _clean_cache.get(key)
    if cached is None:
        cleaned = _clean_tool_schema(schema, api=api, provider=provider, strict=strict)
        cached = remember(_clean_cache, key, cleaned, _CLEAN_CACHE_SIZE)
    return cached


def _clean_tool_schema(
    schema: Mapping[str, Any],
    *,
    api: str | None,
    provider: str | None,
    strict: bool,
) -> dict[str, Any]:
    family = provider_family(api, provider)
    result = flatten_top_level(schema)
    if family == "gemini":
        cleaned = clean_schema_for_gemini(result)
        result = dict(cleaned) if isinstance(cleaned, Mapping) else result
        result["type"] = "object"
    elif family == "xai":
        result = _strip(result, XAI_UNSUPPORTED_KEYWORDS)
    elif family == "openai" and strict:
        result = to_openai_strict(_strip(result, OPENAI_STRICT_UNSUPPORTED_KEYWORDS))
    return result
