"""Making a damaged session file loadable without losing a valid line.

A crash can leave a torn last line; disks and editors can leave garbage. Before a file is
opened for writing, unparseable lines are removed, assistant turns that failed with no content
get a placeholder (providers reject empty content on replay), the original is kept as
`<file>.bak-<pid>-<ms>` and the cleaned file replaces it atomically. Valid lines are copied
byte for byte.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from clawpi.session.codec import dumps_entry, loads_line
from clawpi.session.entries import is_header
from clawpi.session.lock import FileSessionLock, SessionLock

STREAM_ERROR_FALLBACK_TEXT: Final = "[assistant turn failed before producing content]"
"""Content given to an errored assistant turn that streamed nothing."""

_PREVIEW_CHARS: Final = 80


@dataclass(slots=True)
class DroppedLine:
    line_number: int
    preview: str
    reason: str


@dataclass(slots=True)
class RepairReport:
    """What `repair_session_file` did; `repaired` is False when the file was left as it was."""

    path: Path
    repaired: bool = False
    dropped_lines: int = 0
    dropped: list[DroppedLine] = field(default_factory=list)
    rewritten_assistant_messages: int = 0
    added_final_newline: bool = False
    reason: str | None = None
    backup_path: Path | None = None

    def summary(self) -> str:
        return (
            f"session file repaired: dropped {self.dropped_lines} malformed line(s), rewrote "
            f"{self.rewritten_assistant_messages} assistant message(s) ({self.path.name})"
        )


def _parse_line(line: bytes) -> tuple[object, str | None]:
    try:
        value = loads_line(line)
    except ValueError as exc:
        return None, f"not valid JSON ({exc})"
    if not isinstance(value, dict):
        return None, "not a JSON object"
    return value, None


def _needs_placeholder(entry: dict[str, object]) -> bool:
    message = entry.get("message")
    return (
        entry.get("type") == "message"
        and isinstance(message, dict)
        and message.get("role") == "assistant"
        and message.get("stopReason") == "error"
        and message.get("content") == []
    )


def scan_session_bytes(data: bytes, report: RepairReport) -> list[bytes] | None:
    """The lines to keep (each without its newline), or None when the file must be left alone."""
    kept: list[bytes] = []
    header_seen = False
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        value, problem = _parse_line(raw)
        if problem is not None or not isinstance(value, dict):
            preview = raw[:_PREVIEW_CHARS].decode("utf-8", "replace")
            report.dropped.append(DroppedLine(number, preview, problem or "not a JSON object"))
            continue
        if not header_seen:
            if not is_header(value):
                report.reason = "invalid session header"
                return None
            header_seen = True
        if _needs_placeholder(value):
            value["message"]["content"] = [{"type": "text", "text": STREAM_ERROR_FALLBACK_TEXT}]
            raw = dumps_entry(value)
            report.rewritten_assistant_messages += 1
        kept.append(raw)
    if not header_seen:
        report.reason = "empty session file"
        return None
    report.dropped_lines = len(report.dropped)
    return kept


def repair_session_file(
    path: str | os.PathLike[str], *, lock: SessionLock | None = None, fsync: bool = True
) -> RepairReport:
    """Repair `path` in place under its write lock; see the module docstring.

    `fsync=False` skips the flushes to disk (for sessions whose durability setting is off)."""
    file_path = Path(path)
    report = RepairReport(path=file_path)
    session_lock = lock if lock is not None else FileSessionLock(file_path)
    with session_lock:
        try:
            data = file_path.read_bytes()
        except FileNotFoundError:
            report.reason = "missing session file"
            return report
        except OSError as exc:
            report.reason = f"cannot read session file: {exc}"
            return report
        kept = scan_session_bytes(data, report)
        if kept is None:
            return report
        report.added_final_newline = not data.endswith(b"\n")
        changed = report.dropped_lines or report.rewritten_assistant_messages
        if not changed and not report.added_final_newline:
            return report
        if not changed:
            # Only the newline was missing: complete the last line where it is.
            with open(file_path, "ab") as handle:
                handle.write(b"\n")
                handle.flush()
                if fsync:
                    os.fsync(handle.fileno())
            report.repaired = True
            return report
        backup = file_path.with_name(
            f"{file_path.name}.bak-{os.getpid()}-{int(time.time() * 1000)}"
        )
        backup.write_bytes(data)
        write_atomically(file_path, b"".join(line + b"\n" for line in kept), fsync=fsync)
        report.backup_path = backup
        report.repaired = True
        return report


def write_atomically(path: Path, content: bytes, *, fsync: bool = True) -> None:
    """Write `content` to a temp file next to `path`, fsync it and rename it over `path`."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o644
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        view = memoryview(content)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if fsync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        temp.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.replace(temp, path)
    if not fsync:
        return
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
