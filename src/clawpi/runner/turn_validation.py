"""Turn order the strict providers demand, fixed by merging rather than by dropping.

Gemini wants user and model turns to alternate, so consecutive assistant messages (e.g. a
delivery record next to a model reply, or turns left adjacent after a repair) are merged into
one. Anthropic wants user/assistant alternation with every `tool_use` answered in the next user
turn, so tool calls nothing answers are removed and consecutive user messages (a user message
whose reply was lost, then the next one) are merged. Both functions are pure and idempotent.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any, Final

from clawpi.ai.prefix_memo import Pass, ResumableMemo
from clawpi.runner.sanitize import TOOL_CALL_TYPES, tool_result_id
from clawpi.runner.transcript_policy import TranscriptPolicy

Msg = dict[str, Any]

TOOL_CALLS_OMITTED_TEXT: Final = "[tool calls omitted]"


def _merge_consecutive(
    messages: list[Msg], role: str, merge: Callable[[Msg, Msg], Msg]
) -> list[Msg]:
    return _merge_pass(messages, 0, None, (role, merge)).outputs_for(messages)


def _merge_pass(
    messages: list[Msg], _start: int, _state: None, key: tuple[str, Callable[[Msg, Msg], Msg]]
) -> Pass[None]:
    """A run of `role` messages at the end may still grow: it stays unsettled."""
    role, merge = key
    out: list[Msg] = []
    run_start = 0
    for index, message in enumerate(messages):
        if out and message.get("role") == role and out[-1].get("role") == role:
            out[-1] = merge(out[-1], message)
            continue
        run_start = index
        out.append(message)
    if out and out[-1].get("role") == role:
        return Pass(out, run_start, len(out) - 1, None)
    return Pass(out, len(messages), len(out), None)


def _as_blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content) if isinstance(content, list) else []


def merge_assistant_turns(previous: Msg, current: Msg) -> Msg:
    """One assistant turn: both contents in order; usage, stop reason and error of the later."""
    merged = {
        **previous,
        "content": _as_blocks(previous.get("content")) + _as_blocks(current.get("content")),
    }
    for key in ("usage", "stopReason", "errorMessage"):
        if current.get(key):
            merged[key] = current[key]
    return merged


def merge_user_turns(previous: Msg, current: Msg) -> Msg:
    """One user turn: two strings are joined by a blank line, otherwise blocks are concatenated."""
    before, after = previous.get("content"), current.get("content")
    content: Any
    if isinstance(before, str) and isinstance(after, str):
        content = "\n\n".join(part for part in (before, after) if part)
    else:
        content = _as_blocks(before) + _as_blocks(after)
    merged = {**current, "content": content}
    if current.get("timestamp") is None and previous.get("timestamp") is not None:
        merged["timestamp"] = previous["timestamp"]
    return merged


def validate_gemini_turns(messages: list[Msg]) -> list[Msg]:
    """Merge consecutive assistant messages (Gemini needs user/model alternation)."""
    return _merge_consecutive(messages, "assistant", merge_assistant_turns)


def _answered_ids(messages: list[Msg], start: int) -> set[str]:
    """Ids answered between `start` and the next assistant turn."""
    ids: set[str] = set()
    for message in itertools.islice(messages, start, None):  # no copy of the rest per turn
        role = message.get("role")
        if role == "assistant":
            break
        if role == "toolResult":
            result_id = tool_result_id(message)
            if result_id:
                ids.add(result_id)
        elif role == "user" and isinstance(message.get("content"), list):
            for block in message["content"]:
                if isinstance(block, Mapping) and block.get("type") in (
                    "toolResult",
                    "tool_result",
                ):
                    for key in ("toolUseId", "toolCallId", "tool_use_id"):
                        if isinstance(block.get(key), str) and block[key]:
                            ids.add(block[key])
    return ids


def strip_dangling_tool_calls(messages: list[Msg]) -> list[Msg]:
    """Remove assistant tool calls that no result answers before the next assistant turn.

    A turn left empty gets `[tool calls omitted]` so the alternation survives (errored or
    aborted turns are left empty; the request layer drops them).
    """
    return _dangling_pass(messages, 0, None, None).outputs_for(messages)


def _dangling_pass(messages: list[Msg], _start: int, _state: None, _key: None) -> Pass[None]:
    """A turn is answered by what follows it up to the next one: the last turn is unsettled,
    and the turns before it stay as they are while its first message does."""
    out: list[Msg] = []
    last_turn: tuple[int, int] | None = None  # where the last turn starts, in and out
    for index, message in enumerate(messages):
        content = message.get("content")
        if message.get("role") == "assistant":
            last_turn = index, len(out)
        if message.get("role") != "assistant" or not isinstance(content, list):
            out.append(message)
            continue
        calls = [b for b in content if isinstance(b, Mapping) and b.get("type") in TOOL_CALL_TYPES]
        if not calls:
            out.append(message)
            continue
        answered = _answered_ids(messages, index + 1)
        kept = [
            b
            for b in content
            if not (isinstance(b, Mapping) and b.get("type") in TOOL_CALL_TYPES)
            or b.get("id") in answered
        ]
        if len(kept) == len(content):
            out.append(message)
            continue
        if not kept and message.get("stopReason") not in ("error", "aborted"):
            kept = [{"type": "text", "text": TOOL_CALLS_OMITTED_TEXT}]
        out.append({**message, "content": kept})
    if last_turn is None:
        return Pass(out, len(messages), len(out), None)
    return Pass(out, *last_turn, None, closed_by=1)


def validate_anthropic_turns(messages: list[Msg]) -> list[Msg]:
    """Drop unanswered tool calls, then merge consecutive user messages."""
    return _merge_consecutive(strip_dangling_tool_calls(messages), "user", merge_user_turns)


# Per session, each pass goes on from where its output can still change (see `ResumableMemo`).
_assistants_merged: Final = ResumableMemo(_merge_pass)
_undangled: Final = ResumableMemo(_dangling_pass)
_users_merged: Final = ResumableMemo(_merge_pass)


def validate_replay_turns(
    messages: list[Msg], policy: TranscriptPolicy, session: object | None = None
) -> list[Msg]:
    """The turn validation the policy asks for (none, Gemini, Anthropic or both); given the
    `session` it is for, each turn only goes on from where the last one's result can change."""
    if policy.validate_gemini_turns:
        messages = _assistants_merged(session, messages, ("assistant", merge_assistant_turns))
    if policy.validate_anthropic_turns:
        messages = _undangled(session, messages)
        messages = _users_merged(session, messages, ("user", merge_user_turns))
    return messages
