"""The `edit` tool: replace unique text (one edit or several), keeping CRLF and BOM."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import os
from typing import Any

from clawpi.agent.tool import AgentTool, ToolResult, ToolUpdateCallback
from clawpi.ai.abort import AbortSignal
from clawpi.tools.edit_match import (
    detect_line_ending,
    fuzzy_normalize,
    render_diff,
    restore_line_endings,
    to_lf,
)
from clawpi.tools.errors import ToolError, ToolInputError
from clawpi.tools.params import as_mapping, get_str, normalize_aliases, require_str
from clawpi.tools.paths import Workspace

BOM = "\ufeff"

EDIT_DESCRIPTION = (
    "Edit a file by replacing exact text. The oldText must match exactly (including whitespace) "
    "and occur once in the file. Use this for precise, surgical edits. For several changes in one "
    "file pass edits: [{oldText, newText}, ...]; each oldText must be unique and the edits must "
    "not overlap."
)

_EDIT_ITEM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "oldText": {"type": "string", "description": "Exact text to find and replace"},
        "newText": {"type": "string", "description": "New text to replace the old text with"},
    },
    "required": ["oldText", "newText"],
}

EDIT_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "description": "Path to the file to edit (relative or absolute)",
        },
        "oldText": {
            "type": "string",
            "description": "Exact text to find and replace (must match exactly)",
        },
        "newText": {"type": "string", "description": "New text to replace the old text with"},
        "edits": {
            "type": "array",
            "items": _EDIT_ITEM,
            "description": "Several replacements in one call, instead of oldText/newText",
        },
    },
    "required": ["path"],
}


@dataclasses.dataclass(slots=True)
class Replacement:
    old_text: str
    new_text: str


def parse_edits(args: dict[str, Any]) -> list[Replacement]:
    edits = args.get("edits")
    single_old = get_str(args, "oldText", "edit")
    if edits is not None:
        if single_old is not None:
            raise ToolInputError("edit: pass either oldText/newText or edits, not both.")
        if not isinstance(edits, list) or not edits:
            raise ToolInputError("edit: 'edits' must be a non-empty list of {oldText, newText}.")
        result = []
        for index, item in enumerate(edits):
            if not isinstance(item, dict):
                raise ToolInputError(
                    f"edit: edits[{index}] must be an object {{oldText, newText}}."
                )
            item = normalize_aliases(item)
            result.append(
                Replacement(
                    require_str(item, "oldText", f"edit (edits[{index}])"),
                    require_str(item, "newText", f"edit (edits[{index}])"),
                )
            )
        return result
    return [Replacement(require_str(args, "oldText", "edit"), require_str(args, "newText", "edit"))]


def _label(index: int, count: int) -> str:
    return "the text" if count == 1 else f"the text of edit {index + 1}"


def _locate(base: str, needle: str, raw: str, index: int, count: int) -> int:
    if not needle:
        raise ToolInputError(f"edit: oldText of edit {index + 1} is empty; give text to replace.")
    position = base.find(needle)
    if position < 0:
        raise ToolError(
            f"Could not find {_label(index, count).replace('the text', 'the exact text')} in "
            f"{raw}. The old text must match exactly including all whitespace and newlines."
        )
    occurrences = base.count(needle)
    if occurrences > 1:
        raise ToolError(
            f"Found {occurrences} occurrences of {_label(index, count)} in {raw}. The text must "
            "be unique. Please provide more context to make it unique."
        )
    return position


def apply_replacements(content: str, edits: list[Replacement], raw: str) -> str:
    """Apply every edit to `content` (LF text); exact matching when all match exactly,
    otherwise pi's fallback on the normalised copy of the whole file."""
    exact = all(e.old_text and content.find(e.old_text) >= 0 for e in edits)
    if exact:
        base = content
        olds = [e.old_text for e in edits]
    else:
        base = fuzzy_normalize(content)
        olds = [fuzzy_normalize(e.old_text) for e in edits]
    # Uniqueness is judged in the normalised space, so near-duplicates are caught too.
    normalised = fuzzy_normalize(content) if exact else base
    spans: list[tuple[int, int, str]] = []
    for index, (edit, old) in enumerate(zip(edits, olds, strict=True)):
        start = _locate(base, old, raw, index, len(edits))
        fuzzy_old = fuzzy_normalize(edit.old_text)
        if exact and fuzzy_old and normalised.count(fuzzy_old) > 1:
            _locate(normalised, fuzzy_old, raw, index, len(edits))
        spans.append((start, start + len(old), edit.new_text))
    spans.sort()
    for (_, end, _), (start, _, _) in itertools.pairwise(spans):
        if start < end:
            raise ToolError(
                f"Edits overlap in {raw}; merge them into one edit or pick distinct text."
            )
    result = base
    for start, end, new_text in reversed(spans):
        result = result[:start] + new_text + result[end:]
    return result


def _edit_sync(workspace: Workspace, raw: str, edits: list[Replacement]) -> ToolResult:
    real = workspace.resolve(raw, for_write=True)
    try:
        fd = workspace.open_file(real, raw, os.O_RDWR)
    except ToolError as exc:
        if str(exc).startswith(("File not found", "Permission denied")):
            raise ToolError(f"File not found: {raw}") from None
        raise
    with os.fdopen(fd, "r+b") as handle:
        original = handle.read().decode("utf-8", "surrogateescape")
        bom = original.startswith(BOM)
        body = original[1:] if bom else original
        ending = detect_line_ending(body)
        content = to_lf(body)
        for edit in edits:
            edit.old_text = to_lf(edit.old_text)
            edit.new_text = to_lf(edit.new_text)
        updated = apply_replacements(content, edits, raw)
        if updated == content:
            raise ToolError(
                f"No changes made to {raw}. The replacement produced identical content. This "
                "might indicate an issue with special characters or the text not existing as "
                "expected."
            )
        final = (BOM if bom else "") + restore_line_endings(updated, ending)
        handle.seek(0)
        handle.truncate(0)
        handle.write(final.encode("utf-8", "surrogateescape"))
    diff, first_changed = render_diff(content, updated)
    return ToolResult.text(
        f"Successfully replaced text in {raw}."
        if len(edits) == 1
        else f"Successfully applied {len(edits)} edits to {raw}.",
        details={"diff": diff, "firstChangedLine": first_changed},
    )


def create_edit_tool(workspace: Workspace) -> AgentTool:
    async def execute(
        tool_call_id: str,
        params: Any,
        signal: AbortSignal | None = None,
        on_update: ToolUpdateCallback | None = None,
    ) -> ToolResult:
        args = normalize_aliases(as_mapping(params, "edit"))
        raw = require_str(args, "path", "edit")
        edits = parse_edits(args)
        if signal is not None:
            signal.throw_if_aborted()
        return await asyncio.to_thread(_edit_sync, workspace, raw, edits)

    return AgentTool(
        name="edit", label="edit", description=EDIT_DESCRIPTION,
        parameters=EDIT_PARAMETERS, execute=execute,
    )  # fmt: skip
