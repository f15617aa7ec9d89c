"""The openai-completions provider end to end: the official `openai` SDK against a local server
that streams Chat Completions chunks as OpenAI documents them, through `clawpi.ai.stream`."""

from __future__ import annotations

from typing import Any

import pytest

from clawpi.ai import Model, ModelCost, is_context_overflow, stream
from clawpi.ai.types import AssistantMessageEvent, Context
from tests.fakes.events import assert_event_order, final, only_request, stream_aborting_after
from tests.fakes.http_server import FakeResponse, FakeServer
from tests.fakes.openai_sse import (
    chunk,
    completion_frames,
    completion_response,
    error_body,
    finish_chunk,
    reasoning_chunk,
    role_chunk,
    text_chunk,
    tool_call_chunk,
    tool_call_chunks,
    usage_chunk,
)

KEY = "sk-test-completions"
USER: Any = {"role": "user", "content": "What is in a.txt?", "timestamp": 1}
CONTEXT: Context = {"systemPrompt": "You are terse.", "messages": [USER]}
READ_TOOL: Any = {
    "name": "read",
    "description": "Read a file",
    "parameters": {
        "type": "object",
        "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["path"],
    },
}


def model_at(server: FakeServer, **changes: Any) -> Model:
    model = Model(
        id="test-model",
        api="openai-completions",
        provider="test-provider",
        base_url=f"{server.url}/v1",
        reasoning=True,
        input=("text", "image"),
        cost=ModelCost(input=2.0, output=8.0, cache_read=0.5),
        context_window=131_072,
        max_tokens=8192,
    )
    return model.replace(**changes) if changes else model


async def run(
    model: Model, context: Context = CONTEXT, **options: Any
) -> list[AssistantMessageEvent]:
    options.setdefault("api_key", KEY)
    return [event async for event in stream(model, context, **options)]


def types(events: list[AssistantMessageEvent]) -> list[str]:
    return [e["type"] for e in events]


def deltas(events: list[AssistantMessageEvent], kind: str) -> list[str]:
    return [e["delta"] for e in events if e["type"] == kind]  # type: ignore[typeddict-item]


# -- successful turns ------------------------------------------------------------------------


async def test_text_turn_streams_deltas_into_one_text_block(server: FakeServer) -> None:
    server.enqueue(
        completion_response(
            [
                role_chunk(),
                text_chunk("Hel"),
                text_chunk("lo "),
                text_chunk("there"),
                finish_chunk("stop"),
                usage_chunk(12, 3),
            ]
        )
    )
    events = await run(model_at(server))
    assert_event_order(events)
    assert types(events) == [
        "start",
        "text_start",
        "text_delta",
        "text_delta",
        "text_delta",
        "text_end",
        "done",
    ]
    assert deltas(events, "text_delta") == ["Hel", "lo ", "there"]
    end: Any = events[-2]
    assert end["content"] == "Hello there"
    message = final(events)
    assert message["stopReason"] == "stop"
    assert message["content"] == [{"type": "text", "text": "Hello there"}]
    assert (message["api"], message["provider"], message["model"]) == (
        "openai-completions",
        "test-provider",
        "test-model",
    )


async def test_request_goes_to_chat_completions_with_key_model_tokens_and_system_prompt(
    server: FakeServer,
) -> None:
    server.enqueue(completion_response([role_chunk(), text_chunk("ok"), finish_chunk("stop")]))
    await run(model_at(server, reasoning=False), max_tokens=1234, temperature=0.3)
    request = only_request(server)
    assert request.method == "POST"
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    body = request.json()
    assert body["model"] == "test-model"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["store"] is False
    assert body["max_completion_tokens"] == 1234
    assert body["temperature"] == 0.3
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is in a.txt?"},
    ]
    assert "tools" not in body
    assert "reasoning_effort" not in body


async def test_reasoning_model_gets_the_system_prompt_as_developer_role(
    server: FakeServer,
) -> None:
    server.enqueue(completion_response([role_chunk(), text_chunk("ok"), finish_chunk("stop")]))
    await run(model_at(server))
    assert only_request(server).json()["messages"][0] == {
        "role": "developer",
        "content": "You are terse.",
    }


async def test_max_tokens_defaults_to_the_model_limit_capped_at_32k(server: FakeServer) -> None:
    for _ in range(2):
        server.enqueue(completion_response([role_chunk(), text_chunk("ok"), finish_chunk("stop")]))
    await run(model_at(server, max_tokens=4096))
    await run(model_at(server, max_tokens=128_000))
    assert server.requests[0].json()["max_completion_tokens"] == 4096
    assert server.requests[1].json()["max_completion_tokens"] == 32_000


async def test_headers_from_model_and_options_are_sent_options_winning(
    server: FakeServer,
) -> None:
    server.enqueue(completion_response([role_chunk(), text_chunk("ok"), finish_chunk("stop")]))
    model = model_at(server, headers={"X-Title": "clawpi", "X-Route": "model"})
    await run(model, headers={"X-Route": "options", "X-Trace": "t-1"})
    headers = only_request(server).headers
    assert headers["x-title"] == "clawpi"
    assert headers["x-route"] == "options"
    assert headers["x-trace"] == "t-1"


async def test_on_payload_can_replace_the_request_body(server: FakeServer) -> None:
    server.enqueue(completion_response([role_chunk(), text_chunk("ok"), finish_chunk("stop")]))
    seen: list[dict[str, Any]] = []

    def on_payload(payload: dict[str, Any], model: Model) -> dict[str, Any]:
        seen.append(payload)
        return {**payload, "seed": 7, "model": "renamed-model"}

    await run(model_at(server), on_payload=on_payload)
    body = only_request(server).json()
    assert seen[0]["model"] == "test-model"
    assert body["model"] == "renamed-model"
    assert body["seed"] == 7
    assert body["messages"] == seen[0]["messages"]


async def test_thinking_is_signed_with_its_field_and_echoed_back_under_it(
    server: FakeServer,
) -> None:
    server.enqueue(
        completion_response(
            [
                role_chunk(),
                reasoning_chunk("Need to "),
                reasoning_chunk("read it."),
                text_chunk("It says hi."),
                finish_chunk("stop"),
                usage_chunk(20, 5, reasoning_tokens=7),
            ]
        )
    )
    model = model_at(server)
    events = await run(model, reasoning="low")
    assert_event_order(events)
    assert types(events) == [
        "start",
        "thinking_start",
        "thinking_delta",
        "thinking_delta",
        "thinking_end",
        "text_start",
        "text_delta",
        "text_end",
        "done",
    ]
    message = final(events)
    assert message["content"] == [
        {
            "type": "thinking",
            "thinking": "Need to read it.",
            "thinkingSignature": "reasoning_content",
        },
        {"type": "text", "text": "It says hi."},
    ]
    assert server.requests[0].json()["reasoning_effort"] == "low"

    server.enqueue(completion_response([role_chunk(), text_chunk("Sure."), finish_chunk("stop")]))
    follow_up: Any = {"role": "user", "content": "And then?", "timestamp": 3}
    await run(model, {"messages": [USER, message, follow_up]}, reasoning="low")
    sent = server.requests[1].json()["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": "It says hi.",
        "reasoning_content": "Need to read it.",
    }
    assert sent[2] == {"role": "user", "content": "And then?"}


@pytest.mark.parametrize("field", ["reasoning", "reasoning_text"])
async def test_thinking_in_other_reasoning_fields_keeps_that_field_name(
    server: FakeServer, field: str
) -> None:
    server.enqueue(
        completion_response(
            [role_chunk(), reasoning_chunk("hmm", field), text_chunk("ok"), finish_chunk("stop")]
        )
    )
    message = final(await run(model_at(server)))
    assert message["content"][0] == {
        "type": "thinking",
        "thinking": "hmm",
        "thinkingSignature": field,
    }


async def test_duplicate_reasoning_fields_are_not_doubled(server: FakeServer) -> None:
    both = chunk({"reasoning_content": "once", "reasoning": "once"})
    server.enqueue(completion_response([role_chunk(), both, finish_chunk("stop")]))
    message = final(await run(model_at(server)))
    assert message["content"] == [
        {"type": "thinking", "thinking": "once", "thinkingSignature": "reasoning_content"}
    ]


async def test_tool_call_arguments_stream_in_chunks_and_end_parsed(server: FakeServer) -> None:
    parts = ['{"pa', 'th": "sr', "c/a.t", 'xt", "lim', 'it": 20}']
    server.enqueue(
        completion_response(
            [
                role_chunk(),
                *tool_call_chunks(0, "call_abc123", "read", parts),
                finish_chunk("tool_calls"),
                usage_chunk(30, 12),
            ]
        )
    )
    events: list[AssistantMessageEvent] = []
    snapshots: list[dict[str, Any]] = []
    async for event in stream(model_at(server), {**CONTEXT, "tools": [READ_TOOL]}, api_key=KEY):
        events.append(event)
        if event["type"] == "toolcall_delta":
            snapshots.append(dict(event["partial"]["content"][0]["arguments"]))  # type: ignore[typeddict-item]
    assert_event_order(events)
    assert deltas(events, "toolcall_delta") == parts
    assert snapshots == [
        {},
        {"path": "sr"},
        {"path": "src/a.t"},
        {"path": "src/a.txt"},
        {"path": "src/a.txt", "limit": 20},
    ]
    end: Any = next(e for e in events if e["type"] == "toolcall_end")
    assert end["toolCall"] == {
        "type": "toolCall",
        "id": "call_abc123",
        "name": "read",
        "arguments": {"path": "src/a.txt", "limit": 20},
    }
    message = final(events)
    assert message["stopReason"] == "toolUse"
    tools = only_request(server).json()["tools"]
    assert tools == [
        {
            "type": "function",
            "function": {
                "name": "read",
                "description": "Read a file",
                "parameters": READ_TOOL["parameters"],
                "strict": False,
            },
        }
    ]


async def test_two_parallel_tool_calls_become_two_sequential_blocks(server: FakeServer) -> None:
    server.enqueue(
        completion_response(
            [
                role_chunk(),
                text_chunk("Reading both."),
                *tool_call_chunks(0, "call_1", "read", ['{"path":', ' "a.txt"}']),
                *tool_call_chunks(1, "call_2", "read", ['{"path": "b.txt"}']),
                finish_chunk("tool_calls"),
            ]
        )
    )
    events = await run(model_at(server), {**CONTEXT, "tools": [READ_TOOL]})
    assert_event_order(events)
    assert [t for t in types(events) if not t.endswith("delta")] == [
        "start",
        "text_start",
        "text_end",
        "toolcall_start",
        "toolcall_end",
        "toolcall_start",
        "toolcall_end",
        "done",
    ]
    message = final(events)
    assert message["content"][1:] == [
        {"type": "toolCall", "id": "call_1", "name": "read", "arguments": {"path": "a.txt"}},
        {"type": "toolCall", "id": "call_2", "name": "read", "arguments": {"path": "b.txt"}},
    ]
    assert message["stopReason"] == "toolUse"


async def test_calls_sharing_index_zero_are_split_by_their_ids(server: FakeServer) -> None:
    # some servers number every call 0 and tell them apart only by id
    server.enqueue(
        completion_response(
            [
                role_chunk(),
                tool_call_chunk(0, call_id="a1", name="read", arguments='{"path": "a"}'),
                tool_call_chunk(0, call_id="b2", name="read", arguments='{"path": "b"}'),
                finish_chunk("tool_calls"),
            ]
        )
    )
    message = final(await run(model_at(server), {**CONTEXT, "tools": [READ_TOOL]}))
    assert [(b["id"], b["arguments"]) for b in message["content"]] == [  # type: ignore[typeddict-item]
        ("a1", {"path": "a"}),
        ("b2", {"path": "b"}),
    ]


async def test_two_calls_sent_with_one_id_get_ids_of_their_own(server: FakeServer) -> None:
    # every API rejects a history answering two calls with one id, and both must be answered
    server.enqueue(
        completion_response(
            [
                role_chunk(),
                *tool_call_chunks(0, "call_1", "read", ['{"path": "a"}']),
                *tool_call_chunks(1, "call_1", "read", ['{"path": "b"}']),
                *tool_call_chunks(2, "call_1", "read", ['{"path": "c"}']),
                finish_chunk("tool_calls"),
            ]
        )
    )
    message = final(await run(model_at(server), {**CONTEXT, "tools": [READ_TOOL]}))
    assert [(b["id"], b["arguments"]) for b in message["content"]] == [  # type: ignore[typeddict-item]
        ("call_1", {"path": "a"}),
        ("call_1_2", {"path": "b"}),
        ("call_1_3", {"path": "c"}),
    ]


@pytest.mark.parametrize(
    "response",
    [
        FakeResponse.json_body(200, {"object": "chat.completion", "choices": []}),
        completion_response([]),  # nothing but [DONE]
    ],
)
async def test_a_stream_with_no_chunk_at_all_is_an_error_not_a_silent_reply(
    server: FakeServer, response: FakeResponse
) -> None:
    server.enqueue(response)
    message = final(await run(model_at(server)))
    assert message["stopReason"] == "error"
    assert "without a single completion chunk" in message["errorMessage"]  # type: ignore[typeddict-item]


async def test_tool_call_without_an_id_gets_one(server: FakeServer) -> None:
    server.enqueue(
        completion_response(
            [role_chunk(), tool_call_chunk(0, name="read", arguments="{}"), finish_chunk("stop")]
        )
    )
    message = final(await run(model_at(server)))
    call: Any = message["content"][0]
    assert call["id"].startswith("call_")
    assert len(call["id"]) > 10
    assert call["arguments"] == {}


async def test_usage_excludes_cached_input_and_cost_uses_model_prices(server: FakeServer) -> None:
    server.enqueue(
        completion_response(
            [
                role_chunk(),
                text_chunk("ok"),
                finish_chunk("stop"),
                usage_chunk(1000, 200, cached_tokens=400, reasoning_tokens=50),
            ]
        )
    )
    message = final(await run(model_at(server)))
    used = message["usage"]
    assert (used["input"], used["output"], used["cacheRead"], used["cacheWrite"]) == (
        600,
        250,
        400,
        0,
    )
    assert used["totalTokens"] == 600 + 250 + 400
    cost = used["cost"]
    assert cost["input"] == pytest.approx(600 * 2.0 / 1e6)
    assert cost["output"] == pytest.approx(250 * 8.0 / 1e6)
    assert cost["cacheRead"] == pytest.approx(400 * 0.5 / 1e6)
    assert cost["total"] == pytest.approx(cost["input"] + cost["output"] + cost["cacheRead"])


async def test_usage_on_the_choice_and_deepseek_cache_hits_are_read(server: FakeServer) -> None:
    raw = {"prompt_tokens": 100, "completion_tokens": 10, "prompt_cache_hit_tokens": 60}
    last = chunk({}, "stop")
    last["choices"][0]["usage"] = raw
    server.enqueue(completion_response([role_chunk(), text_chunk("ok"), last]))
    used = final(await run(model_at(server)))["usage"]
    assert (used["input"], used["output"], used["cacheRead"]) == (40, 10, 60)


@pytest.mark.parametrize(
    ("finish_reason", "stop_reason"),
    [
        ("stop", "stop"),
        ("end", "stop"),
        (None, "stop"),
        ("length", "length"),
        ("tool_calls", "toolUse"),
        ("function_call", "toolUse"),
    ],
)
async def test_finish_reasons_map_as_pi_maps_them(
    server: FakeServer, finish_reason: str | None, stop_reason: str
) -> None:
    server.enqueue(
        completion_response([role_chunk(), text_chunk("x"), finish_chunk(finish_reason)])
    )
    events = await run(model_at(server))
    assert_event_order(events)
    assert events[-1]["type"] == "done"
    assert final(events)["stopReason"] == stop_reason


async def test_content_filter_is_an_error_keeping_the_partial_text(server: FakeServer) -> None:
    server.enqueue(
        completion_response([role_chunk(), text_chunk("Once upon"), finish_chunk("content_filter")])
    )
    events = await run(model_at(server))
    assert_event_order(events)
    message = final(events)
    assert message["stopReason"] == "error"
    assert "content filter" in message["errorMessage"]
    assert message["content"] == [{"type": "text", "text": "Once upon"}]


async def test_unknown_finish_reason_is_an_error_naming_it(server: FakeServer) -> None:
    server.enqueue(
        completion_response(
            [role_chunk(), text_chunk("x"), finish_chunk("model_context_window_exceeded")]
        )
    )
    events = await run(model_at(server))
    assert_event_order(events)
    message = final(events)
    assert events[-1]["type"] == "error"
    assert message["errorMessage"] == "Unhandled stop reason: model_context_window_exceeded"
    assert is_context_overflow(message)  # z.ai's way of saying it


# -- HTTP errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "body", "headers", "expected"),
    [
        (
            401,
            error_body("Incorrect API key provided: sk-bad.", code="invalid_api_key"),
            {},
            "Incorrect API key",
        ),
        (
            429,
            error_body(
                "Rate limit reached for requests", type="requests", code="rate_limit_exceeded"
            ),
            {"retry-after": "7"},
            "Rate limit reached",
        ),
        (
            500,
            error_body("The server had an error", type="server_error"),
            {},
            "server had an error",
        ),
        (
            503,
            error_body("The engine is currently overloaded", type="server_error"),
            {},
            "overloaded",
        ),
        (529, {"error": {"message": "Overloaded", "type": "overloaded_error"}}, {}, "Overloaded"),
    ],
)
async def test_http_errors_end_in_an_error_event_and_are_not_retried(
    server: FakeServer, status: int, body: Any, headers: dict[str, str], expected: str
) -> None:
    server.enqueue(FakeResponse.json_body(status, body, headers))
    events = await run(model_at(server))
    assert types(events) == ["error"]
    message = final(events)
    assert message["stopReason"] == "error"
    assert message["errorMessage"].startswith(str(status))
    assert expected in message["errorMessage"]
    assert message["content"] == []
    assert len(server.requests) == 1  # the SDK's own retries are off: clawpi owns retry


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (  # OpenAI / OpenRouter
            400,
            error_body(
                "This model's maximum context length is 131072 tokens. However, your messages "
                "resulted in 140211 tokens. Please reduce the length of the messages.",
                code="context_length_exceeded",
            ),
        ),
        (  # Groq
            400,
            error_body(
                "Please reduce the length of the messages or completion.",
                code="context_length_exceeded",
            ),
        ),
        (  # llama.cpp server
            400,
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size, try increasing it",
                    "type": "exceed_context_size_error",
                }
            },
        ),
        (  # Mistral
            400,
            {
                "object": "error",
                "message": "Prompt contains 40012 tokens and 0 draft tokens, too large for model "
                "with 32768 maximum context length",
                "type": "invalid_request_message_error",
                "code": "3051",
            },
        ),
        (413, None),  # Cerebras: no body at all
    ],
)
async def test_context_overflow_errors_are_recognised(
    server: FakeServer, status: int, body: Any
) -> None:
    if body is None:
        server.enqueue(FakeResponse(status=status, body=b""))
    else:
        server.enqueue(FakeResponse.json_body(status, body))
    model = model_at(server)
    message = final(await run(model))
    assert message["stopReason"] == "error"
    assert message["errorMessage"].startswith(str(status))
    assert is_context_overflow(message, model.context_window)


async def test_rate_limit_is_not_taken_for_an_overflow(server: FakeServer) -> None:
    body = error_body("Rate limit reached: too many tokens per minute", code="rate_limit_exceeded")
    server.enqueue(FakeResponse.json_body(429, body, {"retry-after": "2"}))
    message = final(await run(model_at(server)))
    assert message["errorMessage"].startswith("429")


# -- API keys ----------------------------------------------------------------------------------


async def test_missing_key_for_a_remote_server_is_an_error_naming_the_variable() -> None:
    model = Model(
        id="llama-3.3-70b-versatile",
        api="openai-completions",
        provider="groq",
        base_url="https://api.groq.com/openai/v1",
    )
    events = [e async for e in stream(model, CONTEXT)]
    assert types(events) == ["error"]
    assert final(events)["errorMessage"] == ("No API key for provider: groq (set GROQ_API_KEY)")


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_local_server_without_a_key_gets_a_placeholder_key(
    server: FakeServer, host: str
) -> None:
    server.enqueue(completion_response([role_chunk(), text_chunk("ok"), finish_chunk("stop")]))
    model = model_at(server, provider="ollama", base_url=f"http://{host}:{server.port}/v1")
    events = [e async for e in stream(model, CONTEXT)]
    assert final(events)["stopReason"] == "stop"
    assert only_request(server).headers["authorization"] == "Bearer sk-no-key-required"


async def test_key_from_the_provider_variable_is_used(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GROQ_API_KEY", "gsk-from-env")
    server.enqueue(completion_response([role_chunk(), text_chunk("ok"), finish_chunk("stop")]))
    events = [e async for e in stream(model_at(server, provider="groq"), CONTEXT)]
    assert final(events)["stopReason"] == "stop"
    assert only_request(server).headers["authorization"] == "Bearer gsk-from-env"


# -- broken streams --------------------------------------------------------------------------


async def test_connection_dropped_mid_stream_keeps_the_partial_text(server: FakeServer) -> None:
    frames = completion_frames(
        [role_chunk(), text_chunk("Partial "), text_chunk("answer"), text_chunk(" never")]
    )
    server.enqueue(FakeResponse.sse(frames, drop_after=3))
    events = await run(model_at(server))
    assert_event_order(events)
    message = final(events)
    assert events[-1]["type"] == "error"
    assert message["stopReason"] == "error"
    assert message["content"][0]["text"] == "Partial answer"  # type: ignore[typeddict-item]
    assert message["errorMessage"]


async def test_abort_mid_stream_ends_promptly_as_aborted_with_partial_text(
    server: FakeServer,
) -> None:
    frames = completion_frames(
        [role_chunk(), text_chunk("First "), text_chunk("second "), text_chunk("third")]
    )
    server.enqueue(FakeResponse.sse(frames, stall_after=3, stall_seconds=30))
    # the server stalls for 30 s after "second "; the abort must end the stream at once
    events = await stream_aborting_after(
        model_at(server), CONTEXT, api_key=KEY, after_delta="second "
    )
    assert_event_order(events)
    message = final(events)
    assert events[-1]["type"] == "error"
    assert events[-1]["reason"] == "aborted"  # type: ignore[typeddict-item]
    assert message["stopReason"] == "aborted"
    assert message["content"][0]["text"] == "First second "  # type: ignore[typeddict-item]


async def test_tool_call_whose_json_never_closes_is_a_clear_error(server: FakeServer) -> None:
    server.enqueue(
        completion_response(
            [
                role_chunk(),
                *tool_call_chunks(0, "call_w", "write", ['{"path": "a.txt", ', '"content": "hal']),
                finish_chunk("tool_calls"),
                usage_chunk(50, 9),
            ]
        )
    )
    events = await run(model_at(server))
    assert_event_order(events)
    assert "toolcall_end" not in types(events)
    message = final(events)
    assert message["stopReason"] == "error"
    assert "'write'" in message["errorMessage"]
    assert "incomplete or invalid JSON" in message["errorMessage"]
    assert message["usage"]["output"] == 9  # usage after the broken call is still counted


async def test_non_json_sse_data_is_a_clear_error(server: FakeServer) -> None:
    server.enqueue(
        completion_response([role_chunk(), text_chunk("Hi"), "<html>Bad Gateway</html>"])
    )
    events = await run(model_at(server))
    assert_event_order(events)
    message = final(events)
    assert message["stopReason"] == "error"
    assert "not JSON" in message["errorMessage"]
    assert "<html>Bad Gateway</html>" in message["errorMessage"]
    assert message["content"] == [{"type": "text", "text": "Hi"}]


async def test_error_object_inside_the_stream_surfaces_its_message(server: FakeServer) -> None:
    openrouter_error = {
        "id": "gen-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "anthropic/claude-sonnet-4.6",
        "error": {
            "code": 502,
            "message": "Provider returned error",
            "metadata": {"raw": "upstream connect error", "provider_name": "Anthropic"},
        },
        "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
    }
    server.enqueue(completion_response([role_chunk(), text_chunk("Par"), openrouter_error]))
    events = await run(model_at(server))
    assert_event_order(events)
    message = final(events)
    assert message["stopReason"] == "error"
    assert message["errorMessage"] == "Provider returned error (code 502)\nupstream connect error"
    assert message["content"] == [{"type": "text", "text": "Par"}]


async def test_interleaved_tool_call_fragments_are_a_clear_error(server: FakeServer) -> None:
    server.enqueue(
        completion_response(
            [
                role_chunk(),
                tool_call_chunk(0, call_id="c1", name="read", arguments='{"path": "a"}'),
                tool_call_chunk(1, call_id="c2", name="read", arguments='{"path": "b"}'),
                tool_call_chunk(0, arguments='{"limit": 1}'),
                finish_chunk("tool_calls"),
            ]
        )
    )
    events = await run(model_at(server))
    assert_event_order(events)
    assert "out of order" in final(events)["errorMessage"]


async def test_stream_ending_without_done_marker_still_finishes(server: FakeServer) -> None:
    frames = completion_frames([role_chunk(), text_chunk("ok"), finish_chunk("stop")], done=False)
    server.enqueue(FakeResponse.sse(frames))
    events = await run(model_at(server))
    assert_event_order(events)
    assert final(events)["stopReason"] == "stop"


async def test_mistral_content_chunks_split_into_thinking_and_text(server: FakeServer) -> None:
    thinking = {"type": "thinking", "thinking": [{"type": "text", "text": "Let me see."}]}
    server.enqueue(
        completion_response(
            [
                role_chunk(),
                chunk({"content": [thinking]}),
                chunk({"content": [{"type": "text", "text": "Done."}]}),
                finish_chunk("stop"),
            ]
        )
    )
    events = await run(model_at(server))
    assert_event_order(events)
    assert final(events)["content"] == [
        {"type": "thinking", "thinking": "Let me see."},
        {"type": "text", "text": "Done."},
    ]


async def test_openrouter_encrypted_reasoning_rides_on_its_tool_call(server: FakeServer) -> None:
    detail = {"type": "reasoning.encrypted", "id": "call_1", "data": "ENC==", "format": "x"}
    server.enqueue(
        completion_response(
            [
                role_chunk(),
                *tool_call_chunks(0, "call_1", "read", ['{"path": "a"}']),
                chunk({"reasoning_details": [detail]}),
                finish_chunk("tool_calls"),
            ]
        )
    )
    model = model_at(server)
    message = final(await run(model))
    call: Any = message["content"][0]
    assert call["thoughtSignature"]
    result: Any = {
        "role": "toolResult",
        "toolCallId": "call_1",
        "toolName": "read",
        "content": [{"type": "text", "text": "hi"}],
        "isError": False,
        "timestamp": 2,
    }
    server.enqueue(completion_response([role_chunk(), text_chunk("ok"), finish_chunk("stop")]))
    await run(model, {"messages": [USER, message, result], "tools": [READ_TOOL]})
    sent = server.requests[1].json()["messages"]
    assert sent[1]["reasoning_details"] == [detail]


async def test_finish_chunk_without_delta_and_usage_chunk_without_choices(
    server: FakeServer,
) -> None:
    finish = chunk()
    finish["choices"] = [{"index": 0, "finish_reason": "length"}]
    bare_usage = {"id": "x", "object": "chat.completion.chunk", "usage": {"prompt_tokens": 5}}
    server.enqueue(completion_response([role_chunk(), text_chunk("cut"), finish, bare_usage]))
    events = await run(model_at(server))
    assert_event_order(events)
    message = final(events)
    assert message["stopReason"] == "length"
    assert message["usage"]["input"] == 5


async def test_refusal_text_is_kept_as_the_answer(server: FakeServer) -> None:
    refusal = chunk({"refusal": "I can't help with that."})
    server.enqueue(completion_response([role_chunk(), refusal, finish_chunk("stop")]))
    message = final(await run(model_at(server)))
    assert message["content"] == [{"type": "text", "text": "I can't help with that."}]


async def test_fields_of_the_wrong_type_count_as_missing_and_the_rest_is_read(
    server: FakeServer,
) -> None:
    # the chunks reach the reader as the server's JSON: a server that sends a field of another
    # type than the API's must not break the turn, only lose that field
    odd_call: Any = {"index": "0", "id": 7, "function": {"name": ["read"], "arguments": 5}}
    server.enqueue(
        completion_response(
            [
                role_chunk(),
                chunk(choices=False, usage=None) | {"choices": {"0": "not a list"}},
                chunk({"content": "Hel", "refusal": 3, "tool_calls": [odd_call, "x"]}),
                chunk({}) | {"choices": ["not a choice"]},
                chunk("not a delta"),  # type: ignore[arg-type]
                text_chunk("lo"),
                *tool_call_chunks(0, "call_1", "read", ['{"path":', ' "a.txt"}']),
                chunk({}, 42),  # type: ignore[arg-type]
                finish_chunk("tool_calls"),
                usage_chunk(5, 2),
            ]
        )
    )
    events = await run(model_at(server), {**CONTEXT, "tools": [READ_TOOL]})
    assert_event_order(events)
    message = final(events)
    assert message["stopReason"] == "toolUse"
    text, call = message["content"][0], message["content"][-1]
    assert text == {"type": "text", "text": "Hello"}
    assert call["type"] == "toolCall"
    assert (call["id"], call["name"], call["arguments"]) == ("call_1", "read", {"path": "a.txt"})
    assert message["usage"]["input"] == 5
