"""The session write lock: an OS file lock that dies with its holder.

`FileSessionLock` is an fcntl/flock lock (through `filelock`) on `<session file>.lock`. The
kernel drops it when the holding process exits or is killed, so there is no stale-lock
detection to get wrong; the lock file only records who holds it (pid, time) for error
messages. It is held for one append or one rewrite, never across a model call. `SessionLock` is
the interface a distributed implementation (e.g. a Redis lease with a fencing token) plugs into.
"""

from __future__ import annotations

import atexit
import os
import signal
import threading
import time
from pathlib import Path
from types import FrameType, TracebackType
from typing import Final, Protocol, runtime_checkable

import orjson
from filelock import FileLock, Timeout

from clawpi.errors import ClawpiError
from clawpi.session.entries import now_iso

LOCK_TIMEOUT_S: Final = 10.0
"""How long an append waits for another writer before giving up."""
BACKOFF_START_S: Final = 0.05
BACKOFF_MAX_S: Final = 1.0


class SessionLockTimeout(ClawpiError):
    """Another writer held the session lock for longer than the timeout."""

    reason = "session_busy"


@runtime_checkable
class SessionLock(Protocol):
    """Exclusive write access to one session file; re-entrant for its holder."""

    def acquire(self, timeout: float | None = None) -> None: ...

    def release(self) -> None: ...

    @property
    def is_held(self) -> bool: ...

    def __enter__(self) -> SessionLock: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


def lock_path_for(session_file: str | os.PathLike[str]) -> Path:
    """`<real dir>/<name>.lock`: symlinked paths to one session share one lock."""
    path = Path(session_file)
    return Path(os.path.realpath(path.parent)) / f"{path.name}.lock"


def read_lock_owner(lock_path: str | os.PathLike[str]) -> dict[str, object] | None:
    """The `{pid, createdAt}` record of the last holder, or None when unreadable."""
    try:
        data = orjson.loads(Path(lock_path).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _record_owner(fd: int) -> None:
    record = orjson.dumps({"pid": os.getpid(), "createdAt": now_iso()})
    os.ftruncate(fd, 0)
    os.pwrite(fd, record, 0)


_registry_lock = threading.Lock()
_file_locks: dict[str, FileLock] = {}
_held: set[FileSessionLock] = set()
_handlers_installed = False


class FileSessionLock:
    """fcntl lock on `<session file>.lock`, re-entrant within a thread, exclusive across
    threads and processes; acquisition backs off from 50 ms to 1 s until the timeout."""

    def __init__(
        self, session_file: str | os.PathLike[str], timeout: float = LOCK_TIMEOUT_S
    ) -> None:
        self.lock_path = lock_path_for(session_file)
        self.timeout = timeout
        key = str(self.lock_path)
        with _registry_lock:
            file_lock = _file_locks.get(key)
            if file_lock is None:
                file_lock = FileLock(
                    key, thread_local=True, preserve_lock_file=True, on_acquired=_record_owner
                )
                _file_locks[key] = file_lock
        self._lock = file_lock

    @property
    def is_held(self) -> bool:
        return self._lock.is_locked

    def acquire(self, timeout: float | None = None) -> None:
        limit = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        attempt = 0
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            try:
                self._lock.acquire(blocking=False)
            except Timeout:
                pass
            else:
                _track(self)
                return
            attempt += 1
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                owner = read_lock_owner(self.lock_path) or {}
                raise SessionLockTimeout(
                    f"session file locked (timeout {int(limit * 1000)}ms): "
                    f"pid={owner.get('pid', '?')} {self.lock_path}; another writer holds it; "
                    "retry later or stop that process"
                )
            time.sleep(min(BACKOFF_MAX_S, BACKOFF_START_S * attempt, remaining))

    def release(self) -> None:
        if self._lock.is_locked:
            self._lock.release()
        if not self._lock.is_locked:
            with _registry_lock:
                _held.discard(self)

    def __enter__(self) -> FileSessionLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def release_all_locks() -> None:
    """Drop every lock this process holds (at exit and on SIGTERM)."""
    with _registry_lock:
        held = list(_held)
        _held.clear()
    for lock in held:
        while lock._lock.is_locked:
            lock._lock.release(force=True)


def _track(lock: FileSessionLock) -> None:
    global _handlers_installed
    with _registry_lock:
        _held.add(lock)
        if _handlers_installed:
            return
        _handlers_installed = True
    atexit.register(release_all_locks)
    # SIGINT raises KeyboardInterrupt, which unwinds the `with` blocks holding locks.
    main = threading.current_thread() is threading.main_thread()
    if main and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    release_all_locks()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
