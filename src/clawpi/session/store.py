"""`SessionManager`: a pi v3 session file as an append-only tree of entries.

Each `append_*` makes a child of the current leaf, moves the leaf to it and writes one line
(one write call, under the file lock, fsynced unless `fsync=False`; `fsync="background"` leaves
the fsync to a worker thread, see `background_sync`). As in pi, nothing is written
until the session has an assistant message; then everything not yet on disk is written at once,
and never twice (pi re-appends the header and old lines when it reopens a file without an
assistant message; clawpi tracks what is already on disk). Opening a damaged file repairs it
first (see `repair.py`); opening a v1/v2 file migrates it with a backup.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from operator import methodcaller
from pathlib import Path
from typing import Any, Protocol

from clawpi.session.background_sync import FsyncMode
from clawpi.session.codec import dumps_line
from clawpi.session.entries import (
    CURRENT_SESSION_VERSION,
    Entry,
    generate_id,
    is_assistant_entry,
    now_iso,
    random_uuid,
)
from clawpi.session.listing import SessionInfo, find_most_recent_session, list_session_dir
from clawpi.session.loader import (
    PROMOTE_MIN_ENTRIES,
    ParsedFile,
    gc_paused,
    parse_lines,
    read_session_file,
)
from clawpi.session.lock import FileSessionLock, SessionLock
from clawpi.session.migrate import migrate_entries, needs_migration
from clawpi.session.paths import DEFAULT_AGENT_ID, default_session_dir, session_file_name
from clawpi.session.repair import RepairReport, repair_session_file
from clawpi.session.tree import SessionError, SessionTree
from clawpi.session.writer import Foreign, SessionWriter

_GET_ID = methodcaller("get", "id")


class AppendInterceptor(Protocol):
    """Sees every append before it is written (the tool-result guard implements this)."""

    def on_message(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        """The messages to write for `message`, in order (possibly none, or synthetic ones)."""
        ...

    def on_other_entry(self) -> list[dict[str, Any]]:
        """Messages to write before a non-message entry."""
        ...


def _backup_path(path: Path) -> Path:
    return path.with_name(f"{path.name}.bak-{os.getpid()}-{int(time.time() * 1000)}")


class SessionManager(SessionTree):
    """The session tree of one file (or of memory only, see `in_memory`)."""

    def __init__(
        self,
        cwd: str,
        session_dir: Path | None,
        session_file: str | os.PathLike[str] | None,
        persist: bool,
        *,
        fsync: FsyncMode = True,
        repair: bool = True,
        lock_factory: Callable[[Path], SessionLock] = FileSessionLock,
    ) -> None:
        self.cwd = cwd
        self.session_dir = session_dir
        self.persist = persist
        self._fsync = fsync
        self.repair = repair
        self.repair_report: RepairReport | None = None
        self.session_id = ""
        self.session_file: Path | None = None
        self._lock_factory = lock_factory
        self._writer: SessionWriter | None = None
        super().__init__()
        self._on_disk = 0
        self._header_on_disk = False
        self._interceptor: AppendInterceptor | None = None
        if persist and session_dir is not None and not os.path.isdir(session_dir):
            session_dir.mkdir(parents=True, exist_ok=True)
        if session_file is not None:
            self.set_session_file(session_file)
        else:
            self.new_session()

    @property
    def fsync(self) -> FsyncMode:
        """How appends are made durable (see `FsyncMode`); may change between appends."""
        return self._fsync

    @fsync.setter
    def fsync(self, mode: FsyncMode) -> None:
        self._fsync = mode
        if self._writer is not None:
            self._writer.fsync = mode

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        cwd: str | os.PathLike[str],
        session_dir: str | os.PathLike[str] | None = None,
        *,
        agent_id: str = DEFAULT_AGENT_ID,
        pi_agent_dir: str | os.PathLike[str] | None = None,
        fsync: FsyncMode = True,
        session_file: str | os.PathLike[str] | None = None,
    ) -> SessionManager:
        """A new session; its file (`session_file`, else a timestamped name in the session
        directory) appears with the first assistant message. An existing `session_file` is
        opened instead."""
        directory = _resolve_dir(str(cwd), session_dir, agent_id, pi_agent_dir)
        return cls(str(cwd), directory, session_file, True, fsync=fsync)

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        session_dir: str | os.PathLike[str] | None = None,
        *,
        fsync: FsyncMode = True,
        repair: bool = True,
    ) -> SessionManager:
        """Open any pi v1/v2/v3 file (repaired and migrated as needed); cwd from its header."""
        file = _absolute(path)
        directory = Path(session_dir) if session_dir is not None else file.parent
        manager = cls(os.getcwd(), directory, file, True, fsync=fsync, repair=repair)
        cwd = manager._header.get("cwd")
        if isinstance(cwd, str):
            manager.cwd = cwd
        return manager

    @classmethod
    def continue_recent(
        cls,
        cwd: str | os.PathLike[str],
        session_dir: str | os.PathLike[str] | None = None,
        *,
        agent_id: str = DEFAULT_AGENT_ID,
        pi_agent_dir: str | os.PathLike[str] | None = None,
        fsync: FsyncMode = True,
    ) -> SessionManager:
        """The most recently modified valid session in the directory, or a new one."""
        directory = _resolve_dir(str(cwd), session_dir, agent_id, pi_agent_dir)
        recent = find_most_recent_session(directory) if directory.is_dir() else None
        return cls(str(cwd), directory, recent, True, fsync=fsync)

    @classmethod
    def in_memory(cls, cwd: str | os.PathLike[str] | None = None) -> SessionManager:
        """A session that never touches the disk."""
        return cls(str(cwd) if cwd is not None else os.getcwd(), None, None, False)

    @classmethod
    def fork_from(
        cls,
        source_path: str | os.PathLike[str],
        target_cwd: str | os.PathLike[str],
        session_dir: str | os.PathLike[str] | None = None,
        *,
        agent_id: str = DEFAULT_AGENT_ID,
        pi_agent_dir: str | os.PathLike[str] | None = None,
        fsync: FsyncMode = True,
    ) -> SessionManager:
        """A new session in `target_cwd` holding a copy of every entry of `source_path`."""
        source = read_session_file(source_path)
        if source.header is None:
            raise SessionError(
                f"Cannot fork: source session file is empty or invalid: {source_path}"
            )
        migrate_entries(source.lines)
        directory = _resolve_dir(str(target_cwd), session_dir, agent_id, pi_agent_dir)
        directory.mkdir(parents=True, exist_ok=True)
        session_id = random_uuid()
        timestamp = now_iso()
        target = directory / session_file_name(timestamp, session_id)
        header = {
            "type": "session",
            "version": CURRENT_SESSION_VERSION,
            "id": session_id,
            "timestamp": timestamp,
            "cwd": str(target_cwd),
            "parentSession": str(source_path),
        }
        lines = [header] + [e for e in source.lines if e.get("type") != "session"]
        SessionWriter(target, fsync=fsync).append(lambda _: _serialize(lines))
        return cls(str(target_cwd), directory, target, True, fsync=fsync)

    @staticmethod
    def list_sessions(
        cwd: str | os.PathLike[str],
        session_dir: str | os.PathLike[str] | None = None,
        *,
        agent_id: str = DEFAULT_AGENT_ID,
        pi_agent_dir: str | os.PathLike[str] | None = None,
    ) -> list[SessionInfo]:
        """`SessionInfo` for every session in the directory, newest first."""
        return list_session_dir(_resolve_dir(str(cwd), session_dir, agent_id, pi_agent_dir))

    # -- switching files ----------------------------------------------------------------------

    def new_session(
        self, *, id: str | None = None, parent_session: str | None = None
    ) -> Path | None:
        """Start an empty session (in memory until the first assistant message)."""
        return self._begin(id, parent_session, None)

    def _begin(self, id: str | None, parent_session: str | None, file: Path | None) -> Path | None:
        self.session_id = id or random_uuid()
        timestamp = now_iso()
        header: Entry = {
            "type": "session",
            "version": CURRENT_SESSION_VERSION,
            "id": self.session_id,
            "timestamp": timestamp,
            "cwd": self.cwd,
        }
        if parent_session is not None:
            header["parentSession"] = parent_session
        self._reset(header, [])
        self._header_on_disk = False
        self._on_disk = 0
        if file is None and self.persist and self.session_dir is not None:
            file = self.session_dir / session_file_name(timestamp, self.session_id)
        if file is not None:
            self._use_file(file)
        if self._writer is not None:
            self._writer.expect(0, 0, True)
            self._writer.inode = None
        return self.session_file

    def set_session_file(self, path: str | os.PathLike[str]) -> None:
        """Load `path` (repairing or migrating it first when needed), or start it if missing."""
        with gc_paused() as pause:  # every object built here lives as long as the session
            self._set_session_file(_absolute(path))
            pause.promote = len(self._entries) >= PROMOTE_MIN_ENTRIES

    def _set_session_file(self, file: Path) -> None:
        if not os.path.lexists(file):  # a new chat: nothing to read
            self._begin(None, None, file)
            return
        parsed = read_session_file(file, check_objects=False)
        if not parsed.lines and parsed.size == 0 and not file.exists():
            self._begin(None, None, file)
            return
        self._use_file(file)
        if self.persist and self.repair and parsed.damaged and parsed.header is not None:
            self.repair_report = repair_session_file(
                file, lock=self._lock(), fsync=bool(self.fsync)
            )
            parsed = read_session_file(file)
        if parsed.header is None:
            self._start_over(file, parsed)
            return
        if needs_migration(parsed.lines):
            parsed = read_session_file(file)
            migrate_entries(parsed.lines)
            if self.persist:
                with self._lock():
                    _backup_path(file).write_bytes(file.read_bytes())
                    assert self._writer is not None
                    self._writer.rewrite(_serialize(parsed.lines))
                parsed = read_session_file(file)
        if not self._load(parsed) and self.persist and self.repair:
            # a line held JSON that is not an object: repair drops it (with a backup)
            self.repair_report = repair_session_file(
                file, lock=self._lock(), fsync=bool(self.fsync)
            )
            self._load(read_session_file(file))

    def _start_over(self, file: Path, parsed: ParsedFile) -> None:
        """A file without a usable header: keep its bytes aside, then begin a fresh session."""
        if self.persist and parsed.size > 0:
            with self._lock():
                os.replace(file, _backup_path(file))
        self._begin(None, None, file)
        if self.persist:
            assert self._writer is not None
            self._writer.rewrite(dumps_line(self._header))
            self._header_on_disk = True

    def _use_file(self, file: Path) -> None:
        self.session_file = file
        if self._writer is not None:
            self._writer.close()
        if self.persist:
            self._writer = SessionWriter(file, fsync=self.fsync, lock_factory=self._lock_factory)

    def _lock(self) -> SessionLock:
        assert self._writer is not None
        return self._writer.lock

    def _load(self, parsed: ParsedFile) -> bool:
        """Take in a parsed file; False if it held lines that are not JSON objects."""
        lines = parsed.lines
        clean = self._reset(lines[0], lines[1:])
        self.session_id = str(lines[0]["id"])
        self._header_on_disk = True
        self._on_disk = len(self._entries)
        self._has_assistant = False
        if self._writer is not None:
            self._writer.expect(parsed.size, parsed.inode, parsed.ends_with_newline)
        return clean

    # -- writing ------------------------------------------------------------------------------

    def set_interceptor(self, interceptor: AppendInterceptor | None) -> None:
        """Route appends through `interceptor` (see `guard.install_tool_result_guard`)."""
        self._interceptor = interceptor

    @property
    def interceptor(self) -> AppendInterceptor | None:
        return self._interceptor

    def append_entry(self, kind: str, payload: Iterable[tuple[str, Any]]) -> str:
        """Append an entry of any type, e.g. one this version does not know, copied field for
        field (None values left out, payload before the id fields as pi writes custom entries)."""
        return self._append(self._stamp(payload, kind, True))

    def _stamp(self, payload: Iterable[tuple[str, Any]], kind: str, payload_first: bool) -> Entry:
        head = {
            "id": generate_id(self._by_id),
            "parentId": self._leaf_id,
            "timestamp": now_iso(),
        }
        entry: Entry = {"type": kind}
        if payload_first:
            entry.update((k, v) for k, v in payload if v is not None)
            entry.update(head)
        else:
            entry.update(head)
            entry.update((k, v) for k, v in payload if v is not None)
        return entry

    def _append(self, entry: Entry) -> str:
        if self._interceptor is not None and entry.get("type") != "message":
            for message in self._interceptor.on_other_entry():
                self._append(self._stamp([("message", message)], "message", False))
            entry["parentId"] = self._leaf_id
        if not self._has_assistant and is_assistant_entry(entry):
            self._has_assistant = True
        if self._should_write():
            assert self._writer is not None
            self._writer.append(lambda foreign: self._build_write(foreign, entry))
            self._on_disk = len(self._entries) + 1
            self._header_on_disk = True
        self._add(entry)
        return str(entry["id"])

    def _should_write(self) -> bool:
        if not self.persist or self._writer is None:
            return False
        if not self._has_assistant:
            self._has_assistant = any(is_assistant_entry(e) for e in self._entries)
        return self._has_assistant

    def _build_write(self, foreign: Foreign, entry: Entry) -> bytes:
        if foreign.replaced and self._header_on_disk:
            self._reload_keeping_position()
        elif foreign.tail and self._header_on_disk:
            self._merge(foreign.tail)
        if entry["id"] in self._by_id:
            entry["id"] = generate_id(self._by_id)
        if self._header_on_disk and self._on_disk == len(self._entries):
            return dumps_line(entry)
        pending: list[Entry] = [] if self._header_on_disk else [self._header]
        pending.extend(self._entries[self._on_disk :])
        pending.append(entry)
        return _serialize(pending)

    def _merge(self, tail: bytes) -> None:
        """Take in entries another process appended; our leaf stays where it is."""
        parsed = ParsedFile()
        parse_lines(tail, parsed)
        fresh = [e for e in parsed.lines if e.get("type") != "session"]
        self._entries[self._on_disk : self._on_disk] = fresh
        self._on_disk += len(fresh)
        for entry in fresh:
            self._by_id[entry.get("id")] = entry  # type: ignore[index]
            if entry.get("type") == "label":
                self._apply_label(entry)
        self._forget_indexes()

    def _reload_keeping_position(self) -> None:
        assert self.session_file is not None
        leaf, pending = self._leaf_id, self._entries[self._on_disk :]
        parsed = read_session_file(self.session_file)
        if parsed.header is None:
            return
        self._load(parsed)
        for entry in pending:
            self._entries.append(entry)
            self._by_id[entry["id"]] = entry
        self._forget_indexes()
        if leaf is None or leaf in self._by_id:
            self._leaf_id = leaf

    def flush(self) -> None:
        """Write entries held back because the session has no assistant message yet."""
        if not self.persist or self._writer is None:
            return
        if self._header_on_disk and self._on_disk == len(self._entries):
            return
        pending = ([] if self._header_on_disk else [self._header]) + self._entries[self._on_disk :]
        self._writer.append(lambda _: _serialize(pending))
        self._on_disk = len(self._entries)
        self._header_on_disk = True

    def append_message(self, message: dict[str, Any]) -> str:
        """Append a message (user, assistant, toolResult, custom, bashExecution); its id."""
        if self._interceptor is None:
            entry = {
                "type": "message",
                "id": generate_id(self._by_id),
                "parentId": self._leaf_id,
                "timestamp": now_iso(),
                "message": message,
            }
            return self._append(entry)
        entry_id = self._leaf_id or ""
        for item in self._interceptor.on_message(message):
            entry_id = self._append(self._stamp([("message", item)], "message", False))
        return entry_id

    def append_thinking_level_change(self, thinking_level: str) -> str:
        payload = [("thinkingLevel", thinking_level)]
        return self._append(self._stamp(payload, "thinking_level_change", False))

    def append_model_change(self, provider: str, model_id: str) -> str:
        payload = [("provider", provider), ("modelId", model_id)]
        return self._append(self._stamp(payload, "model_change", False))

    def append_compaction(
        self,
        summary: str,
        first_kept_entry_id: str,
        tokens_before: int,
        details: Any = None,
        from_hook: bool | None = None,
    ) -> str:
        payload = [
            ("summary", summary),
            ("firstKeptEntryId", first_kept_entry_id),
            ("tokensBefore", tokens_before),
            ("details", details),
            ("fromHook", from_hook),
        ]
        return self._append(self._stamp(payload, "compaction", False))

    def append_custom_entry(self, custom_type: str, data: Any = None) -> str:
        """Extension state; not part of the model's context."""
        payload = [("customType", custom_type), ("data", data)]
        return self._append(self._stamp(payload, "custom", True))

    def append_custom_message_entry(
        self,
        custom_type: str,
        content: str | list[dict[str, Any]],
        display: bool,
        details: Any = None,
    ) -> str:
        """An extension message that the model sees as a user message."""
        payload = [
            ("customType", custom_type),
            ("content", content),
            ("display", display),
            ("details", details),
        ]
        return self._append(self._stamp(payload, "custom_message", True))

    def append_session_info(self, name: str) -> str:
        return self._append(self._stamp([("name", name.strip())], "session_info", False))

    def append_label_change(self, target_id: str, label: str | None) -> str:
        """Set (or with None/"" clear) the label of an entry."""
        if target_id not in self._by_id:
            raise SessionError(f"Entry {target_id} not found")
        entry = self._stamp([("targetId", target_id), ("label", label)], "label", False)
        entry_id = self._append(entry)
        self._apply_label(entry)
        return entry_id

    def get_cwd(self) -> str:
        return self.cwd

    def get_session_dir(self) -> Path | None:
        return self.session_dir

    def get_session_id(self) -> str:
        return self.session_id

    def get_session_file(self) -> Path | None:
        return self.session_file

    def is_persisted(self) -> bool:
        return self.persist

    def close(self) -> None:
        """Close the file descriptor kept open for appends (reopened by the next append)."""
        if self._writer is not None:
            self._writer.close()

    def matches_disk(self) -> bool:
        """Whether the file on disk is exactly what this manager last read or wrote (nothing
        appended, replaced or edited in place by another process since: same inode and size,
        and not modified after the manager last looked)."""
        if not self.persist or self._writer is None or self.session_file is None:
            return True
        try:
            stat = os.stat(self.session_file)
        except FileNotFoundError:
            return not self._header_on_disk
        if self._writer.inode is None:
            return False
        writer = self._writer
        return (
            stat.st_ino == writer.inode
            and stat.st_size == writer.size
            and stat.st_mtime_ns <= writer.seen_ns
        )

    # -- branching ----------------------------------------------------------------------------

    def branch_with_summary(
        self,
        branch_from_id: str | None,
        summary: str,
        details: Any = None,
        from_hook: bool | None = None,
    ) -> str:
        """Branch (None: from before the root) and record a summary of the abandoned path."""
        if branch_from_id is not None and branch_from_id not in self._by_id:
            raise SessionError(f"Entry {branch_from_id} not found")
        self._leaf_id = branch_from_id
        payload = [
            ("fromId", branch_from_id if branch_from_id is not None else "root"),
            ("summary", summary),
            ("details", details),
            ("fromHook", from_hook),
        ]
        return self._append(self._stamp(payload, "branch_summary", False))

    def create_branched_session(self, leaf_id: str) -> Path | None:
        """Continue in a new session holding only the path to `leaf_id` (labels re-created)."""
        previous = self.session_file
        path = self.get_branch(leaf_id)
        if not path:
            raise SessionError(f"Entry {leaf_id} not found")
        kept = [e for e in path if e.get("type") != "label"]
        ids = {e.get("id") for e in kept}
        labels = [(t, lbl) for t, lbl in self._labels.items() if t in ids]
        self.new_session(parent_session=str(previous) if self.persist and previous else None)
        self._reset(self._header, kept)
        self._on_disk = 0
        self._header_on_disk = False
        for target, label in labels:
            entry = self._stamp([("targetId", target), ("label", label)], "label", False)
            self._entries.append(entry)
            self._by_id[entry["id"]] = entry
            self._leaf_id = entry["id"]
        self._reset(self._header, self._entries)
        if self.persist and self._should_write():
            self.flush()
        return self.session_file if self.persist else None


def _serialize(entries: Sequence[Entry]) -> bytes:
    return b"".join([dumps_line(entry) for entry in entries])


def _absolute(path: str | os.PathLike[str]) -> Path:
    """`path` made absolute and normal, as a `Path`: the caller's own when it already is one
    (a new session would otherwise parse and print its path twice more)."""
    absolute = os.path.abspath(path)
    if isinstance(path, Path) and str(path) == absolute:
        return path
    return Path(absolute)


def _resolve_dir(
    cwd: str,
    session_dir: str | os.PathLike[str] | None,
    agent_id: str,
    pi_agent_dir: str | os.PathLike[str] | None,
) -> Path:
    if session_dir is not None:
        return session_dir if isinstance(session_dir, Path) else Path(session_dir)
    return default_session_dir(cwd, agent_id=agent_id, pi_agent=pi_agent_dir)
