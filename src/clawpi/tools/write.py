"""The `write` tool: create or overwrite a file, creating parent directories."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from clawpi.agent.tool import AgentTool, ToolResult, ToolUpdateCallback
from clawpi.ai.abort import AbortSignal
from clawpi.tools.params import as_mapping, normalize_aliases, require_str
from clawpi.tools.paths import Workspace

WRITE_DESCRIPTION = (
    "Write content to a file. Creates the file if it doesn't exist, overwrites if it does. "
    "Automatically creates parent directories."
)

WRITE_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "description": "Path to the file to write (relative or absolute)",
        },
        "content": {"type": "string", "description": "Content to write to the file"},
    },
    "required": ["path", "content"],
}


def js_length(text: str) -> int:
    """String length as JavaScript counts it (UTF-16 units), which pi reports."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def write_file_bytes(workspace: Workspace, raw: str, data: bytes) -> str:
    """Write `data` to the confined path `raw`; returns the real path written."""
    real = workspace.resolve(raw, for_write=True)
    # No O_TRUNC: the file is truncated only after it is known to be a safe target.
    fd = workspace.open_file(real, raw, os.O_WRONLY | os.O_CREAT, create_parents=True)
    with os.fdopen(fd, "wb") as handle:
        handle.truncate(0)
        handle.write(data)
    return real


def _write_sync(workspace: Workspace, raw: str, content: str) -> ToolResult:
    write_file_bytes(workspace, raw, content.encode("utf-8", "surrogateescape"))
    return ToolResult.text(f"Successfully wrote {js_length(content)} bytes to {raw}")


def create_write_tool(workspace: Workspace) -> AgentTool:
    async def execute(
        tool_call_id: str,
        params: Any,
        signal: AbortSignal | None = None,
        on_update: ToolUpdateCallback | None = None,
    ) -> ToolResult:
        args = normalize_aliases(as_mapping(params, "write"))
        raw = require_str(args, "path", "write")
        content = require_str(args, "content", "write")
        if signal is not None:
            signal.throw_if_aborted()
        return await asyncio.to_thread(_write_sync, workspace, raw, content)

    return AgentTool(
        name="write", label="write", description=WRITE_DESCRIPTION,
        parameters=WRITE_PARAMETERS, execute=execute,
    )  # fmt: skip
