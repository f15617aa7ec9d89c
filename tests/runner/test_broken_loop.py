"""A turn whose agent loop breaks outside the model call still comes back with an error the user
can be shown (the runner's promise), not with nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

from clawpi.ai.stream import StreamOptions
from clawpi.ai.types import Context
from clawpi.runner import run_embedded_agent
from clawpi.runner.lanes import CommandQueue
from clawpi.testing import FunctionProvider
from clawpi.testing.faux import FauxResponse, faux_text


async def test_a_session_write_that_fails_mid_turn_ends_the_turn_with_an_error(
    tmp_path: Path,
) -> None:
    """While the model answers, the session file is replaced by a directory: writing the answer
    fails (a real `IsADirectoryError` from the session writer), which breaks the agent loop."""
    session_file = tmp_path / "sessions" / "s.jsonl"
    turns = {"n": 0}

    async def answer(_context: Context, _options: StreamOptions) -> FauxResponse:
        turns["n"] += 1
        if turns["n"] == 2:
            session_file.unlink()
            session_file.mkdir()
        return FauxResponse(content=[faux_text(f"answer {turns['n']}")])

    provider = FunctionProvider(answer, provider="faux", model_id="faux-1")
    queue = CommandQueue()

    async def turn(prompt: str) -> object:
        return await run_embedded_agent(
            session_id="s",
            session_key="agent:main:test:s",
            session_file=session_file,
            workspace_dir=tmp_path / "ws",
            config=provider.openclaw_config(),
            prompt=prompt,
            run_id=prompt,
            agent_dir=tmp_path / "agent",
            run_queue=queue,
            disable_tools=True,
        )

    first = await turn("one")
    assert [p.text for p in first.payloads] == ["answer 1"]  # type: ignore[attr-defined]
    second = await turn("two")
    payloads = second.payloads  # type: ignore[attr-defined]
    assert payloads and all(p.is_error for p in payloads), payloads
    assert any((p.text or "").strip() for p in payloads)
    shutil.rmtree(session_file)
