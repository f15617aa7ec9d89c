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
import mmap
import os
import signal
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import Final, Protocol, runtime_checkable

import orjson

from clawpi.errors import ClawpiError
from clawpi.session.context import iso_to_ms
from clawpi.session.entries import now_iso
from clawpi.session.paths import real_directory

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


def _lock_key(session_file: str | os.PathLike[str]) -> str:
    """`<real dir>/<name>.lock`: symlinked paths to one session share one lock. A string, which
    is what the lock works with: a new session's first append need not build a `Path`."""
    directory, name = os.path.split(os.path.abspath(session_file))
    return os.path.join(real_directory(directory), name + ".lock")


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


class _Records:
    """The lock-file records of one process, made once (and again in a forked child)."""

    __slots__ = ("owner_head", "owner_tail", "pid", "released")

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.owner_head = b'{"pid":%d,"createdAt":"' % pid
        iso_width = len("2026-01-01T00:00:00.000Z")
        self.owner_tail = b'"}'.ljust(_RECORD_BYTES - len(self.owner_head) - iso_width)
        # `starttime: 0` never matches a live process, so a reader that checks for pid reuse
        # (OpenClaw's lock) treats the file as free at once. The file itself stays: recreating
        # it per append would cost a directory update each time.
        released = {"pid": pid, "createdAt": now_iso(), "starttime": 0, "released": True}
        self.released = orjson.dumps(released).ljust(_RECORD_BYTES)

    def owner(self) -> bytes:
        return self.owner_head + now_iso().encode() + self.owner_tail


_records = _Records(os.getpid())


class _LockFile:
    """One open descriptor of a lock file, its owner record mapped into memory.

    Writing the record through a shared mapping changes the page cache without a system call
    and, once the page is dirty, without touching the inode: a `pwrite` would update the lock
    file's mtime on every acquisition and so add its inode to the journal commit of the
    session file's fsync. Readers using `read` see the same bytes.
    """

    __slots__ = ("_map", "_pwrites", "fd")

    MAP_AFTER: Final = 3
    """Records written with `pwrite` before the file is mapped, two per acquisition (the
    owner, then the release): a lock file used for one append (a new session's first turn,
    often its only one) is not worth the mapping's system calls, nor its unmapping."""

    def __init__(self, path: str) -> None:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except FileNotFoundError:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self.fd = fd
        self._map: mmap.mmap | None = None
        self._pwrites = 0

    def write_record(self, record: bytes) -> None:
        if self._map is not None:
            self._map[:] = record
            return
        os.pwrite(self.fd, record, 0)
        self._pwrites += 1
        if self._pwrites == self.MAP_AFTER:  # tried once; where mapping fails, pwrite it is
            with contextlib.suppress(OSError, ValueError):
                if os.fstat(self.fd).st_size != _RECORD_BYTES:
                    os.ftruncate(self.fd, _RECORD_BYTES)
                self._map = mmap.mmap(self.fd, _RECORD_BYTES)

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
        os.close(self.fd)


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
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 or pid == _records.pid:
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
    file: _LockFile
    count: int


IDLE_LOCK_FILES: Final = 16
"""Unlocked lock files kept open for reuse (opening costs more than locking); each holds two
descriptors once its record is mapped (the mapping keeps a duplicate)."""
_idle: OrderedDict[str, list[_LockFile]] = OrderedDict()
_idle_count = 0


_holds_lock = threading.Lock()
_holds: dict[tuple[int, str], _Hold] = {}
"""Locks held by this process, per (thread, lock file)."""
_handlers_installed = False
_fork_generation = 0
"""Bumped in a forked child: lock files kept by `FileSessionLock` objects are the parent's."""


def _forget_after_fork() -> None:
    """A forked child owns none of its parent's locks; closing the inherited descriptors
    leaves the parent's locks in place (flock releases only when every copy is closed)."""
    global _holds_lock, _idle_count, _fork_generation, _records
    _holds_lock = threading.Lock()
    _fork_generation += 1
    _records = _Records(os.getpid())
    files = [hold.file for hold in _holds.values()]
    files += [file for pool in _idle.values() for file in pool]
    for file in files:
        with contextlib.suppress(OSError):
            file.close()
    _holds.clear()
    _idle.clear()
    _idle_count = 0


os.register_at_fork(after_in_child=_forget_after_fork)


def _take_lock_file(path: str) -> tuple[_LockFile, bool]:
    """An unlocked lock file from the idle pool, or a newly opened one (then True)."""
    global _idle_count
    with _holds_lock:
        pool = _idle.get(path)
        if pool:
            _idle_count -= 1
            file = pool.pop()
            if not pool:
                del _idle[path]
            return file, False
    return _LockFile(path), True


def _park(path: str, file: _LockFile) -> None:
    """Return an unlocked lock file to the idle pool, closing the oldest beyond the limit."""
    global _idle_count
    evicted: list[_LockFile] = []
    with _holds_lock:
        _idle.setdefault(path, []).append(file)
        _idle.move_to_end(path)
        _idle_count += 1
        while _idle_count > IDLE_LOCK_FILES:
            oldest = next(iter(_idle))
            pool = _idle[oldest]
            evicted.append(pool.pop(0))
            _idle_count -= 1
            if not pool:
                del _idle[oldest]
    for old in evicted:
        old.close()


def _park_spares(path: str, spares: list[_LockFile], generation: int) -> None:
    """What a garbage-collected `FileSessionLock` kept goes to the idle pool."""
    while spares:
        file = spares.pop()
        if generation == _fork_generation:
            _park(path, file)
        else:
            with contextlib.suppress(OSError):
                file.close()


def _lock(path: str, file: _LockFile, fresh: bool) -> _LockFile | None:
    """`file` locked, or None while someone else holds the lock.

    The record is read only in a file this process has not locked before: a writer that locks
    by exclusive create (OpenClaw) always makes a new file, and one that locks with flock
    cannot write while we hold it.
    """
    try:
        fcntl.flock(file.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        _park(path, file)
        return None
    if os.fstat(file.fd).st_nlink == 0:  # removed or replaced: lock the file now there
        fcntl.flock(file.fd, fcntl.LOCK_UN)
        file.close()
        return _lock(path, _LockFile(path), True)
    if fresh and _held_without_flock(file.fd):  # e.g. OpenClaw, which locks by creating the file
        fcntl.flock(file.fd, fcntl.LOCK_UN)
        file.close()
        return None
    file.write_record(_records.owner())
    return file


def _unlock(file: _LockFile) -> None:
    try:
        fcntl.flock(file.fd, fcntl.LOCK_UN)
    finally:
        file.close()


class FileSessionLock:
    """flock on `<session file>.lock`, re-entrant within a thread, exclusive across threads
    and processes; acquisition backs off from 50 ms to 1 s until the timeout.

    Implemented on `fcntl.flock` directly: the lock is taken once per append, and a bare
    flock/unlock on a kept-open descriptor costs a few microseconds where a general-purpose
    lock library spends about half a millisecond of Python per acquisition. Each object keeps
    its unlocked lock file open between acquisitions (a thread that finds it taken opens
    another, so threads still exclude each other); when the object goes, the file goes to a
    small process-wide pool for the next lock of that path.
    """

    def __init__(
        self, session_file: str | os.PathLike[str], timeout: float = LOCK_TIMEOUT_S
    ) -> None:
        self._key = _lock_key(session_file)
        self.timeout = timeout
        self._spare: list[_LockFile] = []
        self._generation = _fork_generation
        weakref.finalize(self, _park_spares, self._key, self._spare, self._generation)

    @property
    def lock_path(self) -> Path:
        """The lock file: `<real dir of the session file>/<its name>.lock`."""
        return Path(self._key)

    @property
    def is_held(self) -> bool:
        return (threading.get_ident(), self._key) in _holds

    def acquire(self, timeout: float | None = None) -> None:
        hold_key = (threading.get_ident(), self._key)
        hold = _holds.get(hold_key)
        if hold is not None:
            hold.count += 1
            return
        locked = self._try_lock()
        if locked is None:
            locked = self._wait(timeout)
        _holds[hold_key] = _Hold(locked, 1)
        if not _handlers_installed:
            _install_handlers()

    def _try_lock(self) -> _LockFile | None:
        if self._generation != _fork_generation:
            _park_spares(self._key, self._spare, self._generation)
            self._generation = _fork_generation
        try:
            return _lock(self._key, self._spare.pop(), False)
        except IndexError:  # nothing kept (or another thread has it)
            return _lock(self._key, *_take_lock_file(self._key))

    def _wait(self, timeout: float | None) -> _LockFile:
        limit = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        attempt = 0
        while (locked := self._try_lock()) is None:
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
            _holds.pop(hold_key, None)
            file = hold.file
            file.write_record(_records.released)
            fcntl.flock(file.fd, fcntl.LOCK_UN)
            if self._spare or self._generation != _fork_generation:
                _park(self._key, file)
            else:
                self._spare.append(file)

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
        with contextlib.suppress(OSError, ValueError):
            hold.file.write_record(_records.released)
            _unlock(hold.file)


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
