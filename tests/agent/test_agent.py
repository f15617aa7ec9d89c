"""`Agent`: steering, follow-ups, abort (stream and tools), queues that lose nothing, listeners."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from clawpi.agent import (
    ABORTED_MESSAGE,
    SKIPPED_MESSAGE,
    AbortSignal,
    Agent,
    AgentBusyError,
    AgentError,
    AgentTool,
    ToolResult,
)
from clawpi.errors import AbortedError
from clawpi.testing import FauxProvider, FauxResponse, faux_text, faux_tool_call
from tests.agent.helpers import Recorder, echo_tool, roles, texts, tool

GUARD = 20  # seconds before a hung run fails the test instead of hanging the suite


def _calls(*names: str) -> list[Any]:
    return [faux_tool_call("step", {"text": name}, f"c_{name}") for name in names]


# -- steering and follow-ups --------------------------------------------------------------


async def test_steering_mid_batch_skips_the_remaining_calls_and_is_delivered_next() -> None:
    ran: list[str] = []
    agent: Agent

    async def step(call_id: str, params: Any, signal: Any = None, on_update: Any = None) -> Any:
        ran.append(params["text"])
        if params["text"] == "a":
            agent.steer("stop, use b instead")
        return ToolResult.text(f"did {params['text']}")

    faux = FauxProvider([_calls("a", "b", "c"), "switched"])
    agent = Agent(model=faux.model, tools=[tool("step", step)], tool_execution="sequential")
    recorder = Recorder(agent)
    await agent.prompt("go")

    assert ran == ["a"]
    results = [m for m in agent.state.messages if m["role"] == "toolResult"]
    assert [texts(m) for m in results] == [["did a"], [SKIPPED_MESSAGE], [SKIPPED_MESSAGE]]
    assert [m["isError"] for m in results] == [False, True, True]
    # every call still got its start/end pair
    assert [e["toolCallId"] for e in recorder.of("tool_execution_start")] == ["c_a", "c_b", "c_c"]
    # the steer is injected at the start of the next turn, before the model is called again
    second_request = faux.requests[1]["messages"]
    assert roles(second_request) == [
        "user",
        "assistant",
        "toolResult",
        "toolResult",
        "toolResult",
        "user",
    ]
    assert texts(second_request[-1]) == ["stop, use b instead"]
    assert roles(agent.state.messages)[-2:] == ["user", "assistant"]
    assert not agent.has_queued_messages()


async def test_steering_during_parallel_preparation_skips_calls_not_yet_started() -> None:
    ran: list[str] = []
    agent: Agent

    def before(ctx: Any, signal: Any) -> None:
        if ctx.args["text"] == "a":
            agent.steer("wait")

    async def step(call_id: str, params: Any, signal: Any = None, on_update: Any = None) -> Any:
        ran.append(params["text"])
        return ToolResult.text("ran")

    faux = FauxProvider([_calls("a", "b"), "ok"])
    agent = Agent(model=faux.model, tools=[tool("step", step)], before_tool_call=before)
    recorder = Recorder(agent)
    await agent.prompt("go")
    assert ran == []
    results = [m for m in agent.state.messages if m["role"] == "toolResult"]
    assert [texts(m) for m in results] == [[SKIPPED_MESSAGE], [SKIPPED_MESSAGE]]
    # one start per call: the prepared call is not announced twice
    assert [e["toolCallId"] for e in recorder.of("tool_execution_start")] == ["c_a", "c_b"]
    assert texts(faux.requests[1]["messages"][-1]) == ["wait"]


async def test_follow_up_runs_only_after_the_agent_would_stop() -> None:
    agent: Agent
    faux = FauxProvider([faux_tool_call("echo", {"text": "x"}), "first answer", "second answer"])
    agent = Agent(model=faux.model, tools=[echo_tool()])
    queued = False

    def listener(event: Any) -> None:
        nonlocal queued
        if (
            event["type"] == "message_start"
            and event["message"]["role"] == "assistant"
            and not queued
        ):
            queued = True
            agent.follow_up("and then?")

    agent.subscribe(listener)
    await agent.prompt("go")
    assert roles(agent.state.messages) == [
        "user",
        "assistant",
        "toolResult",
        "assistant",
        "user",
        "assistant",
    ]
    # not injected after the tool batch: only once the model stopped calling tools
    assert texts(agent.state.messages[3]) == ["first answer"]
    assert texts(agent.state.messages[4]) == ["and then?"]
    assert texts(agent.state.messages[5]) == ["second answer"]
    assert len(faux.requests) == 3


@pytest.mark.parametrize(("mode", "turns"), [("one-at-a-time", 3), ("all", 2)])
async def test_follow_up_mode_controls_how_many_messages_a_turn_takes(
    mode: str, turns: int
) -> None:
    faux = FauxProvider(["r1", "r2", "r3"])
    agent = Agent(model=faux.model, follow_up_mode=mode)  # type: ignore[arg-type]
    agent.subscribe(
        lambda e: (
            (agent.follow_up("f1"), agent.follow_up("f2")) if e["type"] == "agent_start" else None
        )
    )
    await agent.prompt("go")
    assert len(faux.requests) == turns
    user_texts = [texts(m)[0] for m in agent.state.messages if m["role"] == "user"]
    assert user_texts == ["go", "f1", "f2"]


async def test_continue_after_an_assistant_reply_delivers_queued_steering() -> None:
    faux = FauxProvider(["first", "second"])
    agent = Agent(model=faux.model)
    await agent.prompt("go")
    with pytest.raises(AgentError, match="Cannot continue from message role: assistant"):
        await agent.continue_()
    agent.steer("more please")
    await agent.continue_()
    assert [texts(m) for m in agent.state.messages] == [
        ["go"],
        ["first"],
        ["more please"],
        ["second"],
    ]


async def test_continue_retries_from_a_user_message() -> None:
    faux = FauxProvider(["answer"])
    agent = Agent(model=faux.model, messages=[{"role": "user", "content": "hi", "timestamp": 1}])
    await agent.continue_()
    assert roles(agent.state.messages) == ["user", "assistant"]
    with pytest.raises(AgentError, match="no messages"):
        await Agent(model=faux.model).continue_()


# -- abort ----------------------------------------------------------------------------------


async def test_abort_during_streaming_keeps_the_partial_reply_as_aborted() -> None:
    faux = FauxProvider(
        [FauxResponse(content=[faux_text("a long answer " * 20)], delay=0.005), "next"],
        chunk_size=4,
    )
    agent = Agent(model=faux.model)
    streaming = asyncio.Event()

    def listener(event: Any) -> None:
        if event["type"] == "message_update" and len(texts(event["message"])[0]) >= 8:
            streaming.set()

    agent.subscribe(listener)
    run = asyncio.create_task(agent.prompt("go"))
    await asyncio.wait_for(streaming.wait(), GUARD)
    agent.abort()
    await asyncio.wait_for(run, GUARD)

    last = agent.state.messages[-1]
    assert last["role"] == "assistant"
    assert last["stopReason"] == "aborted"
    assert last["errorMessage"] == "Request was aborted"
    partial = texts(last)[0]
    assert partial and len(partial) < len("a long answer " * 20)
    assert agent.state.error == "Request was aborted"
    assert not agent.state.is_streaming
    # a new run works with a fresh signal
    await agent.prompt("again")
    assert texts(agent.state.messages[-1]) == ["next"]


def _sleep_tool(pids: list[int], started: asyncio.Event, *, honour_signal: bool) -> AgentTool:
    """A real tool that runs `sleep 30` and, when honouring the signal, kills it on abort."""

    async def run(
        call_id: str, params: Any, signal: AbortSignal | None = None, on_update: Any = None
    ) -> ToolResult:
        proc = await asyncio.create_subprocess_exec("sleep", "30")
        pids.append(proc.pid)
        remove = signal.add_listener(proc.kill) if signal and honour_signal else None
        started.set()
        try:
            code = await proc.wait()
        finally:
            if remove is not None:
                remove()
            if proc.returncode is None:  # cancelled while waiting: never leave it behind
                proc.kill()
                await proc.wait()
        if signal is not None and signal.aborted:
            raise AbortedError("Command aborted")
        return ToolResult.text(f"exit {code}")

    return AgentTool(name="sleep", description="sleep", parameters={"type": "object"}, execute=run)


def _process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_abort_during_a_long_tool_kills_its_subprocess() -> None:
    pids: list[int] = []
    started = asyncio.Event()
    faux = FauxProvider([faux_tool_call("sleep", {}), "never reached"])
    agent = Agent(model=faux.model, tools=[_sleep_tool(pids, started, honour_signal=True)])
    recorder = Recorder(agent)
    run = asyncio.create_task(agent.prompt("go"))
    await asyncio.wait_for(started.wait(), GUARD)
    assert not _process_gone(pids[0])
    agent.abort()
    await asyncio.wait_for(run, GUARD)

    assert _process_gone(pids[0])
    result = agent.state.messages[-1]
    assert result["role"] == "toolResult" and result["isError"] is True
    assert texts(result) == ["Command aborted"]
    assert len(faux.requests) == 1  # no further model call after the abort
    assert recorder.types[-2:] == ["turn_end", "agent_end"]
    assert agent.state.pending_tool_calls == set()


async def test_a_tool_ignoring_the_signal_is_cancelled_after_the_grace_period() -> None:
    pids: list[int] = []
    started = asyncio.Event()
    faux = FauxProvider([faux_tool_call("sleep", {}), "never reached"])
    agent = Agent(
        model=faux.model,
        tools=[_sleep_tool(pids, started, honour_signal=False)],
        tool_abort_grace=0.0,
    )
    run = asyncio.create_task(agent.prompt("go"))
    await asyncio.wait_for(started.wait(), GUARD)
    agent.abort()
    await asyncio.wait_for(run, GUARD)
    assert _process_gone(pids[0])
    assert texts(agent.state.messages[-1]) == [ABORTED_MESSAGE]


async def test_a_steer_queued_just_before_an_abort_is_still_queued_after() -> None:
    pids: list[int] = []
    started = asyncio.Event()
    faux = FauxProvider([faux_tool_call("sleep", {}), "never reached"])
    agent = Agent(model=faux.model, tools=[_sleep_tool(pids, started, honour_signal=True)])
    agent.follow_up("a follow-up")
    run = asyncio.create_task(agent.prompt("go"))
    await asyncio.wait_for(started.wait(), GUARD)
    agent.steer("actually, stop")
    agent.abort()
    await asyncio.wait_for(run, GUARD)

    assert [texts(m) for m in agent.steering_queue] == [["actually, stop"]]
    assert [texts(m) for m in agent.follow_up_queue] == [["a follow-up"]]
    assert agent.has_queued_messages()
    transcript = [t for m in agent.state.messages for t in texts(m)]
    assert "actually, stop" not in transcript and "a follow-up" not in transcript
    # clearing is explicit, and hands the messages back
    cleared = agent.clear_all_queues()
    assert [texts(m) for m in cleared] == [["actually, stop"], ["a follow-up"]]
    assert not agent.has_queued_messages()


async def test_a_drained_steer_not_yet_delivered_goes_back_on_the_queue_on_abort() -> None:
    agent: Agent

    async def step(call_id: str, params: Any, signal: Any = None, on_update: Any = None) -> Any:
        agent.steer("first steer")
        agent.steer("second steer")
        return ToolResult.text("done")

    def listener(event: Any) -> None:
        if event["type"] == "turn_end":
            agent.abort()  # the first steer has been drained for the next turn by now

    faux = FauxProvider([_calls("a", "b"), "never reached"])
    agent = Agent(model=faux.model, tools=[tool("step", step)], tool_execution="sequential")
    agent.subscribe(listener)
    await asyncio.wait_for(agent.prompt("go"), GUARD)

    assert texts(agent.state.messages[-1]) == [SKIPPED_MESSAGE]  # b was skipped for the steer
    assert [texts(m) for m in agent.steering_queue] == [["first steer"], ["second steer"]]
    assert len(faux.requests) == 1


# -- state, listeners, lifecycle ------------------------------------------------------------


async def test_async_listeners_are_awaited_in_order_before_the_next_event() -> None:
    faux = FauxProvider([faux_tool_call("echo", {"text": "x"}), "done"])
    agent = Agent(model=faux.model, tools=[echo_tool()])
    trace: list[str] = []

    async def persist(event: Any) -> None:
        trace.append(f"begin {event['type']}")
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        trace.append(f"end {event['type']}")

    agent.subscribe(persist)
    agent.subscribe(lambda event: trace.append(f"sync {event['type']}"))
    await agent.prompt("go")
    assert len(trace) % 3 == 0
    for i in range(0, len(trace), 3):
        kind = trace[i].split(" ", 1)[1]
        assert trace[i : i + 3] == [f"begin {kind}", f"end {kind}", f"sync {kind}"]


async def test_unsubscribe_stops_delivery_and_state_tracks_the_run() -> None:
    faux = FauxProvider([faux_tool_call("echo", {"text": "x"}, "c1"), "done", "again"])
    agent = Agent(model=faux.model, tools=[echo_tool()])
    snapshots: list[tuple[str, bool, set[str], Any]] = []

    def watch(event: Any) -> None:
        state = agent.state
        snapshots.append(
            (event["type"], state.is_streaming, set(state.pending_tool_calls), state.stream_message)
        )

    unsubscribe = agent.subscribe(watch)
    await agent.prompt("go")
    unsubscribe()
    count = len(snapshots)
    await agent.prompt("more")
    assert len(snapshots) == count
    assert all(streaming for _, streaming, _, _ in snapshots)
    pending = {kind: ids for kind, _, ids, _ in snapshots if kind.startswith("tool_execution")}
    assert pending == {"tool_execution_start": {"c1"}, "tool_execution_end": set()}
    updates = [msg for kind, _, _, msg in snapshots if kind == "message_update"]
    assert updates and all(m["role"] == "assistant" for m in updates)
    assert snapshots[-1][3] is None  # agent_end: nothing streaming


async def test_prompt_while_running_raises_and_wait_for_idle_waits() -> None:
    gate = asyncio.Event()

    async def blocked(call_id: str, params: Any, signal: Any = None, on_update: Any = None) -> Any:
        await gate.wait()
        return ToolResult.text("ok")

    faux = FauxProvider([faux_tool_call("block", {"text": "x"}), "done"])
    agent = Agent(model=faux.model, tools=[tool("block", blocked)])
    run = asyncio.create_task(agent.prompt("go"))
    while not agent.state.pending_tool_calls:
        await asyncio.sleep(0)
    with pytest.raises(AgentBusyError, match="already processing a prompt"):
        await agent.prompt("again")
    gate.set()
    await asyncio.wait_for(agent.wait_for_idle(), GUARD)
    assert not agent.state.is_streaming
    assert texts(agent.state.messages[-1]) == ["done"]
    await run
    await agent.wait_for_idle()  # idle already: returns at once


async def test_prompt_accepts_images_and_message_lists() -> None:
    faux = FauxProvider(["a", "b"])
    agent = Agent(model=faux.model)
    image = {"type": "image", "data": "aGk=", "mimeType": "image/png"}
    await agent.prompt("look", images=[image])  # type: ignore[list-item]
    assert agent.state.messages[0]["content"] == [{"type": "text", "text": "look"}, image]
    messages = [
        {"role": "user", "content": "one", "timestamp": 1},
        {"role": "user", "content": "two", "timestamp": 2},
    ]
    await agent.prompt(messages)  # type: ignore[arg-type]
    assert agent.state.messages[2:4] == messages


async def test_reset_forgets_transcript_queues_and_error() -> None:
    faux = FauxProvider([FauxResponse(error="boom")])
    agent = Agent(model=faux.model)
    await agent.prompt("go")
    agent.steer("s")
    agent.follow_up("f")
    assert agent.state.error == "boom" and agent.has_queued_messages()
    agent.reset()
    assert agent.state.messages == [] and agent.state.error is None
    assert not agent.has_queued_messages()


async def test_cancelling_the_prompt_task_aborts_tools_and_keeps_queues() -> None:
    pids: list[int] = []
    started = asyncio.Event()
    faux = FauxProvider([faux_tool_call("sleep", {}), "never"])
    agent = Agent(model=faux.model, tools=[_sleep_tool(pids, started, honour_signal=True)])
    run = asyncio.create_task(agent.prompt("go"))
    await asyncio.wait_for(started.wait(), GUARD)
    agent.steer("queued")
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    await asyncio.sleep(0)
    assert not agent.state.is_streaming
    assert [texts(m) for m in agent.steering_queue] == [["queued"]]
    # the subprocess was killed by the abort the cancellation fired
    for _ in range(200):
        if _process_gone(pids[0]):
            break
        await asyncio.sleep(0.01)
    assert _process_gone(pids[0])
