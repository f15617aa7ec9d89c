"""`clawpi run` as a real subprocess against a local OpenAI-compatible fake server (models.json)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from clawpi.session import SessionManager
from tests.fakes.http_server import FakeResponse, FakeServer
from tests.fakes.openai_sse import (
    completion_response,
    finish_chunk,
    reasoning_chunk,
    role_chunk,
    text_chunk,
    tool_call_chunks,
    usage_chunk,
)

CLI = [sys.executable, "-m", "clawpi.cli.main"]


@pytest.fixture
def agent_dir(tmp_path: Path, server: FakeServer) -> Path:
    directory = tmp_path / "agent"
    directory.mkdir()
    (directory / "models.json").write_text(
        json.dumps(
            {
                "providers": {
                    "stub": {
                        "baseUrl": server.url + "/v1",
                        "api": "openai-completions",
                        "apiKey": "stub-key",
                        "compat": {"supportsDeveloperRole": False, "supportsStore": False},
                        "models": [
                            {
                                "id": "stub-model",
                                "reasoning": True,
                                "contextWindow": 32000,
                                "maxTokens": 4096,
                            }
                        ],
                    }
                }
            }
        )
    )
    return directory


def answer(text: str) -> FakeResponse:
    return completion_response(
        [role_chunk(), text_chunk(text), finish_chunk("stop"), usage_chunk(150, 5)]
    )


def tool_turn() -> FakeResponse:
    chunks: list[Any] = [role_chunk(), reasoning_chunk("Need to run a command.")]
    chunks += tool_call_chunks(0, "call_1", "exec", ['{"command":', ' "echo hi"}'])
    chunks += [finish_chunk("tool_calls"), usage_chunk(100, 20)]
    return completion_response(chunks)


def run_cli(
    args: list[str], agent_dir: Path, workspace: Path, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CLAWPI_AGENT_DIR": str(agent_dir)}
    return subprocess.run(
        [*CLI, "run", "--cwd", str(workspace), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
        **kwargs,
    )


def session_files() -> list[Path]:
    state = Path(os.environ["CLAWPI_STATE_DIR"])
    return sorted((state / "agents" / "main" / "sessions").glob("*.jsonl"))


def test_text_mode_streams_the_answer_and_writes_the_session(
    server: FakeServer, agent_dir: Path, workspace: Path
) -> None:
    server.enqueue(answer("Hello from the stub."))
    result = run_cli(
        ["--provider", "stub", "--model", "stub-model", "Say hi"], agent_dir, workspace
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Hello from the stub.\n"
    body = server.requests[0].json()
    assert server.requests[0].path == "/v1/chat/completions"
    assert server.requests[0].headers["authorization"] == "Bearer stub-key"
    assert body["messages"][0]["role"] == "system"
    assert body["messages"][-1]["content"] == [{"type": "text", "text": "Say hi"}]
    assert body["reasoning_effort"] == "medium"
    [file] = session_files()
    manager = SessionManager.open(file)
    roles = [e["message"]["role"] for e in manager.get_entries() if e["type"] == "message"]
    assert roles == ["user", "assistant"]
    assert manager.build_session_context().model == {"provider": "stub", "modelId": "stub-model"}


def test_json_mode_prints_header_then_events_in_order(
    server: FakeServer, agent_dir: Path, workspace: Path
) -> None:
    server.enqueue(tool_turn(), answer("Done: hi"))
    result = run_cli(
        [
            "--mode",
            "json",
            "--provider",
            "stub",
            "--model",
            "stub-model",
            "--thinking",
            "low",
            "Say hi using exec",
        ],
        agent_dir,
        workspace,
    )
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines[0]["type"] == "session"
    kinds = [line["type"] for line in lines[1:]]
    updates = [
        line["assistantMessageEvent"]["type"] for line in lines if line["type"] == "message_update"
    ]
    assert updates[:3] == ["thinking_start", "thinking_delta", "thinking_end"]
    assert "toolcall_end" in updates
    collapsed = [
        k for i, k in enumerate(kinds) if k != "message_update" and k != "tool_execution_update"
    ]
    assert collapsed == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_end",
        "tool_execution_start",
        "tool_execution_end",
        "message_start",
        "message_end",
        "turn_end",
        "turn_start",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    # events are snapshots: the thinking_start line does not yet hold the full thinking text
    thinking_start = next(
        x for x in lines if x.get("assistantMessageEvent", {}).get("type") == "thinking_start"
    )
    assert thinking_start["message"]["content"][0]["thinking"] == ""
    tool_end = next(x for x in lines if x["type"] == "tool_execution_end")
    assert tool_end["result"]["content"][0]["text"].strip() == "hi"
    second = server.requests[1].json()["messages"]
    assert second[-2]["reasoning_content"] == "Need to run a command."
    assert second[-1] == {"role": "tool", "content": "hi\n", "tool_call_id": "call_1"}


def test_failure_exits_non_zero_with_the_error_on_stderr(
    server: FakeServer, agent_dir: Path, workspace: Path
) -> None:
    server.enqueue(
        FakeResponse.json_body(
            401,
            {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}},
        )
    )
    result = run_cli(
        ["--mode", "json", "--provider", "stub", "--model", "stub-model", "hi"],
        agent_dir,
        workspace,
    )
    assert result.returncode == 1
    assert "Incorrect API key provided" in result.stderr
    assert json.loads(result.stdout.splitlines()[0])["type"] == "session"


def test_continue_resumes_the_same_file(
    server: FakeServer, agent_dir: Path, workspace: Path
) -> None:
    server.enqueue(answer("first"), answer("second"))
    args = ["--provider", "stub", "--model", "stub-model"]
    assert run_cli([*args, "one"], agent_dir, workspace).returncode == 0
    result = run_cli([*args, "--continue", "two"], agent_dir, workspace)
    assert result.returncode == 0, result.stderr
    [file] = session_files()
    roles = [
        e["message"]["role"]
        for e in SessionManager.open(file).get_entries()
        if e["type"] == "message"
    ]
    assert roles == ["user", "assistant", "user", "assistant"]
    history = server.requests[1].json()["messages"]
    assert [m["role"] for m in history] == ["system", "user", "assistant", "user"]


def test_missing_credentials_say_how_to_fix_it(agent_dir: Path, workspace: Path) -> None:
    result = run_cli(
        ["--provider", "anthropic", "--model", "claude-sonnet-4-5", "hi"], agent_dir, workspace
    )
    assert result.returncode == 2
    assert "ANTHROPIC_API_KEY" in result.stderr
    assert "--base-url http://127.0.0.1:11434/v1" in result.stderr


def test_base_url_points_any_model_id_at_a_local_server(
    server: FakeServer, tmp_path: Path, workspace: Path
) -> None:
    server.enqueue(answer("local answer"))
    empty_agent = tmp_path / "empty-agent"
    result = run_cli(
        ["--provider", "local", "--model", "qwen3:8b", "--base-url", server.url + "/v1", "hi"],
        empty_agent,
        workspace,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "local answer\n"
    assert server.requests[0].json()["model"] == "qwen3:8b"


async def test_rpc_mode_dialogue(server: FakeServer, agent_dir: Path, workspace: Path) -> None:
    server.enqueue(answer("rpc answer"))
    env = {**os.environ, "CLAWPI_AGENT_DIR": str(agent_dir)}
    process = await asyncio.create_subprocess_exec(
        *CLI,
        "run",
        "--cwd",
        str(workspace),
        "--mode",
        "rpc",
        "--provider",
        "stub",
        "--model",
        "stub-model",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    assert process.stdin is not None and process.stdout is not None

    async def send(obj: Any) -> None:
        data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        process.stdin.write(data + b"\n")  # type: ignore[union-attr]
        await process.stdin.drain()  # type: ignore[union-attr]

    async def read_until(predicate: Any) -> list[dict[str, Any]]:
        seen = []
        while True:
            line = await asyncio.wait_for(process.stdout.readline(), 60)  # type: ignore[union-attr]
            assert line, "rpc process ended early"
            item = json.loads(line)
            seen.append(item)
            if predicate(item):
                return seen

    await send({"id": "1", "type": "get_state"})
    [state] = await read_until(lambda i: i.get("type") == "response")
    assert state["id"] == "1" and state["success"] is True
    assert state["data"]["model"]["id"] == "stub-model"
    assert state["data"]["isStreaming"] is False
    await send({"id": "2", "type": "prompt", "message": "hello rpc"})
    seen = await read_until(lambda i: i.get("type") == "agent_end")
    assert seen[0] == {"id": "2", "type": "response", "command": "prompt", "success": True}
    await send({"id": "3", "type": "get_last_assistant_text"})
    [text] = await read_until(lambda i: i.get("type") == "response")
    assert text["data"] == {"text": "rpc answer"}
    await send({"id": "4", "type": "no_such_command"})
    [unknown] = await read_until(lambda i: i.get("type") == "response")
    assert unknown == {
        "type": "response",
        "command": "no_such_command",
        "success": False,
        "error": "Unknown command: no_such_command",
    }
    await send(b"this is not json")
    [parse] = await read_until(lambda i: i.get("type") == "response")
    assert parse["command"] == "parse" and parse["success"] is False
    assert parse["error"].startswith("Failed to parse command")
    await send({"id": "5", "type": "set_model", "provider": "stub", "modelId": "nope"})
    [bad_model] = await read_until(lambda i: i.get("type") == "response")
    assert bad_model["error"] == "Model not found: stub/nope"
    await send({"id": "6", "type": "get_messages"})
    [messages] = await read_until(lambda i: i.get("type") == "response")
    assert [m["role"] for m in messages["data"]["messages"]] == ["user", "assistant"]
    process.stdin.close()
    assert await asyncio.wait_for(process.wait(), 60) == 0


def test_models_and_sessions_commands(server: FakeServer, agent_dir: Path, workspace: Path) -> None:
    env = {**os.environ, "CLAWPI_AGENT_DIR": str(agent_dir)}
    listing = subprocess.run(
        [*CLI, "models", "stub"], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert listing.returncode == 0, listing.stderr
    assert "stub/stub-model" in listing.stdout and "yes" in listing.stdout
    server.enqueue(answer("for the listing"))
    assert (
        run_cli(
            ["--provider", "stub", "--model", "stub-model", "remember this"], agent_dir, workspace
        ).returncode
        == 0
    )
    [file] = session_files()
    sessions = subprocess.run(
        [*CLI, "sessions", "list"], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert str(file) in sessions.stdout
    assert "remember this" in sessions.stdout
    show = subprocess.run(
        [*CLI, "sessions", "show", str(file)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert "[user]\nremember this" in show.stdout
    assert "[assistant]\nfor the listing" in show.stdout
    tree = subprocess.run(
        [*CLI, "sessions", "tree", str(file)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert "model_change" in tree.stdout and tree.stdout.rstrip().endswith("*")
