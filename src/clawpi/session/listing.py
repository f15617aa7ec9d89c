"""Summaries of the session files in a directory, for pickers and `clawpi sessions`.

Same fields and rules as pi's `SessionInfo`: `modified` is the newest user/assistant message
time (falling back to the header time, then the file mtime); lists are newest first.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from clawpi.session.context import iso_to_ms
from clawpi.session.loader import is_valid_session_file, read_session_file


@dataclass(slots=True)
class SessionInfo:
    path: Path
    id: str
    cwd: str
    name: str | None
    parent_session_path: str | None
    created: datetime | None
    modified: datetime
    message_count: int
    first_message: str
    all_messages_text: str


def _from_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return " ".join(
        str(block.get("text", ""))
        for block in content
        if isinstance(block, dict) and block.get("type") == "text"
    )


def session_info(path: Path) -> SessionInfo | None:
    """The summary of one file, or None when it is not a session file."""
    try:
        parsed = read_session_file(path)
        mtime = path.stat().st_mtime
    except OSError:
        return None
    header = parsed.header
    if header is None:
        return None
    count = 0
    first = ""
    texts: list[str] = []
    name: str | None = None
    last_activity: int | None = None
    for entry in parsed.lines[1:]:
        kind = entry.get("type")
        if kind == "session_info" and entry.get("name"):
            name = str(entry["name"]).strip()
        if kind != "message":
            continue
        count += 1
        message = entry.get("message")
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            continue
        if "content" not in message:
            continue
        stamp = message.get("timestamp")
        when = stamp if isinstance(stamp, int | float) else iso_to_ms(entry.get("timestamp"))
        if when is not None:
            last_activity = max(last_activity or 0, int(when))
        text = _text_of(message)
        if not text:
            continue
        texts.append(text)
        if not first and message.get("role") == "user":
            first = text
    created_ms = iso_to_ms(header.get("timestamp"))
    if last_activity:
        modified = _from_ms(last_activity)
    elif created_ms is not None:
        modified = _from_ms(created_ms)
    else:
        modified = datetime.fromtimestamp(mtime, tz=UTC)
    cwd = header.get("cwd")
    parent = header.get("parentSession")
    return SessionInfo(
        path=path,
        id=str(header["id"]),
        cwd=cwd if isinstance(cwd, str) else "",
        name=name,
        parent_session_path=parent if isinstance(parent, str) else None,
        created=_from_ms(created_ms) if created_ms is not None else None,
        modified=modified,
        message_count=count,
        first_message=first or "(no messages)",
        all_messages_text=" ".join(texts),
    )


def list_session_dir(directory: Path) -> list[SessionInfo]:
    """Every session file directly in `directory`, newest first; unreadable files are skipped."""
    if not directory.is_dir():
        return []
    infos = [
        info
        for file in directory.iterdir()
        if file.suffix == ".jsonl" and (info := session_info(file)) is not None
    ]
    infos.sort(key=lambda info: info.modified, reverse=True)
    return infos


def find_most_recent_session(directory: Path) -> Path | None:
    """The newest valid `.jsonl` in `directory` by mtime, or None."""
    try:
        files = [f for f in directory.iterdir() if f.suffix == ".jsonl"]
    except OSError:
        return None
    candidates = []
    for file in files:
        if is_valid_session_file(file):
            try:
                candidates.append((os.stat(file).st_mtime_ns, file))
            except OSError:
                continue
    return max(candidates)[1] if candidates else None
