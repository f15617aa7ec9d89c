"""The tool-result guard: what reaches the session file is always a valid transcript.

Installed on a `SessionManager`, it sees every append. Tool calls of an assistant message become
"pending"; their results clear them. If anything else is appended while calls are pending (a
user message, a compaction, ...), or when the run ends (`flush_pending_tool_results`), each
missing result is written as a synthetic error result first, so a provider never sees a tool call
without its answer. Tool results are capped in size before they are written, user messages get
their input provenance, and a `tool_result_persist` hook may rewrite a result on its way to disk.
Synthetic results carry fixed text and the assistant's own timestamp: replaying the same file
always produces the same request (prompt caches survive).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, Final

from clawpi.session.store import SessionManager

HARD_MAX_TOOL_RESULT_CHARS: Final = 400_000
"""Largest tool result text written to a session file."""
MIN_KEEP_CHARS: Final = 2_000
"""Every truncated text block keeps at least this much."""
TRUNCATION_SUFFIX: Final = (
    "\n\n[Content truncated during persistence: the original exceeded the size limit. "
    "Use offset/limit parameters or request specific sections for large content.]"
)
MISSING_TOOL_RESULT_TEXT: Final = (
    "[clawpi] missing tool result in session history; "
    "inserted synthetic error result for transcript repair."
)

ToolResultHook = Callable[[dict[str, Any]], dict[str, Any] | None]
"""`tool_result_persist`: given the result about to be written, return a replacement (or None
to keep it)."""


def cap_tool_result_size(
    message: dict[str, Any],
    max_chars: int = HARD_MAX_TOOL_RESULT_CHARS,
    min_keep: int = MIN_KEEP_CHARS,
) -> dict[str, Any]:
    """Shrink the text blocks of an oversized tool result in proportion to their size."""
    content = message.get("content")
    if message.get("role") != "toolResult" or not isinstance(content, list):
        return message
    sizes = [
        len(block["text"])
        if isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
        else 0
        for block in content
    ]
    total = sum(sizes)
    if total <= max_chars:
        return message
    new_content: list[Any] = []
    for block, size in zip(content, sizes, strict=True):
        if size == 0:
            new_content.append(block)
            continue
        budget = max(min_keep, size * max_chars // total)
        if size <= budget:
            new_content.append(block)
            continue
        keep = max(0, budget - len(TRUNCATION_SUFFIX))
        new_content.append({**block, "text": block["text"][:keep] + TRUNCATION_SUFFIX})
    return {**message, "content": new_content}


def _tool_calls(message: dict[str, Any]) -> list[tuple[str, str]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    calls = []
    for block in content:
        if isinstance(block, dict) and block.get("type") in ("toolCall", "toolUse"):
            call_id = block.get("id")
            if isinstance(call_id, str) and call_id:
                name = block.get("name")
                calls.append((call_id, name if isinstance(name, str) else ""))
    return calls


class ToolResultGuard:
    """Keeps tool calls and results paired in the file; see the module docstring."""

    def __init__(
        self,
        session: SessionManager,
        *,
        allow_synthetic_tool_results: bool = True,
        allowed_tool_names: Collection[str] | None = None,
        input_provenance: dict[str, Any] | None = None,
        tool_result_persist: ToolResultHook | None = None,
        max_tool_result_chars: int = HARD_MAX_TOOL_RESULT_CHARS,
    ) -> None:
        self.session = session
        self.allow_synthetic_tool_results = allow_synthetic_tool_results
        self.allowed_tool_names = (
            frozenset(allowed_tool_names) if allowed_tool_names is not None else None
        )
        self.input_provenance = input_provenance
        self.tool_result_persist = tool_result_persist
        self.max_tool_result_chars = max_tool_result_chars
        self._pending: dict[str, str] = {}
        self._pending_timestamp: Any = 0
        self._dropped: set[str] = set()
        """Ids of the unknown calls taken out of assistant messages: their results (the loop
        still answers them, "Tool x not found") would have no call in the file to follow."""

    # -- AppendInterceptor --------------------------------------------------------------------

    def on_message(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        role = message.get("role")
        if role == "toolResult":
            call_id = message.get("toolCallId") or message.get("toolUseId")
            if call_id in self._dropped:
                self._dropped.discard(call_id)
                return []
            if self.allowed_tool_names is not None and not isinstance(call_id, str):
                # the answer to a call sent without an id, which left the file with its
                # message (see `_drop_unknown_calls`): there is no call for it to follow
                return []
            return [self._prepare_result(message)]
        self._dropped.clear()
        out = [self._finish(m) for m in self._take_synthetic()]
        if role == "assistant":
            cleaned = self._drop_unknown_calls(message)
            if cleaned is None:
                return out
            message = cleaned
            if message.get("stopReason") not in ("error", "aborted"):
                for call_id, name in _tool_calls(message):
                    self._pending[call_id] = name
                self._pending_timestamp = message.get("timestamp", 0)
        elif role == "user" and self.input_provenance and "provenance" not in message:
            message = {**message, "provenance": dict(self.input_provenance)}
        out.append(message)
        return out

    def on_other_entry(self) -> list[dict[str, Any]]:
        return [self._finish(m) for m in self._take_synthetic()]

    # -- public -------------------------------------------------------------------------------

    def pending_ids(self) -> list[str]:
        return list(self._pending)

    def flush_pending_tool_results(self) -> None:
        """Write synthetic error results for every call still without a result (end of run)."""
        for message in self._take_synthetic():
            self.session.append_message(message)

    def clear_pending_tool_results(self) -> None:
        """Forget pending calls without writing anything (their tools may still be running)."""
        self._pending.clear()

    def uninstall(self) -> None:
        self.session.set_interceptor(None)

    # -- internals ----------------------------------------------------------------------------

    def _take_synthetic(self) -> list[dict[str, Any]]:
        if not self._pending:
            return []
        pending, self._pending = self._pending, {}
        if not self.allow_synthetic_tool_results:
            return []
        return [
            {
                "role": "toolResult",
                "toolCallId": call_id,
                "toolName": name or "unknown",
                "content": [{"type": "text", "text": MISSING_TOOL_RESULT_TEXT}],
                "isError": True,
                "timestamp": self._pending_timestamp,
            }
            for call_id, name in pending.items()
        ]

    def _prepare_result(self, message: dict[str, Any]) -> dict[str, Any]:
        call_id = message.get("toolCallId") or message.get("toolUseId")
        if isinstance(call_id, str) and call_id in self._pending:
            name = self._pending.pop(call_id)
            if not str(message.get("toolName") or "").strip() and name:
                message = {**message, "toolName": name}
        return self._finish(message)

    def _finish(self, message: dict[str, Any]) -> dict[str, Any]:
        message = cap_tool_result_size(message, self.max_tool_result_chars)
        if self.tool_result_persist is not None:
            replaced = self.tool_result_persist(message)
            if replaced is not None:
                message = replaced
        return message

    def _drop_unknown_calls(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """Without tool calls the model may not use, or None when nothing would be left."""
        content = message.get("content")
        if self.allowed_tool_names is None or not isinstance(content, list):
            return message
        allowed = self.allowed_tool_names
        kept = []
        for block in content:
            if not (isinstance(block, dict) and block.get("type") == "toolCall"):
                kept.append(block)
                continue
            call_id = block.get("id")
            if not isinstance(call_id, str):
                continue  # malformed: dropped, and no result can name it
            name = block.get("name")
            if isinstance(name, str) and name in allowed:  # a name that is no string: unknown
                kept.append(block)
            else:
                self._dropped.add(call_id)
        if len(kept) == len(content):
            return message
        if not kept:
            return None
        return {**message, "content": kept}


def install_tool_result_guard(session: SessionManager, **options: Any) -> ToolResultGuard:
    """Guard every append to `session`; returns the guard (flush it when a run ends)."""
    guard = ToolResultGuard(session, **options)
    session.set_interceptor(guard)
    return guard
