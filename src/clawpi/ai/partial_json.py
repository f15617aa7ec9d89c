"""Best-effort parsing of a tool call's argument JSON while it is still streaming.

Each delta of a tool call's arguments asks for the arguments parsed so far. Parsing the whole
text again each time is quadratic over a long argument (a 50 KB file written through a tool call
took 7.7 s of the event loop). `StreamingJsonParser` keeps what it learnt from the text so far:
the scanner's state, so each delta is scanned once; and, while a string value is open (the
usual long argument: a file's content, a command), the parse of everything before it and the
string decoded as far as it safely goes, so a delta costs its own length plus one copy. The
result is always what `parse_streaming_json` gives for the whole text.
"""

from __future__ import annotations

import collections
import json
import re
from collections.abc import Callable
from typing import Any, Final

import orjson

_CLOSER = {"{": "}", "[": "]"}
_LONG_NUMBER = re.compile(r"\d{19}")
"""A run of digits that may not fit in 64 bits: orjson would read such an integer as a float."""
_LONG_NUMBER_SPAN: Final = 18
_IN_STRING = re.compile(r'["\\]')
_STRUCTURE = re.compile(r'["{}\[\],]')
_HIGH_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}$")
_PLACEHOLDER: Final = "\x00clawpi open string\x00"
_PLACEHOLDER_JSON: Final = '"\\u0000clawpi open string\\u0000"'
_UNUSABLE: Final = object()

Loads = Callable[[str], Any]


def parse_streaming_json(text: str) -> dict[str, Any]:
    """Parse possibly-truncated JSON into an object; `{}` when nothing usable is there yet.

    Complete JSON parses strictly. Truncated JSON is completed by closing the open string and
    containers; a member whose value was cut mid-token is dropped rather than guessed.
    """
    parser = StreamingJsonParser()
    parser.append(text)
    return parser.whole_value()


class StreamingJsonParser:
    """`parse_streaming_json` of a text that only grows: `feed` each fragment."""

    __slots__ = (
        "_decoded",
        "_decoded_to",
        "_escaped",
        "_in_string",
        "_long_number",
        "_open_value",
        "_safe",
        "_stack",
        "_string_start",
        "text",
    )

    def __init__(self) -> None:
        self.text = ""
        self._stack: list[str] = []
        self._in_string = False
        self._escaped = False
        self._string_start = 0
        self._safe: collections.deque[tuple[int, tuple[str, ...]]] = collections.deque(maxlen=3)
        """The last places where the text could end cleanly, with the containers open there."""
        self._long_number = False
        self._open_value: tuple[int, Loads, Any, tuple[str | int, ...]] | None = None
        """For the open string: where it starts, the loader, the parse of the text before it
        (with a placeholder for the string) or `_UNUSABLE`, and the placeholder's path."""
        self._decoded = ""
        self._decoded_to = 0

    def feed(self, fragment: str) -> dict[str, Any]:
        """Add `fragment`; the arguments parsed so far."""
        self.append(fragment)
        return self.value()

    def append(self, fragment: str) -> None:
        start = len(self.text)
        self.text += fragment
        if not self._long_number:
            at = max(0, start - _LONG_NUMBER_SPAN)
            self._long_number = _LONG_NUMBER.search(self.text, at) is not None
        self._scan(start)

    def value(self) -> dict[str, Any]:
        if self._in_string:
            value = self._open_string_value()
            if value is not None:
                return value
        return self.whole_value()

    def whole_value(self) -> dict[str, Any]:
        """The parse of the whole text, not using the open string's kept work."""
        text = self.text
        if not text or text.isspace():
            return {}
        loads = self._loads()
        value: Any = _UNUSABLE
        if not self._in_string and not self._stack:  # otherwise it cannot be complete JSON
            try:
                value = loads(text)
            except ValueError:
                pass
        if value is _UNUSABLE:
            value = self._truncated(loads)
        return value if isinstance(value, dict) else {}

    def _loads(self) -> Loads:
        return json.loads if self._long_number else orjson.loads

    def _scan(self, pos: int) -> None:
        """Carry the scanner's state over `text[pos:]`, jumping to the characters that matter."""
        text = self.text
        end = len(text)
        stack = self._stack
        while pos < end:
            if self._escaped:  # the character after a backslash in a string is never special
                self._escaped = False
                pos += 1
                continue
            found = (_IN_STRING if self._in_string else _STRUCTURE).search(text, pos)
            if found is None:
                return
            pos = found.start()
            char = text[pos]
            if self._in_string:
                if char == "\\":
                    self._escaped = True
                else:
                    self._in_string = False
            elif char == '"':
                self._in_string = True
                self._string_start = pos
            elif char in "{[":
                stack.append(char)
                self._safe.append((pos + 1, tuple(stack)))
            elif char in "}]":
                if stack:
                    stack.pop()
                self._safe.append((pos + 1, tuple(stack)))
            else:
                self._safe.append((pos, tuple(stack)))
            pos += 1

    def _truncated(self, loads: Loads) -> Any:
        text = self.text
        stack = tuple(self._stack)
        head = _close_string(text, self._string_start) if self._in_string else text
        attempts = [(head, stack), *((text[:cut], opened) for cut, opened in reversed(self._safe))]
        for attempt, opened in attempts:
            try:
                return loads(_close(_trim_dangling(attempt), opened))
            except ValueError:
                continue
        return {}

    # -- the open string ---------------------------------------------------------------------

    def _open_string_value(self) -> dict[str, Any] | None:
        """The whole-text parse while a string value is open, from the kept parse of what
        precedes it and the string decoded so far; None where that does not apply (a key, a
        text that does not parse before it, an escape that does not decode)."""
        start = self._string_start
        loads = self._loads()
        kept = self._open_value
        if kept is None or kept[0] != start or kept[1] is not loads:
            kept = (start, loads, *self._parse_before(start, loads))
            self._open_value = kept
            self._decoded, self._decoded_to = "", start + 1
        root, path = kept[2], kept[3]
        if root is _UNUSABLE:
            return None
        text = self.text
        end = _escape_safe_end(text, self._decoded_to)
        decoded = self._decoded
        if end > self._decoded_to:
            chunk = text[self._decoded_to : end]
            try:
                piece = loads('"' + chunk + '"')
            except ValueError:
                return None
            decoded += piece
            if not _HIGH_SURROGATE_ESCAPE.search(chunk):  # its pair may follow: decode again
                self._decoded, self._decoded_to = decoded, end
        return _replaced(root, path, 0, decoded)  # type: ignore[no-any-return]

    def _parse_before(self, start: int, loads: Loads) -> tuple[Any, tuple[str | int, ...]]:
        """The text before the string at `start` parsed with a placeholder for the string, and
        the path to it; `_UNUSABLE` where that text does not parse so."""
        text = self.text[:start] + _PLACEHOLDER_JSON
        try:
            root = loads(_close(text, tuple(self._stack)))
        except ValueError:
            return _UNUSABLE, ()
        paths = list(_placeholder_paths(root, ()))
        if len(paths) != 1 or not isinstance(root, dict):
            return _UNUSABLE, ()
        return root, paths[0]


def _escape_safe_end(text: str, start: int) -> int:
    """Where the string body from `start` (an escape boundary) ends without an escape cut in
    the middle: `_close_string`'s rule, read from `start` only."""
    cut = text.rfind("\\", start)
    if cut < 0:
        return len(text)
    run = cut - len(text[start : cut + 1].rstrip("\\")) - start + 1
    if run % 2 == 1:
        tail = text[cut + 1 :]
        if not tail or (tail[0] == "u" and len(tail) < 5):
            return cut
    return len(text)


def _placeholder_paths(node: Any, path: tuple[str | int, ...]) -> Any:
    if isinstance(node, dict):
        for key, child in node.items():
            yield from _placeholder_paths(child, (*path, key))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            yield from _placeholder_paths(child, (*path, index))
    elif node == _PLACEHOLDER:
        yield path


def _replaced(node: Any, path: tuple[str | int, ...], depth: int, value: str) -> Any:
    """`node` with the value at `path` replaced, each container on the way copied."""
    if depth == len(path):
        return value
    copy: Any = dict(node) if isinstance(node, dict) else list(node)
    copy[path[depth]] = _replaced(node[path[depth]], path, depth + 1, value)
    return copy


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
