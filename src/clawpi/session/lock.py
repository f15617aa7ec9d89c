"""The session write lock: an OS file lock that dies with its holder.

`FileSessionLock` is an flock lock on `<session file>.lock`. The
kernel drops it when the holding process exits or is killed, so there is no stale-lock
detection to get wrong; the lock file only records who holds it (pid, time) for error
messages. It is held for one append or one rewrite, never across a model call. `SessionLock` is
the interface a distributed implementation (e.g. a Redis lease with a fencing token) plugs into.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import functools
import os
import signal
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import Final, Protocol, runtime_checkable

import orjson

from clawpi.errors import ClawpiError
from clawpi.session.context import iso_to_ms
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


_RECORD_BYTES: Final = 128
"""The owner record is padded to a fixed width and overwritten in place: truncating the lock
file on every acquisition would cost a journal commit on ext4."""


STALE_RECORD_S: Final = 30 * 60
"""A record of a live process that does not hold the OS lock is respected this long."""


def _record_owner(fd: int) -> None:
    record = b'{"pid":%d,"createdAt":"%s"}' % (os.getpid(), now_iso().encode())
    os.pwrite(fd, record.ljust(_RECORD_BYTES), 0)


def _record_release(fd: int) -> None:
    """Mark the record released. The file stays (recreating it per append would cost a
    directory update each time); `starttime: 0` never matches a live process, so a reader
    that checks for pid reuse (OpenClaw's lock) treats it as free at once."""
    os.pwrite(fd, _released_record(os.getpid()), 0)


@functools.cache
def _released_record(pid: int) -> bytes:
    record = orjson.dumps({"pid": pid, "createdAt": now_iso(), "starttime": 0, "released": True})
    return record.ljust(_RECORD_BYTES)


def _held_without_flock(fd: int) -> bool:
    """Whether the lock file names another live process, recently: a writer that locks by
    creating the file exclusively (OpenClaw does) rather than with flock. Records of dead
    processes (a clawpi writer that was killed) are ignored: the kernel freed their lock."""
    raw = os.pread(fd, 512, 0)
    if not raw.strip() or b'"released":true' in raw:  # the common case: nobody named
        return False
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    if not isinstance(record, dict) or record.get("released"):
        return False
    pid = record.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 or pid == os.getpid():
        return False
    created = iso_to_ms(record.get("createdAt"))
    if created is None or time.time() * 1000 - created > STALE_RECORD_S * 1000:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    """A killed process its parent has not reaped yet still answers kill(pid, 0)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 : stat.rfind(")") + 3] == "Z"


@dataclass(slots=True)
class _Hold:
    fd: int
    inode: int
    count: int


IDLE_DESCRIPTORS: Final = 32
"""Unlocked lock-file descriptors kept open for reuse (opening costs more than locking)."""
_idle: OrderedDict[str, list[tuple[int, int]]] = OrderedDict()
_idle_count = 0


_holds_lock = threading.Lock()
_holds: dict[tuple[int, str], _Hold] = {}
"""Locks held by this process, per (thread, lock file)."""
_handlers_installed = False


def _forget_after_fork() -> None:
    """A forked child owns none of its parent's locks; closing the inherited descriptors
    leaves the parent's locks in place (flock releases only when every copy is closed)."""
    global _holds_lock, _idle_count
    _holds_lock = threading.Lock()
    fds = [hold.fd for hold in _holds.values()]
    fds += [fd for pool in _idle.values() for fd, _ in pool]
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
    _holds.clear()
    _idle.clear()
    _idle_count = 0


os.register_at_fork(after_in_child=_forget_after_fork)


def _open_lock_file(path: str) -> tuple[int, int]:
    """An unlocked descriptor of `path` and its inode, reused from the idle pool if possible."""
    global _idle_count
    with _holds_lock:
        pool = _idle.get(path)
        if pool:
            _idle_count -= 1
            fd_inode = pool.pop()
            if not pool:
                del _idle[path]
            return fd_inode
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except FileNotFoundError:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    return fd, os.fstat(fd).st_ino


def _park(path: str, fd: int, inode: int) -> None:
    """Return an unlocked descriptor to the idle pool, closing the oldest beyond the limit."""
    global _idle_count
    evicted: list[int] = []
    with _holds_lock:
        _idle.setdefault(path, []).append((fd, inode))
        _idle.move_to_end(path)
        _idle_count += 1
        while _idle_count > IDLE_DESCRIPTORS:
            oldest = next(iter(_idle))
            pool = _idle[oldest]
            evicted.append(pool.pop(0)[0])
            _idle_count -= 1
            if not pool:
                del _idle[oldest]
    for old in evicted:
        os.close(old)


def _try_lock(path: str) -> tuple[int, int] | None:
    """The locked descriptor and its inode, or None while someone else holds the lock."""
    fd, inode = _open_lock_file(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        _park(path, fd, inode)
        return None
    try:
        same_file = os.stat(path).st_ino == inode
    except FileNotFoundError:
        same_file = False
    if not same_file:  # the lock file was removed or replaced: lock the new one instead
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        return _try_lock(path) if os.path.exists(path) else None
    if _held_without_flock(fd):  # e.g. OpenClaw, which locks by creating the file
        fcntl.flock(fd, fcntl.LOCK_UN)
        _park(path, fd, inode)
        return None
    _record_owner(fd)
    return fd, inode


def _unlock(fd: int) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


class FileSessionLock:
    """flock on `<session file>.lock`, re-entrant within a thread, exclusive across threads
    and processes; acquisition backs off from 50 ms to 1 s until the timeout.

    Implemented on `fcntl.flock` directly: the lock is taken once per append, and a bare
    flock/unlock on a kept-open descriptor costs a few microseconds where a general-purpose
    lock library spends about half a millisecond of Python per acquisition.
    """

    def __init__(
        self, session_file: str | os.PathLike[str], timeout: float = LOCK_TIMEOUT_S
    ) -> None:
        self.lock_path = lock_path_for(session_file)
        self.timeout = timeout
        self._key = str(self.lock_path)

    @property
    def is_held(self) -> bool:
        return (threading.get_ident(), self._key) in _holds

    def acquire(self, timeout: float | None = None) -> None:
        hold_key = (threading.get_ident(), self._key)
        hold = _holds.get(hold_key)
        if hold is not None:
            hold.count += 1
            return
        locked = _try_lock(self._key)
        if locked is None:
            locked = self._wait(timeout)
        with _holds_lock:
            _holds[hold_key] = _Hold(locked[0], locked[1], 1)
        _install_handlers()

    def _wait(self, timeout: float | None) -> tuple[int, int]:
        limit = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        attempt = 0
        while (locked := _try_lock(self._key)) is None:
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
        return locked

    def release(self) -> None:
        hold_key = (threading.get_ident(), self._key)
        hold = _holds.get(hold_key)
        if hold is None:
            return
        hold.count -= 1
        if hold.count == 0:
            with _holds_lock:
                _holds.pop(hold_key, None)
            _record_release(hold.fd)
            fcntl.flock(hold.fd, fcntl.LOCK_UN)
            _park(self._key, hold.fd, hold.inode)

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
    with _holds_lock:
        holds = list(_holds.values())
        _holds.clear()
    for hold in holds:
        with contextlib.suppress(OSError):
            _record_release(hold.fd)
            _unlock(hold.fd)


def _install_handlers() -> None:
    global _handlers_installed
    if _handlers_installed:
        return
    with _holds_lock:
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
