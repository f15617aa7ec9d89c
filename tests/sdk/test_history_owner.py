"""A session's providers keep their work on its history: the requests are the same as without."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clawpi.ai import Model
from clawpi.sdk import AgentSession
from clawpi.session import SessionManager
from clawpi.testing import FauxProvider, faux_tool_call
from tests.fakes.http_server import FakeServer
from tests.fakes.openai_sse import (
    completion_response,
    finish_chunk,
    role_chunk,
    text_chunk,
    tool_call_chunks,
    usage_chunk,
)
from tests.sdk.conftest import SessionFactory


def _script(server: FakeServer, turns: int) -> None:
    """Each turn: a call of `read` (the same call id every other turn), then an answer."""
    for turn in range(turns):
        call = tool_call_chunks(0, f"call_{turn % 2}", "read", ['{"path": "a.txt"}'])
        server.enqueue(
            completion_response(
                [role_chunk(), *call, finish_chunk("tool_calls"), usage_chunk(9, 2)]
            )
        )
        server.enqueue(
            completion_response(
                [
                    role_chunk(),
                    text_chunk(f"answer {turn}"),
                    finish_chunk("stop"),
                    usage_chunk(9, 2),
                ]
            )
        )


async def _conversation(
    make_session: SessionFactory, server: FakeServer, root: Path, *, keep_work: bool
) -> list[Any]:
    """A session that starts on another model (its tool-call ids are Responses-style, which
    this server's model rewrites), then talks to the fake server for five turns."""
    faux = FauxProvider(
        [
            faux_tool_call("read", {"path": "a.txt"}, call_id="call_x|fc_1"),
            "first answer",
        ]
    )
    root.mkdir()
    (root / "a.txt").write_text("notes\n")
    manager = SessionManager.create(root, root / "sessions")
    session: AgentSession = await make_session(faux.model, session_manager=manager)
    await session.prompt("start")
    model = Model(
        id="local-model", api="openai-completions", provider="local", base_url=server.url + "/v1"
    )
    await session.set_model(model)
    if not keep_work:
        session.agent.stream_options.history_owner = None
    start = len(server.requests)
    _script(server, 5)
    for turn in range(5):
        await session.prompt(f"question {turn}")
    return [request.json()["messages"] for request in server.requests[start:]]


async def test_requests_built_from_kept_work_equal_requests_built_from_scratch(
    make_session: SessionFactory, server: FakeServer, tmp_path: Path, workspace: Path
) -> None:
    kept = await _conversation(make_session, server, tmp_path / "kept", keep_work=True)
    fresh = await _conversation(make_session, server, tmp_path / "fresh", keep_work=False)
    assert len(kept) == len(fresh) == 10
    assert kept == fresh
    # the other model's call id was rewritten for this server, its result along with it
    first = kept[0]
    calls = [m for m in first if m.get("tool_calls")]
    assert calls[0]["tool_calls"][0]["id"] == "call_x"
    assert any(m.get("tool_call_id") == "call_x" for m in first)
    assert kept[-1][-1]["role"] == "tool"  # the last request answers the last call
