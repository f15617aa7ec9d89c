"""The sandboxed tool set driven by the real agent loop and a scripted model: successes come
back as results, refusals as error results the model can read, and files change as expected."""

from __future__ import annotations

from pathlib import Path

from clawpi.agent.agent import Agent
from clawpi.testing.faux import FauxProvider, FauxResponse, faux_tool_call
from clawpi.tools import create_coding_tools
from tests.tools.conftest import requires_bwrap


@requires_bwrap
async def test_agent_runs_sandboxed_tools_and_sees_refusals_as_errors(
    workspace: Path, tmp_path: Path
) -> None:
    (tmp_path / "outside").mkdir()
    secret = tmp_path / "outside" / "secret.txt"
    secret.write_text("TOP SECRET\n")
    calls = [
        faux_tool_call("write", {"file_path": "notes/a.txt", "content": "one\ntwo\n"}, "c1"),
        faux_tool_call(
            "edit", {"path": "notes/a.txt", "old_string": "two", "new_string": "2"}, "c2"
        ),
        faux_tool_call("exec", {"command": "cat notes/a.txt && cat " + str(secret)}, "c3"),
        faux_tool_call("read", {"path": str(secret)}, "c4"),
    ]
    faux = FauxProvider([FauxResponse(content=calls, stop_reason="toolUse"), "done"])
    tools = create_coding_tools(workspace, sandbox=True)
    agent = Agent(model=faux.model, tools=tools, tool_execution="sequential")
    await agent.prompt("go")

    results = {m["toolCallId"]: m for m in agent.state.messages if m["role"] == "toolResult"}
    text = {
        key: "".join(b["text"] for b in m["content"] if b["type"] == "text")
        for key, m in results.items()
    }
    assert [results[k]["isError"] for k in ("c1", "c2", "c3", "c4")] == [False, False, True, True]
    assert text["c1"] == "Successfully wrote 8 bytes to notes/a.txt"
    assert text["c3"].startswith("one\n2\n") and "No such file or directory" in text["c3"]
    assert "outside the workspace" in text["c4"]
    assert "TOP SECRET" not in text["c3"] + text["c4"]
    assert (workspace / "notes/a.txt").read_text() == "one\n2\n"
    assert secret.read_text() == "TOP SECRET\n"
