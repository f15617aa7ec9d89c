"""Appending lines to a session file: one write per call, under the lock, fsynced by default.

The file stays open between appends (reopened if the path now names another file). The writer
remembers the size and inode the file had after its own last write. Under the lock it
checks them: bytes appended meanwhile by another process are handed back so the manager can see
those entries (and never reuse their ids); a torn line left by a writer that died mid-write gets a
newline first, so it can never swallow the next entry; a file replaced by a rewrite elsewhere is
reported so the manager reloads it.
"""

from __future__ import annotations

import os
import weakref
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
        self._fd: int | None = None
        self._fd_inode = 0
        self._finalizer: weakref.finalize[[int], SessionWriter] | None = None

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
            fd, stat = self._current()
            foreign = self._foreign(fd, stat)
            data = build(foreign)
            if not self.ends_with_newline:
                data = b"\n" + data
            _write_all(fd, data)
            if self.fsync:
                os.fsync(fd)
            self.size = (self.size or 0) + len(data)
            self.ends_with_newline = True

    def _current(self) -> tuple[int, os.stat_result]:
        """The kept-open descriptor of the file now at `path` (reopened if it was replaced)."""
        try:
            stat: os.stat_result | None = os.stat(self.path)
        except FileNotFoundError:
            stat = None
        if self._fd is not None and stat is not None and stat.st_ino == self._fd_inode:
            return self._fd, stat
        self.close()
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        stat = os.fstat(fd)
        self._fd, self._fd_inode = fd, stat.st_ino
        self._finalizer = weakref.finalize(self, os.close, fd)
        return fd, stat

    def close(self) -> None:
        """Close the kept-open descriptor (also done when the writer is garbage collected)."""
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None
        self._fd = None

    def _foreign(self, fd: int, stat: os.stat_result) -> Foreign:
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
