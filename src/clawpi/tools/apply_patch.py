"""`apply_patch`: OpenAI's patch format (add, update with context hunks, delete, move).

The whole patch is parsed and applied in memory first; files change only when every hunk
matched, so a bad patch leaves the workspace as it was. Paths follow the workspace rules.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from typing import Any

from clawpi.agent.tool import AgentTool, ToolResult, ToolUpdateCallback
from clawpi.ai.abort import AbortSignal
from clawpi.tools.errors import PatchError, ToolError
from clawpi.tools.params import as_mapping, require_str
from clawpi.tools.paths import Workspace
from clawpi.tools.write import write_file_bytes

BEGIN = "*** Begin Patch"
END = "*** End Patch"
ADD = "*** Add File: "
DELETE = "*** Delete File: "
UPDATE = "*** Update File: "
MOVE = "*** Move to: "
EOF_MARKER = "*** End of File"

APPLY_PATCH_DESCRIPTION = (
    "Apply a patch to files in the workspace. The input is the whole patch text:\n"
    "*** Begin Patch\n*** Add File: path\n+new line\n*** Update File: path\n"
    "*** Move to: new/path (optional)\n@@ optional context line\n unchanged line\n-old line\n"
    "+new line\n*** Delete File: path\n*** End Patch\n"
    "Each hunk needs enough unchanged context lines to be found unambiguously."
)

APPLY_PATCH_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "input": {
            "type": "string",
            "description": "The entire patch, from *** Begin Patch to *** End Patch",
        },
    },
    "required": ["input"],
}


@dataclasses.dataclass(slots=True)
class Hunk:
    anchor: str | None
    old: list[str]
    new: list[str]
    at_end: bool = False
    ops: list[tuple[str, str]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(slots=True)
class FileOp:
    kind: str  # "add" | "delete" | "update"
    path: str
    content: list[str] = dataclasses.field(default_factory=list)
    move_to: str | None = None
    hunks: list[Hunk] = dataclasses.field(default_factory=list)


def parse_patch(text: str) -> list[FileOp]:
    lines = text.strip().replace("\r\n", "\n").split("\n")
    if not lines or lines[0].strip() != BEGIN:
        raise PatchError(f"The patch must start with '{BEGIN}'.")
    if lines[-1].strip() != END:
        raise PatchError(f"The patch must end with '{END}'.")
    ops: list[FileOp] = []
    body = lines[1:-1]
    index = 0
    while index < len(body):
        line = body[index]
        if line.startswith(ADD):
            op = FileOp("add", line[len(ADD) :].strip())
            index += 1
            while index < len(body) and not body[index].startswith("*** "):
                if not body[index].startswith("+"):
                    raise PatchError(
                        f"Add File {op.path}: every line must start with '+' (got {body[index]!r})."
                    )
                op.content.append(body[index][1:])
                index += 1
            ops.append(op)
        elif line.startswith(DELETE):
            ops.append(FileOp("delete", line[len(DELETE) :].strip()))
            index += 1
        elif line.startswith(UPDATE):
            op = FileOp("update", line[len(UPDATE) :].strip())
            index += 1
            if index < len(body) and body[index].startswith(MOVE):
                op.move_to = body[index][len(MOVE) :].strip()
                index += 1
            index = _parse_hunks(body, index, op)
            ops.append(op)
        elif not line.strip():
            index += 1
        else:
            raise PatchError(
                f"Unexpected line in patch: {line!r}. Expected a '*** ... File:' header."
            )
    if not ops:
        raise PatchError("The patch contains no file operations.")
    for op in ops:
        if not op.path:
            raise PatchError("A file operation is missing its path.")
    return ops


def _parse_hunks(body: list[str], index: int, op: FileOp) -> int:
    hunk: Hunk | None = None
    while index < len(body):
        line = body[index]
        if line.startswith("*** ") and line.strip() != EOF_MARKER:
            break
        if line.strip() == EOF_MARKER:
            if hunk is not None:
                hunk.at_end = True
        elif line.startswith("@@"):
            hunk = Hunk(line[2:].strip() or None, [], [])
            op.hunks.append(hunk)
        else:
            if hunk is None:
                hunk = Hunk(None, [], [])
                op.hunks.append(hunk)
            marker, rest = (line[:1], line[1:]) if line else (" ", "")
            if marker in " -+":
                hunk.ops.append((marker, rest))
            if marker == " ":
                hunk.old.append(rest)
                hunk.new.append(rest)
            elif marker == "-":
                hunk.old.append(rest)
            elif marker == "+":
                hunk.new.append(rest)
            else:
                raise PatchError(
                    f"Update File {op.path}: hunk lines start with ' ', '-' or '+' (got {line!r})."
                )
        index += 1
    if not op.hunks and op.move_to is None:
        raise PatchError(f"Update File {op.path}: no hunks.")
    return index


def _seek(lines: list[str], pattern: list[str], start: int, at_end: bool) -> int:
    """Where `pattern` occurs from `start`: exact, then ignoring trailing, then all whitespace."""
    if not pattern:
        return len(lines) if at_end else start
    for norm in (lambda s: s, str.rstrip, str.strip):
        candidates = (
            range(len(lines) - len(pattern), start - 1, -1)
            if at_end
            else range(start, len(lines) - len(pattern) + 1)
        )
        target = [norm(p) for p in pattern]
        for position in candidates:
            if [norm(x) for x in lines[position : position + len(pattern)]] == target:
                return position
    return -1


def apply_hunks(original: str, op: FileOp) -> str:
    lines = original.split("\n")
    trailing_newline = bool(lines) and lines[-1] == ""
    if trailing_newline:
        lines.pop()
    cursor = 0
    for number, hunk in enumerate(op.hunks, 1):
        if hunk.anchor is not None:
            found = _seek(lines, [hunk.anchor], cursor, False)
            if found < 0:
                raise PatchError(
                    f"Update File {op.path}: hunk {number}: context line {hunk.anchor!r} not found."
                )
            cursor = found
        position = _seek(lines, hunk.old, cursor, hunk.at_end)
        if position < 0:
            preview = "\n".join(hunk.old[:6])
            raise PatchError(
                f"Update File {op.path}: hunk {number} does not match the file. Expected lines:\n"
                f"{preview}\nRead the file again and rebuild the hunk with exact context."
            )
        # Context lines keep the file's own text (whitespace the fuzzy match ignored).
        replacement: list[str] = []
        source = position
        for marker, text in hunk.ops:
            if marker == " ":
                replacement.append(lines[source])
                source += 1
            elif marker == "-":
                source += 1
            else:
                replacement.append(text)
        lines[position : position + len(hunk.old)] = replacement
        cursor = position + len(replacement)
    return "\n".join(lines) + ("\n" if trailing_newline or not lines else "")


def _read(workspace: Workspace, raw: str) -> str:
    real = workspace.resolve(raw)
    fd = workspace.open_file(real, raw, os.O_RDONLY)
    with os.fdopen(fd, "rb") as handle:
        return handle.read().decode("utf-8", "surrogateescape")


def _delete(workspace: Workspace, raw: str) -> None:
    parent = workspace.resolve(os.path.dirname(raw) or ".", for_write=True)
    workspace.unlink(parent, os.path.basename(raw), raw)


def apply_patch_sync(workspace: Workspace, text: str) -> ToolResult:
    ops = parse_patch(text)
    writes: list[tuple[str, str]] = []
    deletes: list[str] = []
    summary: list[str] = []
    for op in ops:
        if op.kind == "add":
            workspace.resolve(op.path, for_write=True)
            writes.append((op.path, "\n".join(op.content) + ("\n" if op.content else "")))
            summary.append(f"A {op.path}")
        elif op.kind == "delete":
            workspace.resolve(os.path.dirname(op.path) or ".", for_write=True)
            _read(workspace, op.path)  # must be a readable regular file inside the workspace
            deletes.append(op.path)
            summary.append(f"D {op.path}")
        else:
            updated = apply_hunks(_read(workspace, op.path), op)
            if op.move_to:
                workspace.resolve(op.move_to, for_write=True)
                writes.append((op.move_to, updated))
                deletes.append(op.path)
                summary.append(f"M {op.move_to}")
            else:
                writes.append((op.path, updated))
                summary.append(f"M {op.path}")
    for raw, content in writes:
        write_file_bytes(workspace, raw, content.encode("utf-8", "surrogateescape"))
    for raw in deletes:
        _delete(workspace, raw)
    return ToolResult.text(
        "Success. Updated the following files:\n" + "\n".join(summary),
        details={"files": summary},
    )


def create_apply_patch_tool(workspace: Workspace) -> AgentTool:
    async def execute(
        tool_call_id: str,
        params: Any,
        signal: AbortSignal | None = None,
        on_update: ToolUpdateCallback | None = None,
    ) -> ToolResult:
        args = as_mapping(params, "apply_patch")
        text = args.get("input") if args.get("input") is not None else args.get("patch")
        if not isinstance(text, str):
            text = require_str(args, "input", "apply_patch")
        if workspace.read_only:
            raise ToolError("apply_patch: the workspace is read-only.")
        if signal is not None:
            signal.throw_if_aborted()
        return await asyncio.to_thread(apply_patch_sync, workspace, text)

    return AgentTool(
        name="apply_patch", label="apply_patch", description=APPLY_PATCH_DESCRIPTION,
        parameters=APPLY_PATCH_PARAMETERS, execute=execute,
    )  # fmt: skip
