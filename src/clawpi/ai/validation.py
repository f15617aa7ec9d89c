"""Tool-argument validation with AJV-style type coercion and pi's error text.

Models often send `"5"` for an integer or `"true"` for a boolean. Like pi (AJV with
`coerceTypes: true`), such scalars are coerced to the schema's type before validation; arrays and
objects are never invented from scalars. A failure reads exactly like pi's, so the model sees the
same guidance either way:

    Validation failed for tool "<name>":
      - <path>: <message>

    Received arguments:
    <JSON, 2-space indent>
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from clawpi.ai.bounded import remember
from clawpi.ai.types import Tool, ToolCall
from clawpi.errors import ClawpiError

if TYPE_CHECKING:
    from jsonschema import ValidationError
    from jsonschema.protocols import Validator

_SCALARS = ("string", "number", "integer", "boolean", "null")
_CACHE_LIMIT = 256


class ToolArgumentsError(ClawpiError):
    """A tool call's arguments do not match the tool's schema; the message is for the model."""


class ToolNotFoundError(ClawpiError):
    """The model called a tool that is not available."""


class ToolArgumentValidator:
    """One tool schema compiled once: coerces, validates and explains, call after call."""

    __slots__ = ("_validator", "schema")

    def __init__(self, schema: Mapping[str, Any]) -> None:
        # imported at the first tool call rather than at start-up, where it would cost ~90 ms
        from jsonschema.exceptions import SchemaError
        from jsonschema.validators import Draft202012Validator, validator_for

        self.schema = schema
        cls = validator_for(schema, default=Draft202012Validator)
        try:
            cls.check_schema(dict(schema))
        except SchemaError as exc:
            raise ToolArgumentsError(f"Invalid parameters schema: {exc.message}") from exc
        self._validator: Validator = cls(schema, format_checker=cls.FORMAT_CHECKER)

    def validate(self, tool_name: str, arguments: Any) -> Any:
        """A coerced copy of `arguments`; raises `ToolArgumentsError` with pi's text on failure."""
        coerced = _coerce(arguments, self.schema, self.schema, 0)
        validator = self._validator
        if validator.is_valid(coerced):
            return coerced
        lines = _error_lines(validator.iter_errors(coerced))
        raise ToolArgumentsError(format_validation_failure(tool_name, lines, arguments))


def format_validation_failure(tool_name: str, lines: Sequence[str], arguments: Any) -> str:
    """pi's failure text from `<path>: <message>` lines and the arguments as received."""
    errors = "\n".join(f"  - {line}" for line in lines) or "  - root: Unknown validation error"
    received = json.dumps(arguments, indent=2, ensure_ascii=False, default=str)
    return f'Validation failed for tool "{tool_name}":\n{errors}\n\nReceived arguments:\n{received}'


_compiled: dict[int, tuple[Mapping[str, Any], ToolArgumentValidator]] = {}


def compile_tool_schema(schema: Mapping[str, Any]) -> ToolArgumentValidator:
    """The cached validator for `schema` (keyed by identity; the cache keeps the schema alive)."""
    entry = _compiled.get(id(schema))
    if entry is not None and entry[0] is schema:
        return entry[1]
    validator = ToolArgumentValidator(schema)
    remember(_compiled, id(schema), (schema, validator), _CACHE_LIMIT)
    return validator


def validate_tool_arguments(tool: Tool, tool_call: ToolCall) -> Any:
    """The coerced arguments of `tool_call`, or `ToolArgumentsError` with pi's message."""
    return compile_tool_schema(tool["parameters"]).validate(
        tool_call["name"], tool_call.get("arguments") or {}
    )


def validate_tool_call(tools: Iterable[Tool], tool_call: ToolCall) -> Any:
    """Like `validate_tool_arguments`, after finding the tool by exact name."""
    for tool in tools:
        if tool["name"] == tool_call["name"]:
            return validate_tool_arguments(tool, tool_call)
    raise ToolNotFoundError(f'Tool "{tool_call["name"]}" not found')


# -- coercion ---------------------------------------------------------------------------------


def matches_type(value: Any, kind: str) -> bool:
    """Whether `value` is of JSON Schema type `kind` (true is not an integer)."""
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    return True


_NO = object()


def _numeric_string(text: str, integer: bool) -> Any:
    if not text.strip():
        return _NO
    try:
        number = float(text)
    except ValueError:
        return _NO
    if not math.isfinite(number):
        return _NO
    if integer:
        return int(number) if number.is_integer() else _NO
    try:
        as_int = int(text)
    except ValueError:
        return number
    return as_int


def _coerce_scalar(value: Any, kind: str) -> Any:
    """AJV's coercion table; `_NO` when `value` cannot become `kind`."""
    if kind == "string":
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int | float):
            if isinstance(value, float) and value.is_integer():
                return str(int(value))
            return str(value)
        if value is None:
            return ""
    elif kind in ("number", "integer"):
        if isinstance(value, bool):
            return int(value)
        if value is None:
            return 0
        if isinstance(value, str):
            return _numeric_string(value, kind == "integer")
    elif kind == "boolean":
        if value == "true" or (value == 1 and not isinstance(value, str)):
            return True
        if value == "false" or value is None or (value == 0 and not isinstance(value, str)):
            return False
    elif kind == "null" and (
        value == "" or value is False or (value == 0 and not isinstance(value, bool | str))
    ):
        return None
    return _NO


def coerce_type(value: Any, types: Any) -> Any:
    """`value` as the first of `types` it already is or can be coerced to, else unchanged."""
    kinds: Sequence[Any] = types if isinstance(types, list) else (types,)
    for kind in kinds:
        if matches_type(value, kind):
            if kind == "integer" and isinstance(value, float):
                return int(value)
            return value
    for kind in kinds:
        if kind in _SCALARS and not isinstance(value, dict | list):
            coerced = _coerce_scalar(value, kind)
            if coerced is not _NO:
                return coerced
    return value


def _resolve(root: Mapping[str, Any], ref: str) -> Any:
    node: Any = root
    for part in ref[2:].split("/") if ref.startswith("#/") else ():
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _branch_type(branch: Any, root: Mapping[str, Any]) -> Any:
    """The `type` a branch declares, looking through a local `$ref`; None when untyped."""
    if not isinstance(branch, Mapping):
        return None
    if "type" in branch:
        return branch["type"]
    ref = branch.get("$ref")
    if isinstance(ref, str):
        target = _resolve(root, ref)
        if isinstance(target, Mapping):
            return target.get("type")
    return None


def _branch_for(value: Any, branches: Sequence[Any], root: Mapping[str, Any]) -> Any:
    """The anyOf/oneOf branch coercion should follow: a type match first, else a coercible one."""
    typed = [(b, t) for b in branches if (t := _branch_type(b, root)) is not None]
    for branch, types in typed:
        kinds = types if isinstance(types, list) else [types]
        if any(matches_type(value, kind) for kind in kinds):
            return branch
    if len(typed) < len(branches):
        return None  # an untyped branch (an enum, a const) may accept the value as it is
    for branch, types in typed:
        if coerce_type(value, types) is not value:
            return branch
    return None


def _coerce(value: Any, schema: Any, root: Mapping[str, Any], depth: int) -> Any:
    """A copy of `value` with scalars coerced where `schema` asks for another scalar type."""
    if not isinstance(schema, Mapping) or depth > 64:
        return clone_json(value)
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#"):
        target = _resolve(root, ref)
        if target is not None and target is not schema:
            value = _coerce(value, target, root, depth + 1)
    types = schema.get("type")
    if types is not None:
        value = coerce_type(value, types)
    if isinstance(value, dict):
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        if not isinstance(properties, Mapping):
            properties = {}
        out: dict[str, Any] = {}
        for key, item in value.items():
            sub = properties.get(key)
            if sub is None and isinstance(extra, Mapping):
                sub = extra
            out[key] = _coerce(item, sub, root, depth + 1)
        value = out
    elif isinstance(value, list):
        prefix = schema.get("prefixItems")
        items = schema.get("items")
        if isinstance(items, list):  # draft-07 tuple form
            prefix, items = items, schema.get("additionalItems")
        head = len(prefix) if isinstance(prefix, list) else 0
        value = [
            _coerce(item, prefix[i] if i < head else items, root, depth + 1)  # type: ignore[index]
            for i, item in enumerate(value)
        ]
    for sub in schema.get("allOf") or ():
        value = _coerce(value, sub, root, depth + 1)
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list):
            branch = _branch_for(value, branches, root)
            if branch is not None:
                value = _coerce(value, branch, root, depth + 1)
    return value


def clone_json(value: Any) -> Any:
    """A copy of a JSON value's containers (scalars are immutable)."""
    if isinstance(value, dict):
        return {key: clone_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [clone_json(item) for item in value]
    return value


# -- AJV-style messages -----------------------------------------------------------------------


def _num(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _path(error: ValidationError) -> str:
    return "/".join(str(part) for part in error.absolute_path)


_KEYWORD_RANK = {"type": 0, "required": 1, "additionalProperties": 2}
"""AJV checks a type, then required, then extra properties, then the properties themselves."""


def _rank(error: ValidationError) -> int:
    path = error.relative_schema_path
    return _KEYWORD_RANK.get(str(path[0]), 3) if path else 3


def _error_lines(errors: Iterable[ValidationError]) -> list[str]:
    lines: list[str] = []
    for error in sorted(errors, key=_rank):
        _explain(error, lines)
    return lines


def _explain(error: ValidationError, lines: list[str]) -> None:
    keyword = error.validator
    value: Any = error.validator_value
    path = _path(error)
    instance = error.instance
    if keyword == "required":
        # jsonschema reports one error per missing name; AJV names each one once, in order
        missing = [name for name in value if isinstance(instance, dict) and name not in instance]
        for name in missing:
            line = f"{path or name}: must have required property '{name}'"
            if line not in lines:
                lines.append(line)
                return
        if not missing:
            lines.append(f"{path or 'root'}: {error.message}")
        return
    schema: Any = error.schema
    if keyword == "additionalProperties" and isinstance(instance, dict):
        allowed = schema.get("properties") or {}
        patterns = schema.get("patternProperties") or {}
        extras = [
            key
            for key in instance
            if key not in allowed and not any(re.search(p, key) for p in patterns)
        ]
        line = f"{path or 'root'}: must NOT have additional properties"
        lines.extend(line for _ in extras or [None])
        return
    if keyword in ("anyOf", "oneOf") and error.context:
        for sub in error.context:
            _explain(sub, lines)
    lines.append(f"{path or 'root'}: {_message(keyword, value, error)}")


def _message(keyword: Any, value: Any, error: ValidationError) -> str:
    if keyword == "type":
        return f"must be {','.join(value) if isinstance(value, list) else value}"
    if keyword == "minimum":
        return f"must be >= {_num(value)}"
    if keyword == "maximum":
        return f"must be <= {_num(value)}"
    if keyword == "exclusiveMinimum":
        return f"must be > {_num(value)}"
    if keyword == "exclusiveMaximum":
        return f"must be < {_num(value)}"
    if keyword == "minLength":
        return f"must NOT have fewer than {value} characters"
    if keyword == "maxLength":
        return f"must NOT have more than {value} characters"
    if keyword == "minItems":
        return f"must NOT have fewer than {value} items"
    if keyword == "maxItems":
        return f"must NOT have more than {value} items"
    if keyword == "minProperties":
        return f"must NOT have fewer than {value} properties"
    if keyword == "maxProperties":
        return f"must NOT have more than {value} properties"
    if keyword == "pattern":
        return f'must match pattern "{value}"'
    if keyword == "format":
        return f'must match format "{value}"'
    if keyword == "enum":
        return "must be equal to one of the allowed values"
    if keyword == "const":
        return "must be equal to constant"
    if keyword == "multipleOf":
        return f"must be multiple of {_num(value)}"
    if keyword == "uniqueItems":
        return "must NOT have duplicate items"
    if keyword == "anyOf":
        return "must match a schema in anyOf"
    if keyword == "oneOf":
        return "must match exactly one schema in oneOf"
    if keyword == "not":
        return "must NOT be valid"
    return error.message
