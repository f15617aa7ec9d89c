"""Whatever a model streams back (text with tags and directives, thinking, calls to tools that
exist or not with any arguments, errors midway), a run answers or fails with a clawpi error, the
next turn of the same session still runs, and the session file replays as a valid transcript."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clawpi.ai.stream import StreamOptions
from clawpi.ai.types import Context
from clawpi.errors import ClawpiError
from clawpi.runner import run_embedded_agent
from clawpi.runner.lanes import CommandQueue
from clawpi.session import SessionManager
from clawpi.testing import FunctionProvider
from clawpi.testing.faux import FauxResponse, faux_text, faux_thinking, faux_tool_call
from tests.runner.replay import assert_replays_for_every_api, numbered_turns
from tests.session.test_properties import _corrupt, corruptions

MARKERS = [
    "<think>",
    "</think>",
    "<final>",
    "</final>",
    "MEDIA: ./a.png",
    "[[reply_to_current]]",
    "[[reply_to: 7]]",
    "NO_REPLY",
    "```",
    "\n\n",
    "HEARTBEAT_OK",
    '{"type":"error","error":{"message":"x"}}',
]

HIDDEN = "private-reasoning-7f3a"
"""Written only into thinking blocks: with reasoning off it must never reach a payload."""

texts = st.lists(st.sampled_from(MARKERS) | st.text(max_size=20), max_size=5).map("".join)
arguments = st.dictionaries(
    st.sampled_from(["path", "pattern", "limit", "offset", "x"]),
    st.none() | st.integers(-3, 50) | st.text(max_size=10) | st.sampled_from(["a.txt", "."]),
    max_size=3,
)
blocks = st.one_of(
    texts.map(faux_text),
    texts.map(lambda text: faux_thinking(f"{HIDDEN} {text}")),
    st.builds(
        lambda name, args: faux_tool_call(name, args),
        st.sampled_from(["read", "ls", "find", "grep", "exec", "nope", ""]),
        arguments,
    ),
)
responses = st.builds(
    lambda content, error: FauxResponse(content=content, error=error),
    st.lists(blocks, max_size=4),
    st.none()
    | st.none()
    | st.sampled_from(["overloaded_error", "boom", "context length exceeded"]),
)


def _config(provider: FunctionProvider) -> dict[str, Any]:
    config = provider.openclaw_config(timeoutSeconds=30)
    config["tools"] = {"allow": ["read", "ls", "find", "grep"]}
    return config


async def _turns(script: list[FauxResponse], root: Path) -> list[Any]:
    remaining = list(script)

    async def answer(_context: Context, _options: StreamOptions) -> FauxResponse:
        return remaining.pop(0) if remaining else FauxResponse(content=[faux_text("done")])

    provider = FunctionProvider(answer, provider="faux", model_id="faux-1")
    (root / "ws").mkdir()
    (root / "ws" / "a.txt").write_text("hello\n")
    return await numbered_turns(
        root, 2, session_key="agent:main:test:s", config=_config(provider), timeout_ms=30_000
    )


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=st.lists(responses, max_size=4))
def test_any_model_output_answers_and_leaves_a_replayable_session(
    script: list[FauxResponse],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        outcomes = asyncio.run(_turns(script, root))
        for outcome in outcomes:
            if isinstance(outcome, ClawpiError):
                continue
            # (no payload at all is a silent reply: an empty answer, or NO_REPLY)
            for payload in outcome.payloads:
                assert HIDDEN not in (payload.text or "")
        if (root / "s.jsonl").exists():
            context = SessionManager.open(root / "s.jsonl").build_session_context()
            users = [m for m in context.messages if m.get("role") == "user"]
            assert [u["content"][0]["text"] for u in users][-1:] == ["turn 1"]
            assert_replays_for_every_api(context.messages)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=corruptions, answers=st.lists(texts, min_size=3, max_size=3))
def test_a_session_file_damaged_between_turns_still_answers_and_is_left_valid(
    ops: list[tuple[str, float, bytes]], answers: list[str]
) -> None:
    """Another hand (an editor, a crash elsewhere) damages the file while the runner keeps the
    session's manager open between messages: the next turn still answers, and what is on disk
    afterwards parses line by line and replays validly."""

    async def scenario(root: Path) -> None:
        replies = iter(answers)

        async def answer(_context: Context, _options: StreamOptions) -> FauxResponse:
            return FauxResponse(content=[faux_text(next(replies, "done") or "ok")])

        provider = FunctionProvider(answer, provider="faux", model_id="faux-1")
        config = _config(provider)
        path = root / "s.jsonl"
        for index in range(3):
            if index == 2:
                path.write_bytes(_corrupt(path.read_bytes(), ops))
            result = await run_embedded_agent(
                session_id="s",
                session_key="agent:main:test:s",
                session_file=path,
                workspace_dir=root / "ws",
                config=config,
                prompt=f"turn {index}",
                timeout_ms=30_000,
                run_id=f"r{index}",
                agent_dir=root / "agent",
                run_queue=CommandQueue(),
            )
            assert result.payloads or result.meta.error is None
        for line in path.read_bytes().split(b"\n"):
            if line.strip():
                orjson.loads(line)
        context = SessionManager.open(path).build_session_context()
        assert_replays_for_every_api(context.messages)
        users = [m for m in context.messages if m.get("role") == "user"]
        assert users and users[-1]["content"][0]["text"] == "turn 2"

    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(scenario(Path(tmp)))
