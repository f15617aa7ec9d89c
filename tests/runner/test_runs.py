"""The active run registry: register/clear, steering, abort, waiting for the end."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from pathlib import Path

from clawpi.runner.runs import (
    ActiveRunRegistry,
    EmbeddedRunHandle,
    abort_embedded_pi_run,
    clear_active_embedded_run,
    force_detach_embedded_run,
    get_active_embedded_run_count,
    is_embedded_pi_run_active,
    is_embedded_pi_run_streaming,
    queue_embedded_pi_message,
    resolve_active_embedded_run_session_id,
    set_active_embedded_run,
    wait_for_active_embedded_runs,
    wait_for_embedded_pi_run_end,
)
from clawpi.sdk import AgentSession, SettingsManager, create_agent_session
from clawpi.session import SessionManager
from clawpi.testing import FauxProvider, FauxResponse, faux_text


class SessionHandle:
    """The attempt's handle, as the runner builds it: a thin adapter over `AgentSession`."""

    def __init__(self, session: AgentSession) -> None:
        self.session = session

    def queue_message(self, text: str) -> Awaitable[None]:
        return self.session.steer(text)

    def is_streaming(self) -> bool:
        return self.session.is_streaming

    def is_compacting(self) -> bool:
        return self.session.is_compacting

    def abort(self) -> Awaitable[None]:
        return self.session.abort()


class StateHandle:
    """A handle whose state the test sets directly (for the registry's own rules)."""

    def __init__(self, *, streaming: bool = True, compacting: bool = False) -> None:
        self.streaming = streaming
        self.compacting = compacting
        self.messages: list[str] = []
        self.aborts = 0

    def queue_message(self, text: str) -> None:
        self.messages.append(text)

    def is_streaming(self) -> bool:
        return self.streaming

    def is_compacting(self) -> bool:
        return self.compacting

    def abort(self) -> None:
        self.aborts += 1


class StoppableHandle(StateHandle):
    def __init__(self, *, stopped: bool) -> None:
        super().__init__(streaming=False)
        self.stopped = stopped

    def is_stopped(self) -> bool:
        return self.stopped


async def make_session(faux: FauxProvider, tmp_path: Path, workspace: Path) -> AgentSession:
    return await create_agent_session(
        cwd=workspace,
        agent_dir=tmp_path / "agent",
        model=faux.model,
        session_manager=SessionManager.create(workspace, tmp_path / "sessions"),
        settings_manager=SettingsManager.in_memory({}),
        tools=[],
    )


def test_handles_satisfy_the_protocol() -> None:
    handles: list[EmbeddedRunHandle] = [StateHandle(), StoppableHandle(stopped=False)]
    assert len(handles) == 2


def test_register_and_clear_with_the_same_handle() -> None:
    registry = ActiveRunRegistry()
    handle = StateHandle()
    registry.set_active("s1", handle, "main:telegram:1")
    assert registry.is_active("s1")
    assert registry.resolve_session_id("main:telegram:1") == "s1"
    assert registry.clear_active("s1", handle, "main:telegram:1")
    assert not registry.is_active("s1")
    assert registry.resolve_session_id("main:telegram:1") is None


def test_stale_clear_with_another_handle_is_ignored() -> None:
    registry = ActiveRunRegistry()
    first, retry = StateHandle(), StateHandle()
    registry.set_active("s1", first, "k")
    registry.set_active("s1", retry, "k")  # a retry registered its own handle
    assert not registry.clear_active("s1", first, "k")
    assert registry.runs["s1"] is retry
    assert registry.resolve_session_id("k") == "s1"
    assert registry.force_detach("s1")
    assert not registry.is_active("s1")


def test_steering_is_refused_without_a_run_while_compacting_or_when_stopped() -> None:
    registry = ActiveRunRegistry()
    assert not registry.queue_message("none", "hi")
    compacting = StateHandle(compacting=True)
    registry.set_active("c", compacting)
    assert not registry.queue_message("c", "hi")
    idle = StateHandle(streaming=False)
    registry.set_active("i", idle)
    assert not registry.queue_message("i", "hi")
    stopped = StoppableHandle(stopped=True)
    registry.set_active("s", stopped)
    assert not registry.queue_message("s", "hi")
    between_streams = StoppableHandle(stopped=False)  # not streaming, but not stopped either
    registry.set_active("b", between_streams)
    assert registry.queue_message("b", "hi")
    assert between_streams.messages == ["hi"]
    assert compacting.messages == idle.messages == stopped.messages == []


def test_abort_one_all_or_only_compacting_runs() -> None:
    registry = ActiveRunRegistry()
    a, b = StateHandle(), StateHandle(compacting=True)
    registry.set_active("a", a)
    registry.set_active("b", b)
    assert not registry.abort("missing")
    assert not registry.abort()
    assert registry.abort(mode="compacting")
    assert (a.aborts, b.aborts) == (0, 1)
    assert registry.abort("a")
    assert registry.abort(mode="all")
    assert (a.aborts, b.aborts) == (2, 2)


async def test_wait_for_run_end_resolves_on_clear() -> None:
    registry = ActiveRunRegistry()
    handle = StateHandle()
    assert await registry.wait_for_run_end("s1", timeout_ms=10)  # no run: at once
    registry.set_active("s1", handle)
    waiter = asyncio.create_task(registry.wait_for_run_end("s1", timeout_ms=10_000))
    await asyncio.sleep(0)
    registry.clear_active("s1", StateHandle())  # stale: does not end the wait
    await asyncio.sleep(0)
    assert not waiter.done()
    registry.clear_active("s1", handle)
    assert await waiter is True


async def test_wait_for_run_end_times_out_while_the_run_goes_on() -> None:
    registry = ActiveRunRegistry()
    registry.set_active("s1", StateHandle())
    assert await registry.wait_for_run_end("s1", timeout_ms=1) is False
    assert registry._waiters == {}


async def test_wait_for_all_runs() -> None:
    registry = ActiveRunRegistry()
    handle = StateHandle()
    registry.set_active("s1", handle)
    assert await registry.wait_for_all_runs(timeout_ms=5, poll_ms=1) is False
    waiter = asyncio.create_task(registry.wait_for_all_runs(timeout_ms=10_000, poll_ms=1))
    registry.clear_active("s1", handle)
    assert await waiter is True


async def test_steering_message_is_delivered_into_a_running_turn(
    tmp_path: Path, workspace: Path
) -> None:
    faux = FauxProvider(
        [FauxResponse(content=[faux_text("thinking it over " * 20)], delay=0.002), "Noted."],
        chunk_size=3,
    )
    session = await make_session(faux, tmp_path, workspace)
    handle = SessionHandle(session)
    set_active_embedded_run("sess-steer", handle, "main:telegram:7")
    try:
        turn = asyncio.create_task(session.prompt("start"))
        while not is_embedded_pi_run_streaming("sess-steer"):
            await asyncio.sleep(0.001)
        assert resolve_active_embedded_run_session_id("main:telegram:7") == "sess-steer"
        assert queue_embedded_pi_message("sess-steer", "also: use metric units")
        await turn
    finally:
        assert clear_active_embedded_run("sess-steer", handle, "main:telegram:7")
    assert not is_embedded_pi_run_active("sess-steer")
    second_request = faux.requests[1]["messages"]
    assert second_request[-1]["role"] == "user"
    assert second_request[-1]["content"][0]["text"] == "also: use metric units"
    assert session.get_last_assistant_text() == "Noted."


async def test_abort_stops_a_running_turn_and_waiters_see_the_end(
    tmp_path: Path, workspace: Path
) -> None:
    faux = FauxProvider([FauxResponse(content=[faux_text("y" * 2000)], delay=0.005)], chunk_size=1)
    session = await make_session(faux, tmp_path, workspace)
    handle = SessionHandle(session)

    async def attempt() -> None:
        set_active_embedded_run("sess-abort", handle)
        try:
            await session.prompt("go")
        finally:
            clear_active_embedded_run("sess-abort", handle)

    run = asyncio.create_task(attempt())
    while not is_embedded_pi_run_streaming("sess-abort"):
        await asyncio.sleep(0.001)
    assert get_active_embedded_run_count() >= 1
    assert abort_embedded_pi_run("sess-abort")
    assert await wait_for_embedded_pi_run_end("sess-abort", timeout_ms=10_000)
    await run
    assert session.messages[-1]["stopReason"] == "aborted"
    assert not abort_embedded_pi_run("sess-abort")
    assert await wait_for_active_embedded_runs(timeout_ms=10_000, poll_ms=10)
    assert not force_detach_embedded_run("sess-abort")
