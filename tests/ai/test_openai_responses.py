"""The openai-responses provider end to end: the official `openai` SDK against a local server that
speaks the Responses API's SSE stream, through `clawpi.ai.stream`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from clawpi.ai import Model, get_model, is_context_overflow, stream
from clawpi.ai.types import AssistantMessageEvent, Context
from tests.fakes.events import assert_event_order, final, only_request, stream_aborting_after
from tests.fakes.http_server import FakeResponse, FakeServer, sse_frame
from tests.fakes.responses_sse import ResponsesStream, error_body, usage_json

KEY = "sk-test-responses"
USER: Any = {"role": "user", "content": "What is in a.txt?", "timestamp": 1}
CONTEXT: Context = {"systemPrompt": "You are terse.", "messages": [USER]}


def model_at(server: FakeServer, model_id: str = "gpt-5-mini", **changes: Any) -> Model:
    model = get_model("openai", model_id)
    assert model is not None
    return model.replace(base_url=f"{server.url}/v1", **changes)


async def run(
    model: Model, context: Context = CONTEXT, **options: Any
) -> list[AssistantMessageEvent]:
    options.setdefault("api_key", KEY)
    return [event async for event in stream(model, context, **options)]


# -- successful turns ------------------------------------------------------------------------


async def test_text_turn_streams_deltas_and_signs_the_block_with_the_message_id(
    server: FakeServer,
) -> None:
    server.enqueue(ResponsesStream().message(["Hel", "lo ", "there"]).completed().response())
    events = await run(model_at(server))
    assert_event_order(events)
    assert [e["type"] for e in events] == [
        "start",
        "text_start",
        "text_delta",
        "text_delta",
        "text_delta",
        "text_end",
        "done",
    ]
    assert [e["delta"] for e in events if e["type"] == "text_delta"] == ["Hel", "lo ", "there"]  # type: ignore[typeddict-item]
    message = final(events)
    assert message["stopReason"] == "stop"
    assert message["content"] == [
        {"type": "text", "text": "Hello there", "textSignature": "msg_68c1f0a2c4"}
    ]
    assert message["responseId"] == "resp_0a1b2c3d4e5f"
    assert message["api"] == "openai-responses"
    assert message["provider"] == "openai"
    assert message["model"] == "gpt-5-mini"


async def test_request_goes_to_responses_with_bearer_key_model_and_store_off(
    server: FakeServer,
) -> None:
    server.enqueue(ResponsesStream().message(["ok"]).completed().response())
    await run(model_at(server), max_tokens=1234, temperature=0.25)
    request = only_request(server)
    assert request.method == "POST"
    assert request.path == "/v1/responses"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    body = request.json()
    assert body["model"] == "gpt-5-mini"
    assert body["stream"] is True
    assert body["store"] is False
    assert body["max_output_tokens"] == 1234
    assert body["temperature"] == 0.25
    assert "prompt_cache_key" not in body


async def test_max_output_tokens_defaults_to_the_model_limit_capped_at_32k(
    server: FakeServer,
) -> None:
    server.enqueue(ResponsesStream().message(["a"]).completed().response())
    server.enqueue(ResponsesStream().message(["b"]).completed().response())
    await run(model_at(server, "gpt-5-mini"))
    await run(model_at(server, "gpt-4-turbo"))
    assert server.requests[0].json()["max_output_tokens"] == 32_000
    assert server.requests[1].json()["max_output_tokens"] == 4096


async def test_thinking_signature_is_the_reasoning_item_and_is_replayed_next_turn(
    server: FakeServer,
) -> None:
    first = (
        ResponsesStream()
        .reasoning([["Reading ", "the file"], ["Then answer"]], encrypted="gAAAA-secret==")
        .message(["It says hi."], phase="final_answer")
        .completed(usage_json(reasoning=5))
    )
    server.enqueue(first.response())
    model = model_at(server)
    events = await run(model, reasoning="medium")
    assert_event_order(events)
    message = final(events)
    thinking: Any = message["content"][0]
    assert thinking["thinking"] == "Reading the file\n\nThen answer"
    streamed = "".join(e["delta"] for e in events if e["type"] == "thinking_delta")  # type: ignore[typeddict-item]
    assert streamed == thinking["thinking"]
    reasoning_item = json.loads(thinking["thinkingSignature"])
    assert reasoning_item == first.output[0]
    assert reasoning_item["encrypted_content"] == "gAAAA-secret=="
    text: Any = message["content"][1]
    assert json.loads(text["textSignature"]) == {
        "v": 1,
        "id": "msg_68c1f0a2c4",
        "phase": "final_answer",
    }
    body = server.requests[0].json()
    assert body["reasoning"] == {"effort": "medium", "summary": "auto"}
    assert body["include"] == ["reasoning.encrypted_content"]

    server.enqueue(ResponsesStream().message(["Sure."]).completed().response())
    follow_up: Any = {"role": "user", "content": "And then?", "timestamp": 3}
    await run(model, {"messages": [USER, message, follow_up]}, reasoning="medium")
    replayed = server.requests[1].json()["input"]
    assert replayed[1] == first.output[0]  # verbatim, encrypted content included
    assert replayed[2] == {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "It says hi.", "annotations": []}],
        "status": "completed",
        "id": "msg_68c1f0a2c4",
        "phase": "final_answer",
    }
    assert replayed[3] == {"role": "user", "content": [{"type": "input_text", "text": "And then?"}]}


async def test_tool_call_arguments_stream_in_chunks_and_end_parsed(server: FakeServer) -> None:
    chunks = ['{"pa', 'th": "sr', "c/a.t", 'xt", "lim', 'it": 20}']
    server.enqueue(
        ResponsesStream().function_call("read", chunks, call_id="call_X1").completed().response()
    )
    events: list[AssistantMessageEvent] = []
    snapshots: list[dict[str, Any]] = []
    async for event in stream(model_at(server), {**CONTEXT, "tools": [READ_TOOL]}, api_key=KEY):
        events.append(event)
        if event["type"] == "toolcall_delta":
            snapshots.append(dict(event["partial"]["content"][0]["arguments"]))  # type: ignore[typeddict-item]
    assert_event_order(events)
    deltas = [e["delta"] for e in events if e["type"] == "toolcall_delta"]  # type: ignore[typeddict-item]
    assert deltas == chunks
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
        "id": "call_X1|fc_68c1f0a2d5",
        "name": "read",
        "arguments": {"path": "src/a.txt", "limit": 20},
    }
    assert final(events)["stopReason"] == "toolUse"


async def test_two_parallel_tool_calls_become_two_blocks(server: FakeServer) -> None:
    sse = (
        ResponsesStream()
        .function_call("read", ['{"path":', '"a.txt"}'], call_id="call_1", item_id="fc_1")
        .function_call("read", ['{"path":', '"b.txt"}'], call_id="call_2", item_id="fc_2")
        .completed()
    )
    server.enqueue(sse.response())
    events = await run(model_at(server), {**CONTEXT, "tools": [READ_TOOL]})
    assert_event_order(events)
    message = final(events)
    assert message["stopReason"] == "toolUse"
    assert [(b["id"], b["arguments"]) for b in message["content"]] == [  # type: ignore[typeddict-item]
        ("call_1|fc_1", {"path": "a.txt"}),
        ("call_2|fc_2", {"path": "b.txt"}),
    ]
    ends = [e["contentIndex"] for e in events if e["type"] == "toolcall_end"]  # type: ignore[typeddict-item]
    assert ends == [0, 1]


async def test_an_item_the_server_announces_twice_is_taken_once(server: FakeServer) -> None:
    frames = (
        ResponsesStream()
        .message(["Reading."])
        .function_call("read", ['{"path": "a.txt"}'], call_id="call_1", item_id="fc_1")
        .completed()
        .frames()
    )
    added = [i for i, f in enumerate(frames) if b"output_item.added" in f]
    for index in reversed(added):  # each item's "added" event twice, in a row
        frames.insert(index, frames[index])
    frames.insert(len(frames) - 1, frames[added[0] + 1])  # and the message's once more, late
    server.enqueue(FakeResponse.sse(frames))
    events = await run(model_at(server), {**CONTEXT, "tools": [READ_TOOL]})
    assert_event_order(events)
    message = final(events)
    assert message["content"] == [
        {"type": "text", "text": "Reading.", "textSignature": "msg_68c1f0a2c4"},
        {"type": "toolCall", "id": "call_1|fc_1", "name": "read", "arguments": {"path": "a.txt"}},
    ]


async def test_two_items_with_one_call_id_get_call_ids_of_their_own(server: FakeServer) -> None:
    sse = (
        ResponsesStream()
        .function_call("read", ['{"path": "a"}'], call_id="call_1", item_id="fc_1")
        .function_call("read", ['{"path": "b"}'], call_id="call_1", item_id="fc_2")
        .completed()
    )
    server.enqueue(sse.response())
    message = final(await run(model_at(server), {**CONTEXT, "tools": [READ_TOOL]}))
    # the suffix goes on the call id: that is what the result answers next turn
    assert [b["id"] for b in message["content"]] == ["call_1|fc_1", "call_1_2|fc_2"]  # type: ignore[typeddict-item]


async def test_usage_counts_of_the_wrong_type_are_read_as_zero(server: FakeServer) -> None:
    usage = {
        "input_tokens": 40,
        "input_tokens_details": {"cached_tokens": "many"},
        "output_tokens": [7],
        "total_tokens": None,
    }
    server.enqueue(ResponsesStream().message(["Hi."]).completed(usage).response())
    message = final(await run(model_at(server)))
    counts = message["usage"]
    assert [counts["input"], counts["output"], counts["cacheRead"]] == [40, 0, 0]
    assert counts["totalTokens"] == 0


async def test_usage_excludes_cached_input_and_cost_uses_model_prices(server: FakeServer) -> None:
    usage = usage_json(input_tokens=1_000_000, output_tokens=200_000, cached=400_000)
    server.enqueue(ResponsesStream().message(["ok"]).completed(usage).response())
    model = model_at(server, "gpt-4.1")  # $2 in, $8 out, $0.5 cached per million
    message = final(await run(model))
    assert message["usage"]["input"] == 600_000
    assert message["usage"]["cacheRead"] == 400_000
    assert message["usage"]["output"] == 200_000
    assert message["usage"]["cacheWrite"] == 0
    assert message["usage"]["totalTokens"] == 1_200_000
    cost = message["usage"]["cost"]
    assert cost["input"] == pytest.approx(1.2)
    assert cost["output"] == pytest.approx(1.6)
    assert cost["cacheRead"] == pytest.approx(0.2)
    assert cost["total"] == pytest.approx(3.0)


async def test_flex_service_tier_halves_the_cost(server: FakeServer) -> None:
    usage = usage_json(input_tokens=1_000_000, output_tokens=0)
    server.enqueue(
        ResponsesStream().message(["ok"]).completed(usage, service_tier="flex").response()
    )
    message = final(await run(model_at(server, "gpt-4.1"), extra={"service_tier": "flex"}))
    assert server.requests[0].json()["service_tier"] == "flex"
    assert message["usage"]["cost"]["total"] == pytest.approx(1.0)


async def test_refusal_streams_as_text(server: FakeServer) -> None:
    sse = ResponsesStream()
    item = {
        "id": "msg_r",
        "type": "message",
        "status": "in_progress",
        "role": "assistant",
        "content": [],
    }
    sse.emit("response.output_item.added", output_index=0, item=item)
    part = {"type": "refusal", "refusal": ""}
    sse.emit(
        "response.content_part.added", item_id="msg_r", output_index=0, content_index=0, part=part
    )
    for chunk in ("I can't ", "help with that."):
        sse.emit(
            "response.refusal.delta", item_id="msg_r", output_index=0, content_index=0, delta=chunk
        )
    done_part = {"type": "refusal", "refusal": "I can't help with that."}
    sse.emit(
        "response.output_item.done",
        output_index=0,
        item={**item, "status": "completed", "content": [done_part]},
    )
    server.enqueue(sse.completed().response())
    events = await run(model_at(server))
    assert_event_order(events)
    message = final(events)
    assert message["stopReason"] == "stop"
    assert message["content"] == [
        {"type": "text", "text": "I can't help with that.", "textSignature": "msg_r"}
    ]


async def test_raw_reasoning_text_from_compatible_servers_becomes_thinking(
    server: FakeServer,
) -> None:
    sse = ResponsesStream(model="gpt-oss-120b")
    item = {"id": "rs_oss", "type": "reasoning", "summary": [], "content": []}
    sse.emit("response.output_item.added", output_index=0, item=item)
    for chunk in ("The user ", "wants a file."):
        sse.emit(
            "response.reasoning_text.delta",
            item_id="rs_oss",
            output_index=0,
            content_index=0,
            delta=chunk,
        )
    done_item = {**item, "content": [{"type": "reasoning_text", "text": "The user wants a file."}]}
    sse.emit("response.output_item.done", output_index=0, item=done_item)
    sse.message(["Reading."], item_id="msg_oss")
    server.enqueue(sse.completed().response())
    events = await run(model_at(server), reasoning="low")
    assert_event_order(events)
    thinking: Any = final(events)["content"][0]
    assert thinking["thinking"] == "The user wants a file."
    assert json.loads(thinking["thinkingSignature"]) == done_item


# -- stop reasons ----------------------------------------------------------------------------


async def test_incomplete_for_max_output_tokens_is_length(server: FakeServer) -> None:
    server.enqueue(
        ResponsesStream().message(["cut sh"], done=False).incomplete("max_output_tokens").response()
    )
    events = await run(model_at(server))
    assert_event_order(events)
    assert events[-1]["type"] == "done"
    message = final(events)
    assert message["stopReason"] == "length"
    assert message["content"][0]["text"] == "cut sh"  # type: ignore[typeddict-item]
    assert message["usage"]["output"] == 7


async def test_incomplete_for_content_filter_is_an_error(server: FakeServer) -> None:
    server.enqueue(ResponsesStream().message(["I"]).incomplete("content_filter").response())
    message = final(await run(model_at(server)))
    assert message["stopReason"] == "error"
    assert "content_filter" in message["errorMessage"]


async def test_failed_response_ends_in_error_with_the_server_message(server: FakeServer) -> None:
    sse = ResponsesStream().message(["Par"], done=False).failed("server_error", "The model crashed")
    server.enqueue(sse.response())
    events = await run(model_at(server))
    assert_event_order(events)
    message = final(events)
    assert events[-1]["type"] == "error"
    assert message["stopReason"] == "error"
    assert message["errorMessage"] == "server_error: The model crashed"
    assert message["content"][0]["text"] == "Par"  # type: ignore[typeddict-item]


async def test_cancelled_status_is_an_error(server: FakeServer) -> None:
    sse = ResponsesStream().message(["x"])
    sse.emit("response.completed", response={**_completed(sse), "status": "cancelled"})
    server.enqueue(sse.response())
    message = final(await run(model_at(server)))
    assert message["stopReason"] == "error"
    assert "cancelled" in message["errorMessage"]


async def test_unknown_response_status_is_an_error_naming_it(server: FakeServer) -> None:
    sse = ResponsesStream().message(["x"])
    sse.emit("response.completed", response={**_completed(sse), "status": "paused_for_tea"})
    server.enqueue(sse.response())
    events = await run(model_at(server))
    assert_event_order(events)
    message = final(events)
    assert message["stopReason"] == "error"
    assert "paused_for_tea" in message["errorMessage"]
    assert message["content"][0]["text"] == "x"  # type: ignore[typeddict-item]


async def test_error_event_mid_stream_ends_in_error_with_its_code_and_message(
    server: FakeServer,
) -> None:
    sse = ResponsesStream().message(["Hi"], done=False).error("rate_limit_exceeded", "Slow down")
    server.enqueue(sse.response())
    events = await run(model_at(server))
    assert_event_order(events)
    message = final(events)
    assert message["stopReason"] == "error"
    assert message["errorMessage"] == "Error Code rate_limit_exceeded: Slow down"
    assert message["content"][0]["text"] == "Hi"  # type: ignore[typeddict-item]


def _completed(sse: ResponsesStream) -> dict[str, Any]:
    sse.completed()
    event = sse.events.pop()
    return dict(event["response"])


# -- HTTP errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "body", "headers", "expected"),
    [
        (
            401,
            error_body(
                "Incorrect API key provided: sk-test.", "invalid_request_error", "invalid_api_key"
            ),
            {},
            "Incorrect API key provided",
        ),
        (
            429,
            error_body("Rate limit reached for gpt-5-mini.", "requests", "rate_limit_exceeded"),
            {"retry-after": "1", "x-ratelimit-remaining-requests": "0"},
            "Rate limit reached",
        ),
        (
            500,
            error_body(
                "The server had an error while processing your request.", "server_error", None
            ),
            {},
            "server had an error",
        ),
        (
            503,
            error_body(
                "The engine is currently overloaded, please try again later.", "server_error", None
            ),
            {},
            "overloaded",
        ),
        (
            529,
            error_body("Overloaded", "overloaded_error", None),
            {},
            "Overloaded",
        ),
    ],
)
async def test_http_errors_end_in_an_error_event_and_are_not_retried(
    server: FakeServer, status: int, body: Any, headers: dict[str, str], expected: str
) -> None:
    server.enqueue(FakeResponse.json_body(status, body, headers))
    events = await run(model_at(server))
    assert [e["type"] for e in events] == ["error"]
    message = final(events)
    assert message["stopReason"] == "error"
    assert message["errorMessage"].startswith(str(status))
    assert expected in message["errorMessage"]
    assert message["content"] == []
    assert len(server.requests) == 1  # the SDK's own retries are off: clawpi owns retry


async def test_context_overflow_400_is_recognised(server: FakeServer) -> None:
    body = error_body(
        "Your input exceeds the context window of this model. Please adjust your input and try again.",
        "invalid_request_error",
        "context_length_exceeded",
        "input",
    )
    server.enqueue(FakeResponse.json_body(400, body))
    model = model_at(server)
    message = final(await run(model))
    assert message["stopReason"] == "error"
    assert "exceeds the context window" in message["errorMessage"]
    assert is_context_overflow(message, model.context_window)


async def test_missing_api_key_is_an_error_naming_the_variable(server: FakeServer) -> None:
    events = [e async for e in stream(model_at(server), CONTEXT)]
    assert [e["type"] for e in events] == ["error"]
    assert "OPENAI_API_KEY" in final(events)["errorMessage"]
    assert server.requests == []


async def test_key_from_the_environment_is_used(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    server.enqueue(ResponsesStream().message(["ok"]).completed().response())
    events = [e async for e in stream(model_at(server), CONTEXT)]
    assert final(events)["stopReason"] == "stop"
    assert only_request(server).headers["authorization"] == "Bearer sk-from-env"


# -- broken streams --------------------------------------------------------------------------


async def test_connection_dropped_mid_stream_keeps_the_partial_text(server: FakeServer) -> None:
    sse = ResponsesStream().message(["Partial ", "answer", " never finished"]).completed()
    frames = sse.frames()
    cut = next(i for i, f in enumerate(frames) if b'"answer"' in f) + 1
    server.enqueue(FakeResponse.sse(frames, drop_after=cut))
    events = await run(model_at(server))
    assert_event_order(events)
    message = final(events)
    assert events[-1]["type"] == "error"
    assert message["stopReason"] == "error"
    assert message["content"][0]["text"] == "Partial answer"  # type: ignore[typeddict-item]
    assert "Connection error" in message["errorMessage"]


async def test_stream_that_ends_without_a_final_event_is_an_error(server: FakeServer) -> None:
    sse = ResponsesStream().message(["Hello"])  # no response.completed
    server.enqueue(sse.response())
    events = await run(model_at(server))
    assert_event_order(events)
    message = final(events)
    assert message["stopReason"] == "error"
    assert "response.completed" in message["errorMessage"]
    assert message["content"][0]["text"] == "Hello"  # type: ignore[typeddict-item]


async def test_abort_mid_stream_ends_promptly_as_aborted_with_partial_text(
    server: FakeServer,
) -> None:
    sse = ResponsesStream().message(["First ", "second ", "third"]).completed()
    frames = sse.frames()
    stall = next(i for i, f in enumerate(frames) if b'"second "' in f) + 1
    server.enqueue(FakeResponse.sse(frames, stall_after=stall, stall_seconds=30))
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
    sse = ResponsesStream().function_call("write", ['{"path": "a.txt", "content": "hal'])
    server.enqueue(sse.completed().response())
    events = await run(model_at(server))
    assert_event_order(events)
    message = final(events)
    assert message["stopReason"] == "error"
    assert "write" in message["errorMessage"]
    assert "not a complete JSON object" in message["errorMessage"]
    # the partial arguments stay visible, but the call is never offered as complete
    assert message["content"][0]["arguments"] == {"path": "a.txt", "content": "hal"}  # type: ignore[typeddict-item]
    assert not any(e["type"] == "toolcall_end" for e in events)


async def test_tool_call_cut_off_before_its_item_is_done_is_a_clear_error(
    server: FakeServer,
) -> None:
    sse = ResponsesStream().function_call("write", ['{"path": "a.t'], done=False)
    server.enqueue(sse.incomplete("max_output_tokens").response())
    message = final(await run(model_at(server)))
    assert message["stopReason"] == "error"
    assert "not a complete JSON object" in message["errorMessage"]


async def test_non_json_sse_data_is_a_clear_error(server: FakeServer) -> None:
    frames = ResponsesStream().message(["Hi"], done=False).frames()
    frames.append(sse_frame("this is not json", event="response.output_text.delta"))
    server.enqueue(FakeResponse.sse(frames))
    events = await run(model_at(server))
    assert_event_order(events)
    message = final(events)
    assert message["stopReason"] == "error"
    assert "not JSON" in message["errorMessage"]
    assert "this is not json" in message["errorMessage"]
    assert message["content"][0]["text"] == "Hi"  # type: ignore[typeddict-item]


async def test_event_of_the_wrong_shape_is_a_clear_error(server: FakeServer) -> None:
    frames = ResponsesStream().message(["Hi"], done=False).frames()
    frames.append(sse_frame("[1, 2, 3]"))
    server.enqueue(FakeResponse.sse(frames))
    message = final(await run(model_at(server)))
    assert message["stopReason"] == "error"
    assert "malformed server event" in message["errorMessage"]


async def test_bare_error_object_in_the_stream_ends_in_error_with_its_message(
    server: FakeServer,
) -> None:
    frames = ResponsesStream().message(["Hi"], done=False).frames()
    frames.append(sse_frame({"error": {"message": "upstream timed out", "type": "server_error"}}))
    server.enqueue(FakeResponse.sse(frames))
    message = final(await run(model_at(server)))
    assert message["stopReason"] == "error"
    assert message["errorMessage"] == "upstream timed out"


async def test_delta_without_its_fields_is_a_clear_error(server: FakeServer) -> None:
    frames = ResponsesStream().message(["Hi"], done=False).frames()
    frames.append(sse_frame({"type": "response.output_text.delta", "sequence_number": 9}))
    server.enqueue(FakeResponse.sse(frames))
    message = final(await run(model_at(server)))
    assert message["stopReason"] == "error"
    assert "'delta'" in message["errorMessage"]
    assert "response.output_text.delta" in message["errorMessage"]
    assert message["content"][0]["text"] == "Hi"  # type: ignore[typeddict-item]


async def test_a_200_that_is_not_an_event_stream_is_a_clear_error(server: FakeServer) -> None:
    server.enqueue(FakeResponse.json_body(200, {"id": "resp_1", "output": []}))
    message = final(await run(model_at(server)))
    assert message["stopReason"] == "error"
    assert "text/event-stream" in message["errorMessage"]


async def test_done_marker_after_completion_is_tolerated(server: FakeServer) -> None:
    frames = ResponsesStream().message(["Hi"]).completed().frames()
    frames.append(sse_frame("[DONE]"))
    server.enqueue(FakeResponse.sse(frames))
    message = final(await run(model_at(server)))
    assert message["stopReason"] == "stop"
    assert message["content"][0]["text"] == "Hi"  # type: ignore[typeddict-item]


async def test_done_marker_without_completion_is_an_error(server: FakeServer) -> None:
    frames = ResponsesStream().message(["Hi"]).frames()
    frames.append(sse_frame("[DONE]"))
    server.enqueue(FakeResponse.sse(frames))
    message = final(await run(model_at(server)))
    assert message["stopReason"] == "error"
    assert "response.completed" in message["errorMessage"]


async def test_unknown_event_types_are_ignored(server: FakeServer) -> None:
    sse = ResponsesStream().message(["Hi"])
    sse.emit("response.some_future_event", detail={"x": 1})
    server.enqueue(sse.completed().response())
    message = final(await run(model_at(server)))
    assert message["stopReason"] == "stop"
    assert message["content"] == [{"type": "text", "text": "Hi", "textSignature": "msg_68c1f0a2c4"}]


READ_TOOL: Any = {
    "name": "read",
    "description": "Read a file",
    "parameters": {
        "type": "object",
        "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["path"],
    },
}
