"""Model fallback: candidates, error handling per failure kind, cooldown skips and probes.

Most failures come from the real path: the official `openai` SDK against a local server that
answers each model with a scripted HTTP error, through `clawpi.ai.stream`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from clawpi.ai import Model, complete
from clawpi.ai.errors import FailoverError
from clawpi.ai.types import Context
from clawpi.errors import AbortedError
from clawpi.runner.auth_profiles import HOUR_MS, mark_auth_profile_failure
from clawpi.runner.auth_store import load_auth_profile_store
from clawpi.runner.fallback import (
    AllModelsFailedError,
    ModelCandidate,
    ProbeThrottle,
    is_cooldown_probe_allowed,
    parse_model_ref,
    resolve_fallback_candidates,
    run_with_model_fallback,
)
from tests.fakes.http_server import FakeResponse, FakeServer, RecordedRequest
from tests.fakes.openai_sse import completion_response, error_body, finish_chunk, text_chunk

T0 = 1_800_000_000_000
CONTEXT: Context = {"messages": [{"role": "user", "content": "hi", "timestamp": 1}]}
CONFIG: dict[str, Any] = {
    "agents": {
        "defaults": {
            "model": {"primary": "openai/gpt-a", "fallbacks": ["openai/gpt-b", "groq/llama"]},
            "models": {"groq/llama": {"alias": "fast"}},
        }
    }
}


def c(ref: str) -> ModelCandidate:
    provider, _, model = ref.partition("/")
    return ModelCandidate(provider, model)


# -- candidates ------------------------------------------------------------------------------


def test_candidates_are_requested_then_fallbacks_then_primary_deduplicated() -> None:
    assert resolve_fallback_candidates(CONFIG, "openai", "gpt-a") == [
        c("openai/gpt-a"),
        c("openai/gpt-b"),
        c("groq/llama"),
    ]
    assert resolve_fallback_candidates(CONFIG, "openai", "gpt-z") == [
        c("openai/gpt-z"),
        c("openai/gpt-b"),
        c("groq/llama"),
        c("openai/gpt-a"),
    ]


def test_model_of_another_provider_goes_straight_to_the_configured_primary() -> None:
    assert resolve_fallback_candidates(CONFIG, "anthropic", "claude-x") == [
        c("anthropic/claude-x"),
        c("openai/gpt-a"),
    ]


def test_requested_model_from_the_fallback_chain_keeps_the_chain() -> None:
    assert resolve_fallback_candidates(CONFIG, "groq", "llama") == [
        c("groq/llama"),
        c("openai/gpt-b"),
        c("openai/gpt-a"),
    ]


def test_fallbacks_resolve_aliases_and_bare_ids_and_override_replaces_them() -> None:
    config = {
        "agents": {
            "defaults": {"model": "openai/gpt-a", "models": CONFIG["agents"]["defaults"]["models"]}
        }
    }
    assert resolve_fallback_candidates(config, "openai", "gpt-a", ["FAST", "gpt-c"]) == [
        c("openai/gpt-a"),
        c("groq/llama"),
        c("openai/gpt-c"),
    ]
    assert resolve_fallback_candidates(config, "openai", "gpt-q", []) == [c("openai/gpt-q")]


def test_provider_ids_are_normalised() -> None:
    assert resolve_fallback_candidates(None, " OpenAI ", "gpt-a") == [c("openai/gpt-a")]
    assert parse_model_ref("OpenAI/gpt-a", "x") == c("openai/gpt-a")
    assert parse_model_ref("  ", "x") is None


# -- the real provider path ------------------------------------------------------------------


def ok(text: str) -> FakeResponse:
    return completion_response([text_chunk(text), finish_chunk("stop")])


class Models:
    """A fake OpenAI-compatible server answering per requested model."""

    def __init__(self, server: FakeServer, answers: dict[str, Callable[[], FakeResponse]]):
        self.server = server
        self.answers = answers
        self.calls: list[str] = []
        server.handler = self.handle

    def handle(self, request: RecordedRequest) -> FakeResponse:
        model = request.json()["model"]
        return self.answers[model]()

    async def run(self, provider: str, model: str) -> str:
        """What the runner does per candidate: one request, a failed turn raises."""
        self.calls.append(f"{provider}/{model}")
        target = Model(
            id=model,
            api="openai-completions",
            provider=provider,
            base_url=f"{self.server.url}/v1",
            context_window=100_000,
            max_tokens=1000,
        )
        message = await complete(target, CONTEXT, api_key="sk-test")
        if message["stopReason"] == "error":
            raise RuntimeError(message.get("errorMessage") or "unknown error")
        text = message["content"][0]
        assert text["type"] == "text"
        return text["text"]


def failing(
    status: int, body: Any, headers: dict[str, str] | None = None
) -> Callable[[], FakeResponse]:
    return lambda: FakeResponse.json_body(status, body, headers)


async def test_auth_error_falls_back_to_the_next_model(server: FakeServer) -> None:
    models = Models(
        server,
        {
            "gpt-a": failing(401, error_body("Incorrect API key provided", code="invalid_api_key")),
            "gpt-b": lambda: ok("from b"),
        },
    )
    result = await run_with_model_fallback(CONFIG, "openai", "gpt-a", models.run)
    assert (result.result, result.provider, result.model) == ("from b", "openai", "gpt-b")
    assert [(a.provider, a.model, a.reason) for a in result.attempts] == [
        ("openai", "gpt-a", "auth_permanent")
    ]
    assert result.attempts[0].status == 401


async def test_rate_limit_overload_and_server_errors_fall_back(server: FakeServer) -> None:
    models = Models(
        server,
        {
            "gpt-a": failing(429, error_body("Rate limit reached", code="rate_limit_exceeded")),
            "gpt-b": failing(529, {"error": {"message": "Overloaded", "type": "overloaded_error"}}),
            "llama": lambda: ok("groq answers"),
        },
    )
    result = await run_with_model_fallback(CONFIG, "openai", "gpt-a", models.run)
    assert result.result == "groq answers"
    assert [a.reason for a in result.attempts] == ["rate_limit", "overloaded"]


async def test_cloudflare_html_page_falls_back_as_a_timeout(server: FakeServer) -> None:
    html = "<!DOCTYPE html><html><head><title>521: Web server is down</title></head></html>"
    models = Models(
        server,
        {
            "gpt-a": lambda: FakeResponse(521, {"content-type": "text/html"}, html.encode()),
            "gpt-b": lambda: ok("b"),
        },
    )
    result = await run_with_model_fallback(CONFIG, "openai", "gpt-a", models.run)
    assert result.model == "gpt-b"
    assert result.attempts[0].reason == "timeout"


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        (402, error_body("Payment required"), "billing"),
        (400, error_body("Your credit balance is too low to access the API"), "billing"),
        (
            400,
            error_body("insufficient_quota", type="insufficient_quota", code="insufficient_quota"),
            "billing",
        ),
    ],
)
async def test_billing_failures_fall_back_with_reason_billing(
    server: FakeServer, status: int, body: Any, reason: str
) -> None:
    models = Models(server, {"gpt-a": failing(status, body), "gpt-b": lambda: ok("b")})
    result = await run_with_model_fallback(CONFIG, "openai", "gpt-a", models.run)
    assert result.model == "gpt-b"
    assert result.attempts[0].reason == reason


async def test_model_not_found_falls_back_with_a_warning(
    server: FakeServer, caplog: pytest.LogCaptureFixture
) -> None:
    models = Models(
        server,
        {
            "gpt-a": failing(
                404, error_body("The model `gpt-a` does not exist", code="model_not_found")
            ),
            "gpt-b": lambda: ok("b"),
        },
    )
    with caplog.at_level(logging.WARNING, logger="clawpi.runner.fallback"):
        result = await run_with_model_fallback(CONFIG, "openai", "gpt-a", models.run)
    assert result.attempts[0].reason == "model_not_found"
    assert 'Model "openai/gpt-a" not found. Fell back to "openai/gpt-b".' in caplog.text


async def test_unknown_error_moves_on_but_is_rethrown_on_the_last_candidate() -> None:
    calls: list[str] = []

    async def run(provider: str, model: str) -> str:
        calls.append(model)
        raise RuntimeError(f"bad request from {model}")

    with pytest.raises(RuntimeError, match="bad request from gpt-a") as info:
        await run_with_model_fallback(CONFIG, "anthropic", "claude-x", run)
    assert calls == ["claude-x", "gpt-a"]
    assert not isinstance(info.value, FailoverError)


async def test_bad_request_records_reason_unknown() -> None:
    async def run(provider: str, model: str) -> str:
        if model == "claude-x":
            raise RuntimeError("bad request")
        return "primary"

    result = await run_with_model_fallback(CONFIG, "anthropic", "claude-x", run)
    assert result.result == "primary"
    assert result.attempts[0].reason == "unknown"


async def test_all_failed_error_lists_every_attempt(server: FakeServer) -> None:
    models = Models(
        server,
        {
            "gpt-a": failing(429, error_body("Rate limit reached")),
            "gpt-b": failing(401, error_body("Incorrect API key provided")),
            "llama": failing(503, error_body("Service Unavailable", type="server_error")),
        },
    )
    with pytest.raises(AllModelsFailedError) as info:
        await run_with_model_fallback(CONFIG, "openai", "gpt-a", models.run)
    err = info.value
    assert str(err).startswith("All models failed (3): openai/gpt-a: ")
    assert "(rate_limit) | openai/gpt-b: " in str(err)
    assert "(auth) | groq/llama: " in str(err)
    assert str(err).endswith("(timeout)")
    assert [a.reason for a in err.attempts] == ["rate_limit", "auth", "timeout"]
    assert isinstance(err.__cause__, FailoverError)
    assert err.reason == "unknown"


async def test_a_single_candidate_rethrows_its_own_error() -> None:
    async def run(provider: str, model: str) -> str:
        raise FailoverError("429 rate limited", reason="rate_limit", provider=provider)

    with pytest.raises(FailoverError) as info:
        await run_with_model_fallback(None, "openai", "gpt-a", run)
    assert not isinstance(info.value, AllModelsFailedError)
    assert info.value.reason == "rate_limit"


async def test_user_abort_is_never_fallen_back() -> None:
    calls: list[str] = []

    async def run(provider: str, model: str) -> str:
        calls.append(model)
        raise AbortedError("Operation aborted")

    with pytest.raises(AbortedError):
        await run_with_model_fallback(CONFIG, "openai", "gpt-a", run)
    assert calls == ["gpt-a"]


async def test_timeout_abort_does_fall_back() -> None:
    async def run(provider: str, model: str) -> str:
        if model == "gpt-a":
            raise AbortedError("request timed out")
        return "b"

    result = await run_with_model_fallback(CONFIG, "openai", "gpt-a", run)
    assert result.model == "gpt-b"
    assert result.attempts[0].reason == "timeout"


async def test_context_overflow_is_rethrown_not_fallen_back(server: FakeServer) -> None:
    overflow = error_body(
        "This model's maximum context length is 8192 tokens. However, your messages resulted "
        "in 9000 tokens.",
        code="context_length_exceeded",
    )
    models = Models(server, {"gpt-a": failing(400, overflow), "gpt-b": lambda: ok("b")})
    with pytest.raises(RuntimeError, match="maximum context length"):
        await run_with_model_fallback(CONFIG, "openai", "gpt-a", models.run)
    assert models.calls == ["openai/gpt-a"]


async def test_session_lock_timeout_stops_the_chain() -> None:
    class SessionWriteLockError(Exception):
        pass

    calls: list[str] = []

    async def run(provider: str, model: str) -> str:
        calls.append(model)
        raise SessionWriteLockError("session file locked (timeout 10000ms)")

    with pytest.raises(SessionWriteLockError):
        await run_with_model_fallback(CONFIG, "openai", "gpt-a", run)
    assert calls == ["gpt-a"]


async def test_on_error_sees_each_failed_candidate() -> None:
    seen: list[tuple[str, str, int, int]] = []

    async def on_error(
        candidate: ModelCandidate, err: BaseException, attempt: int, total: int
    ) -> None:
        assert isinstance(err, FailoverError)
        seen.append((candidate.key, err.reason, attempt, total))

    async def run(provider: str, model: str) -> str:
        if model != "llama":
            raise RuntimeError("429 Too Many Requests")
        return "ok"

    await run_with_model_fallback(CONFIG, "openai", "gpt-a", run, on_error=on_error)
    assert seen == [("openai/gpt-a", "rate_limit", 1, 3), ("openai/gpt-b", "rate_limit", 2, 3)]


# -- cooldowns -------------------------------------------------------------------------------


def write_profiles(agent_dir: Path, providers: dict[str, int]) -> None:
    agent_dir.mkdir(parents=True, exist_ok=True)
    profiles = {
        f"{p}:k{i}": {"type": "api_key", "provider": p, "key": f"sk-{p}-{i}"}
        for p, n in providers.items()
        for i in range(n)
    }
    (agent_dir / "auth-profiles.json").write_bytes(
        orjson.dumps({"version": 1, "profiles": profiles})
    )


def cool(agent_dir: Path, provider: str, reason: Any, model: str, times: int = 1) -> None:
    """Mark every profile of `provider` failed `times` times at T0 (1 min, 5 min, 25 min...)."""
    store = load_auth_profile_store(agent_dir)
    for profile_id in list(store.profiles):
        if profile_id.startswith(f"{provider}:"):
            for _ in range(times):
                mark_auth_profile_failure(store, profile_id, reason, model=model, now=T0)


class Recorder:
    def __init__(self, fail: set[str] | None = None) -> None:
        self.calls: list[tuple[str, bool]] = []
        self.fail = fail or set()

    async def __call__(self, provider: str, model: str) -> str:
        self.calls.append((f"{provider}/{model}", is_cooldown_probe_allowed()))
        if f"{provider}/{model}" in self.fail:
            raise FailoverError("429 rate limit", reason="rate_limit", provider=provider)
        return f"{provider}/{model}"


async def test_provider_with_auth_cooldown_on_every_profile_is_skipped(tmp_path: Path) -> None:
    agent_dir = tmp_path / "agent"
    write_profiles(agent_dir, {"openai": 2, "groq": 1})
    cool(agent_dir, "openai", "auth", "gpt-a")
    run = Recorder()
    result = await run_with_model_fallback(
        CONFIG,
        "openai",
        "gpt-a",
        run,
        agent_dir=agent_dir,
        clock=lambda: T0 + 1,
        probe_throttle=ProbeThrottle(),
    )
    assert run.calls == [("groq/llama", False)]
    assert [a.error for a in result.attempts] == [
        "Provider openai has auth issue (skipping all models)",
        "Provider openai has auth issue (skipping all models)",
    ]
    assert all(a.skipped and a.reason == "auth" for a in result.attempts)


async def test_billing_disabled_provider_is_skipped(tmp_path: Path) -> None:
    agent_dir = tmp_path / "agent"
    write_profiles(agent_dir, {"openai": 2, "groq": 1})
    cool(agent_dir, "openai", "billing", "gpt-a")
    run = Recorder()
    result = await run_with_model_fallback(
        CONFIG,
        "openai",
        "gpt-a",
        run,
        agent_dir=agent_dir,
        clock=lambda: T0 + HOUR_MS,
        probe_throttle=ProbeThrottle(),
    )
    assert run.calls == [("groq/llama", False)]
    assert result.attempts[0].reason == "billing"


async def test_rate_limited_model_does_not_skip_another_model_of_the_provider(
    tmp_path: Path,
) -> None:
    agent_dir = tmp_path / "agent"
    write_profiles(agent_dir, {"openai": 2})
    cool(agent_dir, "openai", "rate_limit", "gpt-a", times=3)  # 25 min on both keys
    config = {
        "agents": {
            "defaults": {"model": {"primary": "openai/gpt-a", "fallbacks": ["openai/gpt-b"]}}
        }
    }
    run = Recorder()
    result = await run_with_model_fallback(
        config,
        "openai",
        "gpt-a",
        run,
        agent_dir=agent_dir,
        clock=lambda: T0 + 1,
        probe_throttle=ProbeThrottle(),
    )
    assert run.calls == [("openai/gpt-b", False)]  # same keys, other model: no probe needed
    assert result.attempts[0].error == "Provider openai is in cooldown (all profiles unavailable)"


async def test_cooling_primary_is_probed_near_expiry_once_per_throttle_window(
    tmp_path: Path,
) -> None:
    agent_dir = tmp_path / "agent"
    write_profiles(agent_dir, {"openai": 1, "groq": 1})
    cool(agent_dir, "openai", "rate_limit", "gpt-a")  # until T0 + 1 min
    throttle = ProbeThrottle()
    config = {
        "agents": {
            "defaults": {"model": {"primary": "openai/gpt-a", "fallbacks": ["openai/gpt-b"]}}
        }
    }

    run = Recorder()
    result = await run_with_model_fallback(
        config,
        "openai",
        "gpt-a",
        run,
        agent_dir=agent_dir,
        clock=lambda: T0 + 1,
        probe_throttle=throttle,
    )
    assert run.calls == [("openai/gpt-a", True)]  # within 2 min of expiry: probed
    assert result.model == "gpt-a"

    again = Recorder()
    result = await run_with_model_fallback(
        config,
        "openai",
        "gpt-a",
        again,
        agent_dir=agent_dir,
        clock=lambda: T0 + 2,
        probe_throttle=throttle,
    )
    assert again.calls == [("openai/gpt-b", False)]  # throttled: 30 s between probes
    assert result.attempts[0].error == "Provider openai is in cooldown (all profiles unavailable)"


async def test_far_from_expiry_the_primary_is_skipped_for_a_fallback(tmp_path: Path) -> None:
    agent_dir = tmp_path / "agent"
    write_profiles(agent_dir, {"openai": 1, "groq": 1})
    cool(agent_dir, "openai", "rate_limit", "gpt-a", times=3)  # 25 min
    config = {
        "agents": {"defaults": {"model": {"primary": "openai/gpt-a", "fallbacks": ["groq/llama"]}}}
    }
    run = Recorder()
    result = await run_with_model_fallback(
        config,
        "openai",
        "gpt-a",
        run,
        agent_dir=agent_dir,
        clock=lambda: T0 + 1,
        probe_throttle=ProbeThrottle(),
    )
    assert run.calls == [("groq/llama", False)]
    assert result.attempts[0].skipped


async def test_same_provider_fallback_is_probed_only_once_per_run(tmp_path: Path) -> None:
    agent_dir = tmp_path / "agent"
    write_profiles(agent_dir, {"openai": 1})
    for model in ("gpt-b", "gpt-c"):
        cool(agent_dir, "openai", "rate_limit", model, times=3)
    config = {
        "agents": {
            "defaults": {
                "model": {"primary": "openai/gpt-a", "fallbacks": ["openai/gpt-b", "openai/gpt-c"]}
            }
        }
    }
    run = Recorder(fail={"openai/gpt-a", "openai/gpt-b"})
    with pytest.raises(AllModelsFailedError) as info:
        await run_with_model_fallback(
            config,
            "openai",
            "gpt-a",
            run,
            agent_dir=agent_dir,
            clock=lambda: T0 + 1,
            probe_throttle=ProbeThrottle(),
        )
    assert run.calls == [("openai/gpt-a", False), ("openai/gpt-b", True)]
    assert info.value.attempts[-1].error == (
        "Provider openai is in cooldown (probe already attempted this run)"
    )


async def test_cross_provider_fallback_goes_before_same_provider_when_requested_cools(
    tmp_path: Path,
) -> None:
    agent_dir = tmp_path / "agent"
    write_profiles(agent_dir, {"openai": 1, "groq": 1})
    cool(agent_dir, "openai", "rate_limit", "gpt-a", times=3)
    run = Recorder()
    result = await run_with_model_fallback(
        CONFIG,
        "openai",
        "gpt-a",
        run,
        agent_dir=agent_dir,
        clock=lambda: T0 + 1,
        probe_throttle=ProbeThrottle(),
    )
    assert run.calls == [("groq/llama", False)]
    assert result.provider == "groq"


async def test_no_auth_store_means_no_skips(tmp_path: Path) -> None:
    run = Recorder(fail={"openai/gpt-a"})
    result = await run_with_model_fallback(
        CONFIG, "openai", "gpt-a", run, agent_dir=tmp_path / "missing"
    )
    assert [call for call, _ in run.calls] == ["openai/gpt-a", "openai/gpt-b"]
    assert result.model == "gpt-b"
