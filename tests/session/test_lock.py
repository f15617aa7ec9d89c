"""The write lock: exclusive across processes, re-entrant, freed by the kernel when the holder dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from clawpi.session import FileSessionLock, SessionLockTimeout
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
    child.wait()
    assert (tmp_path / "s.jsonl.lock").exists()  # the file stays; the kernel lock is gone
    lock = FileSessionLock(tmp_path / "s.jsonl", timeout=0.5)
    lock.acquire()
    lock.release()


def test_sigterm_releases_the_lock(tmp_path: Path) -> None:
    child = _hold_in_child(tmp_path / "s.jsonl")
    child.send_signal(signal.SIGTERM)
    assert child.wait() == -signal.SIGTERM
    with FileSessionLock(tmp_path / "s.jsonl", timeout=0.5):
        pass
