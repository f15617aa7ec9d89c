"""Tool results cut down to what the model's context window can hold.

One `read` of a log file or one `exec` with a chatty build can return more text than the whole
context window; compaction cannot help because the latest turn is what overflows. After the
run's compactions fail, the runner truncates every tool result larger than 30% of the window
(at ~4 chars per token, never below 2,000 chars, never above a hard cap) once, in the session
file itself, and retries. The same rule is available in memory for an outgoing context.

The session file is append-only, so the rewrite branches: the leaf moves to the parent of the
first oversized result and every later entry of the branch is appended again, oversized results
truncated. The old entries stay in the file (the tree keeps them), so nothing is lost.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from clawpi.errors import ClawpiError
from clawpi.runner.config import get_path, positive_int
from clawpi.session.entries import Entry
from clawpi.session.store import SessionManager

Msg = dict[str, Any]

MAX_TOOL_RESULT_CONTEXT_SHARE: Final = 0.3
CHARS_PER_TOKEN: Final = 4
MIN_KEEP_CHARS: Final = 2_000
HARD_MAX_TOOL_RESULT_CHARS: Final = 400_000
TRUNCATION_SUFFIX: Final = (
    "\n\n⚠️ [Content truncated — original was too large for the model's context window. "
    "The content above is a partial view. If you need more, request specific sections or use "
    "offset/limit parameters to read smaller chunks.]"
)
MIDDLE_OMISSION_MARKER: Final = "\n\n⚠️ [... middle content omitted — showing head and tail ...]\n\n"
IMPORTANT_TAIL_CHARS: Final = 2_000
TAIL_SHARE: Final = 0.3
MAX_TAIL_CHARS: Final = 4_000
NEWLINE_CUT_SHARE: Final = 0.8
"""Cut at the last newline when it keeps at least this share of the budget."""

_IMPORTANT_TAIL_RE: Final = re.compile(
    r"\b(error|exception|failed|fatal|traceback|panic|stack trace|errno|exit code|"
    r"total|summary|result|complete|finished|done)\b"
)


def calculate_max_tool_result_chars(
    context_window_tokens: int, hard_max_chars: int = HARD_MAX_TOOL_RESULT_CHARS
) -> int:
    """30% of the window in chars (4 per token), capped at `hard_max_chars`."""
    share = math.floor(max(0, context_window_tokens) * MAX_TOOL_RESULT_CONTEXT_SHARE)
    return min(share * CHARS_PER_TOKEN, max(1, hard_max_chars))


def resolve_tool_result_hard_max(config: Mapping[str, Any] | None) -> int:
    """`agents.defaults.toolResultMaxChars` when set to a positive number, else 400,000."""
    value = positive_int(get_path(config or {}, "agents.defaults.toolResultMaxChars"))
    return value or HARD_MAX_TOOL_RESULT_CHARS


def _has_important_tail(text: str) -> bool:
    tail = text[-IMPORTANT_TAIL_CHARS:].lower()
    return bool(_IMPORTANT_TAIL_RE.search(tail)) or tail.rstrip().endswith("}")


def _head_cut(text: str, budget: int) -> int:
    newline = text.rfind("\n", 0, budget + 1)
    return newline if newline > budget * NEWLINE_CUT_SHARE else budget


def truncate_tool_result_text(text: str, max_chars: int) -> str:
    """`text` within `max_chars` (but at least 2,000 chars kept), with the truncation notice.

    Keeps the head, cut at a line break when one is near the limit. When the end looks
    important (errors, totals, closing JSON), keeps head and tail with a marker between.
    """
    if len(text) <= max_chars:
        return text
    budget = max(MIN_KEEP_CHARS, max_chars - len(TRUNCATION_SUFFIX))
    if _has_important_tail(text) and budget > MIN_KEEP_CHARS * 2:
        tail_budget = min(math.floor(budget * TAIL_SHARE), MAX_TAIL_CHARS)
        head_budget = budget - tail_budget - len(MIDDLE_OMISSION_MARKER)
        if head_budget > MIN_KEEP_CHARS:
            head = _head_cut(text, head_budget)
            tail_start = len(text) - tail_budget
            newline = text.find("\n", tail_start)
            if newline != -1 and newline < tail_start + tail_budget * (1 - NEWLINE_CUT_SHARE):
                tail_start = newline + 1
            return text[:head] + MIDDLE_OMISSION_MARKER + text[tail_start:] + TRUNCATION_SUFFIX
    return text[: _head_cut(text, budget)] + TRUNCATION_SUFFIX


def _text_sizes(message: Mapping[str, Any]) -> list[int]:
    content = message.get("content")
    if message.get("role") != "toolResult" or not isinstance(content, list):
        return []
    return [
        len(block["text"])
        if isinstance(block, Mapping)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
        else 0
        for block in content
    ]


def tool_result_text_length(message: Mapping[str, Any]) -> int:
    """Characters of text in a tool result (0 for any other message)."""
    return sum(_text_sizes(message))


def truncate_tool_result_message(message: Msg, max_chars: int) -> Msg:
    """A copy whose text blocks share `max_chars` in proportion to their size; images kept."""
    sizes = _text_sizes(message)
    total = sum(sizes)
    if total <= max_chars:
        return message
    content = []
    for block, size in zip(message["content"], sizes, strict=True):
        if size == 0:
            content.append(block)
            continue
        budget = max(MIN_KEEP_CHARS, math.floor(max_chars * size / total))
        content.append({**block, "text": truncate_tool_result_text(block["text"], budget)})
    return {**message, "content": content}


def is_oversized_tool_result(
    message: Mapping[str, Any],
    context_window_tokens: int,
    hard_max_chars: int = HARD_MAX_TOOL_RESULT_CHARS,
) -> bool:
    limit = calculate_max_tool_result_chars(context_window_tokens, hard_max_chars)
    return tool_result_text_length(message) > limit


def session_likely_has_oversized_tool_results(
    messages: Sequence[Mapping[str, Any]],
    context_window_tokens: int,
    hard_max_chars: int = HARD_MAX_TOOL_RESULT_CHARS,
) -> bool:
    """Whether truncating tool results could resolve a context overflow."""
    return any(is_oversized_tool_result(m, context_window_tokens, hard_max_chars) for m in messages)


def truncate_oversized_tool_results_in_messages(
    messages: list[Msg],
    context_window_tokens: int,
    hard_max_chars: int = HARD_MAX_TOOL_RESULT_CHARS,
) -> tuple[list[Msg], int]:
    """The messages with oversized tool results truncated (in memory), and how many."""
    limit = calculate_max_tool_result_chars(context_window_tokens, hard_max_chars)
    count = 0
    out = []
    for message in messages:
        if tool_result_text_length(message) > limit:
            message = truncate_tool_result_message(message, limit)
            count += 1
        out.append(message)
    return (out if count else messages), count


# -- the tool-loop context guard -----------------------------------------------------------------

SINGLE_TOOL_RESULT_CONTEXT_SHARE: Final = 0.5
CONTEXT_SAFE_SHARE: Final = 0.9
TOOL_RESULT_CHARS_PER_TOKEN: Final = 2
"""Tool output (code, JSON, logs) tokenizes densely: estimate it at 2 chars per token."""
IMAGE_CHAR_ESTIMATE: Final = 8_000
TOOL_LOOP_OVERFLOW_MESSAGE: Final = (
    "Context overflow: estimated context size exceeds safe threshold during tool loop."
)


class ToolLoopContextOverflow(ClawpiError):
    """The context about to be sent would not fit; the runner compacts and retries."""

    def __init__(self, estimated_chars: int, limit_chars: int) -> None:
        super().__init__(TOOL_LOOP_OVERFLOW_MESSAGE)
        self.estimated_chars = estimated_chars
        self.limit_chars = limit_chars


def _content_chars(content: Any, text_weight: int) -> int:
    if isinstance(content, str):
        return len(content) * text_weight
    total = 0
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "image":
            total += IMAGE_CHAR_ESTIMATE
        elif kind == "text":
            total += len(str(block.get("text") or "")) * text_weight
        elif kind == "thinking":
            total += len(str(block.get("thinking") or ""))
        elif kind == "toolCall":
            total += len(str(block.get("name") or "")) + len(repr(block.get("arguments")))
    return total


def estimate_context_chars(messages: Sequence[Mapping[str, Any]], system_prompt: str = "") -> int:
    """Context size in "4-chars-per-token" characters; tool output counts double."""
    weight = CHARS_PER_TOKEN // TOOL_RESULT_CHARS_PER_TOKEN
    return len(system_prompt) + sum(
        _content_chars(m.get("content"), weight if m.get("role") == "toolResult" else 1)
        for m in messages
    )


def guard_tool_loop_context(
    messages: list[Msg], context_window_tokens: int, system_prompt: str = ""
) -> list[Msg]:
    """Check the context before each model call of a tool loop (in memory only).

    A single tool result larger than half the window (at the tool-output rate of 2 chars per
    token) is truncated with the usual notice; if the
    estimate still exceeds 90% of the window, `ToolLoopContextOverflow` is raised. Its message
    is a context-overflow message, so the runner's overflow recovery (compaction) takes over.
    """
    window_tokens = max(0, context_window_tokens)
    window_chars = window_tokens * CHARS_PER_TOKEN
    single_max = math.floor(
        window_tokens * SINGLE_TOOL_RESULT_CONTEXT_SHARE * TOOL_RESULT_CHARS_PER_TOKEN
    )
    out: list[Msg] = []
    changed = False
    for message in messages:
        if tool_result_text_length(message) > single_max:
            message = truncate_tool_result_message(message, single_max)
            changed = True
        out.append(message)
    guarded = out if changed else messages
    estimated = estimate_context_chars(guarded, system_prompt)
    limit = math.floor(window_chars * CONTEXT_SAFE_SHARE)
    if estimated > limit:
        raise ToolLoopContextOverflow(estimated, limit)
    return guarded


@dataclass(slots=True)
class SessionTruncationResult:
    truncated: bool
    truncated_count: int = 0
    reason: str | None = None
    max_chars: int = 0
    rewritten: list[tuple[str, str]] = field(default_factory=list)
    """(old entry id, new entry id) of each truncated tool result."""
    new_leaf_id: str | None = None


def _reappend(session: SessionManager, entry: Entry, ids: Mapping[str, str], message: Any) -> str:
    """Append a copy of `entry` at the leaf; returns the new entry's id."""
    kind = entry.get("type")
    if kind == "message" and isinstance(message, dict):
        return session.append_message(message)
    if kind == "custom_message":
        return session.append_custom_message_entry(
            entry.get("customType", ""),
            entry.get("content", ""),
            bool(entry.get("display")),
            entry.get("details"),
        )
    if kind == "custom":
        return session.append_custom_entry(entry.get("customType", ""), entry.get("data"))
    if kind == "compaction":
        first_kept = str(entry.get("firstKeptEntryId", ""))
        return session.append_compaction(
            entry.get("summary", ""),
            ids.get(first_kept, first_kept),
            entry.get("tokensBefore", 0),
            entry.get("details"),
            entry.get("fromHook"),
        )
    if kind == "thinking_level_change":
        return session.append_thinking_level_change(entry.get("thinkingLevel", "off"))
    if kind == "model_change":
        return session.append_model_change(entry.get("provider", ""), entry.get("modelId", ""))
    if kind == "session_info":
        return session.append_session_info(str(entry.get("name", "")))
    if kind == "label":
        target = str(entry.get("targetId", ""))
        return session.append_label_change(ids.get(target, target), entry.get("label"))
    if kind == "branch_summary":
        return session.branch_with_summary(
            session.get_leaf_id(),
            entry.get("summary", ""),
            entry.get("details"),
            entry.get("fromHook"),
        )
    # An entry type this version does not know (or a malformed message entry): copied field
    # for field through the manager's own stamping, never dropped.
    payload = [(k, v) for k, v in entry.items() if k not in ("type", "id", "parentId", "timestamp")]
    return session.append_entry(str(kind), payload)


def truncate_oversized_tool_results_in_session(
    session: SessionManager | str | os.PathLike[str],
    context_window_tokens: int,
    *,
    hard_max_chars: int = HARD_MAX_TOOL_RESULT_CHARS,
) -> SessionTruncationResult:
    """Truncate the oversized tool results on the session's current branch, in its file.

    `session` is an open `SessionManager` (its leaf moves to the rewritten branch) or a session
    file path. Any append interceptor (the tool-result guard) is bypassed during the rewrite:
    the entries are copies of ones it already let through. Returns what changed; the reason is
    `"no oversized tool results"` when there was nothing to do.
    """
    manager = session if isinstance(session, SessionManager) else SessionManager.open(session)
    limit = calculate_max_tool_result_chars(context_window_tokens, hard_max_chars)
    branch = manager.get_branch()
    if not branch:
        return SessionTruncationResult(False, reason="empty session", max_chars=limit)
    oversized = {
        i
        for i, entry in enumerate(branch)
        if entry.get("type") == "message"
        and isinstance(entry.get("message"), dict)
        and tool_result_text_length(entry["message"]) > limit
    }
    if not oversized:
        return SessionTruncationResult(
            False,
            reason="no oversized tool results",
            max_chars=limit,
            new_leaf_id=manager.get_leaf_id(),
        )
    first = min(oversized)
    result = SessionTruncationResult(True, max_chars=limit)
    interceptor = manager.interceptor  # restored below
    manager.set_interceptor(None)
    try:
        parent = branch[first].get("parentId")
        if isinstance(parent, str) and manager.get_entry(parent) is not None:
            manager.branch(parent)
        else:  # the branch's root (its parent may have been lost to damage)
            manager.reset_leaf()
        ids: dict[str, str] = {}
        for index in range(first, len(branch)):
            entry = branch[index]
            message = entry.get("message")
            if index in oversized and isinstance(message, dict):
                message = truncate_tool_result_message(message, limit)
            new_id = _reappend(manager, entry, ids, message)
            old_id = entry.get("id")
            if isinstance(old_id, str):
                ids[old_id] = new_id
                if index in oversized:
                    result.rewritten.append((old_id, new_id))
    finally:
        manager.set_interceptor(interceptor)
    result.truncated_count = len(result.rewritten)
    result.new_leaf_id = manager.get_leaf_id()
    return result
