"""Many sessions at once: the global cap, one session's turns in order, aborts, steering.

The model is a scripted `FunctionProvider` whose answers wait on asyncio events the test
controls, so every interleaving asserted here is forced by events, never by timing.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from clawpi.ai.abort import AbortController
from clawpi.ai.stream import StreamOptions
from clawpi.ai.types import Context
from clawpi.runner import (
    abort_embedded_pi_run,
    is_embedded_pi_run_active,
    queue_embedded_pi_message,
    run_embedded_agent,
)
from clawpi.runner.lanes import CommandQueue
from clawpi.runner.result import EmbeddedRunResult
from clawpi.runner.run_queue import CommandLaneAbortError
from clawpi.session import SessionManager
from clawpi.testing import FunctionProvider
from clawpi.testing.faux import FauxResponse, faux_text

_ids = itertools.count(1)


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if b.get("type") == "text")


def last_user_text(context: Context) -> str:
    users = [m for m in context["messages"] if m.get("role") == "user"]
    return _text(users[-1]) if users else ""  # type: ignore[arg-type]


Answer = Callable[[Context, StreamOptions], Awaitable[FauxResponse]]


class Harness:
    """One scripted model, one run queue and one temp tree per test."""

    def __init__(self, tmp_path: Path, answer: Answer, *, max_concurrent: int = 4) -> None:
        self.tmp = tmp_path
        self.provider = FunctionProvider(answer, provider="faux", model_id="faux-1")
        self.queue = CommandQueue()
        self.config: dict[str, Any] = self.provider.openclaw_config(maxConcurrent=max_concurrent)
        self.prefix = f"c{next(_ids)}"

    def session_id(self, name: str) -> str:
        return f"{self.prefix}-{name}"

    def session_file(self, name: str) -> Path:
        return self.tmp / "sessions" / f"{name}.jsonl"

    async def run(self, name: str, prompt: str, **kwargs: Any) -> EmbeddedRunResult:
        return await run_embedded_agent(
            session_id=self.session_id(name),
            session_key=f"agent:main:{self.prefix}:{name}",
            session_file=self.session_file(name),
            workspace_dir=self.tmp / "workspace",
            config=self.config,
            prompt=prompt,
            timeout_ms=30_000,
            run_id=f"{name}-{prompt}",
            agent_dir=self.tmp / "agent",
            run_queue=self.queue,
            disable_tools=True,
            **kwargs,
        )

    def user_turns(self, name: str) -> list[str]:
        manager = SessionManager.open(self.session_file(name))
        messages = manager.build_session_context().messages
        return [_text(m) for m in messages if m.get("role") == "user"]

    def assistant_texts(self, name: str) -> list[str]:
        manager = SessionManager.open(self.session_file(name))
        messages = manager.build_session_context().messages
        return [_text(m) for m in messages if m.get("role") == "assistant"]


async def test_global_cap_bounds_concurrent_model_calls_across_many_sessions(
    tmp_path: Path,
) -> None:
    cap, sessions = 3, 12
    state = {"active": 0, "peak": 0}
    at_cap = asyncio.Event()
    gate = asyncio.Event()

    async def answer(context: Context, _options: StreamOptions) -> FauxResponse:
        state["active"] += 1
        state["peak"] = max(state["peak"], state["active"])
        if state["active"] == cap:
            at_cap.set()
        await gate.wait()
        state["active"] -= 1
        return FauxResponse(content=[faux_text(f"echo: {last_user_text(context)}")])

    harness = Harness(tmp_path, answer, max_concurrent=cap)
    runs = [asyncio.create_task(harness.run(f"s{i}", f"hello {i}")) for i in range(sessions)]
    await at_cap.wait()

    assert harness.queue.active_count("main") == cap
    assert harness.queue.queue_size("main") == sessions  # the rest wait in the global lane
    gate.set()
    results = await asyncio.gather(*runs)

    assert state["peak"] == cap
    for i, result in enumerate(results):
        assert [p.text for p in result.payloads] == [f"echo: hello {i}"]
        assert harness.user_turns(f"s{i}") == [f"hello {i}"]
    assert harness.queue.total_queue_size() == 0


async def test_turns_of_one_session_run_strictly_in_submission_order(tmp_path: Path) -> None:
    seen: list[str] = []
    in_flight = {"n": 0, "max": 0}
    first_started = asyncio.Event()
    gate = asyncio.Event()

    async def answer(context: Context, _options: StreamOptions) -> FauxResponse:
        in_flight["n"] += 1
        in_flight["max"] = max(in_flight["max"], in_flight["n"])
        prompt = last_user_text(context)
        seen.append(prompt)
        first_started.set()
        await gate.wait()
        await asyncio.sleep(0)  # let any (wrongly) admitted turn interleave
        in_flight["n"] -= 1
        return FauxResponse(content=[faux_text(f"re: {prompt}")])

    harness = Harness(tmp_path, answer, max_concurrent=8)
    prompts = [f"turn {i}" for i in range(6)]
    runs = [asyncio.create_task(harness.run("one", p)) for p in prompts]
    await first_started.wait()
    assert seen == ["turn 0"]  # the others wait in the session lane despite free global slots
    gate.set()
    results = await asyncio.gather(*runs)

    assert seen == prompts
    assert in_flight["max"] == 1
    assert [r.payloads[0].text for r in results] == [f"re: {p}" for p in prompts]
    assert harness.user_turns("one") == prompts
    assert harness.assistant_texts("one") == [f"re: {p}" for p in prompts]


async def test_aborting_a_queued_turn_removes_it_before_it_reaches_the_model(
    tmp_path: Path,
) -> None:
    seen: list[str] = []
    started = asyncio.Event()
    gate = asyncio.Event()

    async def answer(context: Context, _options: StreamOptions) -> FauxResponse:
        seen.append(last_user_text(context))
        started.set()
        await gate.wait()
        return FauxResponse(content=[faux_text("done")])

    harness = Harness(tmp_path, answer)
    first = asyncio.create_task(harness.run("q", "first"))
    await started.wait()
    controller = AbortController()
    queued = asyncio.create_task(harness.run("q", "second", abort_signal=controller.signal))
    third = asyncio.create_task(harness.run("q", "third"))
    await asyncio.sleep(0)
    controller.abort("user cancelled")

    with pytest.raises(CommandLaneAbortError):
        await queued
    gate.set()
    await first
    await third

    assert seen == ["first", "third"]
    assert harness.user_turns("q") == ["first", "third"]


async def test_aborting_a_running_turn_returns_aborted_and_frees_the_session(
    tmp_path: Path,
) -> None:
    started = asyncio.Event()
    calls = {"n": 0}

    async def answer(context: Context, options: StreamOptions) -> FauxResponse:
        calls["n"] += 1
        if calls["n"] == 1:
            started.set()
            await asyncio.Event().wait()  # never answers: only the abort ends this call
        return FauxResponse(content=[faux_text(f"re: {last_user_text(context)}")])

    harness = Harness(tmp_path, answer)
    running = asyncio.create_task(harness.run("r", "long task"))
    await started.wait()
    assert is_embedded_pi_run_active(harness.session_id("r"))
    assert abort_embedded_pi_run(harness.session_id("r"))
    result = await running

    assert result.meta.aborted is True
    assert not is_embedded_pi_run_active(harness.session_id("r"))
    follow = await harness.run("r", "next")  # the lane is free again
    assert [p.text for p in follow.payloads] == ["re: next"]
    assert harness.user_turns("r") == ["long task", "next"]


async def test_steering_message_is_delivered_into_the_running_turn(tmp_path: Path) -> None:
    contexts: list[list[str]] = []
    first_call = asyncio.Event()
    release = asyncio.Event()

    async def answer(context: Context, _options: StreamOptions) -> FauxResponse:
        users = [_text(m) for m in context["messages"] if m.get("role") == "user"]  # type: ignore[arg-type]
        contexts.append(users)
        if len(contexts) == 1:
            first_call.set()
            await release.wait()
            return FauxResponse(content=[faux_text("working on the report")])
        return FauxResponse(content=[faux_text("added the summary too")])

    harness = Harness(tmp_path, answer)
    running = asyncio.create_task(harness.run("st", "write the report"))
    await first_call.wait()
    assert queue_embedded_pi_message(harness.session_id("st"), "also add a summary")
    release.set()
    result = await running

    assert contexts == [
        ["write the report"],
        ["write the report", "also add a summary"],
    ]
    assert "added the summary too" in [p.text for p in result.payloads]
    assert harness.user_turns("st") == ["write the report", "also add a summary"]
    assert not queue_embedded_pi_message(harness.session_id("st"), "too late")


def _user_turns_seen() -> tuple[list[list[str]], Answer]:
    """A model that answers "ok" and records the user turns of every request it gets."""
    seen: list[list[str]] = []

    async def answer(context: Context, _options: StreamOptions) -> FauxResponse:
        seen.append([_text(m) for m in context["messages"] if m.get("role") == "user"])
        return FauxResponse(content=[faux_text("ok")])

    return seen, answer


def _append_from_another_process(path: Path) -> None:
    other = SessionManager.open(path)
    other.append_message({"role": "user", "content": "from another process", "timestamp": 1})
    other.append_message(
        {"role": "assistant", "content": [{"type": "text", "text": "noted"}],
         "stopReason": "stop", "timestamp": 2}
    )  # fmt: skip


async def test_a_turn_sees_what_another_writer_appended_since_the_last_turn(
    tmp_path: Path,
) -> None:
    """Turns of a chat reuse the session the last turn left open, unless the file changed."""
    seen, answer = _user_turns_seen()
    harness = Harness(tmp_path, answer)
    await harness.run("chat", "first")
    await harness.run("chat", "second")
    _append_from_another_process(harness.session_file("chat"))
    await harness.run("chat", "third")
    assert seen == [
        ["first"],
        ["first", "second"],
        ["first", "second", "from another process", "third"],
    ]
    assert harness.user_turns("chat") == ["first", "second", "from another process", "third"]


async def test_a_new_chats_second_turn_sees_what_another_writer_appended(
    tmp_path: Path,
) -> None:
    """The manager that created a chat's file is kept for its next turn, unless the file
    changed meanwhile."""
    seen, answer = _user_turns_seen()
    harness = Harness(tmp_path, answer)
    await harness.run("fresh", "first")
    _append_from_another_process(harness.session_file("fresh"))
    await harness.run("fresh", "second")
    await harness.run("fresh", "third")
    assert seen == [
        ["first"],
        ["first", "from another process", "second"],
        ["first", "from another process", "second", "third"],
    ]
