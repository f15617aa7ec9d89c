"""Schema cleaning per provider: top-level flattening for all, Gemini's keyword subset, OpenAI
strict mode, xAI's rejected keywords, and the assembled tools' schemas per model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema

from clawpi.ai.models import Model
from clawpi.tools import clean_tool_schema, create_coding_tools

UNION: dict[str, Any] = {
    "anyOf": [
        {
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["add"]},
                "name": {"type": "string"},
            },
            "required": ["action", "name"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["remove"]},
                "id": {"type": "number"},
            },
            "required": ["action", "id"],
            "additionalProperties": False,
        },
    ]
}

RICH: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "$defs": {"Mode": {"type": "string", "enum": ["fast", "slow"]}},
    "properties": {
        "pattern": {"type": "string", "minLength": 1, "pattern": "^x", "description": "kept"},
        "mode": {"$ref": "#/$defs/Mode"},
        "kind": {"const": "file"},
        "count": {"type": ["integer", "null"], "minimum": 0, "default": 3},
        "choice": {"anyOf": [{"const": "a", "type": "string"}, {"const": "b", "type": "string"}]},
        "tags": {"type": "array", "items": {"type": "string", "format": "email"}, "maxItems": 3},
    },
    "required": ["pattern"],
    "additionalProperties": False,
}

GEMINI_FORBIDDEN = {
    "$schema", "$ref", "$defs", "additionalProperties", "minLength", "pattern", "minimum",
    "format", "maxItems", "const",
}  # fmt: skip


def keys_of(node: Any, *, inside_properties: bool = False) -> set[str]:
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if not inside_properties:
                found.add(key)
            found |= keys_of(
                value, inside_properties=(key == "properties" and not inside_properties)
            )
    elif isinstance(node, list):
        for item in node:
            found |= keys_of(item)
    return found


def test_top_level_union_flattens_to_one_object_for_every_provider() -> None:
    for provider in ("anthropic", "openai", "google", "xai", None):
        flat = clean_tool_schema(UNION, provider=provider)
        assert flat["type"] == "object" and "anyOf" not in flat
        assert set(flat["properties"]) == {"action", "name", "id"}
        assert flat["required"] == ["action"]  # the intersection
        if provider != "google":
            assert flat["properties"]["action"]["enum"] == ["add", "remove"]
            assert flat["additionalProperties"] is False  # every variant was closed


def test_gemini_schema_has_no_forbidden_keywords() -> None:
    cleaned = clean_tool_schema(RICH, api="google-generative-ai", provider="google")
    assert not (keys_of(cleaned) & GEMINI_FORBIDDEN)
    props = cleaned["properties"]
    assert props["mode"] == {"type": "string", "enum": ["fast", "slow"]}  # $ref inlined
    assert props["kind"]["enum"] == ["file"]  # const -> enum
    assert props["count"]["type"] == "integer"  # null dropped
    assert props["choice"] == {"type": "string", "enum": ["a", "b"]}  # literal union -> enum
    assert props["pattern"]["description"] == "kept"
    assert RICH["properties"]["mode"] == {"$ref": "#/$defs/Mode"}  # input untouched


def test_openai_strict_closes_objects_and_makes_optionals_nullable() -> None:
    strict = clean_tool_schema(RICH, api="openai-responses", provider="openai", strict=True)
    assert strict["additionalProperties"] is False
    assert strict["required"] == list(RICH["properties"])
    assert strict["properties"]["pattern"]["type"] == "string"  # was required: not nullable
    assert "null" in strict["properties"]["tags"]["type"]
    assert "minLength" not in strict["properties"]["pattern"]
    # A call that omits an optional by sending null still validates.
    jsonschema.validate(
        {"pattern": "x", "mode": None, "kind": None, "count": None, "choice": None, "tags": None},
        strict,
    )


def test_openai_non_strict_keeps_constraints() -> None:
    loose = clean_tool_schema(RICH, api="openai-completions", provider="openai")
    assert loose["properties"]["pattern"]["minLength"] == 1
    assert loose["required"] == ["pattern"]


def test_xai_drops_keywords_it_rejects() -> None:
    cleaned = clean_tool_schema(RICH, provider="xai", api="openai-completions")
    assert "minLength" not in cleaned["properties"]["pattern"]
    assert "maxItems" not in cleaned["properties"]["tags"]
    assert cleaned["properties"]["pattern"]["pattern"] == "^x"


def test_anthropic_keeps_the_schema_but_requires_an_object() -> None:
    cleaned = clean_tool_schema(RICH, api="anthropic-messages", provider="anthropic")
    assert cleaned["properties"]["mode"] == {"$ref": "#/$defs/Mode"}
    assert clean_tool_schema({"properties": {}}, provider="anthropic")["type"] == "object"


def _model(provider: str, api: str) -> Model:
    return Model(id="m", name="m", api=api, provider=provider, base_url="http://127.0.0.1")


def test_assembled_tools_are_clean_for_gemini(workspace: Path) -> None:
    tools = create_coding_tools(workspace, model=_model("google", "google-generative-ai"))
    text = json.dumps([t.parameters for t in tools])
    assert "additionalProperties" not in text
    assert all(t.parameters["type"] == "object" for t in tools)


def test_assembled_tools_in_openai_strict_mode_validate_real_calls(workspace: Path) -> None:
    tools = {
        t.name: t
        for t in create_coding_tools(
            workspace, model=_model("openai", "openai-responses"), strict_schemas=True
        )
    }
    read = tools["read"].parameters
    assert read["additionalProperties"] is False
    assert set(read["required"]) == {"path", "offset", "limit", "file_path"}
    jsonschema.validate({"path": "a.txt", "offset": None, "limit": None, "file_path": None}, read)
