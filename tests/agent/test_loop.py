"""The loop's event protocol, tool execution modes, hooks and error paths, on the faux provider."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from clawpi.agent import (
    BLOCKED_MESSAGE,
    AfterToolCallResult,
    Agent,
    AgentContext,
    AgentError,
    AgentLoopConfig,
    BeforeToolCallResult,
    ToolResult,
    run_agent_loop_continue,
)
from clawpi.testing import FauxProvider, FauxResponse, faux_text, faux_tool_call
from tests.agent.helpers import Recorder, echo_tool, roles, texts, tool


async def test_multi_turn_tool_run_emits_the_full_event_sequence() -> None:
    async def run(call_id: str, params: Any, signal: Any = None, on_update: Any = None) -> Any:
        on_update(ToolResult.text("half"))
        return ToolResult.text(params["text"].upper(), details={"n": 1})

    faux = FauxProvider([faux_tool_call("shout", {"text": "hi"}, "c1"), "Done."], chunk_size=1000)
    agent = Agent(model=faux.model, system_prompt="sys", tools=[tool("shout", run)])
    recorder = Recorder(agent)

    await agent.prompt("hello")

    assert recorder.types == [
        "agent_start",
        "turn_start",
        "message_start",  # user
        "message_end",
        "message_start",  # assistant with the tool call
        "message_update",  # toolcall_start
        "message_update",  # toolcall_delta
        "message_update",  # toolcall_end
        "message_end",
        "tool_execution_start",
        "tool_execution_update",
        "tool_execution_end",
        "message_start",  # toolResult
        "message_end",
        "turn_end",
        "turn_start",
        "message_start",  # final assistant text
        "message_update",  # text_start
        "message_update",  # text_delta
        "message_update",  # text_end
        "message_end",
        "turn_end",
        "agent_end",
    ]
    updates = [e["assistantMessageEvent"]["type"] for e in recorder.of("message_update")]
    assert updates == [
        "toolcall_start",
        "toolcall_delta",
        "toolcall_end",
        "text_start",
        "text_delta",
        "text_end",
    ]
    start = recorder.of("tool_execution_start")[0]
    assert (start["toolCallId"], start["toolName"], start["args"]) == (
        "c1",
        "shout",
        {"text": "hi"},
    )
    update = recorder.of("tool_execution_update")[0]
    assert update["partialResult"] == {
        "content": [{"type": "text", "text": "half"}],
        "details": None,
    }
    end = recorder.of("tool_execution_end")[0]
    assert end["result"] == {"content": [{"type": "text", "text": "HI"}], "details": {"n": 1}}
    assert end["isError"] is False
    first_turn_end = recorder.of("turn_end")[0]
    assert first_turn_end["message"]["stopReason"] == "toolUse"
    assert [r["toolCallId"] for r in first_turn_end["toolResults"]] == ["c1"]

    agent_end = recorder.of("agent_end")[0]
    assert roles(agent_end["messages"]) == ["user", "assistant", "toolResult", "assistant"]
    assert agent.state.messages == agent_end["messages"]
    result = agent.state.messages[2]
    assert result["toolCallId"] == "c1" and result["toolName"] == "shout"
    assert result["isError"] is False and result["details"] == {"n": 1}
    # the model's second request carries the tool result, and the tool definition every time
    second = faux.requests[1]
    assert roles(second["messages"]) == ["user", "assistant", "toolResult"]
    assert second["systemPrompt"] == "sys"
    assert [t["name"] for t in second["tools"]] == ["shout"]
    assert not agent.state.is_streaming and agent.state.pending_tool_calls == set()


async def test_parallel_tools_finishing_out_of_order_are_reported_in_call_order() -> None:
    finished: list[str] = []
    fast_done = asyncio.Event()
    running: set[str] = set()
    overlap: list[set[str]] = []

    async def slow(call_id: str, params: Any, signal: Any = None, on_update: Any = None) -> Any:
        running.add("slow")
        await fast_done.wait()  # cannot finish before the fast tool has
        overlap.append(set(running))
        finished.append("slow")
        return ToolResult.text("slow result")

    async def fast(call_id: str, params: Any, signal: Any = None, on_update: Any = None) -> Any:
        running.add("fast")
        await asyncio.sleep(0)
        finished.append("fast")
        fast_done.set()
        return ToolResult.text("fast result")

    faux = FauxProvider(
        [
            [
                faux_tool_call("slow", {"text": "a"}, "s1"),
                faux_tool_call("fast", {"text": "b"}, "f1"),
            ],
            "ok",
        ]
    )
    agent = Agent(model=faux.model, tools=[tool("slow", slow), tool("fast", fast)])
    recorder = Recorder(agent)
    await agent.prompt("go")

    assert finished == ["fast", "slow"]
    assert overlap == [{"slow", "fast"}]  # both were running at once
    assert [e["toolCallId"] for e in recorder.of("tool_execution_end")] == ["s1", "f1"]
    results = [m for m in agent.state.messages if m["role"] == "toolResult"]
    assert [m["toolCallId"] for m in results] == ["s1", "f1"]
    assert [texts(m) for m in results] == [["slow result"], ["fast result"]]
    assert [m["toolCallId"] for m in faux.requests[1]["messages"] if m["role"] == "toolResult"] == [
        "s1",
        "f1",
    ]


async def test_sequential_mode_runs_one_tool_at_a_time_in_call_order() -> None:
    log: list[str] = []
    active = 0
    most = 0

    async def step(call_id: str, params: Any, signal: Any = None, on_update: Any = None) -> Any:
        nonlocal active, most
        active += 1
        most = max(most, active)
        log.append(f"start {params['text']}")
        await asyncio.sleep(0)
        log.append(f"end {params['text']}")
        active -= 1
        return ToolResult.text(params["text"])

    faux = FauxProvider(
        [[faux_tool_call("step", {"text": str(i)}, f"c{i}") for i in range(3)], "ok"]
    )
    agent = Agent(model=faux.model, tools=[tool("step", step)], tool_execution="sequential")
    recorder = Recorder(agent)
    await agent.prompt("go")

    assert log == ["start 0", "end 0", "start 1", "end 1", "start 2", "end 2"]
    assert most == 1
    tool_events = [
        (e["type"], e.get("toolCallId") or e["message"].get("toolCallId"))
        for e in recorder.events
        if e["type"].startswith("tool_")
        or (e["type"] in ("message_start", "message_end") and e["message"]["role"] == "toolResult")
    ]
    expected = []
    for i in range(3):
        expected += [
            ("tool_execution_start", f"c{i}"),
            ("tool_execution_end", f"c{i}"),
            ("message_start", f"c{i}"),
            ("message_end", f"c{i}"),
        ]
    assert tool_events == expected


async def _run_failing_call(agent: Agent, faux: FauxProvider) -> tuple[Any, Recorder]:
    recorder = Recorder(agent)
    await agent.prompt("go")
    result = next(m for m in agent.state.messages if m["role"] == "toolResult")
    # the loop went on: the model got the error result and answered
    assert roles(agent.state.messages) == ["user", "assistant", "toolResult", "assistant"]
    assert texts(agent.state.messages[-1]) == ["recovered"]
    assert faux.requests[1]["messages"][-1] == result
    end = recorder.of("tool_execution_end")[0]
    assert end["isError"] is True and end["result"]["content"] == result["content"]
    return result, recorder


async def test_unknown_tool_becomes_an_error_result_and_the_loop_goes_on() -> None:
    faux = FauxProvider([faux_tool_call("nope", {"x": 1}), "recovered"])
    agent = Agent(model=faux.model, tools=[echo_tool()])
    result, _ = await _run_failing_call(agent, faux)
    assert result["isError"] is True
    assert texts(result) == ["Tool nope not found"]
    assert result["details"] == {}


async def test_invalid_arguments_reach_the_model_with_the_validation_message() -> None:
    calls: list[Any] = []

    async def run(call_id: str, params: Any, signal: Any = None, on_update: Any = None) -> Any:
        calls.append(params)
        return ToolResult.text("ran")

    schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
        "required": ["path"],
    }
    faux = FauxProvider([faux_tool_call("read", {"limit": 0}), "recovered"])
    agent = Agent(model=faux.model, tools=[tool("read", run, schema)])
    result, _ = await _run_failing_call(agent, faux)
    assert calls == []
    assert texts(result) == [
        'Validation failed for tool "read":\n'
        "  - path: must have required property 'path'\n"
        "  - limit: must be >= 1\n"
        "\n"
        "Received arguments:\n"
        '{\n  "limit": 0\n}'
    ]


async def test_arguments_are_coerced_before_execute() -> None:
    seen: list[Any] = []

    async def run(call_id: str, params: Any, signal: Any = None, on_update: Any = None) -> Any:
        seen.append(params)
        return ToolResult.text("ok")

    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}, "flag": {"type": "boolean"}},
    }
    arguments = {"n": "5", "flag": "true"}
    faux = FauxProvider([faux_tool_call("count", arguments), "done"])
    agent = Agent(model=faux.model, tools=[tool("count", run, schema)])
    await agent.prompt("go")
    assert seen == [{"n": 5, "flag": True}]
    # the assistant message keeps what the model actually sent
    assert agent.state.messages[1]["content"][0]["arguments"] == {"n": "5", "flag": "true"}


async def test_blocked_call_returns_the_hook_reason_and_never_runs_the_tool() -> None:
    log: list[str] = []
    seen: list[Any] = []

    def before(ctx: Any, signal: Any) -> BeforeToolCallResult | None:
        seen.append((ctx.tool_call["name"], ctx.args, ctx.assistant_message["role"]))
        if ctx.args["text"] == "rm -rf":
            return BeforeToolCallResult(block=True, reason="Not allowed: destructive command")
        return None

    faux = FauxProvider([faux_tool_call("echo", {"text": "rm -rf"}), "recovered"])
    agent = Agent(model=faux.model, tools=[echo_tool(log=log)], before_tool_call=before)
    result, _ = await _run_failing_call(agent, faux)
    assert log == []
    assert seen == [("echo", {"text": "rm -rf"}, "assistant")]
    assert texts(result) == ["Not allowed: destructive command"]


async def test_blocked_call_without_reason_uses_the_default_text() -> None:
    async def before(ctx: Any, signal: Any) -> dict[str, Any]:
        return {"block": True}

    faux = FauxProvider([faux_tool_call("echo", {"text": "x"}), "recovered"])
    agent = Agent(model=faux.model, tools=[echo_tool()], before_tool_call=before)
    result, _ = await _run_failing_call(agent, faux)
    assert texts(result) == [BLOCKED_MESSAGE]


async def test_exception_inside_a_tool_becomes_an_error_result() -> None:
    async def boom(call_id: str, params: Any, signal: Any = None, on_update: Any = None) -> Any:
        raise FileNotFoundError("no such file: notes.txt")

    faux = FauxProvider([faux_tool_call("read", {"text": "notes.txt"}), "recovered"])
    agent = Agent(model=faux.model, tools=[tool("read", boom)])
    result, _ = await _run_failing_call(agent, faux)
    assert texts(result) == ["no such file: notes.txt"]
    assert result["isError"] is True


async def test_after_tool_call_replaces_content_and_error_flag_field_by_field() -> None:
    def after(ctx: Any, signal: Any) -> AfterToolCallResult:
        assert texts({"content": ctx.result.content}) == ["secret"]
        return AfterToolCallResult(content=[{"type": "text", "text": "[redacted]"}], is_error=True)

    faux = FauxProvider([faux_tool_call("echo", {"text": "secret"}), "recovered"])
    agent = Agent(model=faux.model, tools=[echo_tool()], after_tool_call=after)
    result, _ = await _run_failing_call(agent, faux)
    assert texts(result) == ["[redacted]"]
    assert result["details"] == {}  # kept from the tool's own result


async def test_hooks_run_before_every_model_call_in_order() -> None:
    order: list[str] = []
    keys: list[str] = []

    def transform(messages: list[Any], signal: Any) -> list[Any]:
        order.append("transform")
        return [m for m in messages if m.get("role") != "note"] + [
            {"role": "note", "text": "ui only"}
        ]

    async def convert(messages: list[Any]) -> list[Any]:
        order.append("convert")
        assert messages[-1]["role"] == "note"  # transform ran first
        return [m for m in messages if m["role"] in ("user", "assistant", "toolResult")]

    async def get_key(provider: str) -> str:
        order.append("key")
        keys.append(provider)
        return f"key-{len(keys)}"

    faux = FauxProvider([faux_tool_call("echo", {"text": "x"}), "done"])
    agent = Agent(
        model=faux.model,
        tools=[echo_tool()],
        transform_context=transform,
        convert_to_llm=convert,
        get_api_key=get_key,
        messages=[{"role": "note", "text": "earlier"}],
    )
    await agent.prompt("go")
    assert order == ["transform", "convert", "key"] * 2
    assert keys == ["faux", "faux"]
    assert [o.api_key for o in faux.options] == ["key-1", "key-2"]
    assert all(m["role"] != "note" for r in faux.requests for m in r["messages"])
    assert agent.state.messages[0] == {"role": "note", "text": "earlier"}


async def test_default_convert_to_llm_drops_app_messages() -> None:
    faux = FauxProvider(["hi"])
    agent = Agent(model=faux.model, messages=[{"role": "bashExecution", "command": "ls"}])
    await agent.prompt("go")
    assert roles(faux.requests[0]["messages"]) == ["user"]
    assert roles(agent.state.messages) == ["bashExecution", "user", "assistant"]


async def test_thinking_level_off_sends_no_reasoning_and_others_pass_through() -> None:
    faux = FauxProvider(["a", "b"], reasoning=True)
    agent = Agent(model=faux.model)
    await agent.prompt("one")
    agent.state.thinking_level = "high"
    await agent.prompt("two")
    assert [o.reasoning for o in faux.options] == [None, "high"]


async def test_model_error_ends_the_run_with_the_error_recorded() -> None:
    faux = FauxProvider([FauxResponse(content=[faux_text("par")], error="503 overloaded")])
    agent = Agent(model=faux.model)
    agent.follow_up("later")
    recorder = Recorder(agent)
    await agent.prompt("go")
    last = agent.state.messages[-1]
    assert last["stopReason"] == "error" and last["errorMessage"] == "503 overloaded"
    assert agent.state.error == "503 overloaded"
    assert recorder.types[-2:] == ["turn_end", "agent_end"]
    assert recorder.of("turn_end")[0]["toolResults"] == []
    # follow-ups are not consumed by a failed run
    assert [texts(m) for m in agent.follow_up_queue] == [["later"]]


async def test_tool_calls_of_a_truncated_reply_are_not_run() -> None:
    log: list[str] = []
    faux = FauxProvider(
        [FauxResponse(content=[faux_tool_call("echo", {"text": "x"})], stop_reason="length"), "ok"]
    )
    agent = Agent(model=faux.model, tools=[echo_tool(log=log)])
    await agent.prompt("go")
    result = agent.state.messages[2]
    assert log == []
    assert result["isError"] is True and "output token limit" in texts(result)[0]
    assert texts(agent.state.messages[-1]) == ["ok"]


async def test_a_failing_listener_ends_the_run_with_an_error_message() -> None:
    faux = FauxProvider(["hi"])
    agent = Agent(model=faux.model)

    def listener(event: Any) -> None:
        if event["type"] == "message_end" and event["message"]["role"] == "assistant":
            raise RuntimeError("disk full")

    agent.subscribe(listener)
    await agent.prompt("go")
    last = agent.state.messages[-1]
    assert last["stopReason"] == "error" and last["errorMessage"] == "disk full"
    assert agent.state.error == "disk full"
    assert not agent.state.is_streaming


async def test_continue_requires_a_context_that_does_not_end_with_the_assistant() -> None:
    faux = FauxProvider(["again"])
    config = AgentLoopConfig(model=faux.model)
    recorder = Recorder()
    with pytest.raises(AgentError, match="Cannot continue: no messages in context"):
        await run_agent_loop_continue(AgentContext("", []), config, recorder.emit)
    assistant_last = [{"role": "user", "content": "hi", "timestamp": 0}, {"role": "assistant"}]
    with pytest.raises(AgentError, match="Cannot continue from message role: assistant"):
        await run_agent_loop_continue(AgentContext("", assistant_last), config, recorder.emit)
    assert recorder.events == []

    user_last = [{"role": "user", "content": "hi", "timestamp": 0}]
    added = await run_agent_loop_continue(AgentContext("", user_last), config, recorder.emit)
    assert roles(added) == ["assistant"] and texts(added[0]) == ["again"]
    assert recorder.types[:2] == ["agent_start", "turn_start"]
    assert recorder.of("agent_end")[0]["messages"] == added


async def test_a_plain_function_tool_works_and_steering_mode_all_delivers_together() -> None:
    agent: Agent

    def run(call_id: str, params: Any, signal: Any = None, on_update: Any = None) -> ToolResult:
        agent.steer("one")
        agent.steer("two")
        return ToolResult.text("sync ok")

    faux = FauxProvider([faux_tool_call("plain", {"text": "x"}), "done"])
    agent = Agent(
        model=faux.model,
        tools=[tool("plain", run)],  # type: ignore[arg-type]
        steering_mode="all",
    )
    await agent.prompt("go")
    assert texts(agent.state.messages[2]) == ["sync ok"]
    assert [texts(m) for m in faux.requests[1]["messages"][-2:]] == [["one"], ["two"]]
    assert len(faux.requests) == 2
