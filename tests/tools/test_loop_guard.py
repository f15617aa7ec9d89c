"""The loop guard around real tools: refusals, the end of a run that keeps being refused,
outcomes recorded from real results and errors, and unknown tools seen through events."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from clawpi.agent.tool import AgentTool
from clawpi.agent.tool_execution import ABORTED_MESSAGE, SKIPPED_MESSAGE
from clawpi.tools import create_coding_tools
from clawpi.tools.errors import ToolError
from clawpi.tools.loop_detection import CRITICAL_THRESHOLD, LoopDetectionConfig, ToolCallHistory
from clawpi.tools.loop_guard import (
    BLOCKED_STREAK_TO_END_RUN,
    RUN_ENDED_NOTICE,
    ToolLoopBlockedError,
    ToolLoopGuard,
)
from tests.tools.conftest import text_of

ON = LoopDetectionConfig(enabled=True)


class Ended:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1


def guarded(workspace: Path, ended: Ended, history: ToolCallHistory | None = None) -> Any:
    guard = ToolLoopGuard(history or ToolCallHistory(), ON, on_end_run=ended)
    tools = {tool.name: tool for tool in guard.wrap_tools(create_coding_tools(workspace))}
    return guard, tools


async def call(tool: AgentTool, call_id: str, params: dict[str, Any]) -> str:
    return text_of(await tool.execute(call_id, params))


async def test_the_call_after_twenty_identical_reads_is_refused_with_a_message_for_the_model(
    workspace: Path,
) -> None:
    (workspace / "notes.txt").write_text("remember the milk\n")
    ended = Ended()
    guard, tools = guarded(workspace, ended)
    for i in range(CRITICAL_THRESHOLD):
        assert "milk" in await call(tools["read"], f"c{i}", {"path": "notes.txt"})
    with pytest.raises(ToolLoopBlockedError, match="CRITICAL: Called read with identical"):
        await call(tools["read"], "c-blocked", {"path": "notes.txt"})
    assert isinstance(ToolLoopBlockedError("x"), ToolError)
    assert guard.blocked_streak == 1 and ended.calls == 0
    # a different call still runs, and it is progress: the refusal streak starts again
    assert "milk" in await call(tools["read"], "c-other", {"path": "notes.txt", "offset": 1})
    assert guard.blocked_streak == 0


async def test_the_third_refusal_in_a_row_ends_the_run_once(workspace: Path) -> None:
    (workspace / "notes.txt").write_text("same\n")
    ended = Ended()
    guard, tools = guarded(workspace, ended)
    for i in range(CRITICAL_THRESHOLD):
        await call(tools["read"], f"c{i}", {"path": "notes.txt"})
    messages = []
    for i in range(BLOCKED_STREAK_TO_END_RUN + 1):
        with pytest.raises(ToolLoopBlockedError) as refused:
            await call(tools["read"], f"blocked{i}", {"path": "notes.txt"})
        messages.append(str(refused.value))
    assert [RUN_ENDED_NOTICE in m for m in messages] == [False, False, True, True]
    assert ended.calls == 1 and guard.ended


async def test_a_file_that_changes_between_reads_is_progress(workspace: Path) -> None:
    ended = Ended()
    _guard, tools = guarded(workspace, ended)
    for i in range(CRITICAL_THRESHOLD + 5):
        (workspace / "log.txt").write_text(f"line {i}\n")
        assert f"line {i}" in await call(tools["read"], f"c{i}", {"path": "log.txt"})
    assert ended.calls == 0


async def test_the_same_failing_call_is_refused_once_its_errors_repeat(workspace: Path) -> None:
    ended = Ended()
    _guard, tools = guarded(workspace, ended)
    for i in range(CRITICAL_THRESHOLD):
        with pytest.raises(Exception, match=r"missing\.txt") as failed:
            await call(tools["read"], f"c{i}", {"path": "missing.txt"})
        assert not isinstance(failed.value, ToolLoopBlockedError)
    with pytest.raises(ToolLoopBlockedError):
        await call(tools["read"], "again", {"path": "missing.txt"})


async def test_repeated_exec_of_the_same_command_is_refused_despite_run_times(
    workspace: Path,
) -> None:
    ended = Ended()
    _guard, tools = guarded(workspace, ended)
    for i in range(CRITICAL_THRESHOLD):
        assert "same" in await call(tools["exec"], f"c{i}", {"command": "echo same"})
    with pytest.raises(ToolLoopBlockedError):
        await call(tools["exec"], "again", {"command": "echo same"})


async def test_the_history_outlives_the_guard_so_a_retried_attempt_keeps_counting(
    workspace: Path,
) -> None:
    (workspace / "notes.txt").write_text("same\n")
    history = ToolCallHistory()
    _first, tools = guarded(workspace, Ended(), history)
    for i in range(CRITICAL_THRESHOLD):
        await call(tools["read"], f"c{i}", {"path": "notes.txt"})
    _second, retried = guarded(workspace, Ended(), history)
    with pytest.raises(ToolLoopBlockedError):
        await call(retried["read"], "after-retry", {"path": "notes.txt"})


def unknown_call(
    guard: ToolLoopGuard,
    call_id: str,
    name: str = "shell",
    error: str | None = None,
    args: Any = None,
) -> None:
    """The events of a call the agent failed without running a tool (by default: no such tool)."""
    guard.observe(
        {"type": "tool_execution_start", "toolCallId": call_id, "toolName": name, "args": args}
    )
    guard.observe(
        {
            "type": "tool_execution_end",
            "toolCallId": call_id,
            "toolName": name,
            "result": {"content": [{"type": "text", "text": error or f"Tool {name} not found"}]},
            "isError": True,
        }
    )


def test_calls_to_a_missing_tool_are_counted_from_events_and_end_the_run(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ended = Ended()
    guard, _tools = guarded(workspace, ended)
    caplog.set_level(logging.ERROR, logger="clawpi.tools.loop_guard")
    for i in range(ON.unknown_tool_threshold):
        unknown_call(guard, f"u{i}")
    assert guard.blocked_streak == 0 and ended.calls == 0
    for i in range(BLOCKED_STREAK_TO_END_RUN):
        unknown_call(guard, f"again{i}")
    assert ended.calls == 1
    assert "attempted unavailable tool shell" in caplog.text


async def test_events_of_the_guards_own_tools_are_not_counted_twice(workspace: Path) -> None:
    (workspace / "notes.txt").write_text("same\n")
    guard, tools = guarded(workspace, Ended())
    guard.observe(
        {"type": "tool_execution_start", "toolCallId": "c1", "toolName": "read", "args": {}}
    )
    await call(tools["read"], "c1", {"path": "notes.txt"})
    guard.observe(
        {"type": "tool_execution_end", "toolCallId": "c1", "toolName": "read", "isError": True}
    )
    assert len(guard.history.records) == 1
    guard.observe({"type": "tool_execution_end", "toolName": 3, "isError": True})
    guard.observe({"type": "message_end"})
    assert len(guard.history.records) == 1


def test_a_call_that_keeps_failing_validation_is_counted_and_ends_the_run(workspace: Path) -> None:
    ended = Ended()
    guard, _tools = guarded(workspace, ended)
    error = 'Validation failed for tool "read": path: is required'
    for i in range(CRITICAL_THRESHOLD):
        unknown_call(guard, f"v{i}", "read", error, {"file": "a.txt"})
    assert guard.blocked_streak == 0
    for i in range(BLOCKED_STREAK_TO_END_RUN):
        unknown_call(guard, f"again{i}", "read", error, {"file": "a.txt"})
    assert ended.calls == 1


def test_calls_skipped_for_the_users_message_or_an_abort_are_not_the_models_loop(
    workspace: Path,
) -> None:
    guard, _tools = guarded(workspace, Ended())
    for i in range(CRITICAL_THRESHOLD + 5):
        unknown_call(guard, f"s{i}", "read", SKIPPED_MESSAGE, {"path": "a.txt"})
        unknown_call(guard, f"a{i}", "read", ABORTED_MESSAGE, {"path": "a.txt"})
    assert guard.history.records == [] and guard.blocked_streak == 0
