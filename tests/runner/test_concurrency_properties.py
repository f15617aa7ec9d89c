"""Random schedules of turns, aborts (queued or running, by signal or by session) and steering
messages over a few sessions, with a model that yields to the loop a random number of times:
every call returns or raises a clawpi error, each session's answered turns are on disk in the
order they were submitted, and every session file replays as a valid transcript."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clawpi.ai.abort import AbortController
from clawpi.ai.stream import StreamOptions
from clawpi.ai.types import Context
from clawpi.errors import ClawpiError
from clawpi.runner import abort_embedded_pi_run, queue_embedded_pi_message, run_embedded_agent
from clawpi.runner.lanes import CommandQueue
from clawpi.runner.result import EmbeddedRunResult
from clawpi.session import SessionManager
from clawpi.testing import FunctionProvider
from clawpi.testing.faux import FauxResponse, faux_text
from tests.runner.replay import assert_valid_replay

SESSIONS = ("a", "b", "c")

actions = st.one_of(
    st.tuples(st.just("turn"), st.sampled_from(SESSIONS), st.booleans()),
    st.tuples(st.just("abort_signal"), st.sampled_from(SESSIONS), st.just(False)),
    st.tuples(st.just("abort_session"), st.sampled_from(SESSIONS), st.just(False)),
    st.tuples(st.just("steer"), st.sampled_from(SESSIONS), st.just(False)),
    st.tuples(st.just("yield"), st.just(""), st.just(False)),
)


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if b.get("type") == "text")


async def _schedule(root: Path, plan: list[tuple[str, str, bool]], pauses: list[int]) -> None:
    pause_at = iter(pauses * 50)

    async def answer(context: Context, _options: StreamOptions) -> FauxResponse:
        for _ in range(next(pause_at, 0)):
            await asyncio.sleep(0)
        users = [_text(m) for m in context["messages"] if m.get("role") == "user"]  # type: ignore[arg-type]
        return FauxResponse(content=[faux_text(f"re: {users[-1] if users else ''}")])

    provider = FunctionProvider(answer, provider="faux", model_id="faux-1")
    config = provider.openclaw_config(maxConcurrent=2)
    queue = CommandQueue()
    submitted: dict[str, list[str]] = {name: [] for name in SESSIONS}
    runs: list[tuple[str, str, asyncio.Task[EmbeddedRunResult]]] = []
    controllers: dict[str, list[AbortController]] = {name: [] for name in SESSIONS}
    for index, (kind, name, with_signal) in enumerate(plan):
        sid = f"{root.name}-{name}"
        if kind == "turn":
            prompt = f"{name}{index}"
            controller = AbortController() if with_signal else None
            if controller is not None:
                controllers[name].append(controller)
            submitted[name].append(prompt)
            task = asyncio.create_task(
                run_embedded_agent(
                    session_id=sid,
                    session_key=f"agent:main:prop:{sid}",
                    session_file=root / f"{name}.jsonl",
                    workspace_dir=root / "ws",
                    config=config,
                    prompt=prompt,
                    timeout_ms=30_000,
                    run_id=f"{sid}-{index}",
                    agent_dir=root / "agent",
                    run_queue=queue,
                    disable_tools=True,
                    abort_signal=controller.signal if controller else None,
                )
            )
            runs.append((name, prompt, task))
        elif kind == "abort_signal" and controllers[name]:
            controllers[name].pop(0).abort("user cancelled")
        elif kind == "abort_session":
            abort_embedded_pi_run(sid)
        elif kind == "steer":
            queue_embedded_pi_message(sid, f"steer {index}")
        for _ in range(next(pause_at, 0)):
            await asyncio.sleep(0)

    outcomes = await asyncio.wait_for(
        asyncio.gather(*(task for _, _, task in runs), return_exceptions=True), timeout=60
    )
    for (name, prompt, _task), outcome in zip(runs, outcomes, strict=True):
        assert isinstance(outcome, EmbeddedRunResult | ClawpiError), (name, prompt, outcome)

    for name in SESSIONS:
        path = root / f"{name}.jsonl"
        if not path.exists():
            continue
        manager = SessionManager.open(path)
        messages = manager.build_session_context().messages
        assert_valid_replay(messages)
        on_disk = [
            _text(m) for m in messages if m.get("role") == "user" and not _text(m).startswith("s")
        ]
        order = {prompt: i for i, prompt in enumerate(submitted[name])}
        assert all(prompt in order for prompt in on_disk), (on_disk, submitted[name])
        assert [order[p] for p in on_disk] == sorted(order[p] for p in on_disk), on_disk
        assert len(set(on_disk)) == len(on_disk), f"a turn was written twice: {on_disk}"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    plan=st.lists(actions, min_size=1, max_size=14),
    pauses=st.lists(st.integers(0, 6), min_size=1, max_size=8),
)
def test_random_schedules_keep_every_session_in_order_and_replayable(
    plan: list[tuple[str, str, bool]], pauses: list[int]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(_schedule(Path(tmp), plan, pauses))
