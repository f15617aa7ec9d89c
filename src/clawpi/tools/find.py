"""The `find` tool: files by glob, .gitignore respected, pi's caps and notices."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

from clawpi.agent.tool import AgentTool, ToolResult, ToolUpdateCallback
from clawpi.ai.abort import AbortSignal
from clawpi.tools.errors import ToolError
from clawpi.tools.globs import compile_glob, walk
from clawpi.tools.grep import finish_output
from clawpi.tools.params import as_mapping, get_int, get_str, require_str
from clawpi.tools.paths import Workspace
from clawpi.tools.truncate import DEFAULT_MAX_BYTES

DEFAULT_FIND_LIMIT = 1000

FIND_DESCRIPTION = (
    "Search for files by glob pattern. Returns matching file paths relative to the search "
    "directory. Respects .gitignore. Output is truncated to "
    f"{DEFAULT_FIND_LIMIT} results or {DEFAULT_MAX_BYTES // 1024}KB (whichever is hit first)."
)

FIND_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pattern": {
            "type": "string",
            "description": "Glob pattern to match files, e.g. '*.ts', '**/*.json', or 'src/**/*.spec.ts'",
        },
        "path": {
            "type": "string",
            "description": "Directory to search in (default: current directory)",
        },
        "limit": {
            "type": "number",
            "description": f"Maximum number of results (default: {DEFAULT_FIND_LIMIT})",
        },
    },
    "required": ["pattern"],
}


def find_sync(
    workspace: Workspace, pattern: str, raw: str, limit: int, check: Callable[[], None]
) -> ToolResult:
    root = workspace.resolve(raw)
    if not os.path.isdir(root):
        raise ToolError(
            f"Path not found: {raw}" if not os.path.exists(root) else f"Not a directory: {raw}"
        )
    matcher = compile_glob(pattern)
    results: list[str] = []
    for _, rel, is_dir in walk(root, check=check):
        if matcher(rel):
            results.append(rel + "/" if is_dir else rel)
            if len(results) >= limit:
                break
    if not results:
        return ToolResult.text("No files found matching pattern")
    results.sort()
    notices = []
    if len(results) >= limit:
        notices.append(
            f"{limit} results limit reached. Use limit={limit * 2} for more, or refine pattern"
        )
    text, details = finish_output(results, notices)
    if len(results) >= limit:
        details = {**(details or {}), "resultLimitReached": limit}
    return ToolResult.text(text, details=details)


def create_find_tool(workspace: Workspace) -> AgentTool:
    async def execute(
        tool_call_id: str,
        params: Any,
        signal: AbortSignal | None = None,
        on_update: ToolUpdateCallback | None = None,
    ) -> ToolResult:
        args = as_mapping(params, "find")
        pattern = require_str(args, "pattern", "find")
        raw = get_str(args, "path", "find") or "."
        limit = max(1, get_int(args, "limit", "find") or DEFAULT_FIND_LIMIT)
        check = signal.throw_if_aborted if signal is not None else (lambda: None)
        return await asyncio.to_thread(find_sync, workspace, pattern, raw, limit, check)

    return AgentTool(
        name="find", label="find", description=FIND_DESCRIPTION,
        parameters=FIND_PARAMETERS, execute=execute,
    )  # fmt: skip
