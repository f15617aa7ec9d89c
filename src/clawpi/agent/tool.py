"""`AgentTool` and `ToolResult`: what a tool is to the agent loop.

A tool signals failure by raising; the loop turns the exception's message into an error result
the model can read and act on. Parameters are a JSON Schema, or a Python type (a pydantic model,
a dataclass, a TypedDict) from which pydantic generates the schema the model sees; arguments are
coerced and validated before `execute` runs and then arrive as instances of that type.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import orjson
from pydantic import TypeAdapter
from pydantic import ValidationError as PydanticValidationError

from clawpi.agent.fast_schema import INVALID, compile_schema
from clawpi.ai.abort import AbortSignal
from clawpi.ai.bounded import remember
from clawpi.ai.types import Tool, UserContent
from clawpi.ai.validation import (
    ToolArgumentsError,
    ToolArgumentValidator,
    format_validation_failure,
)


@dataclasses.dataclass(slots=True)
class ToolResult:
    """What a tool returns: content for the model, details for UIs and the session file."""

    content: list[UserContent]
    details: Any = None

    @classmethod
    def text(cls, text: str, details: Any = None) -> ToolResult:
        return cls(content=[{"type": "text", "text": text}], details=details)

    def to_dict(self) -> dict[str, Any]:
        """The wire form pi uses in events: `{"content": [...], "details": ...}`."""
        return {"content": self.content, "details": self.details}


ToolUpdateCallback = Callable[[ToolResult], None]


class ToolExecute(Protocol):
    def __call__(
        self,
        tool_call_id: str,
        params: Any,
        signal: AbortSignal | None = None,
        on_update: ToolUpdateCallback | None = None,
    ) -> Awaitable[ToolResult]: ...


@dataclasses.dataclass(kw_only=True)
class AgentTool:
    """A tool the model may call.

    `parameters` is a JSON Schema object, or a pydantic model class (or any type pydantic can
    describe) from which the schema is generated; `execute` then receives validated instances of
    it as `params`.
    """

    name: str
    description: str
    parameters: dict[str, Any] | type[Any]
    execute: ToolExecute
    label: str = ""
    _compiled: _CompiledParameters | None = dataclasses.field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if not self.label:
            self.label = self.name

    @property
    def schema(self) -> dict[str, Any]:
        """The JSON Schema of the parameters, as the model sees it."""
        return self._compile().schema

    @property
    def definition(self) -> Tool:
        """The tool as sent to the model: name, description and parameter schema."""
        return self._compile().definition(self)

    def validate_arguments(self, arguments: Mapping[str, Any] | None) -> Any:
        """Coerced, validated parameters for `execute`; `ToolArgumentsError` says what is wrong.

        The arguments are copied, so a tool that mutates its parameters never changes the
        assistant message they came from.
        """
        return self._compile().validate(self.name, {} if arguments is None else arguments)

    def _compile(self) -> _CompiledParameters:
        compiled = self._compiled
        if compiled is None or compiled.source is not self.parameters:
            compiled = self._compiled = _CompiledParameters(self.parameters)
        return compiled


_COMPILED_CACHE_SIZE = 512
_compiled_cache: dict[bytes, Any] = {}


def _compiled_by_content(schema: dict[str, Any]) -> Any:
    """Compile each distinct schema once per process: tools are rebuilt per run with equal
    schemas, and compiling costs far more than serialising the schema to look it up."""
    try:
        key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # not plain JSON data: compile it as it is
        return compile_schema(schema)
    found = _compiled_cache.get(key, _MISSING)
    if found is _MISSING:
        found = remember(_compiled_cache, key, compile_schema(schema), _COMPILED_CACHE_SIZE)
    return found


_MISSING = object()


class _CompiledParameters:
    """Schema, validator and (for typed parameters) pydantic adapter, built once per tool."""

    __slots__ = ("_adapter", "_definition", "_fast", "_validator", "schema", "source")

    def __init__(self, source: dict[str, Any] | type[Any]) -> None:
        self.source = source
        self._adapter: TypeAdapter[Any] | None = None
        if isinstance(source, Mapping):
            self.schema: dict[str, Any] = source
        else:
            self._adapter = TypeAdapter(source)
            self.schema = self._adapter.json_schema()
        self._fast = _compiled_by_content(self.schema)
        self._validator: ToolArgumentValidator | None = None
        self._definition: tuple[str, str, Tool] | None = None

    def definition(self, tool: AgentTool) -> Tool:
        cached = self._definition
        if cached is None or cached[0] != tool.name or cached[1] != tool.description:
            value: Tool = {
                "name": tool.name,
                "description": tool.description,
                "parameters": self.schema,
            }
            cached = self._definition = (tool.name, tool.description, value)
        return cached[2]

    def validate(self, tool_name: str, arguments: Mapping[str, Any]) -> Any:
        validator = self._validator
        if validator is None:  # also checks the schema itself, so the fast path waits for it
            try:
                validator = self._validator = ToolArgumentValidator(self.schema)
            except ToolArgumentsError as exc:
                raise ToolArgumentsError(f'Tool "{tool_name}": {exc}') from exc
        fast = self._fast
        params = fast(arguments) if fast is not None else INVALID
        if params is INVALID:
            params = validator.validate(tool_name, arguments)
        adapter = self._adapter
        if adapter is None:
            return params
        try:
            return adapter.validate_python(params)
        except PydanticValidationError as exc:
            lines = [
                f"{'/'.join(str(part) for part in error['loc']) or 'root'}: {error['msg']}"
                for error in exc.errors()
            ]
            raise ToolArgumentsError(
                format_validation_failure(tool_name, lines, arguments)
            ) from exc
