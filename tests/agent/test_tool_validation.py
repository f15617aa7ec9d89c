"""Tool parameters: pydantic-typed tools, AJV-style coercion and pi's validation text."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from clawpi.agent import Agent, AgentTool, ToolArgumentsError, ToolResult
from clawpi.ai.validation import ToolNotFoundError, validate_tool_arguments, validate_tool_call
from clawpi.testing import FauxProvider, faux_tool_call
from tests.agent.helpers import texts


class Span(BaseModel):
    start: int
    end: int | None = None


class ReadParams(BaseModel):
    """Read part of a file."""

    path: str = Field(description="File to read")
    limit: int = Field(default=100, ge=1)
    mode: Literal["text", "bytes"] = "text"
    span: Span | None = None


async def test_pydantic_tool_schema_is_what_the_model_sees_and_args_arrive_validated() -> None:
    received: list[Any] = []

    async def read(
        call_id: str, params: ReadParams, signal: Any = None, on_update: Any = None
    ) -> Any:
        received.append(params)
        return ToolResult.text(f"{params.path}:{params.limit}")

    read_tool = AgentTool(
        name="read", description="Read a file", parameters=ReadParams, execute=read
    )
    faux = FauxProvider(
        [faux_tool_call("read", {"path": "a.txt", "limit": "20", "span": {"start": "3"}}), "ok"]
    )
    agent = Agent(model=faux.model, tools=[read_tool])
    await agent.prompt("go")

    sent = faux.requests[0]["tools"][0]
    assert sent == {
        "name": "read",
        "description": "Read a file",
        "parameters": ReadParams.model_json_schema(),
    }
    assert sent["parameters"]["properties"]["limit"]["minimum"] == 1
    assert sent["parameters"]["required"] == ["path"]
    assert received == [ReadParams(path="a.txt", limit=20, span=Span(start=3))]
    assert isinstance(received[0], ReadParams) and received[0].limit == 20
    assert texts(agent.state.messages[2]) == ["a.txt:20"]


async def test_pydantic_tool_with_bad_arguments_gets_pi_style_error_text() -> None:
    async def read(
        call_id: str, params: ReadParams, signal: Any = None, on_update: Any = None
    ) -> Any:
        raise AssertionError("must not run")

    read_tool = AgentTool(name="read", description="Read", parameters=ReadParams, execute=read)
    faux = FauxProvider([faux_tool_call("read", {"limit": 0, "mode": "lines"}), "ok"])
    agent = Agent(model=faux.model, tools=[read_tool])
    await agent.prompt("go")
    result = agent.state.messages[2]
    assert result["isError"] is True
    assert texts(result) == [
        'Validation failed for tool "read":\n'
        "  - path: must have required property 'path'\n"
        "  - limit: must be >= 1\n"
        "  - mode: must be equal to one of the allowed values\n"
        "\n"
        "Received arguments:\n"
        '{\n  "limit": 0,\n  "mode": "lines"\n}'
    ]


def _check(schema: dict[str, Any], arguments: Any) -> Any:
    tool = {"name": "t", "description": "", "parameters": schema}
    call = {"type": "toolCall", "id": "1", "name": "t", "arguments": arguments}
    return validate_tool_arguments(tool, call)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kind", "given", "expected"),
    [
        ("integer", "5", 5),
        ("integer", 5.0, 5),
        ("integer", True, 1),
        ("number", "2.5", 2.5),
        ("number", "7", 7),
        ("boolean", "true", True),
        ("boolean", "false", False),
        ("boolean", 0, False),
        ("string", 42, "42"),
        ("string", False, "false"),
        ("string", None, ""),
        ("null", "", None),
    ],
)
def test_scalars_are_coerced_like_ajv(kind: str, given: Any, expected: Any) -> None:
    schema = {"type": "object", "properties": {"v": {"type": kind}}}
    out = _check(schema, {"v": given})
    assert out == {"v": expected} and type(out["v"]) is type(expected)


@pytest.mark.parametrize(
    ("kind", "given", "message"),
    [
        ("integer", "5.5", "must be integer"),
        ("integer", "abc", "must be integer"),
        ("number", "", "must be number"),
        ("number", "NaN", "must be number"),
        ("boolean", "yes", "must be boolean"),
        ("array", "x", "must be array"),  # a scalar never becomes an array
        ("object", "{}", "must be object"),
    ],
)
def test_values_that_cannot_be_coerced_are_reported(kind: str, given: Any, message: str) -> None:
    schema = {"type": "object", "properties": {"v": {"type": kind}}}
    with pytest.raises(ToolArgumentsError) as info:
        _check(schema, {"v": given})
    assert f"  - v: {message}\n" in str(info.value)


def test_nested_paths_extra_properties_and_the_original_arguments_in_the_message() -> None:
    schema = {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {"type": "object", "properties": {"n": {"type": "integer"}}},
            }
        },
        "additionalProperties": False,
    }
    arguments = {"items": [{"n": "1"}, {"n": "x"}], "extra": "é"}
    with pytest.raises(ToolArgumentsError) as info:
        _check(schema, arguments)
    assert str(info.value) == (
        'Validation failed for tool "t":\n'
        "  - root: must NOT have additional properties\n"
        "  - items/1/n: must be integer\n"
        "\n"
        "Received arguments:\n"
        '{\n  "items": [\n    {\n      "n": "1"\n    },\n    {\n      "n": "x"\n    }\n  ],\n'
        '  "extra": "é"\n}'
    )
    assert arguments["items"][0] == {"n": "1"}  # the caller's arguments are never mutated


def test_coercion_follows_refs_and_optional_branches() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"$ref": "#/$defs/Count"},
            "b": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "c": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "d": {"type": ["integer", "string"]},
        },
        "$defs": {"Count": {"type": "integer"}},
    }
    out = _check(schema, {"a": "4", "b": "9", "c": None, "d": "x"})
    assert out == {"a": 4, "b": 9, "c": None, "d": "x"}


def test_validated_arguments_are_a_copy() -> None:
    schema = {"type": "object", "properties": {"tags": {"type": "array"}}}
    arguments = {"tags": ["a"]}
    out = _check(schema, arguments)
    out["tags"].append("b")
    assert arguments == {"tags": ["a"]}


def test_validate_tool_call_names_the_missing_tool() -> None:
    with pytest.raises(ToolNotFoundError, match='Tool "ghost" not found'):
        validate_tool_call([], {"type": "toolCall", "id": "1", "name": "ghost", "arguments": {}})


def test_an_invalid_schema_is_a_clear_error_at_call_time() -> None:
    async def run(*args: Any) -> ToolResult:
        return ToolResult.text("")

    bad = AgentTool(name="bad", description="", parameters={"type": "nonsense"}, execute=run)
    with pytest.raises(ToolArgumentsError, match='Tool "bad": Invalid parameters schema'):
        bad.validate_arguments({})


def test_schema_and_definition_are_built_once_and_follow_changes() -> None:
    async def run(*args: Any) -> ToolResult:
        return ToolResult.text("")

    t = AgentTool(name="t", description="d", parameters=ReadParams, execute=run)
    assert t.schema is t.schema
    assert t.definition is t.definition
    assert t.label == "t"
    t.description = "changed"
    assert t.definition["description"] == "changed"
    t.parameters = {"type": "object"}
    assert t.schema == {"type": "object"}
    assert t.validate_arguments(None) == {}


# -- the compiled fast path agrees with the general path --------------------------------------

_json_scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.floats(-5, 5, allow_nan=False)
_json_scalars |= st.sampled_from(["", "0", "1", "5", "2.5", "true", "false", "abc", "a", "xyz"])
_json_values = st.recursive(
    _json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["n", "s", "b", "tags", "mode", "x"]), inner, max_size=4)
    ),
    max_leaves=8,
)
_FAST_SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 0, "maximum": 3},
            "s": {"type": "string", "minLength": 1, "maxLength": 2},
            "b": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "number"}, "maxItems": 2},
            "mode": {"enum": ["a", 1, True, None]},
        },
        "required": ["n"],
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {"x": {"type": ["integer", "string"], "exclusiveMinimum": 0}},
        "additionalProperties": {"type": "null"},
    },
    {"type": "object", "properties": {"s": {"const": "5"}, "n": {"type": "number"}}},
]


@settings(max_examples=300, deadline=None)
@given(schema=st.sampled_from(_FAST_SCHEMAS), value=_json_values)
def test_compiled_fast_path_matches_coercion_plus_jsonschema(
    schema: dict[str, Any], value: Any
) -> None:
    from jsonschema import Draft202012Validator

    from clawpi.agent.fast_schema import INVALID, compile_schema
    from clawpi.ai.validation import _coerce

    fast = compile_schema(schema)
    assert fast is not None
    expected = _coerce(value, schema, schema, 0)
    valid = Draft202012Validator(schema).is_valid(expected)
    got = fast(value)
    if valid:
        assert got == expected and repr(got) == repr(expected)
    else:
        assert got is INVALID
