"""The `grep` tool: regex or literal search with context lines, pi's caps and notices."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable
from typing import Any

from clawpi.agent.tool import AgentTool, ToolResult, ToolUpdateCallback
from clawpi.ai.abort import AbortSignal
from clawpi.tools.errors import ToolError, ToolInputError
from clawpi.tools.globs import compile_glob, walk
from clawpi.tools.params import as_mapping, get_bool, get_int, get_str, require_str
from clawpi.tools.paths import Workspace
from clawpi.tools.truncate import DEFAULT_MAX_BYTES, format_size, truncate_head, truncate_line

DEFAULT_GREP_LIMIT = 100
_NO_LINE_CAP = 1 << 62

GREP_DESCRIPTION = (
    "Search file contents for a pattern. Returns matching lines with file paths and line numbers. "
    "Respects .gitignore. Output is truncated to "
    f"{DEFAULT_GREP_LIMIT} matches or {DEFAULT_MAX_BYTES // 1024}KB (whichever is hit first). "
    "Long lines are truncated to 500 chars."
)

GREP_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pattern": {"type": "string", "description": "Search pattern (regex or literal string)"},
        "path": {
            "type": "string",
            "description": "Directory or file to search (default: current directory)",
        },
        "glob": {
            "type": "string",
            "description": "Filter files by glob pattern, e.g. '*.ts' or '**/*.spec.ts'",
        },
        "ignoreCase": {
            "type": "boolean",
            "description": "Case-insensitive search (default: false)",
        },
        "literal": {
            "type": "boolean",
            "description": "Treat pattern as literal string instead of regex (default: false)",
        },
        "context": {
            "type": "number",
            "description": "Number of lines to show before and after each match (default: 0)",
        },
        "limit": {
            "type": "number",
            "description": f"Maximum number of matches to return (default: {DEFAULT_GREP_LIMIT})",
        },
    },
    "required": ["pattern"],
}


def finish_output(
    lines: list[str], notices: list[str], trailing: list[str] | None = None
) -> tuple[str, dict[str, Any] | None]:
    """Head-truncate to 50 KB and append the notices (limit, size, then `trailing`) in one
    trailing bracket."""
    truncation = truncate_head("\n".join(lines), max_lines=_NO_LINE_CAP)
    text = truncation.content
    details: dict[str, Any] = {}
    notices = list(notices)
    if truncation.truncated:
        notices.append(f"{format_size(DEFAULT_MAX_BYTES)} limit reached")
        details["truncation"] = truncation.to_dict()
    notices += trailing or []
    if notices:
        text += f"\n\n[{'. '.join(notices)}]"
    return text, details or None


def _search_file(
    workspace: Workspace,
    path: str,
    display: str,
    regex: re.Pattern[str],
    context: int,
    budget: int,
    out: list[str],
) -> tuple[int, bool]:
    """Append one block per match (pi repeats shared context lines) to `out`; returns
    (matches, whether a line was cut). Unlike pi, a file's final newline does not produce an
    empty context line."""
    try:
        # The workspace's own open: no symlinks, no special files, no hard links when confined.
        with os.fdopen(workspace.open_file(path, display, os.O_RDONLY), "rb") as handle:
            data = handle.read()
    except (OSError, ToolError):
        return 0, False
    if b"\x00" in data[:8192]:
        return 0, False
    text = data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    searchable = lines[:-1] if lines and lines[-1] == "" else lines
    matches = [n for n, line in enumerate(searchable, 1) if regex.search(line)][:budget]
    cut_any = False
    for number in matches:
        for current in range(max(1, number - context), min(len(searchable), number + context) + 1):
            shown, cut = truncate_line(lines[current - 1])
            cut_any |= cut
            sep = ":" if current == number else "-"
            out.append(f"{display}{sep}{current}{sep} {shown}")
    return len(matches), cut_any


def grep_sync(
    workspace: Workspace,
    pattern: str,
    raw_path: str,
    glob: str | None,
    ignore_case: bool,
    literal: bool,
    context: int,
    limit: int,
    check: Callable[[], None],
) -> ToolResult:
    root = workspace.resolve(raw_path)
    if not os.path.exists(root):
        raise ToolError(f"Path not found: {raw_path}")
    flags = re.IGNORECASE if ignore_case else 0
    try:
        regex = re.compile(re.escape(pattern) if literal else pattern, flags)
    except re.error as exc:
        raise ToolInputError(
            f"grep: invalid regex {pattern!r}: {exc}. Pass literal=true to search text."
        ) from None
    matcher = compile_glob(glob) if glob else None
    out: list[str] = []
    total = 0
    cut_any = False
    if os.path.isfile(root):
        files = [(root, os.path.basename(root))]
    else:
        files = [(p, rel) for p, rel, is_dir in walk(root, check=check) if not is_dir]
    for path, display in files:
        if total >= limit:
            break
        if matcher is not None and not matcher(display):
            continue
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        check()
        found, cut = _search_file(workspace, path, display, regex, context, limit - total, out)
        total += found
        cut_any |= cut
    if total == 0:
        return ToolResult.text("No matches found")
    notices = []
    if total >= limit:
        notices.append(
            f"{limit} matches limit reached. Use limit={limit * 2} for more, or refine pattern"
        )
    trailing = (
        ["Some lines truncated to 500 chars. Use read tool to see full lines"] if cut_any else []
    )
    text, details = finish_output(out, notices, trailing)
    extra: dict[str, Any] = {}
    if total >= limit:
        extra["matchLimitReached"] = limit
    if cut_any:
        extra["linesTruncated"] = True
    return ToolResult.text(text, details={**(details or {}), **extra} or None)


def create_grep_tool(workspace: Workspace) -> AgentTool:
    async def execute(
        tool_call_id: str,
        params: Any,
        signal: AbortSignal | None = None,
        on_update: ToolUpdateCallback | None = None,
    ) -> ToolResult:
        args = as_mapping(params, "grep")
        pattern = require_str(args, "pattern", "grep")
        raw = get_str(args, "path", "grep") or "."
        limit = get_int(args, "limit", "grep") or DEFAULT_GREP_LIMIT
        context = get_int(args, "context", "grep", minimum=0) or 0
        check = signal.throw_if_aborted if signal is not None else (lambda: None)
        return await asyncio.to_thread(
            grep_sync, workspace, pattern, raw, get_str(args, "glob", "grep"),
            bool(get_bool(args, "ignoreCase", "grep")), bool(get_bool(args, "literal", "grep")),
            context, max(1, limit), check,
        )  # fmt: skip

    return AgentTool(
        name="grep", label="grep", description=GREP_DESCRIPTION,
        parameters=GREP_PARAMETERS, execute=execute,
    )  # fmt: skip
