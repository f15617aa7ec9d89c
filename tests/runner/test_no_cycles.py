"""A turn frees what it built by reference counting: no reference cycles are left for the
cyclic collector, whose full passes over a large heap would land on some unlucky message."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from clawpi.ai.stream import StreamOptions
from clawpi.ai.types import Context
from clawpi.session import SessionManager
from clawpi.testing.faux import FauxResponse, faux_text
from tests.runner.test_concurrency import Harness


async def _answer(_context: Context, _options: StreamOptions) -> FauxResponse:
    return FauxResponse(content=[faux_text("ok")])


@pytest.fixture
def saved_garbage() -> Iterator[list[object]]:
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield gc.garbage
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


async def test_turns_leave_no_cycles_of_clawpi_objects(
    tmp_path: Path, saved_garbage: list[object]
) -> None:
    harness = Harness(tmp_path, _answer)
    await harness.run("warm", "hello")
    gc.collect()
    saved_garbage.clear()
    for i in range(3):
        await harness.run("same-chat", f"turn {i}")
        await harness.run(f"new-chat-{i}", "hello")
    gc.collect()
    ours = sorted(
        {type(o).__qualname__ for o in saved_garbage if type(o).__module__.startswith("clawpi")}
    )
    assert ours == []


def test_opening_small_sessions_leaves_the_collector_running(tmp_path: Path) -> None:
    """Opening a session must not reset the collector's count each time (a chat per message
    opens one per message): cyclic garbage made meanwhile is still collected."""
    path = tmp_path / "chat.jsonl"
    sm = SessionManager.create("/p", tmp_path, session_file=path)
    sm.append_message({"role": "user", "content": "hi", "timestamp": 1})
    sm.append_message({"role": "assistant", "content": [], "stopReason": "stop", "timestamp": 2})
    assert gc.isenabled()
    before = gc.get_stats()[0]["collections"]
    for _ in range(60):
        for _ in range(150):
            cycle: list[object] = []
            cycle.append(cycle)
        SessionManager.open(path)
    assert gc.get_stats()[0]["collections"] > before
