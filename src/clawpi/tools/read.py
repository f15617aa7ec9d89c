"""The `read` tool: text with pi's caps and notices, images as image content, binaries refused."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from clawpi.agent.tool import AgentTool, ToolResult, ToolUpdateCallback
from clawpi.ai.abort import AbortSignal
from clawpi.ai.types import UserContent
from clawpi.tools.errors import ToolError
from clawpi.tools.images import detect_image_mime, prepare_image
from clawpi.tools.params import as_mapping, get_int, normalize_aliases, require_str
from clawpi.tools.paths import Workspace
from clawpi.tools.truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, format_size, truncate_head

BINARY_SNIFF_BYTES = 8192

READ_DESCRIPTION = (
    "Read the contents of a file. Supports text files and images (jpg, png, gif, webp). Images "
    f"are sent as attachments. For text files, output is truncated to {DEFAULT_MAX_LINES} lines or "
    f"{DEFAULT_MAX_BYTES // 1024}KB (whichever is hit first). Use offset/limit for large files. "
    "When you need the full file, continue with offset until complete."
)

READ_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "description": "Path to the file to read (relative or absolute)",
        },
        "offset": {
            "type": "number",
            "description": "Line number to start reading from (1-indexed)",
        },
        "limit": {"type": "number", "description": "Maximum number of lines to read"},
    },
    "required": ["path"],
}


_SCAN_CHUNK = 1 << 20


def _line_start(data: bytes, line_index: int) -> int:
    """Byte offset where 0-based line `line_index` starts (len(data)+1 when past the end).

    Whole megabytes are skipped by counting their newlines, so a deep offset into a large
    file costs a C-speed scan, not a Python loop per line."""
    position = 0
    remaining = line_index
    while remaining > 0:
        chunk_end = min(len(data), position + _SCAN_CHUNK)
        in_chunk = data.count(b"\n", position, chunk_end)
        if in_chunk < remaining and chunk_end < len(data):
            remaining -= in_chunk
            position = chunk_end
            continue
        for _ in range(remaining):
            found = data.find(b"\n", position)
            if found < 0:
                return len(data) + 1
            position = found + 1
        return position
    return position


def _cut_lines(data: bytes, start: int, count: int) -> int:
    """Byte offset of the end of `count` lines from `start` (without the final newline)."""
    position = start
    for index in range(count):
        found = data.find(b"\n", position)
        if found < 0:
            return len(data)
        if index == count - 1:
            return found
        position = found + 1
    return position


def read_text(data: bytes, raw_path: str, offset: int | None, limit: int | None) -> ToolResult:
    total_lines = data.count(b"\n") + 1
    start_line = max(0, offset - 1) if offset else 0
    if start_line >= total_lines:
        raise ToolError(f"Offset {offset} is beyond end of file ({total_lines} lines total)")
    start = _line_start(data, start_line)
    available = total_lines - start_line
    wanted = available if limit is None else min(limit, available)
    # Only what the caps could show is decoded: one line past the line cap, one byte past the
    # byte cap; the totals are then set from the whole selection.
    end = _cut_lines(data, start, wanted)
    selection_lines = wanted
    selection_bytes = end - start
    view_end = min(
        end, start + DEFAULT_MAX_BYTES + 1, _cut_lines(data, start, DEFAULT_MAX_LINES + 1)
    )
    truncation = truncate_head(data[start:view_end].decode("utf-8", "replace"))
    if view_end < end and not truncation.truncated:
        truncation.truncated = True
        truncation.truncated_by = "bytes"
    truncation.total_lines = selection_lines
    truncation.total_bytes = selection_bytes
    first = start_line + 1
    details: dict[str, Any] | None = None
    if truncation.first_line_exceeds_limit:
        line_end = data.find(b"\n", start)
        size = (line_end if line_end >= 0 else len(data)) - start
        text = (
            f"[Line {first} is {format_size(size)}, exceeds {format_size(DEFAULT_MAX_BYTES)} "
            f"limit. Use bash: sed -n '{first}p' {raw_path} | head -c {DEFAULT_MAX_BYTES}]"
        )
        details = {"truncation": truncation.to_dict()}
    elif truncation.truncated:
        last = first + truncation.output_lines - 1
        cap = (
            ""
            if truncation.truncated_by == "lines"
            else f" ({format_size(DEFAULT_MAX_BYTES)} limit)"
        )
        text = (
            f"{truncation.content}\n\n[Showing lines {first}-{last} of {total_lines}{cap}. "
            f"Use offset={last + 1} to continue.]"
        )
        details = {"truncation": truncation.to_dict()}
    elif limit is not None and start_line + wanted < total_lines:
        remaining = total_lines - (start_line + wanted)
        text = (
            f"{truncation.content}\n\n[{remaining} more lines in file. "
            f"Use offset={start_line + wanted + 1} to continue.]"
        )
    else:
        text = truncation.content
    return ToolResult(content=[{"type": "text", "text": text}], details=details)


def _looks_binary(head: bytes) -> bool:
    if b"\x00" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut at the sniff boundary is still text.
        return exc.start < len(head) - 4
    return False


def _read_sync(
    workspace: Workspace, raw: str, offset: int | None, limit: int | None, auto_resize: bool
) -> ToolResult:
    real = workspace.resolve(raw)
    fd = workspace.open_file(real, raw, os.O_RDONLY)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read()
    mime = detect_image_mime(data[:4100])
    if mime is not None:
        image = prepare_image(data, mime, auto_resize=auto_resize)
        note = f"Read image file [{image.mime_type}]"
        dimension = image.dimension_note()
        if dimension:
            note += f"\n{dimension}"
        content: list[UserContent] = [
            {"type": "text", "text": note},
            {"type": "image", "data": image.data, "mimeType": image.mime_type},
        ]
        return ToolResult(content=content)
    if _looks_binary(data[:BINARY_SNIFF_BYTES]):
        raise ToolError(
            f"{raw} is a binary file ({format_size(len(data))}); read returns text and "
            "jpg/png/gif/webp images only. Inspect it with exec (e.g. `file`, `xxd | head`)."
        )
    return read_text(data, raw, offset, limit)


def create_read_tool(workspace: Workspace, *, auto_resize_images: bool = True) -> AgentTool:
    async def execute(
        tool_call_id: str,
        params: Any,
        signal: AbortSignal | None = None,
        on_update: ToolUpdateCallback | None = None,
    ) -> ToolResult:
        args = normalize_aliases(as_mapping(params, "read"))
        raw = require_str(args, "path", "read")
        offset = get_int(args, "offset", "read", minimum=0)
        limit = get_int(args, "limit", "read", minimum=1)
        if signal is not None:
            signal.throw_if_aborted()
        result = await asyncio.to_thread(
            _read_sync, workspace, raw, offset, limit, auto_resize_images
        )
        if signal is not None:
            signal.throw_if_aborted()
        return result

    return AgentTool(
        name="read", label="read", description=READ_DESCRIPTION,
        parameters=READ_PARAMETERS, execute=execute,
    )  # fmt: skip
