"""fsync off the caller's thread, for session files opened with `fsync="background"`.

An append in that mode returns as soon as its bytes are written: the page cache holds them, so
a crash of the process loses nothing. One worker thread then makes them durable, so a slow disk
no longer stalls the event loop (and every other session on it) for each entry. The trade: until
that fsync is done, a crash of the operating system can lose the newest entries.

Appends to a file whose fsync is still waiting share it: the fsync runs after their writes, so
it covers them. Each waiting fsync holds a descriptor of its own (a `dup`), so closing the
session meanwhile loses nothing. What is still waiting at interpreter exit is done then.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
from typing import Literal, TypeAlias

log = logging.getLogger(__name__)

FsyncMode: TypeAlias = bool | Literal["background"]
"""A session file's durability: True fsyncs each append before it returns (the default),
"background" right after it (see this module), False never."""


class BackgroundSync:
    """The worker thread and its queue: one fsync waiting per file at most."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._cond = threading.Condition()
        self._waiting: dict[tuple[int, int], int] = {}
        """(device, inode) -> a descriptor of that file, owned by the queue."""
        self._running = 0
        self._thread: threading.Thread | None = None
        self.done = 0
        """fsyncs completed (diagnostics and tests)."""

    def submit(self, fd: int, file_id: tuple[int, int]) -> None:
        """Make what was written to `fd` durable soon (`file_id`: its device and inode)."""
        with self._cond:
            if file_id in self._waiting:
                return  # that fsync has not started: it will cover this write too
            self._waiting[file_id] = os.dup(fd)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._work, name="clawpi-session-fsync", daemon=True
                )
                self._thread.start()
            self._cond.notify()

    def wait(self) -> None:
        """Return once everything submitted so far is on disk."""
        with self._cond:
            while self._waiting or self._running:
                self._cond.wait()

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._waiting:
                    self._cond.wait()
                file_id = next(iter(self._waiting))
                fd = self._waiting.pop(file_id)
                self._running += 1
            try:
                os.fsync(fd)
            except OSError as exc:  # the bytes are written; only their durability is in doubt
                log.warning("background fsync of a session file failed: %s", exc)
            finally:
                with contextlib.suppress(OSError):
                    os.close(fd)
                with self._cond:
                    self._running -= 1
                    self.done += 1
                    self._cond.notify_all()

    def forget(self) -> None:
        """In a forked child: the worker thread did not come along, and the parent's queue is
        the parent's to finish."""
        for fd in self._waiting.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._reset()


background_fsync = BackgroundSync()
"""The process's one worker (a name apart from this module's, which the package exports too)."""
atexit.register(background_fsync.wait)
os.register_at_fork(after_in_child=background_fsync.forget)
