"""The anthropic-messages provider: the official SDK against a fake server speaking Anthropic SSE."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import pytest

from clawpi.ai import AbortController, Model, get_model, is_context_overflow, stream
from clawpi.ai.providers.anthropic_convert import build_request, normalize_tool_call_id
from clawpi.ai.types import AssistantMessage, AssistantMessageEvent, Context
from tests.fakes import anthropic_sse as sse
from tests.fakes.events import assert_event_order
from tests.fakes.http_server import FakeServer

API_KEY = "sk-ant-api03-test-key"
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()
CONTEXT: Context = {
    "systemPrompt": "You are terse.",
    "messages": [{"role": "user", "content": "Say hello", "timestamp": 1}],
}


def haiku(server: FakeServer, model_id: str = "claude-haiku-4-5", **changes: Any) -> Model:
    model = get_model("anthropic", model_id)
    assert model is not None
    return model.replace(base_url=server.url, **changes)


async def run(
    model: Model, context: Context = CONTEXT, **options: Any
) -> tuple[list[AssistantMessageEvent], AssistantMessage]:
    options.setdefault("api_key", API_KEY)
    result = stream(model, context, **options)
    events = [event async for event in result]
    return events, await result.result()


def types_of(events: list[AssistantMessageEvent]) -> list[str]:
    return [e["type"] for e in events]


# -- text, request shape ---------------------------------------------------------------------


async def test_text_turn_streams_in_order_and_sends_the_documented_request(
    server: FakeServer,
) -> None:
    server.enqueue(sse.stream_response(sse.turn(sse.text_block(0, "Hel", "lo", "!"))))
    model = haiku(server)
    events, message = await run(model)

    assert_event_order(events)
    assert types_of(events) == [
        "start",
        "text_start",
        "text_delta",
        "text_delta",
        "text_delta",
        "text_end",
        "done",
    ]
    assert [e["delta"] for e in events if e["type"] == "text_delta"] == ["Hel", "lo", "!"]
    assert events[5]["content"] == "Hello!"  # type: ignore[typeddict-item]
    assert message["content"] == [{"type": "text", "text": "Hello!"}]
    assert message["stopReason"] == "stop"
    assert message["responseId"] == "msg_01XFDUDYJgAACzvnptvVoYEL"
    assert (message["api"], message["provider"], message["model"]) == (
        "anthropic-messages",
        "anthropic",
        "claude-haiku-4-5",
    )

    (request,) = server.requests
    assert request.method == "POST"
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == API_KEY
    assert "authorization" not in request.headers
    assert request.headers["anthropic-version"]
    betas = request.headers["anthropic-beta"].split(",")
    assert betas == ["fine-grained-tool-streaming-2025-05-14", "interleaved-thinking-2025-05-14"]
    body = request.json()
    assert body["model"] == "claude-haiku-4-5"
    assert body["stream"] is True
    assert body["max_tokens"] == 32000  # min(model max 64000, 32000) when none is given
    assert body["system"] == [
        {"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}
    ]
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Say hello", "cache_control": {"type": "ephemeral"}}
            ],
        }
    ]
    assert "thinking" not in body and "temperature" not in body and "tools" not in body


async def test_explicit_max_tokens_temperature_metadata_and_tool_choice_are_sent(
    server: FakeServer,
) -> None:
    server.enqueue(sse.stream_response(sse.turn(sse.text_block(0, "ok"))))
    await run(
        haiku(server),
        max_tokens=1234,
        temperature=0.2,
        metadata={"user_id": "user-42", "ignored": 1},
        tool_choice="any",
    )
    body = server.requests[0].json()
    assert body["max_tokens"] == 1234
    assert body["temperature"] == 0.2
    assert body["metadata"] == {"user_id": "user-42"}
    assert body["tool_choice"] == {"type": "any"}


async def test_model_and_option_headers_reach_the_server_options_winning(
    server: FakeServer,
) -> None:
    server.enqueue(sse.stream_response(sse.turn(sse.text_block(0, "ok"))))
    model = haiku(server, headers={"x-team": "model", "x-model-only": "m"})
    await run(model, headers={"x-team": "options", "anthropic-beta": "custom-beta"})
    headers = server.requests[0].headers
    assert headers["x-team"] == "options"
    assert headers["x-model-only"] == "m"
    assert headers["anthropic-beta"] == "custom-beta"


async def test_oauth_token_uses_bearer_auth_and_claude_code_identity(server: FakeServer) -> None:
    server.enqueue(sse.stream_response(sse.turn(sse.text_block(0, "ok"))))
    token = "sk-ant-oat01-abcdef"
    await run(haiku(server), api_key=token)
    request = server.requests[0]
    assert request.headers["authorization"] == f"Bearer {token}"
    assert "x-api-key" not in request.headers
    assert request.headers["anthropic-beta"].split(",")[:2] == [
        "claude-code-20250219",
        "oauth-2025-04-20",
    ]
    system = request.json()["system"]
    assert system[0]["text"] == "You are Claude Code, Anthropic's official CLI for Claude."
    assert system[1]["text"] == "You are terse."


async def test_api_key_comes_from_the_environment(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
    server.enqueue(sse.stream_response(sse.turn(sse.text_block(0, "ok"))))
    result = stream(haiku(server), CONTEXT)
    assert (await result.result())["stopReason"] == "stop"
    assert server.requests[0].headers["x-api-key"] == "sk-ant-from-env"


async def test_missing_api_key_is_an_error_event_naming_the_variable(server: FakeServer) -> None:
    result = stream(haiku(server), CONTEXT)
    events = [event async for event in result]
    assert types_of(events) == ["error"]
    message = events[0]["error"]  # type: ignore[typeddict-item]
    assert "No API key for provider: anthropic" in message["errorMessage"]
    assert "ANTHROPIC_API_KEY" in message["errorMessage"]
    assert server.requests == []


async def test_on_payload_can_replace_the_request_body(server: FakeServer) -> None:
    server.enqueue(sse.stream_response(sse.turn(sse.text_block(0, "ok"))))
    seen: list[dict[str, Any]] = []

    def on_payload(body: dict[str, Any], model: Model) -> dict[str, Any]:
        seen.append(body)
        return {**body, "max_tokens": 7, "service_tier": "standard_only"}

    await run(haiku(server), on_payload=on_payload)
    sent = server.requests[0].json()
    assert seen[0]["model"] == "claude-haiku-4-5"
    assert sent["max_tokens"] == 7
    assert sent["service_tier"] == "standard_only"


# -- thinking --------------------------------------------------------------------------------


async def test_thinking_signature_is_concatenated_and_round_trips(server: FakeServer) -> None:
    server.enqueue(
        sse.stream_response(
            sse.turn(
                sse.thinking_block(0, ["Let me ", "think."], ["EqQBCgIYAh", "IM1gbcDa=="]),
                sse.text_block(1, "Answer"),
            )
        ),
        sse.stream_response(sse.turn(sse.text_block(0, "Again"))),
    )
    model = haiku(server)
    events, first = await run(model, reasoning="medium", temperature=0.5)
    assert_event_order(events)
    assert types_of(events)[:5] == [
        "start",
        "thinking_start",
        "thinking_delta",
        "thinking_delta",
        "thinking_end",
    ]
    assert first["content"][0] == {
        "type": "thinking",
        "thinking": "Let me think.",
        "thinkingSignature": "EqQBCgIYAhIM1gbcDa==",
    }
    body = server.requests[0].json()
    # medium budget 8192 on top of the 32000 base, capped by the model's 64000
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert body["max_tokens"] == 32000 + 8192
    assert "temperature" not in body

    context: Context = {
        "messages": [
            *CONTEXT["messages"],
            first,
            {"role": "user", "content": "And again?", "timestamp": 2},
        ]
    }
    await run(model, context, reasoning="medium")
    sent = server.requests[1].json()["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Let me think.", "signature": "EqQBCgIYAhIM1gbcDa=="},
            {"type": "text", "text": "Answer"},
        ],
    }


async def test_redacted_thinking_is_kept_opaque_and_sent_back(server: FakeServer) -> None:
    server.enqueue(
        sse.stream_response(
            sse.turn(sse.redacted_thinking_block(0, "EmwKAhgBEgy3va3pzix"), sse.text_block(1, "Hi"))
        ),
        sse.stream_response(sse.turn(sse.text_block(0, "ok"))),
    )
    model = haiku(server)
    events, first = await run(model, reasoning="low")
    assert_event_order(events)
    assert types_of(events)[1:3] == ["thinking_start", "thinking_end"]
    assert first["content"][0] == {
        "type": "thinking",
        "thinking": "[Reasoning redacted]",
        "thinkingSignature": "EmwKAhgBEgy3va3pzix",
        "redacted": True,
    }
    context: Context = {
        "messages": [*CONTEXT["messages"], first, {"role": "user", "content": "go", "timestamp": 3}]
    }
    await run(model, context)
    assistant = server.requests[1].json()["messages"][1]
    assert assistant["content"][0] == {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}


@pytest.mark.parametrize(
    ("model_id", "level", "effort"),
    [
        ("claude-sonnet-4-6", "minimal", "low"),
        ("claude-sonnet-4-6", "medium", "medium"),
        ("claude-sonnet-4-6", "xhigh", "high"),
        ("claude-opus-4-6", "high", "high"),
        ("claude-opus-4-6", "xhigh", "max"),
        ("claude-opus-4-7", "xhigh", "xhigh"),
    ],
)
async def test_adaptive_models_get_adaptive_thinking_with_effort(
    server: FakeServer, model_id: str, level: str, effort: str
) -> None:
    server.enqueue(sse.stream_response(sse.turn(sse.text_block(0, "ok"))))
    await run(haiku(server, model_id), reasoning=level, temperature=1.0)
    request = server.requests[0]
    body = request.json()
    assert body["thinking"] == {"type": "adaptive"}
    assert body["output_config"] == {"effort": effort}
    assert body["max_tokens"] == 32000
    assert "temperature" not in body
    assert request.headers["anthropic-beta"] == "fine-grained-tool-streaming-2025-05-14"


async def test_thinking_budgets_can_be_overridden(server: FakeServer) -> None:
    server.enqueue(sse.stream_response(sse.turn(sse.text_block(0, "ok"))))
    await run(haiku(server), reasoning="high", max_tokens=4000, thinking_budgets={"high": 3000})
    body = server.requests[0].json()
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 3000}
    assert body["max_tokens"] == 7000


async def test_non_reasoning_model_gets_no_thinking_and_keeps_temperature(
    server: FakeServer,
) -> None:
    server.enqueue(sse.stream_response(sse.turn(sse.text_block(0, "ok"))))
    await run(haiku(server, "claude-3-haiku-20240307"), reasoning="high", temperature=0.3)
    body = server.requests[0].json()
    assert "thinking" not in body
    assert body["temperature"] == 0.3
    assert body["max_tokens"] == 4096


# -- tool calls ------------------------------------------------------------------------------

TOOLS: Any = [
    {
        "name": "read",
        "description": "Read a file",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    }
]


async def test_tool_call_arguments_stream_in_pieces_and_parse_at_the_end(
    server: FakeServer,
) -> None:
    chunks = ['{"pa', 'th": "src/ma', 'in.py", "li', 'mit": 20}']
    server.enqueue(
        sse.stream_response(
            sse.turn(
                sse.text_block(0, "Reading."),
                sse.tool_use_block(1, "toolu_01A09q90qw90lq917835lq9", "read", chunks),
                stop_reason="tool_use",
            )
        )
    )
    model = haiku(server)
    events, message = await run(model, {**CONTEXT, "tools": TOOLS})
    assert_event_order(events)
    deltas = [e for e in events if e["type"] == "toolcall_delta"]
    assert [e["delta"] for e in deltas] == chunks
    assert all(e["contentIndex"] == 1 for e in deltas)
    end = next(e for e in events if e["type"] == "toolcall_end")
    assert end["toolCall"] == {
        "type": "toolCall",
        "id": "toolu_01A09q90qw90lq917835lq9",
        "name": "read",
        "arguments": {"path": "src/main.py", "limit": 20},
    }
    assert message["stopReason"] == "toolUse"
    assert server.requests[0].json()["tools"] == [
        {
            "name": "read",
            "description": "Read a file",
            "input_schema": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        }
    ]


async def test_partial_arguments_grow_with_each_delta(server: FakeServer) -> None:
    chunks = ['{"path": "a', "bc", '", "n": 1', "2}"]
    server.enqueue(
        sse.stream_response(
            sse.turn(sse.tool_use_block(0, "toolu_1", "read", chunks), stop_reason="tool_use")
        )
    )
    result = stream(haiku(server), {**CONTEXT, "tools": TOOLS}, api_key=API_KEY)
    snapshots = []
    async for event in result:
        if event["type"] == "toolcall_delta":
            snapshots.append(dict(event["partial"]["content"][0]["arguments"]))  # type: ignore[typeddict-item]
    assert snapshots == [
        {"path": "a"},
        {"path": "abc"},
        {"path": "abc", "n": 1},
        {"path": "abc", "n": 12},
    ]


async def test_two_parallel_tool_calls_get_their_own_blocks(server: FakeServer) -> None:
    server.enqueue(
        sse.stream_response(
            sse.turn(
                sse.tool_use_block(0, "toolu_a", "read", ['{"path":', '"a.txt"}']),
                sse.tool_use_block(1, "toolu_b", "read", ['{"path":"b', '.txt"}']),
                stop_reason="tool_use",
            )
        )
    )
    events, message = await run(haiku(server), {**CONTEXT, "tools": TOOLS})
    assert_event_order(events)
    ends = [e for e in events if e["type"] == "toolcall_end"]
    assert [(e["contentIndex"], e["toolCall"]["id"]) for e in ends] == [
        (0, "toolu_a"),
        (1, "toolu_b"),
    ]
    assert [c["arguments"] for c in message["content"]] == [  # type: ignore[typeddict-item]
        {"path": "a.txt"},
        {"path": "b.txt"},
    ]
    assert message["stopReason"] == "toolUse"


async def test_a_block_start_the_server_repeats_is_taken_once(server: FakeServer) -> None:
    call = sse.tool_use_block(1, "toolu_r", "read", ['{"path":', ' "a.txt"}'])
    server.enqueue(
        sse.stream_response(
            sse.turn(sse.text_block(0, "Reading."), [call[0], *call], stop_reason="tool_use")
        )
    )
    events, message = await run(haiku(server), {**CONTEXT, "tools": TOOLS})
    assert_event_order(events)
    assert message["content"] == [
        {"type": "text", "text": "Reading."},
        {"type": "toolCall", "id": "toolu_r", "name": "read", "arguments": {"path": "a.txt"}},
    ]


async def test_tool_call_without_arguments_gets_an_empty_object(server: FakeServer) -> None:
    server.enqueue(
        sse.stream_response(
            sse.turn(sse.tool_use_block(0, "toolu_x", "now", []), stop_reason="tool_use")
        )
    )
    _, message = await run(haiku(server))
    assert message["content"][0]["arguments"] == {}  # type: ignore[typeddict-item]
    assert message["stopReason"] == "toolUse"


# -- usage, cost, stop reasons ---------------------------------------------------------------


async def test_usage_from_message_start_is_updated_by_message_delta_and_priced(
    server: FakeServer,
) -> None:
    frames = sse.turn(
        sse.text_block(0, "ok"),
        input_tokens=1000,
        output_tokens=1,
        cache_read=2000,
        cache_write=300,
        usage={"input_tokens": None, "output_tokens": 400, "cache_read_input_tokens": 2500},
    )
    server.enqueue(sse.stream_response(frames))
    model = haiku(server)
    _, message = await run(model)
    usage = message["usage"]
    assert (usage["input"], usage["output"], usage["cacheRead"], usage["cacheWrite"]) == (
        1000,
        400,
        2500,
        300,
    )
    assert usage["totalTokens"] == 1000 + 400 + 2500 + 300
    cost = usage["cost"]
    # claude-haiku-4-5: $1 in, $5 out, $0.10 cache read, $1.25 cache write per million
    assert cost["input"] == pytest.approx(1.0 * 1000 / 1e6)
    assert cost["output"] == pytest.approx(5.0 * 400 / 1e6)
    assert cost["cacheRead"] == pytest.approx(0.1 * 2500 / 1e6)
    assert cost["cacheWrite"] == pytest.approx(1.25 * 300 / 1e6)
    assert cost["total"] == pytest.approx(
        cost["input"] + cost["output"] + cost["cacheRead"] + cost["cacheWrite"]
    )


async def test_missing_cache_counts_in_message_start_count_as_zero(server: FakeServer) -> None:
    frames = sse.turn(
        sse.text_block(0, "ok"),
        input_tokens=10,
        cache_read=None,
        cache_write=None,
        usage={"output_tokens": 5, "input_tokens": 12},
    )
    server.enqueue(sse.stream_response(frames))
    _, message = await run(haiku(server))
    usage = message["usage"]
    assert (usage["input"], usage["output"], usage["cacheRead"], usage["cacheWrite"]) == (
        12,
        5,
        0,
        0,
    )
    assert usage["totalTokens"] == 17


@pytest.mark.parametrize(
    ("anthropic_reason", "stop_reason"),
    [
        ("end_turn", "stop"),
        ("max_tokens", "length"),
        ("tool_use", "toolUse"),
        ("pause_turn", "stop"),
        ("stop_sequence", "stop"),
    ],
)
async def test_stop_reasons_map_like_pi(
    server: FakeServer, anthropic_reason: str, stop_reason: str
) -> None:
    server.enqueue(
        sse.stream_response(sse.turn(sse.text_block(0, "x"), stop_reason=anthropic_reason))
    )
    events, message = await run(haiku(server))
    assert events[-1]["type"] == "done"
    assert events[-1]["reason"] == stop_reason
    assert message["stopReason"] == stop_reason


@pytest.mark.parametrize(
    ("anthropic_reason", "wording"),
    [
        ("refusal", "refused"),
        ("sensitive", "safety"),
        ("model_went_fishing", "Unhandled stop reason: model_went_fishing"),
    ],
)
async def test_refusal_sensitive_and_unknown_stop_reasons_end_in_an_error(
    server: FakeServer, anthropic_reason: str, wording: str
) -> None:
    server.enqueue(
        sse.stream_response(sse.turn(sse.text_block(0, "partial"), stop_reason=anthropic_reason))
    )
    events, message = await run(haiku(server))
    assert_event_order(events)
    assert events[-1]["type"] == "error"
    assert message["stopReason"] == "error"
    assert wording in message["errorMessage"]
    assert anthropic_reason in message["errorMessage"]
    assert message["content"] == [{"type": "text", "text": "partial"}]
    assert message["usage"]["output"] == 15


# -- HTTP errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "error_type", "text"),
    [
        (401, "authentication_error", "invalid x-api-key"),
        (500, "api_error", "Internal server error"),
        (529, "overloaded_error", "Overloaded"),
        (503, "overloaded_error", "Service temporarily overloaded"),
    ],
)
async def test_http_errors_end_in_an_error_event_with_the_providers_message(
    server: FakeServer, status: int, error_type: str, text: str
) -> None:
    server.enqueue(sse.error_response(status, error_type, text))
    events, message = await run(haiku(server))
    assert types_of(events) == ["error"]
    assert message["stopReason"] == "error"
    assert str(status) in message["errorMessage"]
    assert text in message["errorMessage"]
    assert error_type in message["errorMessage"]
    assert len(server.requests) == 1
    assert not is_context_overflow(message)


async def test_rate_limit_is_not_retried_by_the_sdk(server: FakeServer) -> None:
    server.enqueue(
        sse.error_response(
            429,
            "rate_limit_error",
            "Number of request tokens has exceeded your per-minute rate limit",
            headers={"retry-after": "1", "x-should-retry": "true"},
        ),
        sse.stream_response(sse.turn(sse.text_block(0, "should never be fetched"))),
    )
    events, message = await run(haiku(server))
    assert types_of(events) == ["error"]
    assert message["errorMessage"].startswith("429 ")
    assert "rate_limit_error" in message["errorMessage"]
    assert len(server.requests) == 1  # clawpi owns retry: the SDK must not try again
    assert not is_context_overflow(message)


async def test_prompt_too_long_is_a_context_overflow(server: FakeServer) -> None:
    server.enqueue(
        sse.error_response(
            400, "invalid_request_error", "prompt is too long: 213462 tokens > 200000 maximum"
        )
    )
    _, message = await run(haiku(server))
    assert message["stopReason"] == "error"
    assert "prompt is too long: 213462 tokens > 200000 maximum" in message["errorMessage"]
    assert is_context_overflow(message)


async def test_error_event_inside_the_stream_keeps_partial_content(server: FakeServer) -> None:
    frames = [
        sse.message_start(input_tokens=30),
        *sse.text_block(0, "Half an ans"),
        sse.error_frame("overloaded_error", "Overloaded"),
    ]
    server.enqueue(sse.stream_response(frames))
    events, message = await run(haiku(server))
    assert_event_order(events)
    assert events[-1]["type"] == "error"
    assert message["stopReason"] == "error"
    assert "overloaded_error" in message["errorMessage"]
    assert "Overloaded" in message["errorMessage"]
    assert message["content"] == [{"type": "text", "text": "Half an ans"}]
    assert message["usage"]["input"] == 30


# -- broken streams --------------------------------------------------------------------------


async def test_connection_dropped_mid_stream_keeps_partial_content(server: FakeServer) -> None:
    frames = sse.turn(sse.text_block(0, "one ", "two ", "three"))
    # message_start, ping, text start, two deltas, then the connection is cut
    server.enqueue(sse.stream_response(frames, drop_after=5))
    events, message = await run(haiku(server))
    assert_event_order(events)
    assert events[-1]["type"] == "error"
    assert message["stopReason"] == "error"
    assert message["content"] == [{"type": "text", "text": "one two "}]
    assert "Connection error" in message["errorMessage"]


async def test_stream_closed_cleanly_before_the_end_is_an_error(server: FakeServer) -> None:
    frames = [sse.message_start(), *sse.text_block(0, "incomplete")]
    server.enqueue(sse.stream_response(frames))
    events, message = await run(haiku(server))
    assert_event_order(events)
    assert message["stopReason"] == "error"
    assert "ended before the response was complete" in message["errorMessage"]
    assert message["content"] == [{"type": "text", "text": "incomplete"}]


async def test_abort_mid_stream_stops_promptly_and_keeps_partial_content(
    server: FakeServer,
) -> None:
    frames = sse.turn(sse.text_block(0, "streaming ", "forever"))
    # after the first text delta the server goes silent for 30 s
    server.enqueue(sse.stream_response(frames, stall_after=4, stall_seconds=30))
    controller = AbortController()
    result = stream(haiku(server), CONTEXT, api_key=API_KEY, signal=controller.signal)
    events: list[AssistantMessageEvent] = []

    async def consume() -> None:
        async for event in result:
            events.append(event)
            if event["type"] == "text_delta":
                controller.abort()

    await asyncio.wait_for(consume(), timeout=10)
    message = await result.result()
    assert_event_order(events)
    assert events[-1]["type"] == "error"
    assert events[-1]["reason"] == "aborted"
    assert message["stopReason"] == "aborted"
    assert message["content"] == [{"type": "text", "text": "streaming "}]


async def test_tool_call_whose_json_never_closes_is_a_clear_error(server: FakeServer) -> None:
    server.enqueue(
        sse.stream_response(
            sse.turn(
                sse.tool_use_block(0, "toolu_bad", "read", ['{"path": "a.t', "xt"]),
                stop_reason="tool_use",
            )
        )
    )
    events, message = await run(haiku(server), {**CONTEXT, "tools": TOOLS})
    assert_event_order(events)
    assert "toolcall_end" not in types_of(events)
    assert message["stopReason"] == "error"
    assert "'read'" in message["errorMessage"] and "toolu_bad" in message["errorMessage"]
    assert "not a complete JSON object" in message["errorMessage"]


async def test_stream_ending_inside_a_tool_call_is_a_clear_error(server: FakeServer) -> None:
    frames = [
        sse.message_start(),
        sse.block_start(0, {"type": "tool_use", "id": "toolu_cut", "name": "read", "input": {}}),
        sse.block_delta(0, {"type": "input_json_delta", "partial_json": '{"path": "x'}),
        sse.message_delta("tool_use"),
        sse.message_stop(),
    ]
    server.enqueue(sse.stream_response(frames))
    events, message = await run(haiku(server))
    assert_event_order(events)
    assert message["stopReason"] == "error"
    assert "never completed" in message["errorMessage"]
    assert "toolu_cut" in message["errorMessage"]


async def test_non_json_event_data_is_a_clear_error(server: FakeServer) -> None:
    frames = [
        sse.message_start(),
        *sse.text_block(0, "fine so far")[:2],
        b"event: content_block_delta\ndata: {this is not json\n\n",
        sse.message_delta(),
        sse.message_stop(),
    ]
    server.enqueue(sse.stream_response(frames))
    events, message = await run(haiku(server))
    assert_event_order(events)
    assert message["stopReason"] == "error"
    assert "not JSON" in message["errorMessage"]
    assert "{this is not json" in message["errorMessage"]
    assert message["content"] == [{"type": "text", "text": "fine so far"}]


async def test_unknown_blocks_and_deltas_are_skipped(server: FakeServer) -> None:
    frames = sse.turn(
        [
            sse.block_start(0, {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web"}),
            sse.block_delta(0, {"type": "input_json_delta", "partial_json": "{}"}),
            sse.block_stop(0),
        ],
        [
            sse.block_start(1, {"type": "text", "text": ""}),
            sse.block_delta(1, {"type": "citations_delta", "citation": {"type": "x"}}),
            sse.block_delta(1, {"type": "text_delta", "text": "cited"}),
            sse.block_stop(1),
        ],
    )
    server.enqueue(sse.stream_response(frames))
    events, message = await run(haiku(server))
    assert_event_order(events)
    assert message["content"] == [{"type": "text", "text": "cited"}]
    assert message["stopReason"] == "stop"


# -- message conversion ----------------------------------------------------------------------


def _history() -> list[Any]:
    other = {
        "api": "openai-responses",
        "provider": "openai",
        "model": "gpt-5",
        "usage": {},
        "stopReason": "toolUse",
        "timestamp": 2,
    }
    return [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in this picture?"},
                {"type": "text", "text": "   "},
                {"type": "image", "data": PNG, "mimeType": "image/png"},
            ],
            "timestamp": 1,
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "unsigned musing"},
                {"type": "text", "text": ""},
                {"type": "text", "text": "Let me look."},
                {
                    "type": "toolCall",
                    "id": "call_1|fc_abc/def",
                    "name": "read",
                    "arguments": {"path": "a.png"},
                },
                {"type": "toolCall", "id": "call_2", "name": "read", "arguments": {"path": "b"}},
                {"type": "toolCall", "id": "call_3", "name": "read", "arguments": {"path": "c"}},
            ],
            **other,
        },
        {
            "role": "toolResult",
            "toolCallId": "call_1|fc_abc/def",
            "toolName": "read",
            "content": [{"type": "image", "data": PNG, "mimeType": "image/png"}],
            "isError": False,
            "timestamp": 3,
        },
        {
            "role": "toolResult",
            "toolCallId": "call_2",
            "toolName": "read",
            "content": [{"type": "text", "text": "line 1"}, {"type": "text", "text": "line 2"}],
            "isError": False,
            "timestamp": 4,
        },
        {
            "role": "toolResult",
            "toolCallId": "call_3",
            "toolName": "read",
            "content": [{"type": "text", "text": "ENOENT: no such file"}],
            "isError": True,
            "timestamp": 5,
        },
        {"role": "user", "content": "Thanks\ud800!", "timestamp": 6},
    ]


async def test_history_is_converted_to_anthropic_messages(server: FakeServer) -> None:
    server.enqueue(sse.stream_response(sse.turn(sse.text_block(0, "ok"))))
    await run(haiku(server), {"messages": _history(), "tools": TOOLS})
    messages = server.requests[0].json()["messages"]
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    assert messages == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "What is in this picture?"}, image],
        },
        {
            "role": "assistant",
            "content": [
                # another model's thinking arrives as plain text; empty text is dropped
                {"type": "text", "text": "unsigned musing"},
                {"type": "text", "text": "Let me look."},
                {
                    "type": "tool_use",
                    "id": "call_1_fc_abc_def",
                    "name": "read",
                    "input": {"path": "a.png"},
                },
                {"type": "tool_use", "id": "call_2", "name": "read", "input": {"path": "b"}},
                {"type": "tool_use", "id": "call_3", "name": "read", "input": {"path": "c"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "call_1_fc_abc_def",
                    "content": [{"type": "text", "text": "(see attached image)"}, image],
                    "is_error": False,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "call_2",
                    "content": "line 1\nline 2",
                    "is_error": False,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "call_3",
                    "content": "ENOENT: no such file",
                    "is_error": True,
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Thanks!", "cache_control": {"type": "ephemeral"}}
            ],
        },
    ]


async def test_last_tool_result_carries_the_cache_marker(server: FakeServer) -> None:
    server.enqueue(sse.stream_response(sse.turn(sse.text_block(0, "ok"))))
    history = _history()[:-1]
    await run(haiku(server), {"messages": history})
    last = server.requests[0].json()["messages"][-1]
    assert [b.get("cache_control") for b in last["content"]] == [
        None,
        None,
        {"type": "ephemeral"},
    ]


async def test_same_model_unsigned_thinking_goes_back_as_text(server: FakeServer) -> None:
    server.enqueue(sse.stream_response(sse.turn(sse.text_block(0, "ok"))))
    model = haiku(server)
    assistant: Any = {
        "role": "assistant",
        "content": [{"type": "thinking", "thinking": "cut off by an abort"}],
        "api": model.api,
        "provider": model.provider,
        "model": model.id,
        "usage": {},
        "stopReason": "stop",
        "timestamp": 2,
    }
    context: Context = {
        "messages": [
            CONTEXT["messages"][0],
            assistant,
            {"role": "user", "content": "continue", "timestamp": 3},
        ]
    }
    await run(model, context)
    sent = server.requests[0].json()["messages"][1]
    assert sent == {
        "role": "assistant",
        "content": [{"type": "text", "text": "cut off by an abort"}],
    }


async def test_cache_retention_none_sends_no_cache_markers(server: FakeServer) -> None:
    server.enqueue(sse.stream_response(sse.turn(sse.text_block(0, "ok"))))
    await run(haiku(server), cache_retention="none")
    body = server.requests[0].json()
    assert body["system"] == [{"type": "text", "text": "You are terse."}]
    assert body["messages"] == [{"role": "user", "content": "Say hello"}]


def test_long_retention_asks_for_a_one_hour_cache_only_on_anthropics_api() -> None:
    model = get_model("anthropic", "claude-haiku-4-5")
    assert model is not None
    body = build_request(model, CONTEXT, cache_retention="long")
    assert body["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert body["messages"][-1]["content"][-1]["cache_control"] == {
        "type": "ephemeral",
        "ttl": "1h",
    }
    proxy = model.replace(base_url="https://gateway.example.com/anthropic")
    body = build_request(proxy, CONTEXT, cache_retention="long")
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}


def test_tool_call_ids_are_normalized_to_anthropics_alphabet() -> None:
    model = get_model("anthropic", "claude-haiku-4-5")
    assert model is not None
    source: Any = {}
    assert normalize_tool_call_id("call_1|fc:ab.c", model, source) == "call_1_fc_ab_c"
    assert len(normalize_tool_call_id("x" * 100, model, source)) == 64


def test_catalog_has_anthropic_models_with_prices() -> None:
    model = get_model("anthropic", "claude-opus-4-6")
    assert model is not None
    assert model.api == "anthropic-messages"
    assert model.base_url == "https://api.anthropic.com"
    assert model.reasoning and model.supports_images
    assert (model.cost.input, model.cost.output) == (5.0, 25.0)
    assert model.context_window == 1_000_000


async def test_blocks_left_open_by_the_server_are_closed_before_done(server: FakeServer) -> None:
    frames = [
        sse.message_start(),
        sse.block_start(0, {"type": "text", "text": ""}),
        sse.block_delta(0, {"type": "text_delta", "text": "never stopped"}),
        sse.message_delta("end_turn"),
        sse.message_stop(),
    ]
    server.enqueue(sse.stream_response(frames))
    events, message = await run(haiku(server))
    assert_event_order(events)
    assert types_of(events)[-2:] == ["text_end", "done"]
    assert message["content"] == [{"type": "text", "text": "never stopped"}]


async def test_copilot_claude_uses_bearer_auth_without_tool_streaming_beta(
    server: FakeServer,
) -> None:
    server.enqueue(sse.stream_response(sse.turn(sse.text_block(0, "ok"))))
    model = Model(
        id="claude-sonnet-4",
        api="anthropic-messages",
        provider="github-copilot",
        base_url=server.url,
        reasoning=True,
        max_tokens=16000,
    )
    await run(model, api_key="ghu_copilot_token")
    headers = server.requests[0].headers
    assert headers["authorization"] == "Bearer ghu_copilot_token"
    assert "x-api-key" not in headers
    assert headers["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    assert server.requests[0].json()["max_tokens"] == 16000


async def test_usage_counts_of_the_wrong_type_are_read_as_zero(server: FakeServer) -> None:
    frames = sse.turn(sse.text_block(0, "Hi."), usage={"output_tokens": "A"})
    frames[0] = sse.message_start(input_tokens=25, cache_read="A", cache_write=[3])  # type: ignore[arg-type]
    server.enqueue(sse.stream_response(frames))
    _, message = await run(haiku(server))
    usage = message["usage"]
    counts = [usage["input"], usage["output"], usage["cacheRead"], usage["cacheWrite"]]
    assert counts == [25, 0, 0, 0]
    assert usage["totalTokens"] == 25


async def test_fields_of_the_wrong_type_count_as_missing_and_the_rest_is_read(
    server: FakeServer,
) -> None:
    # the events reach the reader as the server's JSON: a field of another type than the
    # API's must not break the turn, only lose that field
    odd = [
        sse.frame({"type": "content_block_start", "index": "0", "content_block": {"type": "text"}}),
        sse.frame({"type": "content_block_start", "index": 5, "content_block": "text"}),
        sse.block_delta(0, {"type": ["text_delta"], "text": "x"}),
        sse.block_delta(0, {"type": "text_delta", "text": 42}),
        sse.frame({"type": "content_block_delta", "index": [0], "delta": {"type": "text_delta"}}),
        sse.frame({"type": "content_block_delta", "index": 0, "delta": "text_delta"}),
    ]
    text = [sse.block_start(0, {"type": "text", "text": ""}), odd[2], odd[3], odd[4], odd[5]]
    text += sse.text_block(0, "Hel", "lo")[1:]
    frames = sse.turn(odd[:2], text, stop_reason="end_turn")
    server.enqueue(sse.stream_response(frames))
    events, message = await run(haiku(server))
    assert_event_order(events)
    assert message["content"] == [{"type": "text", "text": "Hello"}]
    assert message["stopReason"] == "stop"
