"""Wrappers every assembled tool gets: the run's abort signal, Claude-style parameter aliases,
and the provider's schema dialect."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from clawpi.agent.tool import AgentTool, ToolResult, ToolUpdateCallback
from clawpi.ai.abort import AbortSignal, any_signal
from clawpi.errors import AbortedError
from clawpi.tools.params import PARAM_ALIASES
from clawpi.tools.schema import clean_tool_schema


def with_abort(tool: AgentTool, run_signal: AbortSignal | None) -> AgentTool:
    """Refuse at once when the run is already aborted; otherwise hand the tool a signal that
    fires on the run's abort or the call's own."""
    if run_signal is None:
        return tool
    inner = tool.execute

    async def execute(
        tool_call_id: str,
        params: Any,
        signal: AbortSignal | None = None,
        on_update: ToolUpdateCallback | None = None,
    ) -> ToolResult:
        if run_signal.aborted or (signal is not None and signal.aborted):
            raise AbortedError(f"{tool.name}: operation aborted before it started")
        combined = (
            run_signal if signal is None or signal is run_signal else any_signal(run_signal, signal)
        )
        return await inner(tool_call_id, params, combined, on_update)

    return dataclasses.replace(tool, execute=execute)


def with_param_aliases(tool: AgentTool) -> AgentTool:
    """Also accept `file_path`, `old_string`, `new_string` in the schema; pi's names stay, and
    a name and its alias satisfy the same requirement."""
    schema = tool.parameters
    if not isinstance(schema, dict):
        return tool
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return tool
    patched = copy.deepcopy(schema)
    props = patched["properties"]
    required = list(patched.get("required") or [])
    added = False
    for alias, name in PARAM_ALIASES.items():
        if name in props and alias not in props:
            props[alias] = {**props[name], "description": f"Alias of {name}"}
            added = True
            if name in required:
                required.remove(name)
    if not added:
        return tool
    if required:
        patched["required"] = required
    else:
        patched.pop("required", None)
    return dataclasses.replace(tool, parameters=patched)


def with_clean_schema(
    tool: AgentTool, *, api: str | None, provider: str | None, strict: bool = False
) -> AgentTool:
    if not isinstance(tool.parameters, dict):
        return tool
    cleaned = clean_tool_schema(tool.parameters, api=api, provider=provider, strict=strict)
    return dataclasses.replace(tool, parameters=cleaned)
