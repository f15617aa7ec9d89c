"""The write lock: exclusive across processes, re-entrant, freed by the kernel when the holder dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest

from clawpi.session import FileSessionLock, SessionLockTimeout
from clawpi.session.entries import now_iso
from clawpi.session.lock import read_lock_owner

_HOLDER = textwrap.dedent(
    """
    import sys, time
    from clawpi.session import FileSessionLock
    lock = FileSessionLock(sys.argv[1])
    lock.acquire()
    print("held", flush=True)
    time.sleep(60)
    """
)


def _hold_in_child(session_file: Path) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(session_file)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    return child


def test_lock_records_pid_and_time_and_is_reentrant(tmp_path: Path) -> None:
    lock = FileSessionLock(tmp_path / "s.jsonl")
    with lock:
        with FileSessionLock(tmp_path / "s.jsonl"):
            owner = read_lock_owner(lock.lock_path)
            assert owner is not None and owner["pid"] == os.getpid()
            assert str(owner["createdAt"]).endswith("Z")
        assert lock.is_held
    assert not lock.is_held
    assert lock.lock_path == tmp_path / "s.jsonl.lock"


def test_symlinked_directories_share_one_lock(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    assert FileSessionLock(tmp_path / "link" / "s.jsonl").lock_path == real / "s.jsonl.lock"


def test_held_lock_times_out_with_the_holder_pid(tmp_path: Path) -> None:
    child = _hold_in_child(tmp_path / "s.jsonl")
    try:
        with pytest.raises(SessionLockTimeout, match=rf"pid={child.pid} .*s\.jsonl\.lock"):
            FileSessionLock(tmp_path / "s.jsonl", timeout=0.2).acquire()
    finally:
        child.kill()
        child.wait()


def test_lock_of_a_killed_process_does_not_block_the_next_writer(tmp_path: Path) -> None:
    child = _hold_in_child(tmp_path / "s.jsonl")
    child.send_signal(signal.SIGKILL)
    # not reaped yet: a zombie still answers kill(pid, 0), its record must not count
    lock = FileSessionLock(tmp_path / "s.jsonl", timeout=5)
    lock.acquire()
    owner = read_lock_owner(lock.lock_path)
    assert owner is not None and owner["pid"] == os.getpid()
    lock.release()
    child.wait()


def test_sigterm_releases_the_lock(tmp_path: Path) -> None:
    child = _hold_in_child(tmp_path / "s.jsonl")
    child.send_signal(signal.SIGTERM)
    assert child.wait() == -signal.SIGTERM
    with FileSessionLock(tmp_path / "s.jsonl", timeout=0.5):
        pass


def _write_record(lock_path: Path, pid: int) -> None:
    lock_path.write_bytes(orjson.dumps({"pid": pid, "createdAt": now_iso()}))


def test_lock_held_by_a_writer_that_does_not_use_flock_is_respected(tmp_path: Path) -> None:
    """OpenClaw locks by creating the lock file exclusively; while its (live) owner is
    named there, clawpi waits."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _write_record(tmp_path / "s.jsonl.lock", sleeper.pid)
        with pytest.raises(SessionLockTimeout, match=f"pid={sleeper.pid}"):
            FileSessionLock(tmp_path / "s.jsonl", timeout=0.2).acquire()
    finally:
        sleeper.kill()
        sleeper.wait()
    with FileSessionLock(tmp_path / "s.jsonl", timeout=0.5):  # its owner is gone now
        owner = read_lock_owner(tmp_path / "s.jsonl.lock")
        assert owner is not None and owner["pid"] == os.getpid() and "released" not in owner
    # released: the record says so, and carries a start time no live process has, so
    # OpenClaw's lock (which checks for pid reuse) does not wait for it
    owner = read_lock_owner(tmp_path / "s.jsonl.lock")
    assert owner is not None and owner["released"] is True and owner["starttime"] == 0


def test_each_acquisition_rewrites_the_record_that_readers_see(tmp_path: Path) -> None:
    lock = FileSessionLock(tmp_path / "s.jsonl")
    for _ in range(3):  # the first acquisition pwrites its records, later ones go through the map
        with lock:
            held = read_lock_owner(lock.lock_path)
            assert held is not None and held["pid"] == os.getpid() and "released" not in held
        released = read_lock_owner(lock.lock_path)
        assert released is not None and released["released"] is True
    assert lock.lock_path.stat().st_size == 128


def _mapped(path: Path) -> bool:
    with open("/proc/self/maps", encoding="utf-8") as maps:
        return any(line.rstrip().endswith(str(path)) for line in maps)


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc/self/maps")
def test_a_lock_taken_once_is_written_without_mapping_its_file(tmp_path: Path) -> None:
    """A new session's first append takes the lock once: mapping the lock file then would
    only add an mmap and a munmap. From the second acquisition on, the record goes through
    the map, and readers still see every record."""
    lock = FileSessionLock(tmp_path / "s.jsonl")
    real = lock.lock_path.resolve()
    with lock:
        assert not _mapped(real)
    assert not _mapped(real)
    released = read_lock_owner(lock.lock_path)
    assert released is not None and released["released"] is True
    with lock:
        assert _mapped(real)
        held = read_lock_owner(lock.lock_path)
        assert held is not None and held["pid"] == os.getpid() and "released" not in held


def test_a_lock_file_replaced_between_acquisitions_is_respected(tmp_path: Path) -> None:
    """OpenClaw removes a released record and creates its own file: the descriptor this lock
    kept open names the old file, and must not be trusted."""
    lock = FileSessionLock(tmp_path / "s.jsonl", timeout=0.2)
    with lock:
        pass
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock.lock_path.unlink()
        _write_record(lock.lock_path, sleeper.pid)
        with pytest.raises(SessionLockTimeout, match=f"pid={sleeper.pid}"):
            lock.acquire()
    finally:
        sleeper.kill()
        sleeper.wait()
    with lock:
        owner = read_lock_owner(lock.lock_path)
        assert owner is not None and owner["pid"] == os.getpid()


def test_a_forked_child_does_not_share_the_parents_lock(tmp_path: Path) -> None:
    lock = FileSessionLock(tmp_path / "s.jsonl")
    with lock:  # leaves an unlocked descriptor kept for the next acquisition
        pass
    ready_read, ready_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: wait until the parent holds the lock, then try to take it
        code = 1
        try:
            os.read(ready_read, 1)
            try:
                lock.acquire(timeout=0.2)
            except SessionLockTimeout:
                code = 0
        finally:
            os._exit(code)
    try:
        with lock:
            os.write(ready_write, b"x")
            _, status = os.waitpid(pid, 0)
    finally:
        os.close(ready_read)
        os.close(ready_write)
    assert os.waitstatus_to_exitcode(status) == 0, "the child took a lock its parent held"
