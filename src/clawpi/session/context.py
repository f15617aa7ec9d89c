"""What the model sees of a session: the root-to-leaf path resolved into messages.

Follows pi's `buildSessionContext`: only the latest compaction on the path matters (its summary,
then the kept entries from `firstKeptEntryId`, then everything after it); branch summaries and
custom messages become messages; model and thinking level come from the path. `convert_to_llm`
then turns pi's extra message roles into plain user messages with pi's exact wording.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any, Final

from clawpi.ai.prefix_memo import Pass
from clawpi.session.entries import Entry
from clawpi.session.loader import gc_paused

COMPACTION_SUMMARY_PREFIX: Final = (
    "The conversation history before this point was compacted into the following summary:"
    "\n\n<summary>\n"
)
COMPACTION_SUMMARY_SUFFIX: Final = "\n</summary>"
BRANCH_SUMMARY_PREFIX: Final = (
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
)
BRANCH_SUMMARY_SUFFIX: Final = "</summary>"
DEFAULT_THINKING_LEVEL: Final = "off"

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(slots=True)
class SessionContext:
    """The resolved context at a leaf.

    `messages` are model-ready (user/assistant/toolResult only); `agent_messages` are pi's
    intermediate list (with `compactionSummary`, `branchSummary`, `custom`, `bashExecution`
    roles) for code that renders a transcript. `model` is `{"provider", "modelId"}` or None.
    """

    messages: list[dict[str, Any]] = field(default_factory=list)
    agent_messages: list[dict[str, Any]] = field(default_factory=list)
    thinking_level: str = DEFAULT_THINKING_LEVEL
    model: dict[str, Any] | None = None


class _Unset:
    pass


UNSET: Final = _Unset()
"""Marks "no leaf given" (use the last entry), as opposed to None (the empty position)."""


def iso_to_ms(value: object) -> int | None:
    """JavaScript's `new Date(iso).getTime()` for the ISO strings pi writes; None if invalid."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    delta = parsed - _EPOCH
    return delta.days * 86_400_000 + delta.seconds * 1000 + delta.microseconds // 1000


def get_path(by_id: Mapping[str, Entry], leaf: Entry) -> list[Entry]:
    """Root-first path to `leaf`; a parent cycle in a damaged file stops the walk, never hangs."""
    path = [leaf]
    append = path.append
    get = by_id.get
    parent_id = leaf.get("parentId")
    for _ in range(len(by_id)):
        if parent_id is None:
            break
        current = get(parent_id)
        if current is None:
            break
        append(current)
        parent_id = current.get("parentId")
    path.reverse()
    return path


def build_session_context(
    entries: Sequence[Entry],
    leaf_id: str | _Unset | None = UNSET,
    by_id: Mapping[str, Entry] | None = None,
) -> SessionContext:
    """The context at `leaf_id` (None: empty; unknown or not given: the last entry)."""
    if leaf_id is None:
        return SessionContext()
    with gc_paused():
        if by_id is None:
            by_id = {entry.get("id"): entry for entry in entries}  # type: ignore[misc]
        leaf = by_id.get(leaf_id) if isinstance(leaf_id, str) else None
        if leaf is None:
            if not entries:
                return SessionContext()
            leaf = entries[-1]
        return resolve_with_path(by_id, leaf)[0]


def resolve_path(path: list[Entry]) -> SessionContext:
    """The context of a root-first path (no walk: the path is known)."""
    return resolve_with_path({}, path[-1], path[:-1])[0] if path else SessionContext()


def extend_context(context: SessionContext, entry: Entry) -> bool:
    """Bring `context` (resolved at some leaf) to a new child `entry` of that leaf, in place.

    False when the entry reshapes the context (a compaction, a damaged message): resolve the
    path anew then. The rules are those of the full resolution, applied to one more entry."""
    kind = entry.get("type")
    if kind == "message":
        message = entry.get("message")
        if type(message) is not dict:
            return False
        role = message.get("role")
        if role == "assistant":
            context.model = {"provider": message.get("provider"), "modelId": message.get("model")}
        if role in _LLM_ROLES:  # the model reads it as it is
            context.agent_messages.append(message)
            context.messages.append(message)
            return True
    elif kind == "thinking_level_change":
        context.thinking_level = entry.get("thinkingLevel")  # type: ignore[assignment]
        return True
    elif kind == "model_change":
        context.model = {"provider": entry.get("provider"), "modelId": entry.get("modelId")}
        return True
    elif kind == "compaction":
        return False
    added: list[dict[str, Any]] = []
    _collect((entry,), added)
    if added:
        context.agent_messages.extend(added)
        context.messages.extend(convert_to_llm(added))
    return True


def resolve_with_path(
    by_id: Mapping[str, Entry], leaf: Entry, known_path: list[Entry] | None = None
) -> tuple[SessionContext, list[Entry]]:
    """The context at `leaf` and the root-first path to it, from one walk leaf to root,
    resolving as it goes: on a large session every pass over the entries costs a cache miss
    per entry, so the common case (messages and settings) is done in the same pass as the
    walk; compactions, summaries and custom messages (or damaged entries) take the general
    route over the collected path."""
    path: list[Entry] = []
    messages: list[dict[str, Any]] = []
    keep, add = path.append, messages.append
    get = by_id.get
    model: dict[str, Any] | None = None
    thinking_level: Any = _UNSET_LEVEL
    plain = True
    reshaped = False
    ancestors = reversed(known_path) if known_path is not None else None
    entry: Entry | None = leaf
    for _ in range(len(by_id) + len(known_path or ()) + 1):
        if entry is None:
            break
        keep(entry)
        kind = entry.get("type")
        if kind == "message":
            message = entry.get("message")
            if type(message) is not dict:
                reshaped = True
            else:
                role = message.get("role")
                if role == "assistant":
                    if model is None:
                        model = {
                            "provider": message.get("provider"),
                            "modelId": message.get("model"),
                        }
                elif role != "user" and role != "toolResult":
                    plain = False
                add(message)
        elif kind == "thinking_level_change":
            if thinking_level is _UNSET_LEVEL:
                thinking_level = entry.get("thinkingLevel")
        elif kind == "model_change":
            if model is None:
                model = {"provider": entry.get("provider"), "modelId": entry.get("modelId")}
        elif kind == "compaction" or kind == "custom_message" or kind == "branch_summary":
            reshaped = True
        if ancestors is not None:
            entry = next(ancestors, None)
        else:
            parent_id = entry.get("parentId")
            entry = get(parent_id) if parent_id is not None else None
    path.reverse()
    if reshaped:
        return _resolve_general(path), path
    messages.reverse()
    context = SessionContext(
        messages=list(messages) if plain else convert_to_llm(messages),
        agent_messages=messages,
        thinking_level=DEFAULT_THINKING_LEVEL if thinking_level is _UNSET_LEVEL else thinking_level,
        model=model,
    )
    return context, path


_UNSET_LEVEL: Final = object()
_ROLE: Final = itemgetter("role")
_LLM_ROLES: Final = frozenset({"user", "assistant", "toolResult"})


def _resolve_general(path: list[Entry]) -> SessionContext:
    """One pass over the path: settings, messages, the latest compaction."""
    thinking_level: Any = DEFAULT_THINKING_LEVEL
    model: dict[str, Any] | None = None
    compaction_index = -1
    agent_messages: list[dict[str, Any]] = []
    append = agent_messages.append
    plain = True  # only user/assistant/toolResult so far: nothing to convert
    for index, entry in enumerate(path):
        kind = entry.get("type")
        if kind == "message":
            message = entry.get("message")
            if type(message) is dict:
                role = message.get("role")
                if role == "assistant":
                    model = {"provider": message.get("provider"), "modelId": message.get("model")}
                elif role != "user" and role != "toolResult":
                    plain = False
                append(message)
        elif kind == "thinking_level_change":
            thinking_level = entry.get("thinkingLevel")
        elif kind == "model_change":
            model = {"provider": entry.get("provider"), "modelId": entry.get("modelId")}
        elif kind == "compaction":
            compaction_index = index
        elif kind == "custom_message" or kind == "branch_summary":
            plain = False
            _collect((entry,), agent_messages)
    if compaction_index >= 0:
        agent_messages = _with_compaction(path, compaction_index)
        plain = False
    return SessionContext(
        messages=list(agent_messages) if plain else convert_to_llm(agent_messages),
        agent_messages=agent_messages,
        thinking_level=thinking_level,
        model=model,
    )


def _with_compaction(path: list[Entry], compaction_index: int) -> list[dict[str, Any]]:
    """The summary, the kept entries from `firstKeptEntryId`, then everything after."""
    compaction = path[compaction_index]
    out: list[dict[str, Any]] = [
        {
            "role": "compactionSummary",
            "summary": compaction.get("summary"),
            "tokensBefore": compaction.get("tokensBefore"),
            "timestamp": iso_to_ms(compaction.get("timestamp")),
        }
    ]
    first_kept = compaction.get("firstKeptEntryId")
    start = compaction_index
    for index in range(compaction_index):
        if path[index].get("id") == first_kept:
            start = index
            break
    _collect(path[start:compaction_index], out)
    _collect(path[compaction_index + 1 :], out)
    return out


def _collect(entries: Sequence[Entry], out: list[dict[str, Any]]) -> None:
    append = out.append
    for entry in entries:
        kind = entry.get("type")
        if kind == "message":
            message = entry.get("message")
            if isinstance(message, dict):
                append(message)
        elif kind == "custom_message":
            append(custom_message_from_entry(entry))
        elif kind == "branch_summary" and entry.get("summary"):
            append(
                {
                    "role": "branchSummary",
                    "summary": entry.get("summary"),
                    "fromId": entry.get("fromId"),
                    "timestamp": iso_to_ms(entry.get("timestamp")),
                }
            )


def custom_message_from_entry(entry: Entry) -> dict[str, Any]:
    """A `custom_message` entry as pi's in-memory `custom` message (timestamp = entry time)."""
    message: dict[str, Any] = {
        "role": "custom",
        "customType": entry.get("customType"),
        "content": entry.get("content"),
        "display": entry.get("display"),
    }
    if "details" in entry:
        message["details"] = entry["details"]
    message["timestamp"] = iso_to_ms(entry.get("timestamp"))
    return message


def bash_execution_to_text(message: Mapping[str, Any]) -> str:
    """A user `!command` run as the text the model reads (pi's wording)."""
    text = f"Ran `{message.get('command')}`\n"
    output = message.get("output")
    text += f"```\n{output}\n```" if output else "(no output)"
    exit_code = message.get("exitCode")
    if message.get("cancelled"):
        text += "\n\n(command cancelled)"
    elif exit_code is not None and exit_code != 0:
        text += f"\n\nCommand exited with code {_js_number(exit_code)}"
    if message.get("truncated") and message.get("fullOutputPath"):
        text += f"\n\n[Output truncated. Full output: {message.get('fullOutputPath')}]"
    return text


def _js_number(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _text_message(text: str, timestamp: Any) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": timestamp}


def has_only_model_roles(messages: Sequence[Mapping[str, Any]]) -> bool:
    """Whether every message is a user, assistant or tool result one: the usual chat, which
    `convert_to_llm` passes through as it is. One pass in C."""
    try:
        return _LLM_ROLES.issuperset(map(_ROLE, messages))
    except KeyError:  # a message without a role (left out by the conversion)
        return False


def convert_to_llm(
    messages: Sequence[Mapping[str, Any]], *, model_roles_only: bool | None = None
) -> list[dict[str, Any]]:
    """pi's `convertToLlm`: extra roles become user messages; unknown roles are left out.

    `model_roles_only`: what `has_only_model_roles(messages)` is, when the caller knows it.
    """
    if model_roles_only is None:
        model_roles_only = has_only_model_roles(messages)
    if model_roles_only:
        return list(messages)  # type: ignore[arg-type]
    return llm_conversion_pass(list(messages), 0, None, None).outputs


def llm_conversion_pass(
    messages: list[Mapping[str, Any]], _start: int, _state: None, _key: None
) -> Pass[None]:
    """`convert_to_llm` as a `ResumableMemo` step: each message converts on its own."""
    out: list[dict[str, Any]] = []
    append = out.append
    for message in messages:
        role = message.get("role")
        if role == "user" or role == "assistant" or role == "toolResult":
            append(message)  # type: ignore[arg-type]
        elif role == "custom":
            content = message.get("content")
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            append({"role": "user", "content": content, "timestamp": message.get("timestamp")})
        elif role == "compactionSummary":
            text = (
                COMPACTION_SUMMARY_PREFIX + str(message.get("summary")) + COMPACTION_SUMMARY_SUFFIX
            )
            append(_text_message(text, message.get("timestamp")))
        elif role == "branchSummary":
            text = BRANCH_SUMMARY_PREFIX + str(message.get("summary")) + BRANCH_SUMMARY_SUFFIX
            append(_text_message(text, message.get("timestamp")))
        elif role == "bashExecution" and not message.get("excludeFromContext"):
            append(_text_message(bash_execution_to_text(message), message.get("timestamp")))
    return Pass(out, len(messages), len(out), None)
