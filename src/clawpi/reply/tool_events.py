"""Reading tool events: result text and status, what a messaging tool sends, what mutates.

The subscription records tool failures and messaging-tool sends from these; they know the
shapes pi's tools and OpenClaw's messaging tools produce, and nothing about chat replies.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from clawpi.ai.text import content_text

MAX_TOOL_EVENT_TEXT_CHARS = 8000
MESSAGING_TOOL_NAMES = frozenset({"message", "sessions_send"})
_MESSAGING_SEND_ACTIONS = frozenset({"send", "reply", "thread-reply", "threadreply", "sendmessage"})
_MUTATING_TOOLS = frozenset(
    {"write", "edit", "apply_patch", "exec", "bash", "message", "sessions_send"}
)
_READ_ONLY_PROCESS_ACTIONS = frozenset({"list", "poll", "log", "status"})


def tool_result_status(result: Any) -> str | None:
    """`status` of a tool result's details (or of JSON text content), e.g. "error"."""
    if not isinstance(result, Mapping):
        return None
    details = result.get("details")
    if isinstance(details, Mapping) and isinstance(details.get("status"), str):
        return str(details["status"])
    text = content_text(result).strip()
    if text.startswith("{") and '"status"' in text:
        try:
            parsed = orjson.loads(text)
        except orjson.JSONDecodeError:
            return None
        if isinstance(parsed, dict) and isinstance(parsed.get("status"), str):
            return str(parsed["status"])
    return None


def sanitize_tool_result(result: Any) -> Any:
    """A tool result fit for an event: long text truncated, image data dropped."""
    if not isinstance(result, Mapping):
        return result
    content = result.get("content")
    if not isinstance(content, list):
        return dict(result)
    clean: list[Any] = []
    for block in content:
        if isinstance(block, Mapping) and block.get("type") == "image":
            clean.append({"type": "image", "mimeType": block.get("mimeType"), "omitted": True})
        elif isinstance(block, Mapping) and isinstance(block.get("text"), str):
            text = block["text"]
            if len(text) > MAX_TOOL_EVENT_TEXT_CHARS:
                text = text[:MAX_TOOL_EVENT_TEXT_CHARS] + "…(truncated)"
            clean.append({**block, "text": text})
        else:
            clean.append(block)
    return {**result, "content": clean}


def is_mutating_tool_call(tool_name: str, args: Any) -> bool:
    """Whether the call changes something (a file, a process, a message sent): its failure
    must always be reported."""
    name = tool_name.lower()
    if name == "process":
        action = str(args.get("action", "")).lower() if isinstance(args, Mapping) else ""
        return action not in _READ_ONLY_PROCESS_ACTIONS
    return name in _MUTATING_TOOLS


def messaging_tool_send(
    tool_name: str, args: Mapping[str, Any]
) -> tuple[str | None, dict[str, Any] | None, list[str]] | None:
    """(text, target, media) a messaging tool call is about to send, or None for other actions."""
    action = str(args.get("action") or "send").lower()
    if tool_name == "message" and action not in _MESSAGING_SEND_ACTIONS:
        return None
    text = next(
        (args[k] for k in ("message", "text", "content") if isinstance(args.get(k), str)), None
    )
    target_keys = ("to", "target", "channel", "threadId", "sessionKey", "provider", "accountId")
    target = {k: args[k] for k in target_keys if args.get(k) is not None} or None
    if target is not None:
        target["tool"] = tool_name
    media: list[str] = []
    for key in ("media", "mediaUrl", "mediaUrls", "media_urls", "path"):
        value = args.get(key)
        if isinstance(value, str) and value:
            media.append(value)
        elif isinstance(value, list):
            media.extend(v for v in value if isinstance(v, str) and v)
    if not text and not media:
        return None
    return text, target, media
