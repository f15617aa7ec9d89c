"""The google-generative-ai provider: the google-genai SDK against a fake Gemini server."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import pytest

from clawpi.ai import AbortController, Model, get_model, is_context_overflow, stream
from clawpi.ai.stream import StreamOptions
from clawpi.ai.types import AssistantMessageEvent, Context
from tests.fakes import gemini_sse as g
from tests.fakes.events import assert_event_order, final
from tests.fakes.http_server import FakeResponse, FakeServer

PATH = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
CONTEXT: Context = {
    "systemPrompt": "You are terse.",
    "messages": [{"role": "user", "content": "Hi", "timestamp": 1}],
}


def gemini(server: FakeServer, model_id: str = "gemini-2.5-flash", **changes: Any) -> Model:
    model = get_model("google", model_id)
    assert model is not None
    return model.replace(base_url=server.url + "/v1beta", **changes)


async def collect(
    model: Model, context: Context = CONTEXT, **options: Any
) -> list[AssistantMessageEvent]:
    options.setdefault("api_key", "test-key")
    return [event async for event in stream(model, context, StreamOptions(**options))]


# -- answers ---------------------------------------------------------------------------------


async def test_text_streams_as_one_block_and_request_hits_the_gemini_endpoint(
    server: FakeServer,
) -> None:
    server.enqueue(g.text_stream("Hel", "lo ", "there"))
    events = await collect(gemini(server))
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
    message = final(events)
    assert message["content"] == [{"type": "text", "text": "Hello there"}]
    assert message["stopReason"] == "stop"
    assert message["api"] == "google-generative-ai"
    assert message["provider"] == "google"
    assert message["model"] == "gemini-2.5-flash"
    [request] = server.requests
    assert request.method == "POST"
    assert request.path == PATH
    assert request.headers["x-goog-api-key"] == "test-key"


async def test_bare_host_base_url_gets_the_default_api_version(server: FakeServer) -> None:
    server.enqueue(g.text_stream("ok"))
    model = gemini(server).replace(base_url=server.url)
    message = final(await collect(model))
    assert message["content"][0] == {"type": "text", "text": "ok"}
    assert server.requests[0].path == PATH


async def test_api_key_comes_from_gemini_api_key_env(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "env-key")
    server.enqueue(g.text_stream("ok"))
    events = [e async for e in stream(gemini(server), CONTEXT)]
    assert final(events)["stopReason"] == "stop"
    assert server.requests[0].headers["x-goog-api-key"] == "env-key"


async def test_missing_key_is_an_error_event_naming_the_variable(server: FakeServer) -> None:
    events = [e async for e in stream(gemini(server), CONTEXT)]
    assert [e["type"] for e in events] == ["error"]
    assert "GEMINI_API_KEY" in final(events)["errorMessage"]  # type: ignore[typeddict-item]
    assert server.requests == []


async def test_thinking_then_text_keeps_signatures_on_their_blocks(server: FakeServer) -> None:
    thought_sig = g.signature("thought")
    text_sig = g.signature("text")
    server.enqueue(
        g.stream(
            g.chunk(g.thought("Let me ", thought_sig)),
            g.chunk(g.thought("think.")),  # no signature: the earlier one is kept
            g.chunk(g.text("Answer", text_sig)),
            g.chunk(g.text(" done."), finish_reason="STOP", usage=g.usage(12, 4, thoughts=30)),
        )
    )
    events = await collect(gemini(server), reasoning="medium")
    assert_event_order(events)
    assert [e["type"] for e in events] == [
        "start",
        "thinking_start",
        "thinking_delta",
        "thinking_delta",
        "thinking_end",
        "text_start",
        "text_delta",
        "text_delta",
        "text_end",
        "done",
    ]
    message = final(events)
    assert message["content"] == [
        {"type": "thinking", "thinking": "Let me think.", "thinkingSignature": thought_sig},
        {"type": "text", "text": "Answer done.", "textSignature": text_sig},
    ]
    assert events[4]["content"] == "Let me think."  # type: ignore[typeddict-item]


async def test_a_later_non_empty_signature_replaces_the_earlier_one(server: FakeServer) -> None:
    first, second = g.signature("first"), g.signature("second")
    server.enqueue(
        g.stream(
            g.chunk(g.thought("a", first)),
            g.chunk(g.thought("b", "")),
            g.chunk(g.thought("c", second), finish_reason="STOP"),
        )
    )
    message = final(await collect(gemini(server), reasoning="low"))
    assert message["content"][0]["thinkingSignature"] == second  # type: ignore[typeddict-item]


async def test_signatures_round_trip_into_the_next_request(server: FakeServer) -> None:
    thought_sig, call_sig, text_sig = g.signature("t"), g.signature("c"), g.signature("x")
    server.enqueue(
        g.stream(
            g.chunk(g.thought("Need the file.", thought_sig)),
            g.chunk(g.function_call("read", {"path": "a.txt"}, sig=call_sig), finish_reason="STOP"),
        ),
        g.stream(g.chunk(g.text("It says hi.", text_sig), finish_reason="STOP")),
        g.text_stream("ok"),
    )
    model = gemini(server)
    first = final(await collect(model, reasoning="high"))
    assert first["stopReason"] == "toolUse"
    call: Any = first["content"][1]
    assert call["thoughtSignature"] == call_sig
    history: Context = {
        "messages": [
            *CONTEXT["messages"],
            first,
            {
                "role": "toolResult",
                "toolCallId": call["id"],
                "toolName": "read",
                "content": [{"type": "text", "text": "hi"}],
                "isError": False,
                "timestamp": 2,
            },
        ]
    }
    second = final(await collect(model, history, reasoning="high"))
    history["messages"] = [
        *history["messages"],
        second,
        {"role": "user", "content": "k", "timestamp": 3},
    ]
    await collect(model, history, reasoning="high")

    model_turn = server.requests[1].json()["contents"][1]
    assert model_turn["role"] == "model"
    thought_part, call_part = model_turn["parts"]
    assert thought_part["thought"] is True
    assert thought_part["text"] == "Need the file."
    assert decoded(thought_part["thoughtSignature"]) == decoded(thought_sig)
    assert call_part["functionCall"] == {"name": "read", "args": {"path": "a.txt"}}
    assert decoded(call_part["thoughtSignature"]) == decoded(call_sig)
    text_part = server.requests[2].json()["contents"][3]["parts"][0]
    assert text_part["text"] == "It says hi."
    assert decoded(text_part["thoughtSignature"]) == decoded(text_sig)


def decoded(signature: str) -> bytes:
    """Signatures are protobuf bytes: the SDK may re-encode them URL-safe; the bytes must match."""
    return base64.urlsafe_b64decode(signature.replace("+", "-").replace("/", "_"))


# -- tool calls ------------------------------------------------------------------------------


async def test_tool_call_arrives_whole_even_when_its_frame_is_split_on_the_wire(
    server: FakeServer,
) -> None:
    args = {"path": "src/main.py", "limit": 20, "flags": ["a", "b"]}
    call_frame = g.chunk(g.function_call("read", args, call_id="call_1"), finish_reason="STOP")
    cut1, cut2 = len(call_frame) // 3, 2 * len(call_frame) // 3
    server.enqueue(
        g.stream(
            g.chunk(g.text("Reading.")),
            call_frame[:cut1],
            call_frame[cut1:cut2],
            call_frame[cut2:],
        )
    )
    events = await collect(gemini(server))
    assert_event_order(events)
    kinds = [e["type"] for e in events]
    assert kinds == [
        "start",
        "text_start",
        "text_delta",
        "text_end",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_end",
        "done",
    ]
    delta: Any = events[5]
    assert delta["contentIndex"] == 1
    assert delta["partial"]["content"][1]["arguments"] == args
    end: Any = events[6]
    assert end["toolCall"] == {
        "type": "toolCall",
        "id": "call_1",
        "name": "read",
        "arguments": args,
    }
    assert final(events)["stopReason"] == "toolUse"


async def test_parallel_tool_calls_get_unique_ids_and_missing_args_become_empty(
    server: FakeServer,
) -> None:
    server.enqueue(
        g.stream(
            g.chunk(
                g.function_call("ls", {"path": "."}),
                g.function_call("ls", {"path": "src"}),
            ),
            g.chunk(
                g.function_call("now", None, call_id="dup"),
                g.function_call("now", {}, call_id="dup"),
            ),
            g.chunk(finish_reason="STOP", usage=g.usage(8, 6)),
        )
    )
    events = await collect(gemini(server))
    assert_event_order(events)
    message = final(events)
    calls: list[Any] = message["content"]
    assert [c["name"] for c in calls] == ["ls", "ls", "now", "now"]
    assert [c["arguments"] for c in calls] == [{"path": "."}, {"path": "src"}, {}, {}]
    ids = [c["id"] for c in calls]
    assert len(set(ids)) == 4
    assert ids[0].startswith("ls_")
    assert ids[2] == "dup"
    assert ids[3].startswith("now_")
    assert message["stopReason"] == "toolUse"
    assert sum(e["type"] == "toolcall_delta" for e in events) == 4


async def test_any_finish_reason_with_a_tool_call_is_tool_use(server: FakeServer) -> None:
    server.enqueue(g.stream(g.chunk(g.function_call("f", {"a": 1}), finish_reason="MAX_TOKENS")))
    assert final(await collect(gemini(server)))["stopReason"] == "toolUse"


# -- usage and stop reasons ------------------------------------------------------------------


async def test_usage_counts_thoughts_as_output_and_cost_uses_model_prices(
    server: FakeServer,
) -> None:
    server.enqueue(
        g.stream(
            g.chunk(g.text("a"), usage=g.usage(1000, 1)),
            g.chunk(
                g.text("b"),
                finish_reason="STOP",
                usage=g.usage(1000, 200, thoughts=300, cached=400),
            ),
        )
    )
    model = gemini(server)
    usage = final(await collect(model))["usage"]
    assert usage["input"] == 1000
    assert usage["output"] == 500
    assert usage["cacheRead"] == 400
    assert usage["cacheWrite"] == 0
    assert usage["totalTokens"] == 1500
    cost = usage["cost"]
    assert cost["input"] == pytest.approx(1000 * model.cost.input / 1e6)
    assert cost["output"] == pytest.approx(500 * model.cost.output / 1e6)
    assert cost["cacheRead"] == pytest.approx(400 * model.cost.cache_read / 1e6)
    assert cost["total"] == pytest.approx(cost["input"] + cost["output"] + cost["cacheRead"])
    assert cost["total"] > 0


@pytest.mark.parametrize(("finish", "stop"), [("STOP", "stop"), ("MAX_TOKENS", "length")])
async def test_normal_finish_reasons_map_to_stop_reasons(
    server: FakeServer, finish: str, stop: str
) -> None:
    server.enqueue(g.text_stream("x", finish_reason=finish))
    events = await collect(gemini(server))
    assert events[-1]["type"] == "done"
    assert final(events)["stopReason"] == stop


@pytest.mark.parametrize(
    ("finish", "wording"),
    [
        ("SAFETY", "safety filters"),
        ("RECITATION", "reciting"),
        ("PROHIBITED_CONTENT", "prohibited content"),
        ("BLOCKLIST", "blocklisted"),
        ("SPII", "personal information"),
        ("MALFORMED_FUNCTION_CALL", "malformed function call"),
        ("LANGUAGE", "language"),
        ("OTHER", "unspecified"),
        ("FINISH_REASON_UNSPECIFIED", "did not say"),
    ],
)
async def test_blocking_finish_reasons_end_in_an_error_naming_the_reason(
    server: FakeServer, finish: str, wording: str
) -> None:
    server.enqueue(g.text_stream("partial answer", finish_reason=finish))
    events = await collect(gemini(server))
    assert_event_order(events)
    assert events[-1]["type"] == "error"
    message = final(events)
    assert message["stopReason"] == "error"
    assert finish in message["errorMessage"]  # type: ignore[typeddict-item]
    assert wording in message["errorMessage"]  # type: ignore[typeddict-item]
    assert message["content"] == [{"type": "text", "text": "partial answer"}]
    assert message["usage"]["input"] == 10


async def test_unknown_finish_reason_is_an_error_naming_the_value(server: FakeServer) -> None:
    server.enqueue(g.text_stream("x", finish_reason="BRAND_NEW_REASON"))
    with pytest.warns(
        UserWarning, match="BRAND_NEW_REASON"
    ):  # the SDK warns about enum values it does not know
        events = await collect(gemini(server))
    message = final(events)
    assert message["stopReason"] == "error"
    assert "unknown finishReason 'BRAND_NEW_REASON'" in message["errorMessage"]  # type: ignore[typeddict-item]


async def test_blocked_prompt_is_an_error_with_the_block_reason(server: FakeServer) -> None:
    server.enqueue(
        g.stream(
            g.frame(
                {
                    "promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
                    "usageMetadata": g.usage(7, 0),
                }
            )
        )
    )
    message = final(await collect(gemini(server)))
    assert message["stopReason"] == "error"
    assert "PROHIBITED_CONTENT" in message["errorMessage"]  # type: ignore[typeddict-item]


# -- HTTP errors -----------------------------------------------------------------------------


async def test_http_401_is_an_error_event_with_googles_message(server: FakeServer) -> None:
    server.enqueue(
        g.error(400, "API key not valid. Please pass a valid API key.", "INVALID_ARGUMENT"),
    )
    server.enqueue(
        g.error(401, "Request had invalid authentication credentials.", "UNAUTHENTICATED")
    )
    first = final(await collect(gemini(server)))
    second = final(await collect(gemini(server)))
    assert first["errorMessage"].startswith("400 ")  # type: ignore[typeddict-item]
    assert "API key not valid" in first["errorMessage"]  # type: ignore[typeddict-item]
    assert second["stopReason"] == "error"
    assert second["errorMessage"].startswith("401 ")  # type: ignore[typeddict-item]
    assert "UNAUTHENTICATED" in second["errorMessage"]  # type: ignore[typeddict-item]
    assert "invalid authentication credentials" in second["errorMessage"]  # type: ignore[typeddict-item]


async def test_http_429_is_not_retried_by_the_sdk(server: FakeServer) -> None:
    server.enqueue(
        g.error(
            429,
            "You exceeded your current quota, please check your plan and billing details.",
            "RESOURCE_EXHAUSTED",
            headers={"retry-after": "1"},
        ),
        g.text_stream("should never be fetched"),
    )
    events = await collect(gemini(server))
    assert events[-1]["type"] == "error"
    message = final(events)
    assert message["errorMessage"].startswith("429 ")  # type: ignore[typeddict-item]
    assert "RESOURCE_EXHAUSTED" in message["errorMessage"]  # type: ignore[typeddict-item]
    assert "exceeded your current quota" in message["errorMessage"]  # type: ignore[typeddict-item]
    assert not is_context_overflow(message)
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("status", "text", "status_name"),
    [
        (
            500,
            "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting",
            "INTERNAL",
        ),
        (503, "The model is overloaded. Please try again later.", "UNAVAILABLE"),
    ],
)
async def test_server_errors_are_error_events_without_retry(
    server: FakeServer, status: int, text: str, status_name: str
) -> None:
    server.enqueue(g.error(status, text, status_name), g.text_stream("never"))
    message = final(await collect(gemini(server)))
    assert message["stopReason"] == "error"
    assert message["errorMessage"].startswith(f"{status} ")  # type: ignore[typeddict-item]
    assert text in message["errorMessage"]  # type: ignore[typeddict-item]
    assert len(server.requests) == 1


async def test_context_overflow_400_is_recognised_as_overflow(server: FakeServer) -> None:
    server.enqueue(
        g.error(
            400,
            "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575).",
            "INVALID_ARGUMENT",
        )
    )
    model = gemini(server)
    message = final(await collect(model))
    assert message["stopReason"] == "error"
    assert "exceeds the maximum number of tokens allowed" in message["errorMessage"]  # type: ignore[typeddict-item]
    assert is_context_overflow(message, model.context_window)


async def test_error_object_sent_inside_the_stream_ends_in_an_error_event(
    server: FakeServer,
) -> None:
    server.enqueue(
        g.stream(
            g.chunk(g.text("Partial")),
            g.frame(
                {
                    "error": {
                        "code": 503,
                        "message": "The model is overloaded.",
                        "status": "UNAVAILABLE",
                    }
                }
            ),
        )
    )
    events = await collect(gemini(server))
    message = final(events)
    assert message["stopReason"] == "error"
    assert "The model is overloaded." in message["errorMessage"]  # type: ignore[typeddict-item]
    assert message["content"] == [{"type": "text", "text": "Partial"}]


# -- broken streams --------------------------------------------------------------------------


async def test_connection_dropped_mid_stream_keeps_partial_content(server: FakeServer) -> None:
    server.enqueue(
        g.stream(
            g.chunk(g.text("Half an "), usage=g.usage(9, 2)),
            g.chunk(g.text("answer")),
            g.chunk(g.text(" never arrives"), finish_reason="STOP"),
            drop_after=2,
        )
    )
    events = await collect(gemini(server))
    assert_event_order(events)
    message = final(events)
    assert message["stopReason"] == "error"
    assert message["content"] == [{"type": "text", "text": "Half an answer"}]
    assert message["errorMessage"]  # type: ignore[typeddict-item]
    assert message["usage"]["input"] == 9
    assert len(server.requests) == 1  # the SDK's automatic continuation stayed off


async def test_abort_mid_stream_stops_promptly_and_keeps_partial(server: FakeServer) -> None:
    server.enqueue(
        g.stream(
            g.chunk(g.text("First words")),
            g.chunk(g.text(" never")),
            stall_after=1,
        )
    )
    controller = AbortController()
    events: list[AssistantMessageEvent] = []

    async def consume() -> None:
        async for event in stream(gemini(server), CONTEXT, api_key="k", signal=controller.signal):
            events.append(event)
            if event["type"] == "text_delta":
                controller.abort()

    await asyncio.wait_for(consume(), timeout=10)
    message = final(events)
    assert events[-1]["type"] == "error"
    assert message["stopReason"] == "aborted"
    assert message["content"] == [{"type": "text", "text": "First words"}]


async def test_abort_while_waiting_for_the_first_byte(server: FakeServer) -> None:
    server.enqueue(g.stream(g.chunk(g.text("late")), stall_after=0))
    controller = AbortController()
    task = asyncio.ensure_future(
        stream(gemini(server), CONTEXT, api_key="k", signal=controller.signal).result()
    )
    while not server.requests:
        await asyncio.sleep(0.01)
    controller.abort()
    message = await asyncio.wait_for(task, timeout=10)
    assert message["stopReason"] == "aborted"


async def test_non_json_data_line_is_a_clear_error(server: FakeServer) -> None:
    server.enqueue(g.stream(g.chunk(g.text("ok so far")), g.frame("this is not json")))
    events = await collect(gemini(server))
    message = final(events)
    assert message["stopReason"] == "error"
    assert "not valid JSON" in message["errorMessage"]  # type: ignore[typeddict-item]
    assert "this is not json" in message["errorMessage"]  # type: ignore[typeddict-item]
    assert message["content"] == [{"type": "text", "text": "ok so far"}]


async def test_function_call_json_that_never_closes_is_a_clear_error(server: FakeServer) -> None:
    truncated = g.chunk(g.function_call("write", {"path": "a.txt", "content": "long text"}))
    truncated = truncated[: truncated.index(b"long")]
    server.enqueue(g.stream(g.chunk(g.text("Writing.")), truncated))
    events = await collect(gemini(server))
    assert_event_order(events)
    message = final(events)
    assert message["stopReason"] == "error"
    assert "not valid JSON" in message["errorMessage"]  # type: ignore[typeddict-item]
    assert message["content"] == [{"type": "text", "text": "Writing."}]


async def test_stream_without_finish_reason_still_ends_cleanly(server: FakeServer) -> None:
    server.enqueue(g.stream(g.chunk(g.text("no finish"))))
    events = await collect(gemini(server))
    assert events[-1]["type"] == "done"
    assert final(events)["stopReason"] == "stop"


@pytest.mark.parametrize("body", [{"unexpected": True}, {"candidates": []}])
async def test_an_answer_with_no_candidate_at_all_is_an_error_not_a_silent_reply(
    server: FakeServer, body: dict[str, Any]
) -> None:
    # e.g. a baseUrl that points at something else: a user would otherwise get nothing back
    server.enqueue(FakeResponse.json_body(200, body))
    message = final(await collect(gemini(server)))
    assert message["stopReason"] == "error"
    assert "without a single candidate" in message["errorMessage"]  # type: ignore[typeddict-item]
