"""Best-effort parsing of a tool call's argument JSON while it is still streaming."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import orjson

_CLOSER = {"{": "}", "[": "]"}
_LONG_NUMBER = re.compile(r"\d{19}")
"""A run of digits that may not fit in 64 bits: orjson would read such an integer as a float."""


def _loader(text: str) -> Callable[[str], Any]:
    return json.loads if _LONG_NUMBER.search(text) else orjson.loads


def parse_streaming_json(text: str) -> dict[str, Any]:
    """Parse possibly-truncated JSON into an object; `{}` when nothing usable is there yet.

    Complete JSON parses strictly. Truncated JSON is completed by closing the open string and
    containers; a member whose value was cut mid-token is dropped rather than guessed.
    """
    if not text or text.isspace():
        return {}
    loads = _loader(text)
    try:
        value = loads(text)
    except ValueError:
        value = _parse_truncated(text, loads)
    return value if isinstance(value, dict) else {}


def _parse_truncated(text: str, loads: Callable[[str], Any]) -> Any:
    stack: list[str] = []
    in_string = False
    escaped = False
    string_start = 0
    # (cut position, open containers at that point): places where the text can end cleanly
    safe: list[tuple[int, tuple[str, ...]]] = []
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
            string_start = index
        elif char in "{[":
            stack.append(char)
            safe.append((index + 1, tuple(stack)))
        elif char in "}]":
            if stack:
                stack.pop()
            safe.append((index + 1, tuple(stack)))
        elif char == ",":
            safe.append((index, tuple(stack)))
    attempts: list[str] = []
    head = text
    if in_string:
        head = _close_string(text, string_start)
    attempts.append(_close(_trim_dangling(head), tuple(stack)))
    for cut, open_stack in reversed(safe[-3:]):
        attempts.append(_close(_trim_dangling(text[:cut]), open_stack))
    for attempt in attempts:
        try:
            return loads(attempt)
        except ValueError:
            continue
    return {}


def _close_string(text: str, start: int) -> str:
    body = text[start:]
    # drop an escape sequence that was cut in the middle (a lone backslash or a partial \uXXXX)
    cut = body.rfind("\\")
    if cut != -1:
        backslashes = len(body[: cut + 1]) - len(body[: cut + 1].rstrip("\\"))
        if backslashes % 2 == 1:
            tail = body[cut + 1 :]
            if not tail or (tail[0] == "u" and len(tail) < 5):
                body = body[:cut]
    return text[:start] + body + '"'


def _trim_dangling(text: str) -> str:
    stripped = text.rstrip()
    if stripped.endswith(","):
        stripped = stripped[:-1].rstrip()
    if stripped.endswith(":"):
        # a key without its value: drop the key as well
        stripped = stripped[:-1].rstrip()
        if stripped.endswith('"'):
            start = _string_start(stripped)
            if start is not None:
                stripped = stripped[:start].rstrip()
                if stripped.endswith(","):
                    stripped = stripped[:-1].rstrip()
    return stripped


def _string_start(text: str) -> int | None:
    index = len(text) - 2
    while index >= 0:
        if text[index] == '"':
            backslashes = 0
            probe = index - 1
            while probe >= 0 and text[probe] == "\\":
                backslashes += 1
                probe -= 1
            if backslashes % 2 == 0:
                return index
        index -= 1
    return None


def _close(text: str, stack: tuple[str, ...]) -> str:
    return text + "".join(_CLOSER[c] for c in reversed(stack))
