"""`fsync="background"`: appends return once written; a worker thread makes them durable, one
fsync per file covering every write queued behind it, also after the session is closed, in a
forked child, and at interpreter exit."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

import clawpi.session.background_sync as sync_module
from clawpi.session import SessionManager, background_fsync
from tests.session.test_store import _assistant


def _texts(path: Path) -> list[str]:
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    messages = [e["message"] for e in lines if e.get("type") == "message"]
    return [m["content"][0]["text"] for m in messages if m["role"] == "assistant"]


def _descriptors_of(path: Path) -> int:
    """How many descriptors this process has open on `path`."""
    count = 0
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor is gone by now
            count += os.readlink(f"/proc/self/fd/{name}") == str(path)
    return count


class _GatedFsync:
    """The real `os.fsync`, held at a gate when the worker calls it (inline fsyncs pass): lets
    a test see what queues behind a running one."""

    def __init__(self) -> None:
        self.real = os.fsync
        self.started = threading.Event()
        self.gate = threading.Event()
        self.calls = 0

    def __call__(self, fd: int) -> None:
        if threading.current_thread().name != "clawpi-session-fsync":
            self.real(fd)
            return
        self.calls += 1
        self.started.set()
        self.gate.wait(10)
        self.real(fd)


@pytest.fixture
def gated(monkeypatch: pytest.MonkeyPatch) -> Iterator[_GatedFsync]:
    gate = _GatedFsync()
    monkeypatch.setattr(sync_module.os, "fsync", gate)
    yield gate
    gate.gate.set()
    background_fsync.wait()


def test_an_append_returns_written_and_the_worker_makes_it_durable(tmp_path: Path) -> None:
    sm = SessionManager.create("/proj", tmp_path, fsync="background")
    before = background_fsync.done
    sm.append_message({"role": "user", "content": "hi", "timestamp": 1})
    sm.append_message(_assistant("one"))
    assert sm.session_file is not None
    assert _texts(sm.session_file) == ["one"]  # written before append returned
    background_fsync.wait()
    assert background_fsync.done > before


def test_writes_queued_behind_a_running_fsync_share_the_next_one(
    tmp_path: Path, gated: _GatedFsync
) -> None:
    sm = SessionManager.create("/proj", tmp_path, fsync="background")
    sm.append_message({"role": "user", "content": "hi", "timestamp": 1})
    sm.append_message(_assistant("one"))  # its fsync starts and waits at the gate
    assert gated.started.wait(10)
    for text in ("two", "three", "four"):
        sm.append_message(_assistant(text))  # all behind the running one: one more fsync
    gated.gate.set()
    background_fsync.wait()
    assert gated.calls == 2
    assert sm.session_file is not None
    assert _descriptors_of(sm.session_file) == 1  # the writer's own: the queue's are closed
    assert sm.session_file is not None
    assert _texts(sm.session_file) == ["one", "two", "three", "four"]


def test_a_session_closed_before_its_fsync_ran_is_still_synced(
    tmp_path: Path, gated: _GatedFsync, caplog: pytest.LogCaptureFixture
) -> None:
    first = SessionManager.create("/proj", tmp_path, fsync="background")
    first.append_message({"role": "user", "content": "hi", "timestamp": 1})
    first.append_message(_assistant("one"))
    assert gated.started.wait(10)
    second = SessionManager.create("/proj", tmp_path, fsync="background")
    second.append_message({"role": "user", "content": "hi", "timestamp": 1})
    second.append_message(_assistant("two"))  # queued behind the first file's fsync
    second.close()  # the queue holds a descriptor of its own
    del second
    with caplog.at_level(logging.WARNING, logger="clawpi.session.background_sync"):
        gated.gate.set()
        background_fsync.wait()
    assert gated.calls == 2
    assert caplog.records == []  # both fsyncs succeeded


def test_the_setting_can_change_between_appends(tmp_path: Path, gated: _GatedFsync) -> None:
    sm = SessionManager.create("/proj", tmp_path)  # fsync=True: inline, not through the queue
    sm.append_message({"role": "user", "content": "hi", "timestamp": 1})
    sm.append_message(_assistant("one"))
    assert gated.calls == 0
    sm.fsync = "background"
    sm.append_message(_assistant("two"))
    assert gated.started.wait(10)
    gated.gate.set()
    background_fsync.wait()
    assert gated.calls == 1
    sm.fsync = False
    sm.append_message(_assistant("three"))
    background_fsync.wait()
    assert gated.calls == 1
    assert sm.session_file is not None
    assert _texts(sm.session_file) == ["one", "two", "three"]


def test_a_forked_child_starts_with_an_empty_queue_of_its_own(
    tmp_path: Path, gated: _GatedFsync
) -> None:
    sm = SessionManager.create("/proj", tmp_path, fsync="background")
    sm.append_message({"role": "user", "content": "hi", "timestamp": 1})
    sm.append_message(_assistant("one"))
    assert gated.started.wait(10)  # the parent's worker is inside an fsync
    sm.append_message(_assistant("two"))  # and one more waits in the parent's queue
    pid = os.fork()
    if pid == 0:  # the child: the parent's waiting fsync is not its own; its own must run
        code = 1
        try:
            signal.alarm(30)  # a child left waiting on the parent's queue dies, not hangs
            gated.gate.set()  # (the child's copy of the gate)
            child = SessionManager.create("/proj", tmp_path / "child", fsync="background")
            child.append_message({"role": "user", "content": "hi", "timestamp": 1})
            child.append_message(_assistant("child"))
            done_before = background_fsync.done
            background_fsync.wait()
            code = 0 if background_fsync.done == done_before + 1 == 1 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    gated.gate.set()
    background_fsync.wait()
    assert gated.calls == 2
    assert sm.session_file is not None
    assert _texts(sm.session_file) == ["one", "two"]


def test_what_is_still_queued_at_exit_is_synced_before_the_process_ends(
    tmp_path: Path,
) -> None:
    """A child appends, its fsync held back, then exits normally: the exit waits for it."""
    marker = tmp_path / "synced"
    script = f"""
import os, time
import clawpi.session.background_sync as bg
from clawpi.session import SessionManager
real = os.fsync
def slow(fd):
    time.sleep(0.3)
    real(fd)
    open({str(marker)!r}, "a").write("x")
bg.os.fsync = slow
sm = SessionManager.create("/proj", {str(tmp_path / "s")!r}, fsync="background")
sm.append_message({{"role": "user", "content": "hi", "timestamp": 1}})
sm.append_message({{"role": "assistant", "content": [], "api": "x", "provider": "p",
                    "model": "m", "stopReason": "stop", "timestamp": 2}})
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    assert marker.read_text() == "x"
