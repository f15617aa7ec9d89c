"""Appending lines to a session file: one write per call, under the lock, fsynced by default.

The writer remembers the size and inode the file had after its own last write. Under the lock it
checks them: bytes appended meanwhile by another process are handed back so the manager can see
those entries (and never reuse their ids); a torn line left by a writer that died mid-write gets a
newline first, so it can never swallow the next entry; a file replaced by a rewrite elsewhere is
reported so the manager reloads it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from clawpi.session.lock import FileSessionLock, SessionLock


@dataclass(slots=True)
class Foreign:
    """What changed on disk since our last write."""

    tail: bytes = b""
    replaced: bool = False


class SessionWriter:
    def __init__(
        self,
        path: Path,
        *,
        fsync: bool = True,
        lock_factory: Callable[[Path], SessionLock] = FileSessionLock,
    ) -> None:
        self.path = path
        self.fsync = fsync
        self.lock = lock_factory(path)
        self.size: int | None = None
        self.inode: int | None = None
        self.ends_with_newline = True

    def expect(self, size: int, inode: int, ends_with_newline: bool) -> None:
        """Record the state of the file as the manager last read it."""
        self.size = size
        self.inode = inode
        self.ends_with_newline = ends_with_newline

    def append(self, build: Callable[[Foreign], bytes]) -> None:
        """Under the lock: learn what others wrote, then write `build(foreign)` in one call.

        `build` runs inside the lock so ids can be checked against entries written by others.
        """
        with self.lock:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                foreign = self._foreign(fd)
                data = build(foreign)
                if not self.ends_with_newline:
                    data = b"\n" + data
                _write_all(fd, data)
                if self.fsync:
                    os.fsync(fd)
                self.size = (self.size or 0) + len(data)
                self.ends_with_newline = True
            finally:
                os.close(fd)

    def _foreign(self, fd: int) -> Foreign:
        stat = os.fstat(fd)
        known = self.size or 0
        if self.inode is None or stat.st_ino != self.inode or stat.st_size < known:
            replaced = self.inode is not None
            self.size, self.inode = stat.st_size, stat.st_ino
            self.ends_with_newline = stat.st_size == 0 or os.pread(fd, 1, stat.st_size - 1) == b"\n"
            return Foreign(replaced=replaced)
        if stat.st_size == known:
            return Foreign()
        tail = os.pread(fd, stat.st_size - known, known)
        self.size = stat.st_size
        self.ends_with_newline = tail.endswith(b"\n")
        return Foreign(tail=tail)

    def rewrite(self, content: bytes) -> None:
        """Replace the whole file atomically (temp file, fsync, rename) under the lock."""
        from clawpi.session.repair import write_atomically

        with self.lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(self.path, content, fsync=self.fsync)
            stat = self.path.stat()
            self.size, self.inode = stat.st_size, stat.st_ino
            self.ends_with_newline = True


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
