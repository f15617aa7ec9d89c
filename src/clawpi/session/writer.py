"""Appending lines to a session file: one write per call, under the lock, fsynced by default
(or in the background, see `background_sync`).

The file stays open between appends (reopened if the path now names another file). The writer
remembers the size and inode the file had after its own last write. Under the lock it
checks them: bytes appended meanwhile by another process are handed back so the manager can see
those entries (and never reuse their ids); a torn line left by a writer that died mid-write gets a
newline first, so it can never swallow the next entry; a file replaced by a rewrite elsewhere is
reported so the manager reloads it.
"""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from clawpi.session.background_sync import FsyncMode, background_fsync
from clawpi.session.lock import FileSessionLock, SessionLock


@dataclass(frozen=True, slots=True)
class Foreign:
    """What changed on disk since our last write."""

    tail: bytes = b""
    replaced: bool = False


_NOTHING: Final = Foreign()


class SessionWriter:
    def __init__(
        self,
        path: Path,
        *,
        fsync: FsyncMode = True,
        lock_factory: Callable[[Path], SessionLock] = FileSessionLock,
    ) -> None:
        self.path = path
        self.fsync: FsyncMode = fsync
        self._lock_factory = lock_factory
        self._lock: SessionLock | None = None
        self.size: int | None = None
        self.inode: int | None = None
        self.ends_with_newline = True
        self.seen_ns = 0
        """The clock just after this writer last read or wrote the file: a modification time
        past it is someone else's, even one that kept the size (an edit in place)."""
        self._fd: int | None = None
        self._finalizer: weakref.finalize[[int], SessionWriter] | None = None

    @property
    def lock(self) -> SessionLock:
        """Made at first use: a manager switches files (new session, then the file it was
        asked for) before it writes anything."""
        if self._lock is None:
            self._lock = self._lock_factory(self.path)
        return self._lock

    def expect(self, size: int, inode: int, ends_with_newline: bool) -> None:
        """Record the state of the file as the manager last read it."""
        self.size = size
        self.inode = inode
        self.ends_with_newline = ends_with_newline
        self.seen_ns = time.time_ns()

    def append(self, build: Callable[[Foreign], bytes]) -> None:
        """Under the lock: learn what others wrote, then write `build(foreign)` in one call.

        `build` runs inside the lock so ids can be checked against entries written by others.
        The fsync comes after the lock is released: the line is already in the file, in order,
        and other writers need not wait for our disk.
        """
        lock = self.lock
        lock.acquire()
        try:
            fd = self._fd
            if fd is None:
                fd, stat = self._reopen()
            else:  # fstat, not stat: no path walk; a file replaced or removed has no links left
                stat = os.fstat(fd)
                if stat.st_nlink == 0:
                    fd, stat = self._reopen()
            data = build(self._foreign(fd, stat))
            if not self.ends_with_newline:
                data = b"\n" + data
            _write_all(fd, data)
            self.seen_ns = time.time_ns()
            self.size = (self.size or 0) + len(data)
            self.ends_with_newline = True
        finally:
            lock.release()
        if self.fsync == "background":
            background_fsync.submit(fd, (stat.st_dev, stat.st_ino))
        elif self.fsync:
            os.fsync(fd)

    def _reopen(self) -> tuple[int, os.stat_result]:
        """A descriptor of the file now at `path` (created if missing), kept open."""
        self.close()
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        stat = os.fstat(fd)
        self._fd = fd
        self._finalizer = weakref.finalize(self, os.close, fd)
        return fd, stat

    def close(self) -> None:
        """Close the kept-open descriptor (also done when the writer is garbage collected)."""
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None
        self._fd = None

    def _foreign(self, fd: int, stat: os.stat_result) -> Foreign:
        """What others did to the file since our last write (usually nothing: `_NOTHING`)."""
        known = self.size or 0
        if self.inode is None or stat.st_ino != self.inode or stat.st_size < known:
            replaced = self.inode is not None
            self.size, self.inode = stat.st_size, stat.st_ino
            self.ends_with_newline = stat.st_size == 0 or os.pread(fd, 1, stat.st_size - 1) == b"\n"
            return Foreign(replaced=replaced)
        if stat.st_size == known:
            return _NOTHING
        tail = os.pread(fd, stat.st_size - known, known)
        self.size = stat.st_size
        self.ends_with_newline = tail.endswith(b"\n")
        return Foreign(tail=tail)

    def rewrite(self, content: bytes) -> None:
        """Replace the whole file atomically (temp file, fsync, rename) under the lock."""
        from clawpi.session.repair import write_atomically

        with self.lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(self.path, content, fsync=bool(self.fsync))  # rare: never deferred
            stat = self.path.stat()
            self.size, self.inode = stat.st_size, stat.st_ino
            self.ends_with_newline = True
            self.seen_ns = time.time_ns()


def _write_all(fd: int, data: bytes) -> None:
    written = os.write(fd, data)
    if written < len(data):  # a short write (e.g. a signal mid-way): write the rest
        view = memoryview(data)[written:]
        while view:
            view = view[os.write(fd, view) :]
