"""A writer SIGKILLed at random moments never costs an entry whose append had returned."""

from __future__ import annotations

import functools
import os
import random
import signal
import time
from pathlib import Path

import orjson

from clawpi.session import SessionManager
from tests.session._children import append_forever, fork

KILLS = 40


def _read_all(fd: int) -> list[str]:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks).decode().split()


def test_sigkilled_writer_never_loses_a_returned_append(tmp_path: Path) -> None:
    sm = SessionManager.create("/p", tmp_path)
    sm.append_message({"role": "assistant", "content": [], "stopReason": "stop", "timestamp": 0})
    assert sm.session_file is not None
    path = sm.session_file
    rng = random.Random(1234)
    confirmed: list[str] = []
    repairs = 0
    for round_ in range(KILLS):
        read_fd, write_fd = os.pipe()
        pid = fork(functools.partial(append_forever, path, write_fd, round_))
        os.close(write_fd)
        time.sleep(rng.uniform(0.0, 0.15))
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        confirmed += _read_all(read_fd)
        os.close(read_fd)
        reopened = SessionManager.open(path)  # must never fail
        if reopened.repair_report is not None and reopened.repair_report.repaired:
            repairs += 1
        ids = {e["id"] for e in reopened.get_entries()}
        missing = [entry_id for entry_id in confirmed if entry_id not in ids]
        assert missing == [], f"round {round_}: lost {len(missing)} confirmed entries"
    print(f"{len(confirmed)} confirmed appends, {repairs} repairs after {KILLS} kills")
    final = SessionManager.open(path)
    entries = final.get_entries()
    assert len(confirmed) > KILLS  # the children really were writing
    ids = [e["id"] for e in entries]
    assert len(ids) == len(set(ids))
    assert all(e["parentId"] is None or e["parentId"] in set(ids) for e in entries)
    for line in path.read_bytes().splitlines():
        orjson.loads(line)  # after the repairs every line is whole
