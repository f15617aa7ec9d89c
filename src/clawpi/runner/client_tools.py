"""Client tools: OpenAI-style function definitions that the caller executes, not clawpi.

When the model calls one, the run stops with stop reason "tool_calls" and the pending calls are
returned to the caller (who runs them and sends the results with the next message).
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from clawpi.agent import AgentTool, ToolResult
from clawpi.ai.abort import AbortSignal
from clawpi.errors import ConfigError

CLIENT_TOOL_PENDING_TEXT = (
    "Tool call handed to the client; its result arrives with the next message."
)


@dataclasses.dataclass(frozen=True, slots=True)
class PendingToolCall:
    id: str
    """9 hex characters, as OpenClaw hands them to clients."""
    name: str
    arguments: str
    """The arguments as a JSON string (OpenAI's function-call convention)."""

    def to_dict(self) -> dict[str, str]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


def _definition(raw: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    function = raw.get("function") if raw.get("type") == "function" else raw
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise ConfigError(
            "client tool definitions must look like "
            '{"type": "function", "function": {"name", "description", "parameters"}}'
        )
    parameters = function.get("parameters")
    if not isinstance(parameters, Mapping):
        parameters = {"type": "object", "properties": {}}
    return str(function["name"]), str(function.get("description") or ""), dict(parameters)


def make_client_tools(
    definitions: Sequence[Mapping[str, Any]], on_call: Callable[[PendingToolCall], None]
) -> list[AgentTool]:
    """AgentTools that never execute: each records the call and asks the run to stop."""
    tools = []
    for raw in definitions:
        name, description, parameters = _definition(raw)

        async def execute(
            tool_call_id: str,
            params: Any,
            signal: AbortSignal | None = None,
            on_update: Any = None,
            _name: str = name,
        ) -> ToolResult:
            call = PendingToolCall(
                id=secrets.token_hex(5)[:9],
                name=_name,
                arguments=orjson.dumps(params if params is not None else {}).decode(),
            )
            on_call(call)
            return ToolResult.text(CLIENT_TOOL_PENDING_TEXT, {"clientTool": True, "id": call.id})

        tools.append(
            AgentTool(name=name, description=description, parameters=parameters, execute=execute)
        )
    return tools
