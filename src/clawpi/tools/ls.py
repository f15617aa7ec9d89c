"""The `ls` tool: one directory, dotfiles included, sorted case-insensitively."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from clawpi.agent.tool import AgentTool, ToolResult, ToolUpdateCallback
from clawpi.ai.abort import AbortSignal
from clawpi.tools.errors import ToolError
from clawpi.tools.grep import finish_output
from clawpi.tools.params import as_mapping, get_int, get_str
from clawpi.tools.paths import Workspace
from clawpi.tools.truncate import DEFAULT_MAX_BYTES

DEFAULT_LS_LIMIT = 500

LS_DESCRIPTION = (
    "List directory contents. Returns entries sorted alphabetically, with '/' suffix for "
    "directories. Includes dotfiles. Output is truncated to "
    f"{DEFAULT_LS_LIMIT} entries or {DEFAULT_MAX_BYTES // 1024}KB (whichever is hit first)."
)

LS_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "Directory to list (default: current directory)"},
        "limit": {
            "type": "number",
            "description": f"Maximum number of entries to return (default: {DEFAULT_LS_LIMIT})",
        },
    },
}


def ls_sync(workspace: Workspace, raw: str, limit: int) -> ToolResult:
    real = workspace.resolve(raw)
    if not os.path.exists(real):
        raise ToolError(f"Path not found: {raw}")
    if not os.path.isdir(real):
        raise ToolError(f"Not a directory: {raw}")
    try:
        with os.scandir(real) as iterator:
            entries = [(e.name, e.is_dir()) for e in iterator]
    except OSError as exc:
        raise ToolError(f"Cannot read directory: {raw}: {exc.strerror}") from None
    if not entries:
        return ToolResult.text("(empty directory)")
    entries.sort(key=lambda item: item[0].lower())
    shown = [name + "/" if is_dir else name for name, is_dir in entries[:limit]]
    notices = []
    if len(entries) > limit:
        notices.append(f"{limit} entries limit reached. Use limit={limit * 2} for more")
    text, details = finish_output(shown, notices)
    if len(entries) > limit:
        details = {**(details or {}), "entryLimitReached": limit}
    return ToolResult.text(text, details=details)


def create_ls_tool(workspace: Workspace) -> AgentTool:
    async def execute(
        tool_call_id: str,
        params: Any,
        signal: AbortSignal | None = None,
        on_update: ToolUpdateCallback | None = None,
    ) -> ToolResult:
        args = as_mapping(params, "ls")
        raw = get_str(args, "path", "ls") or "."
        limit = max(1, get_int(args, "limit", "ls") or DEFAULT_LS_LIMIT)
        if signal is not None:
            signal.throw_if_aborted()
        return await asyncio.to_thread(ls_sync, workspace, raw, limit)

    return AgentTool(
        name="ls", label="ls", description=LS_DESCRIPTION,
        parameters=LS_PARAMETERS, execute=execute,
    )  # fmt: skip
