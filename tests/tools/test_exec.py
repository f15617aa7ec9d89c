"""exec and process with real subprocesses: output, errors, timeout and abort killing the whole
tree, the background hand-off, truncation with the full-output file, TTL, scoping, security."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from clawpi.agent.tool import ToolResult
from clawpi.ai.abort import AbortController
from clawpi.errors import AbortedError
from clawpi.tools import CommandFailedError, ExecDeniedError, ProcessRegistry, ToolError
from clawpi.tools.process import create_process_tool
from clawpi.tools.process_registry import run_scope
from tests.tools.conftest import requires_bwrap, text_of
from tests.tools.proc_util import marker_seconds, wait_for_sleepers, wait_until_gone


@pytest.fixture
def tools(make_tools):  # type: ignore[no-untyped-def]
    return make_tools()


async def test_exec_returns_merged_output(tools) -> None:
    result = await tools["exec"].execute("c", {"command": "echo out; echo err >&2"})
    assert text_of(result) == "out\nerr\n"
    assert result.details["status"] == "completed" and result.details["exitCode"] == 0


async def test_exec_empty_output_says_so(tools) -> None:
    assert text_of(await tools["exec"].execute("c", {"command": "true"})) == "(no output)"


async def test_exec_nonzero_exit_is_an_error_that_keeps_the_output(tools) -> None:
    with pytest.raises(CommandFailedError) as caught:
        await tools["exec"].execute("c", {"command": "echo partial; exit 7"})
    assert str(caught.value) == "partial\n\n\nCommand exited with code 7"
    assert caught.value.exit_code == 7


async def test_exec_runs_in_workdir_relative_to_workspace(tools, workspace: Path) -> None:
    (workspace / "sub").mkdir()
    result = await tools["exec"].execute("c", {"command": "pwd", "workdir": "sub"})
    assert text_of(result).strip() == str((workspace / "sub").resolve())
    with pytest.raises(ToolError, match="Working directory does not exist: missing"):
        await tools["exec"].execute("c", {"command": "pwd", "workdir": "missing"})


async def test_exec_timeout_kills_the_whole_process_tree(tools) -> None:
    child, grandchild, detached = marker_seconds(), marker_seconds(), marker_seconds()
    command = (
        f"sleep {child} & (sleep {grandchild} &) ; setsid sleep {detached} & echo started; wait"
    )
    with pytest.raises(
        CommandFailedError, match=r"started\n\n\nCommand timed out after 0\.5 seconds"
    ):
        await tools["exec"].execute("c", {"command": command, "timeout": 0.5})
    for marker in (child, grandchild, detached):
        assert wait_until_gone(marker) == [], f"sleep {marker} survived the timeout"


async def test_exec_abort_kills_the_tree_and_reports_aborted(make_tools) -> None:
    controller = AbortController()
    tools = make_tools(signal=controller.signal)
    marker = marker_seconds()
    updates: list[ToolResult] = []

    async def run() -> ToolResult:
        return await tools["exec"].execute(
            "c", {"command": f"echo ready; sleep {marker} & wait"}, None, updates.append
        )

    task = asyncio.create_task(run())
    await wait_for_sleepers(marker, 1)
    controller.abort()
    with pytest.raises(AbortedError, match=r"ready\n\n\nCommand aborted"):
        await task
    assert wait_until_gone(marker) == []
    assert any("ready" in text_of(update) for update in updates)


async def test_exec_refuses_to_start_when_run_already_aborted(make_tools, workspace: Path) -> None:
    controller = AbortController()
    controller.abort()
    tools = make_tools(signal=controller.signal)
    with pytest.raises(AbortedError):
        await tools["exec"].execute("c", {"command": "touch started"})
    assert not (workspace / "started").exists()


async def test_exec_tail_truncates_and_saves_full_output(make_tools) -> None:
    tools = make_tools(workspace_only=True)
    result = await tools["exec"].execute("c", {"command": "seq 1 5000"})
    text = text_of(result)
    path = result.details["fullOutputPath"]
    assert text.endswith(f"\n\n[Showing lines 3002-5001 of 5001. Full output: {path}]")
    assert text.startswith("3002\n")
    assert Path(path).read_text() == "".join(f"{i}\n" for i in range(1, 5001))
    # The confined read tool may open exactly this log, though it lies outside the workspace.
    full = await tools["read"].execute("c", {"path": path, "offset": 1, "limit": 2})
    assert text_of(full).startswith("1\n2\n")


async def test_exec_byte_cap_keeps_the_tail(tools) -> None:
    result = await tools["exec"].execute(
        "c", {"command": "for i in $(seq 1 1200); do printf '%099d\\n' $i; done"}
    )
    body, notice = text_of(result).rsplit("\n\n", 1)
    assert len(body.encode()) <= 50 * 1024
    assert body.rstrip("\n").endswith("1200")
    assert "(50.0KB limit). Full output: " in notice


async def test_exec_slow_command_moves_to_background_and_poll_collects(tools) -> None:
    result = await tools["exec"].execute(
        "c", {"command": "echo early; sleep 0.3; echo late", "yieldMs": 50}
    )
    assert result.details["status"] == "running"
    session_id = result.details["sessionId"]
    assert f"session {session_id}" in text_of(result)
    polled = await tools["process"].execute(
        "p", {"action": "poll", "sessionId": session_id, "timeout": 5000}
    )
    collected = text_of(polled)
    while polled.details["status"] == "running":
        polled = await tools["process"].execute(
            "p", {"action": "poll", "sessionId": session_id, "timeout": 5000}
        )
        collected += text_of(polled)
    assert "late" in collected and "Process exited with code 0." in collected


async def test_background_session_lifecycle_list_write_log_kill_clear(tools) -> None:
    started = await tools["exec"].execute(
        "c", {"command": "read line; echo got:$line; sleep 30", "background": True}
    )
    session_id = started.details["sessionId"]
    listing = text_of(await tools["process"].execute("p", {"action": "list"}))
    assert listing.startswith(f"{session_id} running")
    await tools["process"].execute(
        "p", {"action": "submit", "sessionId": session_id, "data": "hello"}
    )
    polled = ""
    while "got:hello" not in polled:
        polled += text_of(await tools["process"].execute(
            "p", {"action": "poll", "sessionId": session_id, "timeout": 2000}))  # fmt: skip
    log = text_of(await tools["process"].execute("p", {"action": "log", "sessionId": session_id}))
    assert log.startswith("got:hello\n\n[lines 0-1 of 1; running]")
    with pytest.raises(ToolError, match="still running"):
        await tools["process"].execute("p", {"action": "clear", "sessionId": session_id})
    killed = await tools["process"].execute("p", {"action": "kill", "sessionId": session_id})
    assert killed.details["status"] == "killed"
    assert "killed" in text_of(await tools["process"].execute("p", {"action": "list"}))
    await tools["process"].execute("p", {"action": "clear", "sessionId": session_id})
    assert (
        text_of(await tools["process"].execute("p", {"action": "list"}))
        == "No running or recent sessions."
    )


async def test_process_log_offset_and_limit(tools) -> None:
    started = await tools["exec"].execute("c", {"command": "seq 1 500", "background": True})
    session_id = started.details["sessionId"]
    await tools["process"].execute(
        "p", {"action": "poll", "sessionId": session_id, "timeout": 5000}
    )
    while (
        await tools["process"].execute(
            "p", {"action": "poll", "sessionId": session_id, "timeout": 5000}
        )
    ).details["status"] == "running":
        pass
    default = text_of(
        await tools["process"].execute("p", {"action": "log", "sessionId": session_id})
    )
    assert default.startswith("301\n") and "[lines 300-500 of 500; exited with code 0]" in default
    sliced = text_of(await tools["process"].execute(
        "p", {"action": "log", "sessionId": session_id, "offset": 10, "limit": 3}))  # fmt: skip
    assert sliced.startswith("11\n12\n13\n\n[lines 10-13 of 500")


async def test_finished_sessions_are_forgotten_after_ttl(workspace: Path) -> None:
    now = [1000.0]
    registry = ProcessRegistry(ttl_seconds=60, clock=lambda: now[0])
    try:
        process = create_process_tool(registry)
        session = await registry.spawn(
            ["sh", "-c", "echo hi"],
            command="echo hi",
            cwd=str(workspace),
            env=os.environ,
            timeout=None,
        )
        session.backgrounded = True
        await session.wait()
        assert session.id in text_of(await process.execute("p", {"action": "list"}))
        now[0] += 59
        assert session.id in text_of(await process.execute("p", {"action": "list"}))
        now[0] += 2
        assert (
            text_of(await process.execute("p", {"action": "list"}))
            == "No running or recent sessions."
        )
        with pytest.raises(ToolError, match="No process session"):
            await process.execute("p", {"action": "poll", "sessionId": session.id})
    finally:
        await registry.shutdown()


async def test_sessions_are_scoped_per_chat(make_tools, registry: ProcessRegistry) -> None:
    alice = make_tools(scope_key="chat-alice")
    bob = make_tools(scope_key="chat-bob")
    started = await alice["exec"].execute("c", {"command": "sleep 30", "background": True})
    session_id = started.details["sessionId"]
    assert session_id in text_of(await alice["process"].execute("p", {"action": "list"}))
    assert (
        text_of(await bob["process"].execute("p", {"action": "list"}))
        == "No running or recent sessions."
    )
    with pytest.raises(ToolError, match="No process session"):
        await bob["process"].execute("p", {"action": "kill", "sessionId": session_id})


async def test_one_tool_set_shared_by_chats_takes_the_scope_of_each_run(make_tools) -> None:
    """The runner builds tools without a scope and sets `run_scope` per run (each run is its
    own task, so its scope is its own)."""
    shared = make_tools()

    async def in_chat(chat: str, call: Callable[[], Awaitable[Any]]) -> Any:
        async def run() -> Any:
            run_scope.set(chat)
            return await call()

        return await asyncio.create_task(run())

    started = await in_chat(
        "chat-alice",
        lambda: shared["exec"].execute("c", {"command": "sleep 30", "background": True}),
    )
    session_id = started.details["sessionId"]
    listing = lambda: shared["process"].execute("p", {"action": "list"})  # noqa: E731
    assert session_id in text_of(await in_chat("chat-alice", listing))
    assert text_of(await in_chat("chat-bob", listing)) == "No running or recent sessions."
    with pytest.raises(ToolError, match="No process session"):
        await in_chat(
            "chat-bob",
            lambda: shared["process"].execute("p", {"action": "kill", "sessionId": session_id}),
        )
    assert run_scope.get() is None


async def test_exec_security_deny_refuses_everything(make_tools, workspace: Path) -> None:
    tools = make_tools(exec_security="deny")
    with pytest.raises(ExecDeniedError, match="exec is disabled"):
        await tools["exec"].execute("c", {"command": "touch x"})
    assert not (workspace / "x").exists()


async def test_exec_allowlist_allows_listed_bins_and_safe_stdin_filters(make_tools) -> None:
    tools = make_tools(exec_security="allowlist", exec_allowlist=["echo", "printf"])
    result = await tools["exec"].execute("c", {"command": "printf 'a\\nb\\n' | wc -l"})
    assert text_of(result).strip() == "2"
    for denied in (
        "cat /etc/passwd",
        "echo hi | wc -l /etc/passwd",
        "echo $(id)",
        "echo hi > f",
        "rm -rf .",
    ):
        with pytest.raises(ExecDeniedError):
            await tools["exec"].execute("c", {"command": denied})


async def test_exec_rejects_loader_environment_variables(tools) -> None:
    with pytest.raises(ExecDeniedError, match="LD_PRELOAD"):
        await tools["exec"].execute("c", {"command": "true", "env": {"LD_PRELOAD": "/x.so"}})
    result = await tools["exec"].execute(
        "c", {"command": "echo $GREETING", "env": {"GREETING": "hey"}}
    )
    assert text_of(result) == "hey\n"


@requires_bwrap
async def test_sandboxed_exec_gets_a_clean_environment(
    make_tools, monkeypatch, workspace: Path
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    tools = make_tools(sandbox=True)
    result = await tools["exec"].execute(
        "c", {"command": "echo key=${OPENAI_API_KEY:-unset} sandbox=$CLAWPI_SANDBOX home=$HOME"}
    )
    assert text_of(result) == f"key=unset sandbox=1 home={workspace.resolve()}\n"


@requires_bwrap
async def test_sandbox_private_tmp_is_not_the_host_tmp(make_tools, tmp_path: Path) -> None:
    tools = make_tools(sandbox=True)
    name = f"/tmp/clawpi-private-{os.getpid()}-{id(tools)}"
    result = await tools["exec"].execute("c", {"command": f"echo inside > {name} && cat {name}"})
    assert text_of(result) == "inside\n"
    assert not os.path.exists(name)


@requires_bwrap
async def test_sandbox_timeout_kills_everything_inside(make_tools) -> None:
    tools = make_tools(sandbox=True)
    marker = marker_seconds()
    with pytest.raises(CommandFailedError, match="timed out"):
        await tools["exec"].execute(
            "c", {"command": f"setsid sleep {marker} & sleep {marker}", "timeout": 0.5}
        )
    assert wait_until_gone(marker) == []


@requires_bwrap
async def test_sandbox_network_is_shared_only_when_allowed(make_tools) -> None:
    import socket

    from clawpi.tools import SandboxConfig

    tools = make_tools(sandbox=SandboxConfig(network=True))
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        result = await tools["exec"].execute(
            "c", {"command": f"bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}' && echo connected"}
        )
        assert text_of(result) == "connected\n"
        connection, _ = listener.accept()
        connection.close()


async def test_exec_output_beyond_the_memory_cap_counts_every_line(tools) -> None:
    result = await tools["exec"].execute("c", {"command": "seq 1 300000"})  # ~2 MB of output
    text = text_of(result)
    path = result.details["fullOutputPath"]
    assert text.endswith(f"\n\n[Showing lines 298002-300001 of 300001. Full output: {path}]")
    assert text.startswith("298002\n")
    assert Path(path).stat().st_size == sum(len(f"{i}\n") for i in range(1, 300001))


async def test_cancelling_the_exec_call_kills_the_command(tools) -> None:
    marker = marker_seconds()
    task = asyncio.create_task(tools["exec"].execute("c", {"command": f"sleep {marker}"}))
    await wait_for_sleepers(marker, 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert wait_until_gone(marker) == []


async def test_background_exit_is_reported_once(make_tools) -> None:
    finished: list[tuple[str, int | None]] = []
    done = asyncio.Event()

    def on_exit(session) -> None:  # type: ignore[no-untyped-def]
        finished.append((session.id, session.exit_code))
        done.set()

    tools = make_tools(on_background_exit=on_exit)
    started = await tools["exec"].execute("c", {"command": "sleep 0.1; exit 3", "background": True})
    await asyncio.wait_for(done.wait(), 10)
    await tools["process"].execute(
        "p", {"action": "poll", "sessionId": started.details["sessionId"]}
    )
    assert finished == [(started.details["sessionId"], 3)]
    quick = await tools["exec"].execute("c", {"command": "true"})
    assert quick.details["status"] == "completed" and len(finished) == 1  # foreground: no report


async def test_process_write_with_eof_closes_stdin(tools) -> None:
    started = await tools["exec"].execute("c", {"command": "cat", "background": True})
    session_id = started.details["sessionId"]
    await tools["process"].execute(
        "p", {"action": "write", "sessionId": session_id, "data": "piped\n", "eof": True}
    )
    polled = await tools["process"].execute(
        "p", {"action": "poll", "sessionId": session_id, "timeout": 5000}
    )
    while polled.details["status"] == "running":
        polled = await tools["process"].execute(
            "p", {"action": "poll", "sessionId": session_id, "timeout": 5000}
        )
    log = text_of(await tools["process"].execute("p", {"action": "log", "sessionId": session_id}))
    assert log.startswith("piped\n") and polled.details["exitCode"] == 0
    with pytest.raises(ToolError, match="not accepting input"):
        await tools["process"].execute(
            "p", {"action": "write", "sessionId": session_id, "data": "x"}
        )
