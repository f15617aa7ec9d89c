"""`run_embedded_agent` against a real HTTP server speaking OpenAI Chat Completions SSE.

The runner is configured the way OpenClaw users configure it: one `stub` provider with a main and
a backup model, two API-key auth profiles in a fixed order. The server answers per (API key,
model), so each test injects one fault for one key or model and checks what the runner made of
it: the classified reason, the action (rotate, cool down, fail over, compact and retry, or an
error payload), the cooldowns on disk, what the user is shown, and that the session file is
still a valid transcript for every provider.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

# The provider module (and the openai SDK under it, ~2 s) loads lazily on the first request; load
# it now so that first request is not mistaken for a silent model by a short idle watchdog.
import clawpi.ai.providers.openai_completions  # noqa: F401
from clawpi.ai.abort import AbortController
from clawpi.ai.errors import FailoverError
from clawpi.reply.user_text import (
    AUTH_ERROR_TEXT,
    CONTEXT_OVERFLOW_TEXT,
    NETWORK_ERROR_TEXT,
    OVERLOADED_TEXT,
    RATE_LIMIT_TEXT,
)
from clawpi.runner import run_embedded_agent
from clawpi.runner.result import (
    RETRY_LIMIT_TEXT,
    TIMEOUT_NO_RESPONSE_TEXT,
    TOOL_LOOP_ENDED_TEXT,
    EmbeddedRunResult,
)
from clawpi.runner.run import BackoffPolicy
from clawpi.session import SessionManager
from clawpi.tools.loop_detection import CRITICAL_THRESHOLD, GLOBAL_CIRCUIT_BREAKER_THRESHOLD
from clawpi.tools.loop_guard import BLOCKED_STREAK_TO_END_RUN, RUN_ENDED_NOTICE
from tests.fakes.http_server import FakeResponse, FakeServer, RecordedRequest
from tests.fakes.openai_sse import (
    completion_response,
    error_body,
    finish_chunk,
    role_chunk,
    text_chunk,
    tool_call_chunks,
    usage_chunk,
)
from tests.runner.replay import assert_replays_for_every_api, user_text
from tests.tools.conftest import requires_bwrap

MAIN = "main-model"
BACKUP = "backup-model"
NO_BACKOFF = BackoffPolicy(initial_ms=0, max_ms=0)
IDLE_S = 2
STALL_S = 3 * IDLE_S
Responder = Callable[[RecordedRequest], FakeResponse]


# -- the fake provider ----------------------------------------------------------------------


def reply(text: str, *, prompt_tokens: int = 10) -> FakeResponse:
    return completion_response(
        [role_chunk(), text_chunk(text), finish_chunk("stop"), usage_chunk(prompt_tokens, 3)]
    )


def http_error(status: int, message: str, type_: str, code: str | None = None, **hdr: str) -> Any:
    return FakeResponse.json_body(status, error_body(message, type=type_, code=code), hdr)


def is_summary_request(body: dict[str, Any]) -> bool:
    first = (body.get("messages") or [{}])[0]
    return first.get("role") in ("system", "developer") and "context compaction" in str(
        first.get("content")
    )


class Stub:
    """Routes requests by (key, model); a route is a list of responders, the last one sticky."""

    def __init__(self, server: FakeServer) -> None:
        self.server = server
        self.routes: dict[tuple[str | None, str | None], list[Responder]] = {}
        self.calls: list[tuple[str, str, str]] = []
        self.summary: list[Responder] = [lambda _r: reply("## Goal\nSay hello.\n")]
        server.handler = self._handle

    def on(self, key: str | None, model: str | None, *responses: FakeResponse | Responder) -> None:
        self.routes[(key, model)] = [
            r if callable(r) and not isinstance(r, FakeResponse) else (lambda _q, r=r: r)
            for r in responses
        ]

    def _pop(self, route: list[Responder], request: RecordedRequest) -> FakeResponse:
        responder = route.pop(0) if len(route) > 1 else route[0]
        return responder(request)

    def _handle(self, request: RecordedRequest) -> FakeResponse:
        body = request.json()
        key = request.headers.get("authorization", "").removeprefix("Bearer ")
        model = str(body.get("model"))
        if is_summary_request(body):
            self.calls.append((key, model, "summary"))
            return self._pop(self.summary, request)
        self.calls.append((key, model, "turn"))
        for route_key in ((key, model), (key, None), (None, model), (None, None)):
            if route_key in self.routes:
                return self._pop(self.routes[route_key], request)
        return reply(f"ok from {key} on {model}")

    def turns(self) -> list[tuple[str, str]]:
        return [(k, m) for k, m, kind in self.calls if kind == "turn"]


@pytest.fixture
def stub(server: FakeServer) -> Stub:
    return Stub(server)


class Env:
    def __init__(self, tmp_path: Path, server: FakeServer) -> None:
        self.agent_dir = tmp_path / "agent"
        self.agent_dir.mkdir()
        self.workspace = tmp_path / "workspace"
        self.session_file = tmp_path / "sessions" / "s1.jsonl"
        self.session_file.parent.mkdir()
        self.prompts: list[str] = []
        (self.agent_dir / "auth-profiles.json").write_text(
            json.dumps(
                {
                    "version": 1,
                    "profiles": {
                        "stub:p1": {"type": "api_key", "provider": "stub", "key": "key-1"},
                        "stub:p2": {"type": "api_key", "provider": "stub", "key": "key-2"},
                    },
                }
            )
        )
        self.config: dict[str, Any] = {
            "models": {
                "providers": {
                    "stub": {
                        "baseUrl": server.url + "/v1",
                        "api": "openai-completions",
                        "models": [
                            {"id": MAIN, "contextWindow": 32_000, "maxTokens": 1_000},
                            {"id": BACKUP, "contextWindow": 32_000, "maxTokens": 1_000},
                        ],
                    }
                }
            },
            "agents": {
                "defaults": {
                    "model": {"primary": f"stub/{MAIN}", "fallbacks": [f"stub/{BACKUP}"]},
                    "llm": {"idleTimeoutSeconds": 30},
                    "compaction": {"keepRecentTokens": 1, "reserveTokensFloor": 1},
                }
            },
            "auth": {"order": {"stub": ["stub:p1", "stub:p2"]}},
        }

    def watch_for_stalls(self) -> None:
        """A short LLM idle timeout, for tests whose server stalls (others keep 30 s, so a
        slow but healthy answer on a loaded machine is never taken for a stall)."""
        self.config["agents"]["defaults"]["llm"]["idleTimeoutSeconds"] = IDLE_S

    async def run(self, prompt: str = "hello", **kwargs: Any) -> EmbeddedRunResult:
        self.prompts.append(prompt)
        kwargs.setdefault("overload_backoff", NO_BACKOFF)
        return await run_embedded_agent(
            session_id="s1",
            session_key="agent:main:telegram:dm:42",
            session_file=self.session_file,
            workspace_dir=self.workspace,
            config=self.config,
            prompt=prompt,
            timeout_ms=kwargs.pop("timeout_ms", 20_000),
            run_id=f"run-{len(self.prompts)}",
            agent_dir=self.agent_dir,
            **kwargs,
        )

    def usage_stats(self) -> dict[str, Any]:
        data = json.loads((self.agent_dir / "auth-profiles.json").read_text())
        return dict(data.get("usageStats") or {})

    def assert_transcript_valid(self) -> list[dict[str, Any]]:
        """Reopened from disk, the session is a valid history for every provider's API."""
        manager = SessionManager.open(self.session_file)
        messages = manager.build_session_context().messages
        # Compaction folds earlier turns into a summary, but they stay on the branch.
        branch = [
            user_text(e["message"])
            for e in manager.get_branch()
            if e.get("type") == "message" and e["message"].get("role") == "user"
        ]
        for prompt in self.prompts:
            assert prompt in branch, f"user turn {prompt!r} was lost: {branch}"
        in_context = [user_text(m) for m in messages if m.get("role") == "user"]
        assert self.prompts[-1] in in_context, "the latest user turn is not in the context"
        assert_replays_for_every_api(messages)
        return messages


@pytest.fixture
def env(tmp_path: Path, server: FakeServer, stub: Stub) -> Env:
    return Env(tmp_path, server)


def _cooldown(stats: dict[str, Any], profile: str, model: str | None = None) -> int | None:
    entry = stats.get(profile) or {}
    if model is not None:
        entry = (entry.get("modelCooldowns") or {}).get(model) or {}
    value = entry.get("cooldownUntil")
    return int(value) if value is not None else None


# -- key rotation with cooldowns --------------------------------------------------------------


async def test_rate_limit_429_rotates_to_second_key_and_cools_the_key_for_that_model_only(
    env: Env, stub: Stub
) -> None:
    stub.on(
        "key-1",
        MAIN,
        http_error(
            429,
            "Rate limit reached for main-model. Please try again in 7s.",
            "requests",
            "rate_limit_exceeded",
            **{"retry-after": "7"},
        ),
    )
    before = int(time.time() * 1000)
    result = await env.run("first question")

    assert stub.turns() == [("key-1", MAIN), ("key-2", MAIN)]
    assert [p.text for p in result.payloads] == [f"ok from key-2 on {MAIN}"]
    assert result.meta.error is None
    assert result.meta.agent_meta is not None
    assert result.meta.agent_meta.auth_profile_id == "stub:p2"
    stats = env.usage_stats()
    until = _cooldown(stats, "stub:p1", MAIN)
    assert until is not None and before + 7_000 <= until <= int(time.time() * 1000) + 7_000
    assert stats["stub:p1"]["modelCooldowns"][MAIN]["reason"] == "rate_limit"
    assert _cooldown(stats, "stub:p1") is None  # the key still serves other models
    assert stats["stub:p1"]["failureCounts"] == {"rate_limit": 1}
    assert "modelCooldowns" not in stats["stub:p2"]
    env.assert_transcript_valid()

    # The next run starts with p2: p1 is cooling down for this model.
    stub.calls.clear()
    await env.run("second question")
    assert stub.turns() == [("key-2", MAIN)]
    env.assert_transcript_valid()


@pytest.mark.parametrize(
    ("status", "message", "type_", "code"),
    [
        (401, "Unauthorized: authentication required.", "authentication_error", None),
        (403, "Forbidden: this key cannot use main-model.", "forbidden", None),
    ],
)
async def test_auth_failure_rotates_and_cools_the_whole_profile(
    env: Env, stub: Stub, status: int, message: str, type_: str, code: str | None
) -> None:
    stub.on("key-1", None, http_error(status, message, type_, code))
    result = await env.run()

    assert stub.turns() == [("key-1", MAIN), ("key-2", MAIN)]
    assert [p.text for p in result.payloads] == [f"ok from key-2 on {MAIN}"]
    stats = env.usage_stats()
    assert stats["stub:p1"]["failureCounts"] == {"auth": 1}
    assert _cooldown(stats, "stub:p1") is not None  # profile-wide, not per model
    assert "modelCooldowns" not in stats["stub:p1"]
    env.assert_transcript_valid()


async def test_revoked_key_401_disables_the_profile(env: Env, stub: Stub) -> None:
    stub.on(
        "key-1",
        None,
        http_error(
            401, "Incorrect API key provided: key-1.", "invalid_request_error", "invalid_api_key"
        ),
    )
    result = await env.run()

    assert stub.turns() == [("key-1", MAIN), ("key-2", MAIN)]
    assert result.meta.error is None
    p1 = env.usage_stats()["stub:p1"]
    assert p1["disabledReason"] == "auth_permanent"
    assert p1["disabledUntil"] > int(time.time() * 1000)
    env.assert_transcript_valid()


async def test_billing_402_disables_the_profile_for_hours(env: Env, stub: Stub) -> None:
    stub.on(
        "key-1",
        None,
        http_error(402, "Insufficient credits. Add more credits to your account.", "billing"),
    )
    before = int(time.time() * 1000)
    result = await env.run()

    assert stub.turns() == [("key-1", MAIN), ("key-2", MAIN)]
    assert result.meta.error is None
    p1 = env.usage_stats()["stub:p1"]
    assert p1["disabledReason"] == "billing"
    assert p1["disabledUntil"] >= before + 5 * 3_600_000  # 5 h for the first billing failure
    assert p1["failureCounts"] == {"billing": 1}
    env.assert_transcript_valid()


async def test_billing_on_every_key_ends_with_the_billing_copy_not_raw_json(
    env: Env, stub: Stub
) -> None:
    del env.config["agents"]["defaults"]["model"]["fallbacks"]
    stub.on(None, MAIN, http_error(402, "Insufficient credits on this account.", "billing"))
    result = await env.run()

    assert stub.turns() == [("key-1", MAIN), ("key-2", MAIN)]
    assert len(result.payloads) == 1 and result.payloads[0].is_error
    text = result.payloads[0].text or ""
    assert "billing" in text.lower() or "credits" in text.lower()
    assert "{" not in text and "invalid_request_error" not in text
    stats = env.usage_stats()
    assert stats["stub:p1"]["disabledReason"] == "billing"
    assert stats["stub:p2"]["disabledReason"] == "billing"
    env.assert_transcript_valid()


def _fault(name: str) -> FakeResponse:
    frames = [role_chunk(), text_chunk("Partial"), text_chunk(" answer")]
    return {
        "rate_limit": lambda: http_error(429, "Rate limit reached. Try again in 2s.", "requests"),
        "auth": lambda: http_error(401, "Unauthorized", "authentication_error"),
        "overloaded": lambda: FakeResponse.json_body(
            529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        ),
        "cut": lambda: completion_response(frames, drop_after=2),
        "stall": lambda: completion_response(frames, stall_after=1, stall_seconds=STALL_S),
    }[name]()


@pytest.mark.parametrize(
    ("fault", "copy"),
    [
        ("rate_limit", RATE_LIMIT_TEXT),
        ("auth", AUTH_ERROR_TEXT),
        ("overloaded", OVERLOADED_TEXT),
        ("cut", NETWORK_ERROR_TEXT),
        ("stall", TIMEOUT_NO_RESPONSE_TEXT),
    ],
)
async def test_without_fallbacks_a_fault_on_every_key_shows_the_reply_layer_copy(
    env: Env, stub: Stub, fault: str, copy: str
) -> None:
    del env.config["agents"]["defaults"]["model"]["fallbacks"]
    if fault == "stall":
        env.watch_for_stalls()
    stub.on(None, MAIN, lambda _r: _fault(fault))
    result = await env.run()

    assert stub.turns() == [("key-1", MAIN), ("key-2", MAIN)]
    errors = [p for p in result.payloads if p.is_error]
    assert [p.text for p in errors] == [copy]
    for payload in result.payloads:
        assert "{" not in (payload.text or "") and "Traceback" not in (payload.text or "")
    assert "key-1" not in repr(result) and "key-2" not in repr(result)
    if fault in ("cut", "stall"):  # transport trouble: no key is to blame
        stats = env.usage_stats().values()
        assert not any(s.get("modelCooldowns") or s.get("cooldownUntil") for s in stats)
        assert result.meta.aborted is False
    env.assert_transcript_valid()


async def test_all_keys_cooling_down_fails_over_without_calling_the_main_model(
    env: Env, stub: Stub
) -> None:
    stub.on(None, MAIN, _fault("rate_limit"))
    await env.run("first")
    stub.calls.clear()
    result = await env.run("second")

    assert stub.turns() == [("key-1", BACKUP)]
    meta = result.meta.agent_meta
    assert meta is not None
    assert [(a["model"], a["reason"]) for a in meta.fallback_attempts] == [(MAIN, "rate_limit")]
    env.assert_transcript_valid()


# -- model fallback ---------------------------------------------------------------------------


async def test_unknown_model_404_fails_over_to_the_backup_model(env: Env, stub: Stub) -> None:
    stub.on(
        None,
        MAIN,
        http_error(
            404,
            f"The model `{MAIN}` does not exist or you do not have access to it.",
            "invalid_request_error",
            "model_not_found",
        ),
    )
    result = await env.run()

    assert stub.turns() == [("key-1", MAIN), ("key-2", MAIN), ("key-1", BACKUP)]
    assert [p.text for p in result.payloads] == [f"ok from key-1 on {BACKUP}"]
    meta = result.meta.agent_meta
    assert meta is not None and meta.model == BACKUP
    assert [(a["model"], a["reason"]) for a in meta.fallback_attempts] == [
        (MAIN, "model_not_found")
    ]
    stats = env.usage_stats()
    for profile in ("stub:p1", "stub:p2"):
        assert stats[profile]["modelCooldowns"][MAIN]["reason"] == "model_not_found"
        assert _cooldown(stats, profile) is None
    env.assert_transcript_valid()


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (
            503,
            error_body(
                "The engine is currently overloaded, please try again later", type="server_error"
            ),
        ),
        (529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ],
)
async def test_overloaded_model_cools_both_keys_for_it_and_fails_over(
    env: Env, stub: Stub, status: int, body: dict[str, Any]
) -> None:
    stub.on(None, MAIN, FakeResponse.json_body(status, body))
    result = await env.run()

    assert stub.turns() == [("key-1", MAIN), ("key-2", MAIN), ("key-1", BACKUP)]
    assert [p.text for p in result.payloads] == [f"ok from key-1 on {BACKUP}"]
    meta = result.meta.agent_meta
    assert meta is not None
    assert [a["reason"] for a in meta.fallback_attempts] == ["overloaded"]
    stats = env.usage_stats()
    for profile in ("stub:p1", "stub:p2"):
        assert stats[profile]["modelCooldowns"][MAIN]["reason"] == "overloaded"
        assert _cooldown(stats, profile) is None
    env.assert_transcript_valid()


async def test_server_error_500_rotates_then_fails_over_with_model_cooldowns(
    env: Env, stub: Stub
) -> None:
    stub.on(
        None,
        MAIN,
        http_error(500, "The server had an error while processing your request.", "server_error"),
    )
    result = await env.run()

    assert stub.turns() == [("key-1", MAIN), ("key-2", MAIN), ("key-1", BACKUP)]
    assert result.meta.error is None
    meta = result.meta.agent_meta
    assert meta is not None and meta.model == BACKUP
    assert [a["reason"] for a in meta.fallback_attempts] == ["server_error"]
    stats = env.usage_stats()
    assert stats["stub:p1"]["modelCooldowns"][MAIN]["reason"] == "server_error"
    env.assert_transcript_valid()


async def test_every_model_failing_raises_failover_error_naming_each(env: Env, stub: Stub) -> None:
    stub.on(None, None, http_error(500, "The server had an error.", "server_error"))
    with pytest.raises(FailoverError) as caught:
        await env.run()
    assert "All models failed (2)" in str(caught.value)
    assert len(stub.turns()) == 4
    env.assert_transcript_valid()


# -- transport faults: no cooldowns ---------------------------------------------------------------


async def test_stream_cut_midway_rotates_without_cooling_the_key(env: Env, stub: Stub) -> None:
    frames = [role_chunk(), text_chunk("Partial ans"), text_chunk("wer that never ends")]
    stub.on("key-1", MAIN, completion_response(frames, drop_after=2))
    result = await env.run()

    assert stub.turns() == [("key-1", MAIN), ("key-2", MAIN)]
    assert [p.text for p in result.payloads] == [f"ok from key-2 on {MAIN}"]
    assert "stub:p1" not in env.usage_stats() or not env.usage_stats()["stub:p1"].get(
        "modelCooldowns"
    )
    messages = env.assert_transcript_valid()
    cut = [m for m in messages if m.get("role") == "assistant" and m.get("stopReason") == "error"]
    assert cut and "Partial ans" in json.dumps(cut[0]["content"])


async def test_stall_past_idle_timeout_rotates_without_cooling_the_key(
    env: Env, stub: Stub
) -> None:
    env.watch_for_stalls()
    frames = [role_chunk(), text_chunk("Thinking about"), text_chunk(" it")]
    stub.on("key-1", MAIN, completion_response(frames, stall_after=2, stall_seconds=STALL_S))
    result = await env.run()

    assert stub.turns() == [("key-1", MAIN), ("key-2", MAIN)]
    assert [p.text for p in result.payloads] == [f"ok from key-2 on {MAIN}"]
    stats = env.usage_stats()
    assert "modelCooldowns" not in stats.get("stub:p1", {})
    assert _cooldown(stats, "stub:p1") is None
    env.assert_transcript_valid()


# -- context overflow ------------------------------------------------------------------------------

OVERFLOW = http_error(
    400,
    "This model's maximum context length is 32000 tokens. However, your messages resulted in "
    "40000 tokens. Please reduce the length of the messages.",
    "invalid_request_error",
    "context_length_exceeded",
)


async def test_context_overflow_compacts_then_retries_successfully(env: Env, stub: Stub) -> None:
    await env.run("tell me about the weather")
    await env.run("and tomorrow?")
    stub.calls.clear()
    stub.on(None, MAIN, OVERFLOW, lambda _r: reply("All summarised, here you go."))
    result = await env.run("and next week?")

    kinds = [kind for _k, _m, kind in stub.calls]
    assert kinds == ["turn", "summary", "turn"]
    assert [p.text for p in result.payloads] == ["All summarised, here you go."]
    assert result.meta.error is None
    assert (
        env.usage_stats().get("stub:p1", {}).get("errorCount", 0) == 0
    )  # overflow is no key fault
    entries = [json.loads(line) for line in env.session_file.read_text().splitlines()]
    assert any(e.get("type") == "compaction" for e in entries)
    env.assert_transcript_valid()


async def test_overflow_exhausting_compaction_truncates_oversized_tool_result_then_succeeds(
    env: Env, stub: Stub
) -> None:
    for model in env.config["models"]["providers"]["stub"]["models"]:
        model["contextWindow"] = 16_000  # a tool result cap of 19,200 chars (30% at 4/token)
    # No threshold compaction inside the attempt: the overflow error path is under test.
    env.config["agents"]["defaults"]["compaction"]["enabled"] = False
    env.workspace.mkdir(exist_ok=True)
    (env.workspace / "big.txt").write_text(("x" * 99 + "\n") * 600)
    stub.on(
        None,
        MAIN,
        completion_response(
            [
                role_chunk(),
                *tool_call_chunks(0, "call_read1", "read", ['{"path": "big.txt"}']),
                finish_chunk("tool_calls"),
            ]
        ),
        lambda _r: reply("The file is full of x."),
    )
    await env.run("read big.txt")

    state = {"turns": 0}

    def overflow_until_small(request: RecordedRequest) -> FakeResponse:
        state["turns"] += 1
        return OVERFLOW if len(request.body) > 40_000 else reply("Fits now.")

    stub.calls.clear()
    stub.summary = [
        lambda _r: FakeResponse.json_body(500, error_body("summariser down", type="server_error"))
    ]
    stub.on(None, MAIN, overflow_until_small)
    result = await env.run("summarise it")

    assert [p.text for p in result.payloads] == ["Fits now."]
    entries = [json.loads(line) for line in env.session_file.read_text().splitlines()]
    results = [
        e["message"]
        for e in entries
        if e.get("type") == "message" and e["message"]["role"] == "toolResult"
    ]
    text = json.dumps(results[-1]["content"])
    assert 2_000 <= len(text) <= 19_200 + 500
    assert state["turns"] >= 2
    env.assert_transcript_valid()


async def test_overflow_that_survives_compaction_and_truncation_gives_the_fixed_payload(
    env: Env, stub: Stub
) -> None:
    await env.run("first")
    stub.on(None, MAIN, OVERFLOW)
    result = await env.run("second")

    assert [p.text for p in result.payloads] == [CONTEXT_OVERFLOW_TEXT]
    assert result.payloads[0].is_error
    assert result.meta.error is not None and result.meta.error.kind == "context_overflow"
    assert not any(
        s.get("modelCooldowns") or s.get("cooldownUntil") for s in env.usage_stats().values()
    )
    env.assert_transcript_valid()


# -- tool traffic, abort, client tools, iteration cap --------------------------------------------


async def test_fault_after_a_tool_call_keeps_tool_call_and_result_paired(
    env: Env, stub: Stub
) -> None:
    (env.workspace).mkdir(exist_ok=True)
    (env.workspace / "notes.txt").write_text("remember the milk\n")
    stub.on(
        "key-1",
        MAIN,
        completion_response(
            [
                role_chunk(),
                *tool_call_chunks(0, "call_abc", "read", ['{"path": ', '"notes.txt"}']),
                finish_chunk("tool_calls"),
            ]
        ),
        http_error(
            429, "Rate limit reached. Please try again in 20s.", "requests", "rate_limit_exceeded"
        ),
    )
    result = await env.run("what is in notes.txt?")

    assert stub.turns() == [("key-1", MAIN), ("key-1", MAIN), ("key-2", MAIN)]
    assert result.meta.error is None
    assert result.payloads[-1].text == f"ok from key-2 on {MAIN}"
    messages = env.assert_transcript_valid()
    results = [m for m in messages if m.get("role") == "toolResult"]
    assert results and "remember the milk" in json.dumps(results[0]["content"])
    assert env.usage_stats()["stub:p1"]["modelCooldowns"][MAIN]["reason"] == "rate_limit"


async def test_abort_mid_stream_returns_aborted_with_a_valid_transcript(
    env: Env, stub: Stub
) -> None:
    controller = AbortController()
    streaming = asyncio.Event()
    loop = asyncio.get_running_loop()

    def slow(_request: RecordedRequest) -> FakeResponse:
        loop.call_soon_threadsafe(streaming.set)
        frames = [role_chunk(), text_chunk("Let me"), text_chunk(" think")]
        return completion_response(frames, stall_after=2, stall_seconds=STALL_S)

    stub.on(None, MAIN, slow)
    run = asyncio.create_task(env.run("a long question", abort_signal=controller.signal))
    await streaming.wait()
    controller.abort("user pressed stop")
    result = await run

    assert result.meta.aborted is True
    assert stub.turns() == [("key-1", MAIN)]
    assert not env.usage_stats().get("stub:p1", {}).get("errorCount")
    env.assert_transcript_valid()


async def test_client_tool_calls_end_the_run_with_every_pending_call(env: Env, stub: Stub) -> None:
    stub.on(
        None,
        MAIN,
        completion_response(
            [
                role_chunk(),
                *tool_call_chunks(0, "call_w1", "get_weather", ['{"city": "Oslo"}']),
                *tool_call_chunks(1, "call_w2", "get_weather", ['{"city": ', '"Rome"}']),
                finish_chunk("tool_calls"),
            ]
        ),
    )
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    result = await env.run("weather in Oslo and Rome?", client_tools=tools)

    assert result.meta.stop_reason == "tool_calls"
    calls = result.meta.pending_tool_calls
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("get_weather", {"city": "Oslo"}),
        ("get_weather", {"city": "Rome"}),
    ]
    assert all(len(c.id) == 9 and int(c.id, 16) >= 0 for c in calls)
    assert len({c.id for c in calls}) == 2
    assert result.meta.error is None and result.meta.aborted is False
    assert not result.payloads
    assert stub.turns() == [("key-1", MAIN)]  # the caller runs the tools, not the runner
    env.assert_transcript_valid()


@pytest.mark.parametrize("suppress", [False, True])
async def test_a_failed_read_is_reported_unless_tool_errors_are_suppressed(
    env: Env, stub: Stub, suppress: bool
) -> None:
    env.workspace.mkdir()
    if suppress:
        env.config["messages"] = {"suppressToolErrors": True}
    call = tool_call_chunks(0, "call_r", "read", ['{"path": "absent.txt"}'])
    silent = completion_response([role_chunk(), finish_chunk("stop")])
    stub.on(
        None,
        MAIN,
        completion_response([role_chunk(), *call, finish_chunk("tool_calls")]),
        silent,
    )
    result = await env.run("read absent.txt")

    texts = [p.text or "" for p in result.payloads]
    if suppress:
        assert texts == []
    else:
        assert len(texts) == 1 and texts[0].startswith("⚠️") and "absent.txt" in texts[0]
    env.assert_transcript_valid()


@pytest.mark.parametrize("suppress", [False, True])
@pytest.mark.parametrize("no_warnings", [False, True])
async def test_a_failed_command_is_reported_unless_the_run_asks_for_no_warnings(
    env: Env, stub: Stub, suppress: bool, no_warnings: bool
) -> None:
    env.workspace.mkdir()
    env.config["messages"] = {"suppressToolErrors": suppress}
    call = tool_call_chunks(0, "call_x", "exec", ['{"command": "exit 3"}'])
    stub.on(
        None,
        MAIN,
        completion_response([role_chunk(), *call, finish_chunk("tool_calls")]),
        completion_response([role_chunk(), finish_chunk("stop")]),
    )
    result = await env.run("run it", suppress_tool_error_warnings=no_warnings)

    texts = [p.text or "" for p in result.payloads]
    if no_warnings:
        assert texts == []
    else:
        assert len(texts) == 1 and texts[0].startswith("⚠️") and "code 3" in texts[0]
    env.assert_transcript_valid()


def offered_tools(stub: Stub) -> list[list[str]]:
    """The names of the tools each request offered the model."""
    seen: list[list[str]] = []

    def respond(request: RecordedRequest) -> FakeResponse:
        tools = request.json().get("tools") or []
        seen.append(sorted(t["function"]["name"] for t in tools))
        return reply("ok")

    stub.on(None, MAIN, respond)
    return seen


@requires_bwrap
@pytest.mark.parametrize("access", ["rw", "ro"])
async def test_a_read_only_sandbox_offers_no_tool_that_writes(
    env: Env, stub: Stub, access: str
) -> None:
    env.config["agents"]["defaults"]["sandbox"] = {"mode": "all", "workspaceAccess": access}
    seen = offered_tools(stub)
    await env.run("hello")

    assert len(seen) == 1 and "read" in seen[0] and "exec" in seen[0]
    writes = {"write", "edit"} & set(seen[0])
    assert writes == (set() if access == "ro" else {"write", "edit"})


def calling_every_time(name: str, arguments: str) -> Responder:
    """A model that answers every request with the same tool call (a fresh call id each time)."""
    count = itertools.count()

    def respond(_request: RecordedRequest) -> FakeResponse:
        call_id = f"call_{next(count)}"
        frames = [role_chunk(), *tool_call_chunks(0, call_id, name, [arguments])]
        return completion_response([*frames, finish_chunk("tool_calls")])

    return respond


def tool_result_texts(messages: list[dict[str, Any]]) -> list[str]:
    return [user_text(m) for m in messages if m.get("role") == "toolResult"]


async def test_loop_detection_ends_a_run_that_keeps_repeating_a_refused_call(
    env: Env, stub: Stub, caplog: pytest.LogCaptureFixture
) -> None:
    env.workspace.mkdir()
    (env.workspace / "notes.txt").write_text("remember the milk\n")
    env.config["tools"] = {"loopDetection": {"enabled": True}}
    stub.on(None, MAIN, calling_every_time("read", '{"path": "notes.txt"}'))
    caplog.set_level(logging.WARNING, logger="clawpi.tools.loop_guard")
    result = await env.run("what is in notes.txt?")

    # twenty reads run, then three are refused and the third ends the run
    assert stub.turns() == [("key-1", MAIN)] * (CRITICAL_THRESHOLD + BLOCKED_STREAK_TO_END_RUN)
    assert result.meta.error is not None and result.meta.error.kind == "tool_loop"
    assert result.meta.aborted is False
    assert [(p.text, p.is_error) for p in result.payloads] == [(TOOL_LOOP_ENDED_TEXT, True)]
    texts = tool_result_texts(env.assert_transcript_valid())
    assert all("remember the milk" in t for t in texts[:CRITICAL_THRESHOLD])
    refused = texts[CRITICAL_THRESHOLD:]
    assert len(refused) == 3 and all(t.startswith("CRITICAL: Called read") for t in refused)
    assert [RUN_ENDED_NOTICE in t for t in refused] == [False, False, True]
    assert caplog.text.count("loop warning for read (generic_repeat, 10)") == 1
    assert not env.usage_stats().get("stub:p1", {}).get("errorCount")


async def test_loop_detection_ends_a_run_that_keeps_calling_a_missing_tool(
    env: Env, stub: Stub
) -> None:
    env.config["tools"] = {"loopDetection": {"enabled": True, "unknownToolThreshold": 4}}
    stub.on(None, MAIN, calling_every_time("shell", '{"command": "ls"}'))
    result = await env.run("list the files")

    assert len(stub.turns()) == 4 + BLOCKED_STREAK_TO_END_RUN
    assert result.meta.error is not None and result.meta.error.kind == "tool_loop"
    assert result.payloads[-1].text == TOOL_LOOP_ENDED_TEXT
    env.assert_transcript_valid()


async def test_loop_detection_ends_a_run_that_keeps_sending_arguments_that_do_not_validate(
    env: Env, stub: Stub
) -> None:
    env.config["tools"] = {"loopDetection": {"enabled": True}}
    stub.on(None, MAIN, calling_every_time("read", '{"path": {"x": 1}}'))
    result = await env.run("read it")

    assert len(stub.turns()) == CRITICAL_THRESHOLD + BLOCKED_STREAK_TO_END_RUN
    assert result.meta.error is not None and result.meta.error.kind == "tool_loop"
    texts = tool_result_texts(env.assert_transcript_valid())
    # the agent refused each call before any tool ran, so the model read its validation error
    assert len(texts) == len(stub.turns())
    assert all(t.startswith('Validation failed for tool "read"') for t in texts)


async def test_without_loop_detection_a_long_repetition_runs_to_its_answer(
    env: Env, stub: Stub
) -> None:
    env.workspace.mkdir()
    (env.workspace / "notes.txt").write_text("remember the milk\n")
    repeats = GLOBAL_CIRCUIT_BREAKER_THRESHOLD + 2
    looping = calling_every_time("read", '{"path": "notes.txt"}')
    stub.on(None, MAIN, *([looping] * repeats), lambda _r: reply("the milk"))
    result = await env.run("what is in notes.txt?")

    assert len(stub.turns()) == repeats + 1
    assert result.meta.error is None
    assert [p.text for p in result.payloads] == ["the milk"]
    texts = tool_result_texts(env.assert_transcript_valid())
    assert len(texts) == repeats and all("remember the milk" in t for t in texts)


async def test_unsupported_thinking_level_retries_with_a_level_the_model_lists(
    env: Env, stub: Stub
) -> None:
    env.config["models"]["providers"]["stub"]["models"][0]["reasoning"] = True

    def effort(request: RecordedRequest) -> FakeResponse:
        if request.json().get("reasoning_effort") == "medium":
            return reply("Thought it through.")
        return http_error(
            400,
            "Unsupported value: 'reasoning_effort' does not support 'low' with this model. "
            "Supported values are: 'medium' and 'high'.",
            "invalid_request_error",
        )

    stub.on(None, MAIN, effort)
    result = await env.run(thinking_level="low")

    assert [p.text for p in result.payloads] == ["Thought it through."]
    assert stub.turns() == [("key-1", MAIN), ("key-1", MAIN)]  # same key, another level
    assert not env.usage_stats().get("stub:p1", {}).get("errorCount")
    env.assert_transcript_valid()


async def test_run_stops_at_the_iteration_cap_with_the_retry_limit_payload(
    env: Env, stub: Stub, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every real retry path is bounded well below the cap (32 at least); a cap of 2 lets a
    # persistent overflow with successful compactions reach it.
    import clawpi.runner.run as run_module

    monkeypatch.setattr(run_module, "iteration_cap", lambda _count: 2)
    await env.run("first")
    await env.run("second")
    stub.calls.clear()
    stub.on(None, MAIN, OVERFLOW)
    result = await env.run("third")

    # Each attempt: the overflow, the session's own compaction, its retry (overflowing again).
    assert [kind for _k, _m, kind in stub.calls] == ["turn", "summary", "turn"] * 2
    assert result.meta.error is not None and result.meta.error.kind == "retry_limit"
    assert [p.text for p in result.payloads] == [RETRY_LIMIT_TEXT]
    env.assert_transcript_valid()


def _stalled_summary(arrived: asyncio.Event | None = None) -> Responder:
    loop = asyncio.get_running_loop()

    def respond(_request: RecordedRequest) -> FakeResponse:
        if arrived is not None:
            loop.call_soon_threadsafe(arrived.set)
        return completion_response([role_chunk(), text_chunk("## Goal")], stall_after=1)

    return respond


async def test_hung_summariser_is_cut_off_by_the_compaction_timeout(env: Env, stub: Stub) -> None:
    defaults = env.config["agents"]["defaults"]
    defaults["compaction"].update({"enabled": False, "timeoutSeconds": 0.5})
    await env.run("first")
    stub.calls.clear()
    stub.summary = [_stalled_summary()]
    stub.on(None, MAIN, OVERFLOW)
    result = await env.run("second")

    assert [kind for _k, _m, kind in stub.calls] == ["turn", "summary"]
    assert [p.text for p in result.payloads] == [CONTEXT_OVERFLOW_TEXT]
    entries = [json.loads(line) for line in env.session_file.read_text().splitlines()]
    assert not any(e.get("type") == "compaction" for e in entries)
    env.assert_transcript_valid()


async def test_abort_during_forced_compaction_stops_the_run_without_another_attempt(
    env: Env, stub: Stub
) -> None:
    env.config["agents"]["defaults"]["compaction"]["enabled"] = False
    await env.run("first")
    stub.calls.clear()
    summarising = asyncio.Event()
    stub.summary = [_stalled_summary(summarising)]
    stub.on(None, MAIN, OVERFLOW)
    controller = AbortController()
    run = asyncio.create_task(env.run("second", abort_signal=controller.signal))
    await summarising.wait()
    controller.abort("user pressed stop")
    result = await run

    assert result.meta.aborted is True
    assert [kind for _k, _m, kind in stub.calls] == ["turn", "summary"]
    entries = [json.loads(line) for line in env.session_file.read_text().splitlines()]
    assert not any(e.get("type") == "compaction" for e in entries)
    env.assert_transcript_valid()


async def test_timeout_with_most_of_the_context_used_compacts_and_retries_on_the_same_key(
    env: Env, stub: Stub
) -> None:
    for model in env.config["models"]["providers"]["stub"]["models"]:
        model["contextWindow"] = 16_000
    env.config["agents"]["defaults"]["compaction"]["enabled"] = False
    env.watch_for_stalls()
    env.workspace.mkdir(exist_ok=True)
    (env.workspace / "notes.txt").write_text("remember the milk\n")
    tool_turn = completion_response(
        [
            role_chunk(),
            *tool_call_chunks(0, "call_n1", "read", ['{"path": "notes.txt"}']),
            finish_chunk("tool_calls"),
            usage_chunk(12_000, 20),  # 75% of the window: past the 65% share
        ]
    )
    stall = completion_response(
        [role_chunk(), text_chunk("Hmm")], stall_after=1, stall_seconds=STALL_S
    )
    stub.on(None, MAIN, tool_turn, stall, lambda _r: reply("Milk, as noted."))
    result = await env.run("what do my notes say?")

    assert [(k, kind) for k, _m, kind in stub.calls] == [
        ("key-1", "turn"),
        ("key-1", "turn"),
        ("key-1", "summary"),
        ("key-1", "turn"),
    ]
    assert [p.text for p in result.payloads] == ["Milk, as noted."]
    assert result.meta.error is None
    stats = env.usage_stats()
    assert _cooldown(stats, "stub:p1") is None and "modelCooldowns" not in stats["stub:p1"]
    entries = [json.loads(line) for line in env.session_file.read_text().splitlines()]
    assert any(e.get("type") == "compaction" for e in entries)
    env.assert_transcript_valid()


async def test_failed_overflow_recovery_never_replays_the_previous_answer(
    env: Env, stub: Stub
) -> None:
    await env.run("first")
    stub.summary = [lambda _r: http_error(500, "summariser down", "server_error")]
    stub.on(None, MAIN, OVERFLOW)
    result = await env.run("second")

    assert [p.text for p in result.payloads] == [CONTEXT_OVERFLOW_TEXT]
    assert result.meta.error is not None and result.meta.error.kind == "context_overflow"
    env.assert_transcript_valid()


async def test_run_timeout_during_compaction_is_reported_aborted_without_rotation(
    env: Env, stub: Stub
) -> None:
    defaults = env.config["agents"]["defaults"]
    defaults["compaction"]["timeoutSeconds"] = 0.2  # the deadline's one-time grace
    await env.run("first")
    stub.calls.clear()
    stub.summary = [
        lambda _r: completion_response(
            [role_chunk(), text_chunk("## Goal")], stall_after=1, stall_seconds=1.5
        )
    ]
    stub.on(None, MAIN, OVERFLOW)
    result = await env.run("second", timeout_ms=1_000)

    assert result.meta.aborted is True
    assert {key for key, _m, _kind in stub.calls} == {"key-1"}  # no rotation to p2
    assert not any(
        s.get("modelCooldowns") or s.get("cooldownUntil") for s in env.usage_stats().values()
    )
    assert all(p.text != f"ok from key-1 on {MAIN}" for p in result.payloads)
    env.assert_transcript_valid()
