"""pi's output caps: whole-line head and tail truncation by line count and UTF-8 bytes."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

DEFAULT_MAX_LINES = 2000
DEFAULT_MAX_BYTES = 50 * 1024
GREP_MAX_LINE_LENGTH = 500


@dataclasses.dataclass(slots=True)
class Truncation:
    """The outcome of a truncation; `to_dict()` is what pi stores in `details.truncation`."""

    content: str
    truncated: bool
    truncated_by: Literal["lines", "bytes"] | None
    total_lines: int
    total_bytes: int
    output_lines: int
    output_bytes: int
    last_line_partial: bool
    first_line_exceeds_limit: bool
    max_lines: int
    max_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "content": self.content,
            "truncated": self.truncated,
            "truncatedBy": self.truncated_by,
            "totalLines": self.total_lines,
            "totalBytes": self.total_bytes,
            "outputLines": self.output_lines,
            "outputBytes": self.output_bytes,
            "lastLinePartial": self.last_line_partial,
            "firstLineExceedsLimit": self.first_line_exceeds_limit,
            "maxLines": self.max_lines,
            "maxBytes": self.max_bytes,
        }


def format_size(num_bytes: int) -> str:
    if num_bytes < 1024:
        return f"{num_bytes}B"
    if num_bytes < 1024 * 1024:
        return f"{num_bytes / 1024:.1f}KB"
    return f"{num_bytes / (1024 * 1024):.1f}MB"


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _untruncated(
    text: str, total_lines: int, total_bytes: int, max_lines: int, max_bytes: int
) -> Truncation:
    return Truncation(
        text, False, None, total_lines, total_bytes, total_lines, total_bytes,
        False, False, max_lines, max_bytes,
    )  # fmt: skip


def truncate_head(
    text: str, *, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES
) -> Truncation:
    """Keep whole leading lines while both caps hold (for file reads: the start matters)."""
    total_bytes = _size(text)
    lines = text.split("\n")
    total_lines = len(lines)
    if total_lines <= max_lines and total_bytes <= max_bytes:
        return _untruncated(text, total_lines, total_bytes, max_lines, max_bytes)
    first = _size(lines[0])
    if first > max_bytes:
        return Truncation(
            "", True, "bytes", total_lines, total_bytes, 0, 0, False, True, max_lines, max_bytes
        )
    kept: list[str] = []
    used = 0
    by: Literal["lines", "bytes"] = "lines"
    for index, line in enumerate(lines):
        if index >= max_lines:
            by = "lines"
            break
        cost = _size(line) + (1 if index > 0 else 0)
        if used + cost > max_bytes:
            by = "bytes"
            break
        kept.append(line)
        used += cost
    content = "\n".join(kept)
    return Truncation(
        content, True, by, total_lines, total_bytes, len(kept), _size(content),
        False, False, max_lines, max_bytes,
    )  # fmt: skip


def _utf8_tail(text: str, max_bytes: int) -> str:
    data = text.encode("utf-8", "surrogatepass")[-max_bytes:]
    start = 0
    while start < len(data) and (data[start] & 0xC0) == 0x80:
        start += 1
    return data[start:].decode("utf-8", "replace")


def truncate_tail(
    text: str, *, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES
) -> Truncation:
    """Keep whole trailing lines while both caps hold (for command output: the end matters)."""
    total_bytes = _size(text)
    lines = text.split("\n")
    total_lines = len(lines)
    if total_lines <= max_lines and total_bytes <= max_bytes:
        return _untruncated(text, total_lines, total_bytes, max_lines, max_bytes)
    kept: list[str] = []
    used = 0
    by: Literal["lines", "bytes"] = "lines"
    partial = False
    for count, line in enumerate(reversed(lines)):
        if count >= max_lines:
            by = "lines"
            break
        cost = _size(line) + (1 if count > 0 else 0)
        if used + cost > max_bytes:
            by = "bytes"
            if not kept:
                kept.append(_utf8_tail(line, max_bytes))
                partial = True
            break
        kept.append(line)
        used += cost
    kept.reverse()
    content = "\n".join(kept)
    return Truncation(
        content, True, by, total_lines, total_bytes, len(kept), _size(content),
        partial, False, max_lines, max_bytes,
    )  # fmt: skip


def truncate_line(line: str, max_chars: int = GREP_MAX_LINE_LENGTH) -> tuple[str, bool]:
    """Cut one grep output line to `max_chars`, marking the cut."""
    if len(line) <= max_chars:
        return line, False
    return line[:max_chars] + "... [truncated]", True
