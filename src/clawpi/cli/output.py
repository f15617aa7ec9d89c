"""Writing to the terminal or a pipe: JSON lines snapshotted at the moment they are written."""

from __future__ import annotations

import sys
from typing import Any

import orjson


def _default(value: Any) -> Any:
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if hasattr(value, "__dataclass_fields__"):
        import dataclasses

        return dataclasses.asdict(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def json_line(value: Any) -> bytes:
    """One JSON line; serialising now is what snapshots live objects (pi's json mode did not)."""
    return orjson.dumps(value, default=_default, option=orjson.OPT_NON_STR_KEYS) + b"\n"


def write_json(value: Any) -> None:
    sys.stdout.buffer.write(json_line(value))
    sys.stdout.buffer.flush()


def write_text(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def error(text: str) -> None:
    sys.stderr.write(text.rstrip("\n") + "\n")
    sys.stderr.flush()
