"""Tool schemas cleaned for Gemini: rejected keywords go, meaning stays, input is untouched."""

from __future__ import annotations

import copy
from typing import Any

from clawpi.ai.providers.google_schema import (
    GEMINI_UNSUPPORTED_SCHEMA_KEYWORDS,
    clean_schema_for_gemini,
)


def keywords(node: Any) -> set[str]:
    """Every schema keyword used anywhere in `node` (property names excluded)."""
    found: set[str] = set()
    if isinstance(node, list):
        for item in node:
            found |= keywords(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            found.add(key)
            if key == "properties":
                for sub in value.values():
                    found |= keywords(sub)
            else:
                found |= keywords(value)
    return found


def test_rejected_keywords_are_removed_at_every_depth() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "items": {
                "type": "array",
                "minItems": 1,
                "uniqueItems": True,
                "items": {
                    "type": "object",
                    "patternProperties": {"^x": {"type": "string"}},
                    "properties": {"n": {"type": "number", "minimum": 0, "exclusiveMaximum": 9}},
                },
            },
            "email": {"type": "string", "format": "email", "pattern": ".+@.+", "examples": ["a@b"]},
        },
    }
    cleaned = clean_schema_for_gemini(schema)
    assert not keywords(cleaned) & GEMINI_UNSUPPORTED_SCHEMA_KEYWORDS
    assert cleaned == {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {"type": "object", "properties": {"n": {"type": "number"}}},
            },
            "email": {"type": "string"},
        },
    }


def test_property_names_that_look_like_keywords_are_kept() -> None:
    schema = {
        "type": "object",
        "properties": {"format": {"type": "string"}, "pattern": {"type": "string"}},
        "required": ["format", "pattern"],
    }
    assert clean_schema_for_gemini(schema) == schema


def test_local_refs_are_inlined_keeping_the_referring_description() -> None:
    schema = {
        "type": "object",
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}}},
        "definitions": {"Name": {"type": "string", "maxLength": 10}},
        "properties": {
            "at": {"$ref": "#/$defs/Point", "description": "where"},
            "name": {"$ref": "#/definitions/Name"},
            "missing": {"$ref": "#/$defs/Nope", "description": "unknown"},
        },
    }
    assert clean_schema_for_gemini(schema) == {
        "type": "object",
        "properties": {
            "at": {
                "type": "object",
                "properties": {"x": {"type": "number"}},
                "description": "where",
            },
            "name": {"type": "string"},
            "missing": {"description": "unknown"},
        },
    }


def test_recursive_refs_terminate() -> None:
    schema = {
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"child": {"$ref": "#/$defs/Node"}, "v": {"type": "string"}},
            }
        },
        "$ref": "#/$defs/Node",
    }
    cleaned = clean_schema_for_gemini(schema)
    assert cleaned["properties"]["v"] == {"type": "string"}
    assert cleaned["properties"]["child"] == {}  # the cycle is cut: "any value"


def test_literal_unions_become_enums_and_const_becomes_enum() -> None:
    schema = {
        "type": "object",
        "properties": {
            "mode": {
                "description": "how",
                "anyOf": [
                    {"const": "fast", "type": "string"},
                    {"const": "slow", "type": "string"},
                ],
            },
            "fixed": {"const": 3, "type": "integer"},
            "mixed": {"oneOf": [{"const": "a", "type": "string"}, {"const": 1, "type": "integer"}]},
        },
    }
    cleaned = clean_schema_for_gemini(schema)["properties"]
    assert cleaned["mode"] == {"type": "string", "enum": ["fast", "slow"], "description": "how"}
    assert cleaned["fixed"] == {"enum": [3], "type": "integer"}
    assert cleaned["mixed"] == {
        "oneOf": [{"enum": ["a"], "type": "string"}, {"enum": [1], "type": "integer"}]
    }


def test_nullable_variants_collapse_to_the_non_null_schema() -> None:
    schema = {
        "type": "object",
        "properties": {
            "limit": {
                "anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}],
                "title": "Limit",
            },
            "tags": {"type": ["array", "null"], "items": {"type": "string"}},
            "either": {"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "null"}]},
        },
    }
    cleaned = clean_schema_for_gemini(schema)["properties"]
    assert cleaned["limit"] == {"type": "integer", "title": "Limit"}
    assert cleaned["tags"] == {"type": "array", "items": {"type": "string"}}
    assert cleaned["either"] == {"anyOf": [{"type": "string"}, {"type": "number"}]}


def test_input_is_not_mutated_and_non_objects_pass_through() -> None:
    schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"a": {"anyOf": [{"const": "x", "type": "string"}]}},
    }
    before = copy.deepcopy(schema)
    clean_schema_for_gemini(schema)
    assert schema == before
    assert clean_schema_for_gemini(True) is True
    assert clean_schema_for_gemini(None) is None
