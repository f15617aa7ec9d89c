"""The conversation as plain text for the summariser: the model must not mistake it for a chat."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

TOOL_RESULT_MAX_CHARS = 2000


def _texts(content: Any, kind: str = "text", key: str = "text") -> list[str]:
    if isinstance(content, str):
        return [content]
    return [part.get(key, "") for part in content or () if part.get("type") == kind]


def serialize_conversation(messages: Sequence[Mapping[str, Any]]) -> str:
    """`[User]: …`, `[Assistant thinking]: …`, `[Assistant]: …`, `[Assistant tool calls]: …`,
    `[Tool result]: …` (truncated), separated by blank lines; empty parts omitted."""
    parts: list[str] = []
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        if role == "user":
            text = "".join(_texts(content))
            if text:
                parts.append(f"[User]: {text}")
        elif role == "assistant":
            thinking = "\n".join(_texts(content, "thinking", "thinking"))
            if thinking:
                parts.append(f"[Assistant thinking]: {thinking}")
            text = "\n".join(_texts(content))
            if text:
                parts.append(f"[Assistant]: {text}")
            calls = [
                f"{block.get('name', '')}({_format_args(block.get('arguments') or {})})"
                for block in content or ()
                if block.get("type") == "toolCall"
            ]
            if calls:
                parts.append("[Assistant tool calls]: " + "; ".join(calls))
        elif role == "toolResult":
            text = "".join(_texts(content))
            if len(text) > TOOL_RESULT_MAX_CHARS:
                extra = len(text) - TOOL_RESULT_MAX_CHARS
                text = text[:TOOL_RESULT_MAX_CHARS] + f"\n\n[... {extra} more characters truncated]"
            if text:
                parts.append(f"[Tool result]: {text}")
    return "\n\n".join(parts)


def _format_args(arguments: Mapping[str, Any]) -> str:
    return ", ".join(f"{key}={orjson.dumps(value).decode()}" for key, value in arguments.items())
