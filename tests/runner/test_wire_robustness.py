"""Whatever a provider's server sends back, over the real wire protocol of each API and through
its official SDK, `run_embedded_agent` answers with something a user can be shown (or raises a
clawpi error), shows no raw JSON error body, stack trace or API key, leaves
`auth-profiles.json` readable with sane cooldowns, and leaves a session whose branch keeps every
answered user turn, in order, and replays validly for every provider.

The server's answers are generated: well-formed streams (text, a tool call) that are then cut,
truncated, duplicated, perturbed field by field or given garbage frames, and HTTP errors of
every status with real and random bodies and `retry-after` values; the last answer may repeat
for every later request (a tool-calling stream only with loop detection on, which must end the
turn), and the runner has a fallback model or not.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clawpi.errors import ClawpiError
from clawpi.runner.result import EmbeddedRunResult
from clawpi.runner.run import BackoffPolicy
from clawpi.session import SessionManager
from tests.fakes import anthropic_sse, gemini_sse, openai_sse
from tests.fakes.http_server import FakeResponse, FakeServer, RecordedRequest, sse_frame
from tests.fakes.responses_sse import ResponsesStream
from tests.runner.replay import assert_replays_for_every_api, numbered_turns, user_text

KEYS = ("wire-key-one-5d1c", "wire-key-two-9e0b")
WORDS = ["Sure", " - ", "here", " it", " is", ".", "\n\n", "Done", "ok"]
NO_BACKOFF = BackoffPolicy(initial_ms=0, max_ms=0)
FORBIDDEN = ("Traceback", 'File "', '"type":"error"', '{"error"', *KEYS)

# -- well-formed answers, per API ------------------------------------------------------------


def _completions(texts: list[str], call: dict[str, Any] | None) -> list[bytes]:
    chunks: list[dict[str, Any]] = [openai_sse.role_chunk()]
    chunks.extend(openai_sse.text_chunk(t) for t in texts)
    if call is not None:
        chunks.extend(openai_sse.tool_call_chunks(0, "call_1", "read", [json.dumps(call)]))
    chunks.append(openai_sse.finish_chunk("tool_calls" if call else "stop"))
    chunks.append(openai_sse.usage_chunk(10, 3))
    return openai_sse.completion_frames(chunks)


def _responses(texts: list[str], call: dict[str, Any] | None) -> list[bytes]:
    stream = ResponsesStream("main-model").message(texts or [""])
    if call is not None:
        stream.function_call("read", [json.dumps(call)], call_id="call_1")
    return stream.completed().frames()


def _anthropic(texts: list[str], call: dict[str, Any] | None) -> list[bytes]:
    blocks = [anthropic_sse.text_block(0, *(texts or [""]))]
    if call is not None:
        blocks.append(anthropic_sse.tool_use_block(1, "toolu_1", "read", [json.dumps(call)]))
    return anthropic_sse.turn(*blocks, stop_reason="tool_use" if call else "end_turn")


def _gemini(texts: list[str], call: dict[str, Any] | None) -> list[bytes]:
    parts = [gemini_sse.text(t) for t in texts or [""]]
    frames = [gemini_sse.chunk(part) for part in parts[:-1]]
    last = [parts[-1]]
    if call is not None:
        last.append(gemini_sse.function_call("read", call))
    frames.append(gemini_sse.chunk(*last, finish_reason="STOP", usage=gemini_sse.usage(10, 5)))
    return frames


def _anthropic_error(status: int, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": "api_error", "message": message}}


def _openai_error(status: int, message: str) -> dict[str, Any]:
    return openai_sse.error_body(message, type="invalid_request_error", code=None)


def _gemini_error(status: int, message: str) -> dict[str, Any]:
    return {"error": {"code": status, "message": message, "status": "INVALID_ARGUMENT"}}


@dataclasses.dataclass(frozen=True)
class Api:
    name: str
    suffix: str
    good: Callable[[list[str], dict[str, Any] | None], list[bytes]]
    error: Callable[[int, str], dict[str, Any]]


APIS = {
    "openai-completions": Api("openai-completions", "/v1", _completions, _openai_error),
    "openai-responses": Api("openai-responses", "/v1", _responses, _openai_error),
    "anthropic-messages": Api("anthropic-messages", "", _anthropic, _anthropic_error),
    "google-generative-ai": Api("google-generative-ai", "/v1beta", _gemini, _gemini_error),
}

# -- what the server may do ------------------------------------------------------------------

REAL_ERRORS = [
    "This model's maximum context length is 8192 tokens. However, your messages resulted in "
    "9000 tokens. Please reduce the length of the messages.",
    "prompt is too long: 210000 tokens > 200000 maximum",
    "Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM)",
    "Overloaded",
    "Incorrect API key provided: wire-key-one-5d1c. You can find your API key at "
    "https://platform.openai.com/account/api-keys.",
    "Your credit balance is too low to access the Anthropic API.",
    "The model `main-model` does not exist or you do not have access to it.",
    "Request timed out",
    "Internal server error",
    "Malformed request sent with wire-key-one-5d1c (see docs)",  # a proxy echoing the key
    "Malformed request sent with wire-key-two-9e0b (see docs)",
    "Unsupported value: 'reasoning_effort' does not support 'high' with this model. "
    "Supported values are: 'low' and 'medium'.",
]
safe_text = st.text(st.characters(codec="ascii", categories=["L", "N", "Zs"]), max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**12) | safe_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(safe_text, inner, max_size=3),
    max_leaves=8,
)
garbage_frames = st.one_of(
    st.just(b"data: {not json\n\n"),
    st.just(b"data: \n\n"),
    st.just(b": a comment\n\n"),
    st.just(b"event: surprise\ndata: {}\n\n"),
    st.just(b"\xff\xfe\x00 binary\n\n"),
    json_values.map(lambda value: sse_frame(value)),
    st.builds(
        lambda kind, value: sse_frame({"type": kind, "index": 0, "delta": value}, event=kind),
        st.sampled_from(
            [
                "content_block_delta",
                "content_block_start",
                "message_delta",
                "response.output_text.delta",
                "response.completed",
                "error",
            ]
        ),
        json_values,
    ),
)
retry_after = st.sampled_from(
    ["0", "1", "0.5", "-3", "soon", "99999", "Wed, 21 Oct 2015 07:28:00 GMT", ""]
)


def _perturbed(frame: bytes, draw: st.DrawFn) -> bytes:
    """The frame with one value somewhere in its JSON replaced by another of any type."""
    head, _, data = frame.decode(errors="replace").rstrip("\r\n").rpartition("data: ")
    try:
        payload = json.loads(data)
    except json.JSONDecodeError:
        return frame
    holders: list[Any] = []

    def walk(value: Any) -> None:
        if isinstance(value, (dict, list)) and value:
            holders.append(value)
            for child in value.values() if isinstance(value, dict) else value:
                walk(child)

    walk(payload)
    if not holders:
        return frame
    holder = draw(st.sampled_from(holders))
    key = draw(st.sampled_from(sorted(holder) if isinstance(holder, dict) else range(len(holder))))
    if draw(st.booleans()) and isinstance(holder, dict):
        del holder[key]
    else:
        holder[key] = draw(json_values)
    return f"{head}data: {json.dumps(payload)}\n\n".encode()


@st.composite
def answers(draw: st.DrawFn, api: Api) -> FakeResponse:
    kind = draw(st.sampled_from(["good", "mangled", "mangled", "error", "odd"]))
    if kind == "error":
        status = draw(st.sampled_from([400, 401, 402, 403, 404, 408, 413, 429, 500, 502, 503, 529]))
        message = draw(st.sampled_from(REAL_ERRORS) | safe_text)
        form = draw(st.sampled_from(["shaped", "shaped", "random", "html", "empty"]))
        if form == "shaped":
            body = json.dumps(api.error(status, message)).encode()
        elif form == "random":
            body = json.dumps(draw(json_values)).encode()
        elif form == "html":
            body = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
        else:
            body = b""
        headers = {"content-type": "application/json"}
        if draw(st.booleans()):
            headers["retry-after"] = draw(retry_after)
        return FakeResponse(status=status, headers=headers, body=body)
    if kind == "odd":  # a 200 that is not the stream the SDK asked for
        body = json.dumps(draw(json_values)).encode()
        content_type = draw(st.sampled_from(["application/json", "text/event-stream", "text/html"]))
        return FakeResponse(status=200, headers={"content-type": content_type}, body=body)
    texts = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4))
    call = draw(st.none() | st.just({"path": "a.txt"}) | st.fixed_dictionaries({"path": safe_text}))
    frames = api.good(texts, call)
    if kind == "good":
        return FakeResponse.sse(frames)
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(frames)))
        action = draw(st.sampled_from(["insert", "replace", "duplicate", "truncate", "perturb"]))
        if action == "perturb" and at < len(frames):
            frames[at] = _perturbed(frames[at], draw)
        elif action == "insert":
            frames.insert(at, draw(garbage_frames))
        elif action == "replace" and at < len(frames):
            frames[at] = draw(garbage_frames)
        elif action == "duplicate" and at < len(frames):
            frames.insert(at, frames[at])
        elif action == "truncate":
            frames = frames[:at]
    cut = draw(st.none() | st.integers(0, max(0, len(frames) - 1)))
    return FakeResponse.sse(frames, drop_after=cut)


# -- the run ---------------------------------------------------------------------------------


LOOP_DETECTION = {
    "enabled": True,
    "warningThreshold": 2,
    "criticalThreshold": 3,
    "unknownToolThreshold": 2,
}
"""Low thresholds: a looping turn ends after a few requests, not twenty."""


def _config(
    api: Api, server: FakeServer, fallback: bool, idle_s: int, loop_detection: bool = False
) -> dict[str, Any]:
    """Two keys and a fallback model, or (without `fallback`) one model: then a failure the
    fallback would take is the user's reply."""
    tools: dict[str, Any] = {"allow": ["read"]}
    if loop_detection:
        tools["loopDetection"] = LOOP_DETECTION
    return {
        "models": {
            "providers": {
                "stub": {
                    "baseUrl": server.url + api.suffix,
                    "api": api.name,
                    "models": [
                        {"id": "main-model", "contextWindow": 32_000, "maxTokens": 1_000},
                        {"id": "backup-model", "contextWindow": 32_000, "maxTokens": 1_000},
                    ],
                }
            }
        },
        "agents": {
            "defaults": {
                "model": {
                    "primary": "stub/main-model",
                    "fallbacks": ["stub/backup-model"] if fallback else [],
                },
                "llm": {"idleTimeoutSeconds": idle_s},
                "compaction": {"keepRecentTokens": 1, "reserveTokensFloor": 1},
            }
        },
        "auth": {"order": {"stub": ["stub:p1", "stub:p2"]}},
        "tools": tools,
    }


def _write_profiles(agent_dir: Path) -> None:
    agent_dir.mkdir()
    profiles = {
        f"stub:p{n}": {"type": "api_key", "provider": "stub", "key": key}
        for n, key in enumerate(KEYS, start=1)
    }
    (agent_dir / "auth-profiles.json").write_text(json.dumps({"version": 1, "profiles": profiles}))


async def _turns(
    api: Api,
    server: FakeServer,
    root: Path,
    count: int,
    fallback: bool,
    streamed: list[Any] | None = None,
    idle_s: int = 30,
    loop_detection: bool = False,
) -> list[Any]:
    """The outcome of each turn; what was streamed to the chat meanwhile goes to `streamed`."""
    shown = streamed if streamed is not None else []
    (root / "ws").mkdir()
    (root / "ws" / "a.txt").write_text("hello\n")
    _write_profiles(root / "agent")
    return await numbered_turns(
        root,
        count,
        session_key="agent:main:telegram:dm:42",
        config=_config(api, server, fallback, idle_s, loop_detection),
        timeout_ms=20_000,
        overload_backoff=NO_BACKOFF,
        on_block_reply=shown.append,
        on_partial_reply=shown.append,
        on_tool_result=shown.append,
    )


def _assert_showable(text: str) -> None:
    for forbidden in FORBIDDEN:
        assert forbidden not in text, f"{forbidden!r} shown to the user: {text!r}"


def _check(outcomes: list[Any], root: Path, started_ms: int, streamed: list[Any]) -> None:
    for payload in streamed:
        _assert_showable(getattr(payload, "text", None) or "")
    for outcome in outcomes:
        if isinstance(outcome, ClawpiError):
            assert not any(secret in str(outcome) for secret in KEYS), str(outcome)
            continue
        assert isinstance(outcome, EmbeddedRunResult)
        texts = [payload.text or "" for payload in outcome.payloads]
        for text in texts:
            _assert_showable(text)
        if outcome.meta.error is not None or outcome.meta.aborted:
            assert any(t.strip() for t in texts), f"a failed run showed nothing: {outcome.meta}"
    store = json.loads((root / "agent" / "auth-profiles.json").read_text())
    day_ms = 24 * 3600 * 1000
    for stats in (store.get("usageStats") or {}).values():
        windows = [stats, *(stats.get("modelCooldowns") or {}).values()]
        for window in windows:
            for field in ("cooldownUntil", "disabledUntil"):
                until = window.get(field)
                if until is not None:
                    assert started_ms <= until <= int(time.time() * 1000) + day_ms, (field, until)
    if not (root / "s.jsonl").exists():
        return
    manager = SessionManager.open(root / "s.jsonl")
    branch = [
        user_text(e["message"])
        for e in manager.get_branch()
        if e.get("type") == "message" and e["message"].get("role") == "user"
    ]
    # (a retried attempt prompts again after the failed one's error message, as OpenClaw does)
    assert branch == sorted(branch), f"user turns out of order: {branch}"
    for index, outcome in enumerate(outcomes):
        if isinstance(outcome, EmbeddedRunResult):
            assert f"turn {index}" in branch, f"user turn {index} was lost: {branch}"
    assert_replays_for_every_api(manager.build_session_context().messages)


def _scenario(
    api_name: str,
    script: list[FakeResponse],
    count: int,
    sticky: bool,
    fallback: bool = True,
    idle_s: int = 30,
    loop_detection: bool = False,
) -> int:
    """`script` answers the requests in turn; then its last answer again (`sticky`), or a
    plain "Done". Returns how many requests the server had.

    Without `loop_detection` a stream is never repeated: one that calls a tool would have the
    model call it again and again until the run's timeout, as OpenClaw's would without its
    opt-in loop detection."""
    api = APIS[api_name]
    remaining = list(script)
    sticky = sticky and (loop_detection or remaining[-1].chunks is None)
    requests = 0

    def handle(_request: RecordedRequest) -> FakeResponse:
        nonlocal requests
        requests += 1
        if len(remaining) > 1 or (remaining and not sticky):
            return remaining.pop(0)
        return remaining[0] if remaining else FakeResponse.sse(api.good(["Done"], None))

    with FakeServer() as server, tempfile.TemporaryDirectory() as tmp:
        server.handler = handle
        started_ms = int(time.time() * 1000)
        streamed: list[Any] = []
        outcomes = asyncio.run(
            _turns(api, server, Path(tmp), count, fallback, streamed, idle_s, loop_detection)
        )
        _check(outcomes, Path(tmp), started_ms, streamed)
    return requests


def _scripts(api_name: str) -> st.SearchStrategy[list[FakeResponse]]:
    return st.lists(answers(APIS[api_name]), min_size=1, max_size=5)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    api_name=st.sampled_from(sorted(APIS)),
    sticky=st.booleans(),
    fallback=st.booleans(),
)
def test_any_server_answer_gives_a_showable_reply_and_a_valid_session(
    data: st.DataObject, api_name: str, sticky: bool, fallback: bool
) -> None:
    script = data.draw(_scripts(api_name))
    _scenario(api_name, script, count=2, sticky=sticky, fallback=fallback)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), api_name=st.sampled_from(sorted(APIS)), fallback=st.booleans())
def test_with_loop_detection_an_answer_repeated_forever_still_ends_each_turn(
    data: st.DataObject, api_name: str, fallback: bool
) -> None:
    """A server that repeats its last answer for every request, a tool call included: the
    model "calls" the tool forever. Loop detection refuses the call and ends the run, so each
    turn comes back as above, after a handful of requests rather than at the run's timeout
    (which would take hundreds)."""
    script = data.draw(_scripts(api_name))
    requests = _scenario(
        api_name, script, count=2, sticky=True, fallback=fallback, loop_detection=True
    )
    assert requests <= 120, f"{requests} requests: a repeated answer was not stopped"


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    api_name=st.sampled_from(sorted(APIS)),
    stall_after=st.integers(0, 12),
    call=st.booleans(),
    fallback=st.booleans(),
)
def test_a_stream_that_stalls_anywhere_ends_the_turn_and_leaves_a_valid_session(
    api_name: str, stall_after: int, call: bool, fallback: bool
) -> None:
    """The server stops sending (the connection stays open) after any frame: the idle
    watchdog ends the attempt, and the turn and the next one come back as above."""
    frames = APIS[api_name].good(["Sure", " it is"], {"path": "a.txt"} if call else None)
    stalled = FakeResponse.sse(frames, stall_after=min(stall_after, len(frames) - 1))
    _scenario(api_name, [stalled], count=2, sticky=False, fallback=fallback, idle_s=1)


@pytest.mark.parametrize("api_name", sorted(APIS))
@pytest.mark.parametrize("fallback", [False, True])
def test_a_key_the_provider_echoes_is_masked_in_the_reply_and_the_error(
    api_name: str, fallback: bool
) -> None:
    api = APIS[api_name]
    # the key sent, and the provider's other key, which this run may not have sent yet
    body = api.error(400, "Malformed request sent with wire-key-one-5d1c, wire-key-two-9e0b")
    echo = FakeResponse(
        status=400, headers={"content-type": "application/json"}, body=json.dumps(body).encode()
    )
    with FakeServer() as server, tempfile.TemporaryDirectory() as tmp:
        server.handler = lambda _request: echo
        outcome = asyncio.run(_turns(api, server, Path(tmp), 1, fallback))[0]
    if isinstance(outcome, ClawpiError):  # every model failed: the caller gets the error
        shown = [str(outcome), *(a.error for a in getattr(outcome, "attempts", []))]
    else:
        shown = [payload.text or "" for payload in outcome.payloads]
    assert any("Malformed request sent with ***, ***" in text for text in shown), shown
    assert not any(key in text for text in shown for key in KEYS)


def test_a_tool_call_streamed_without_an_id_leaves_a_valid_session() -> None:
    """Found by the generated answers above: a `tool_use` block with no id. The loop still
    runs and answers the call; neither the call nor its answer can be paired on disk, so
    neither is written, and the session replays for every provider."""
    nameless = [
        anthropic_sse.block_start(1, {"type": "tool_use", "name": "read", "input": {}}),
        anthropic_sse.block_delta(1, {"type": "input_json_delta", "partial_json": '{"path": ""}'}),
        anthropic_sse.block_stop(1),
    ]
    frames = anthropic_sse.turn(
        anthropic_sse.text_block(0, "Sure"), nameless, stop_reason="tool_use"
    )
    _scenario("anthropic-messages", [anthropic_sse.stream_response(frames)], 2, sticky=False)


def test_a_tool_call_named_with_a_list_ends_the_turn_with_a_valid_session() -> None:
    """Found by the generated answers with loop detection on: `"name": []` on a `tool_use`
    block, answered forever. Each turn still comes back, and no user turn is lost."""
    frames = anthropic_sse.turn(
        anthropic_sse.text_block(0, "Sure"),
        [
            anthropic_sse.block_start(1, {"type": "tool_use", "id": "toolu_1", "name": []}),
            anthropic_sse.block_delta(
                1, {"type": "input_json_delta", "partial_json": '{"path": "a.txt"}'}
            ),
            anthropic_sse.block_stop(1),
        ],
        stop_reason="tool_use",
    )
    response = anthropic_sse.stream_response(frames)
    _scenario("anthropic-messages", [response], 2, sticky=True, loop_detection=True)
