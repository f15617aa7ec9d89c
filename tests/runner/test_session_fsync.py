"""`run_embedded_agent(session_fsync=...)`: the session file's durability, per run."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import orjson
import pytest

import clawpi.session.background_sync as sync_module
from clawpi.ai.stream import StreamOptions
from clawpi.ai.types import Context
from clawpi.session import background_fsync
from clawpi.testing.faux import FauxResponse, faux_text
from tests.runner.test_concurrency import Harness


async def _answer(_context: Context, _options: StreamOptions) -> FauxResponse:
    return FauxResponse(content=[faux_text("ok")])


def _roles(path: Path) -> list[str]:
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    return [e["message"]["role"] for e in lines if e.get("type") == "message"]


async def test_background_fsync_runs_off_the_loop_and_each_run_sets_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = sync_module.os.fsync
    callers: list[str] = []  # the threads that fsynced the session file
    harness = Harness(tmp_path, _answer)
    session_file = str(harness.session_file("chat"))

    def fsync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}") == session_file:  # not the auth profile store's
            callers.append(threading.current_thread().name)
        real(fd)

    monkeypatch.setattr(sync_module.os, "fsync", fsync)

    result = await harness.run("chat", "one", session_fsync="background")
    assert [p.text for p in result.payloads] == ["ok"]
    background_fsync.wait()
    assert callers and set(callers) == {"clawpi-session-fsync"}  # none on the loop's thread
    assert _roles(harness.session_file("chat")) == ["user", "assistant"]

    callers.clear()
    await harness.run("chat", "two")  # the same (cached) session, now with the default
    background_fsync.wait()
    assert callers and set(callers) == {threading.current_thread().name}

    callers.clear()
    await harness.run("chat", "three", session_fsync=False)
    background_fsync.wait()
    assert callers == []
    assert _roles(harness.session_file("chat")) == ["user", "assistant"] * 3
