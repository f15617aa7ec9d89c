"""JSON for session lines: orjson, with the standard library as the fallback for the rare
line orjson refuses (a lone UTF-16 surrogate escape, an integer beyond 64 bits) so that such
a line is kept instead of being treated as corrupt."""

from __future__ import annotations

import json
from typing import Any

import orjson


def loads_line(line: bytes) -> Any:
    """Parse one line; raises ValueError when it is not JSON at all."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line)


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
