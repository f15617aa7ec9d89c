"""create_coding_tools: the contract's names and order, aliases, abort wrapping, read-only mode."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from clawpi.ai.abort import AbortController
from clawpi.errors import AbortedError
from clawpi.tools import create_coding_tools
from tests.tools.conftest import requires_bwrap, text_of


def test_default_tool_names_follow_the_contract(workspace: Path) -> None:
    names = [t.name for t in create_coding_tools(workspace)]
    assert names == ["read", "write", "edit", "exec", "process", "grep", "find", "ls"]
    assert all(t.label == t.name for t in create_coding_tools(workspace))


@requires_bwrap
async def test_contract_example_reads_a_file_in_sandbox_mode(workspace: Path) -> None:
    (workspace / "a.txt").write_text("hello\n")
    tools = create_coding_tools(workspace, sandbox=True)
    read = next(t for t in tools if t.name == "read")
    result = await read.execute("call-1", {"path": "a.txt"})
    assert text_of(result) == "hello\n"


def test_read_only_mode_drops_write_and_edit(workspace: Path) -> None:
    names = [t.name for t in create_coding_tools(workspace, read_only=True)]
    assert "write" not in names and "edit" not in names and "read" in names


def test_missing_workspace_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="Workspace directory does not exist"):
        create_coding_tools(tmp_path / "nope")


async def test_run_abort_reaches_every_tool(workspace: Path) -> None:
    controller = AbortController()
    tools = {t.name: t for t in create_coding_tools(workspace, signal=controller.signal)}
    (workspace / "a.txt").write_text("x")
    controller.abort("user pressed stop")
    for name, params in [
        ("read", {"path": "a.txt"}), ("write", {"path": "b.txt", "content": "x"}),
        ("edit", {"path": "a.txt", "oldText": "x", "newText": "y"}), ("exec", {"command": "true"}),
        ("process", {"action": "list"}), ("grep", {"pattern": "x"}), ("find", {"pattern": "*"}),
        ("ls", {}),
    ]:  # fmt: skip
        with pytest.raises(AbortedError):
            await tools[name].execute("c", params)
    assert not (workspace / "b.txt").exists()
    assert (workspace / "a.txt").read_text() == "x"


async def test_call_signal_and_run_signal_both_stop_exec(workspace: Path) -> None:
    run = AbortController()
    call = AbortController()
    tools = {t.name: t for t in create_coding_tools(workspace, signal=run.signal)}
    task = asyncio.create_task(
        tools["exec"].execute("c", {"command": "echo go; sleep 20"}, call.signal)
    )
    await asyncio.sleep(0.2)
    call.abort()
    with pytest.raises(AbortedError, match="Command aborted"):
        await task
