"""JSON for session lines: orjson, with the standard library as the fallback for the rare
line orjson refuses (a lone UTF-16 surrogate escape, an integer beyond 64 bits, a number beyond
a double's range) so that such a line is kept instead of being treated as corrupt, as
`JSON.parse` keeps it. `NaN` and `Infinity` written as bare words are not JSON, and pi skips
a line holding them: so does the fallback."""

from __future__ import annotations

import json
from typing import Any

import orjson


def loads_line(line: bytes) -> Any:
    """Parse one line; raises ValueError when it is not JSON at all."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line, parse_constant=_not_json)


def _not_json(word: str) -> Any:
    raise ValueError(f"{word} is not a JSON value")


def dumps_entry(entry: Any) -> bytes:
    """One compact JSON line (no newline), UTF-8, the way `JSON.stringify` writes it."""
    try:
        return orjson.dumps(entry)
    except TypeError:
        return json.dumps(entry, separators=(",", ":"), ensure_ascii=True).encode()


def dumps_line(entry: Any) -> bytes:
    """`dumps_entry` with the newline, written by orjson itself (no copy to append it)."""
    try:
        return orjson.dumps(entry, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        return dumps_entry(entry) + b"\n"
