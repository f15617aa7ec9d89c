"""Several processes appending to one session at once lose nothing and keep the tree valid."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import orjson

from clawpi.session import FileSessionLock, SessionManager, repair_session_file
from clawpi.session.lock import IDLE_LOCK_FILES, read_lock_owner
from tests.session._children import append_n, fork

WRITERS = 4
EACH = 40


def test_concurrent_writers_keep_every_entry_whole_and_the_tree_valid(tmp_path: Path) -> None:
    sm = SessionManager.create("/p", tmp_path)
    root = sm.append_message(
        {"role": "assistant", "content": [], "stopReason": "stop", "timestamp": 0}
    )
    assert sm.session_file is not None
    path = sm.session_file
    go_read, go_write = os.pipe()
    ready_read, ready_write = os.pipe()
    pids: dict[int, int] = {}
    for writer in range(WRITERS):
        report_read, report_write = os.pipe()
        pid = fork(
            functools.partial(append_n, path, EACH, writer, report_write, ready_write, go_read)
        )
        os.close(report_write)
        pids[pid] = report_read
    ready = b""
    while len(ready) < WRITERS:  # every writer has opened the session at its root
        ready += os.read(ready_read, WRITERS)
    os.write(go_write, b"x" * WRITERS)  # all start together
    reported: dict[int, list[str]] = {}
    for pid, report_read in pids.items():
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        with os.fdopen(report_read, "rb") as report:
            reported[pid] = report.read().decode().split()
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    entries = [orjson.loads(line) for line in lines[1:-1]]  # no torn or interleaved line
    assert len(entries) == 1 + WRITERS * EACH
    ids = [e["id"] for e in entries]
    assert len(set(ids)) == len(ids)
    by_id = {e["id"]: e for e in entries}
    for own in reported.values():
        assert len(own) == EACH
        # each writer's entries form a chain from the shared root, in its own order
        parents = [by_id[own[0]]["parentId"]] + [by_id[i]["parentId"] for i in own[1:]]
        assert parents == [root, *own[:-1]]
    reopened = SessionManager.open(path)
    assert reopened.repair_report is None
    assert [e["id"] for e in reopened.get_entries()] == ids
    assert len(reopened.get_children(root)) == WRITERS


def test_a_writer_sees_entries_appended_by_another_process(tmp_path: Path) -> None:
    first = SessionManager.create("/p", tmp_path)
    first.append_message({"role": "assistant", "content": [], "stopReason": "stop", "timestamp": 0})
    assert first.session_file is not None
    second = SessionManager.open(first.session_file)
    other = second.append_message({"role": "user", "content": "from two", "timestamp": 1})
    mine = first.append_message({"role": "user", "content": "from one", "timestamp": 2})
    assert first.get_entry(other) is not None  # merged in under the lock
    assert first.get_leaf_id() == mine
    assert [e["id"] for e in SessionManager.open(first.session_file).get_entries()] == [
        e["id"] for e in first.get_entries()
    ]


def test_append_after_the_file_was_replaced_elsewhere_lands_in_the_new_file(
    tmp_path: Path,
) -> None:
    sm = SessionManager.create("/p", tmp_path)
    first = sm.append_message(
        {"role": "assistant", "content": [], "stopReason": "stop", "timestamp": 0}
    )
    assert sm.session_file is not None
    with open(sm.session_file, "ab") as handle:
        handle.write(b'{"type":"message","id":"torn')  # a writer died mid-line
    inode = sm.session_file.stat().st_ino
    assert repair_session_file(sm.session_file).repaired  # another process repairs it
    assert sm.session_file.stat().st_ino != inode
    second = sm.append_message({"role": "user", "content": "after repair", "timestamp": 1})
    reopened = SessionManager.open(sm.session_file)
    assert [e["id"] for e in reopened.get_entries()] == [first, second]
    assert reopened.repair_report is None


def test_lock_descriptors_stay_bounded_across_many_sessions(tmp_path: Path) -> None:
    fds_before = len(os.listdir("/proc/self/fd"))
    for index in range(IDLE_LOCK_FILES * 3):
        with FileSessionLock(tmp_path / f"s{index}.jsonl"):
            pass
    assert len(os.listdir("/proc/self/fd")) <= fds_before + 2 * IDLE_LOCK_FILES
    owner = read_lock_owner(tmp_path / "s0.jsonl.lock")
    assert owner is not None and owner["released"] is True
