"""What the openai-responses provider sends: history, tools, reasoning settings and headers, as the
local server receives them from the official SDK."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from clawpi.ai import Model, StreamOptions, get_model, stream
from clawpi.ai.providers.openai_responses_convert import (
    build_request,
    normalize_tool_call_id,
    parse_text_signature,
)
from clawpi.ai.types import Context
from tests.fakes.http_server import FakeServer
from tests.fakes.responses_sse import ResponsesStream

KEY = "sk-test-convert"
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
REASONING_ITEM = {
    "id": "rs_prev",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "Need the file."}],
    "encrypted_content": "gAAAA-prev==",
}


def model_at(server: FakeServer, model_id: str = "gpt-5-mini", **changes: Any) -> Model:
    model = get_model("openai", model_id)
    assert model is not None
    return model.replace(base_url=f"{server.url}/v1", **changes)


async def sent_body(server: FakeServer, model: Model, context: Context, **options: Any) -> Any:
    """Run one turn against a canned reply and return the JSON body the server received."""
    server.enqueue(ResponsesStream().message(["ok"]).completed().response())
    options.setdefault("api_key", KEY)
    message = await stream(model, context, **options).result()
    assert message["stopReason"] == "stop", message.get("errorMessage")
    return server.requests[-1].json()


def assistant(target: Model, content: list[Any], stop: str = "toolUse", **over: Any) -> Any:
    return {
        "role": "assistant",
        "content": content,
        "api": target.api,
        "provider": target.provider,
        "model": target.id,
        "usage": {
            "input": 1,
            "output": 1,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": 2,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
        },
        "stopReason": stop,
        "timestamp": 2,
        **over,
    }


def user(content: Any) -> Any:
    return {"role": "user", "content": content, "timestamp": 1}


def tool_result(call_id: str, content: list[Any], is_error: bool = False) -> Any:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": "read",
        "content": content,
        "isError": is_error,
        "timestamp": 3,
    }


READ_TOOL: Any = {
    "name": "read",
    "description": "Read a file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
}


# -- system prompt and user messages ---------------------------------------------------------


async def test_system_prompt_is_a_developer_message_for_reasoning_models(
    server: FakeServer,
) -> None:
    body = await sent_body(
        server, model_at(server), {"systemPrompt": "Be terse.", "messages": [user("hi")]}
    )
    assert body["input"][0] == {"role": "developer", "content": "Be terse."}
    assert "instructions" not in body


async def test_system_prompt_is_a_system_message_for_other_models(server: FakeServer) -> None:
    body = await sent_body(
        server, model_at(server, "gpt-4.1"), {"systemPrompt": "Be terse.", "messages": [user("hi")]}
    )
    assert body["input"][0] == {"role": "system", "content": "Be terse."}


async def test_user_text_and_image_become_input_parts(server: FakeServer) -> None:
    content = [
        {"type": "text", "text": "What is this?"},
        {"type": "image", "data": PNG, "mimeType": "image/png"},
    ]
    body = await sent_body(server, model_at(server), {"messages": [user(content)]})
    assert body["input"] == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "What is this?"},
                {
                    "type": "input_image",
                    "detail": "auto",
                    "image_url": f"data:image/png;base64,{PNG}",
                },
            ],
        },
        {"role": "developer", "content": [{"type": "input_text", "text": "# Juice: 0 !important"}]},
    ]


async def test_images_are_dropped_for_a_text_only_model(server: FakeServer) -> None:
    content = [
        {"type": "text", "text": "Look"},
        {"type": "image", "data": PNG, "mimeType": "image/png"},
    ]
    body = await sent_body(server, model_at(server, "o3-mini"), {"messages": [user(content)]})
    assert body["input"][0] == {"role": "user", "content": [{"type": "input_text", "text": "Look"}]}


async def test_lone_surrogates_are_removed_from_outgoing_text(server: FakeServer) -> None:
    body = await sent_body(
        server,
        model_at(server, "gpt-4.1"),
        {"systemPrompt": "sys\ud800", "messages": [user("bad \udc00text 😀")]},
    )
    assert body["input"][0]["content"] == "sys"
    assert body["input"][1]["content"][0]["text"] == "bad text 😀"


# -- assistant history -----------------------------------------------------------------------


async def test_assistant_history_replays_reasoning_text_and_tool_calls_as_items(
    server: FakeServer,
) -> None:
    model = model_at(server)
    history = assistant(
        model,
        [
            {
                "type": "thinking",
                "thinking": "Need the file.",
                "thinkingSignature": orjson.dumps(REASONING_ITEM).decode(),
            },
            {"type": "text", "text": "Reading it.", "textSignature": "msg_prev"},
            {"type": "toolCall", "id": "call_7|fc_7", "name": "read", "arguments": {"path": "a"}},
        ],
    )
    context: Context = {
        "messages": [
            user("read a"),
            history,
            tool_result("call_7|fc_7", [{"type": "text", "text": "A!"}]),
        ],
        "tools": [READ_TOOL],
    }
    body = await sent_body(server, model, context, reasoning="low")
    assert body["input"] == [
        {"role": "user", "content": [{"type": "input_text", "text": "read a"}]},
        REASONING_ITEM,
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Reading it.", "annotations": []}],
            "status": "completed",
            "id": "msg_prev",
        },
        {
            "type": "function_call",
            "id": "fc_7",
            "call_id": "call_7",
            "name": "read",
            "arguments": '{"path":"a"}',
        },
        {"type": "function_call_output", "call_id": "call_7", "output": "A!"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "name": "read",
            "description": "Read a file",
            "parameters": READ_TOOL["parameters"],
            "strict": False,
        }
    ]
    assert body["reasoning"] == {"effort": "low", "summary": "auto"}


async def test_text_without_signature_gets_a_positional_id_and_long_ids_are_shortened(
    server: FakeServer,
) -> None:
    model = model_at(server, "gpt-4.1")
    long_id = "msg_" + "x" * 100
    context: Context = {
        "messages": [
            user("a"),
            assistant(model, [{"type": "text", "text": "plain"}], stop="stop"),
            user("b"),
            assistant(
                model, [{"type": "text", "text": "long", "textSignature": long_id}], stop="stop"
            ),
            user("c"),
        ]
    }
    body = await sent_body(server, model, context)
    ids = [item["id"] for item in body["input"] if item.get("type") == "message"]
    assert ids[0] == "msg_1"
    assert ids[1].startswith("msg_")
    assert len(ids[1]) <= 64
    assert ids[1] != long_id


async def test_tool_results_carry_error_text_and_images_inside_the_output(
    server: FakeServer,
) -> None:
    model = model_at(server)
    history = assistant(
        model,
        [
            {"type": "toolCall", "id": "call_a|fc_a", "name": "read", "arguments": {}},
            {"type": "toolCall", "id": "call_b|fc_b", "name": "read", "arguments": {}},
            {"type": "toolCall", "id": "call_c|fc_c", "name": "read", "arguments": {}},
        ],
    )
    image = {"type": "image", "data": PNG, "mimeType": "image/png"}
    context: Context = {
        "messages": [
            user("go"),
            history,
            tool_result("call_a|fc_a", [{"type": "text", "text": "ENOENT: no such file"}], True),
            tool_result("call_b|fc_b", [{"type": "text", "text": "a picture"}, image]),
            tool_result("call_c|fc_c", [image]),
        ]
    }
    body = await sent_body(server, model, context)
    outputs = [item for item in body["input"] if item.get("type") == "function_call_output"]
    data_url = f"data:image/png;base64,{PNG}"
    assert outputs == [
        {"type": "function_call_output", "call_id": "call_a", "output": "ENOENT: no such file"},
        {
            "type": "function_call_output",
            "call_id": "call_b",
            "output": [
                {"type": "input_text", "text": "a picture"},
                {"type": "input_image", "detail": "auto", "image_url": data_url},
            ],
        },
        {
            "type": "function_call_output",
            "call_id": "call_c",
            "output": [{"type": "input_image", "detail": "auto", "image_url": data_url}],
        },
    ]


async def test_missing_tool_result_gets_a_synthetic_error_output(server: FakeServer) -> None:
    model = model_at(server)
    history = assistant(
        model, [{"type": "toolCall", "id": "call_z|fc_z", "name": "read", "arguments": {}}]
    )
    body = await sent_body(server, model, {"messages": [user("go"), history, user("never mind")]})
    assert {
        "type": "function_call_output",
        "call_id": "call_z",
        "output": "No result provided",
    } in body["input"]


async def test_reasoning_only_history_after_an_abort_is_not_replayed(server: FakeServer) -> None:
    model = model_at(server)
    signature = orjson.dumps(REASONING_ITEM).decode()
    aborted = assistant(
        model,
        [{"type": "thinking", "thinking": "Need", "thinkingSignature": signature}],
        stop="aborted",
    )
    cut_off = assistant(
        model,
        [{"type": "thinking", "thinking": "Need", "thinkingSignature": signature}],
        stop="length",
    )
    context: Context = {"messages": [user("a"), aborted, user("b"), cut_off, user("c")]}
    body = await sent_body(server, model, context, reasoning="high")
    assert [item.get("type") for item in body["input"]] == [None, None, None]
    assert all(item["role"] == "user" for item in body["input"])


async def test_text_signature_with_phase_is_replayed_with_its_phase(server: FakeServer) -> None:
    model = model_at(server, "gpt-5.2-codex")
    signature = '{"v":1,"id":"msg_p","phase":"commentary"}'
    history = assistant(
        model, [{"type": "text", "text": "Looking.", "textSignature": signature}], stop="stop"
    )
    body = await sent_body(server, model, {"messages": [user("a"), history, user("b")]})
    message = body["input"][1]
    assert message["id"] == "msg_p"
    assert message["phase"] == "commentary"


async def test_other_models_tool_calls_keep_call_ids_but_drop_fc_item_ids(
    server: FakeServer,
) -> None:
    model = model_at(server)
    older = assistant(
        model,
        [
            {
                "type": "thinking",
                "thinking": "Hmm",
                "thinkingSignature": orjson.dumps(REASONING_ITEM).decode(),
            },
            {"type": "toolCall", "id": "call_9|fc_9", "name": "read", "arguments": {"path": "x"}},
        ],
        model="gpt-5.1",
    )
    context: Context = {
        "messages": [user("go"), older, tool_result("call_9|fc_9", [{"type": "text", "text": "X"}])]
    }
    body = await sent_body(server, model, context)
    items = body["input"]
    # another model's thinking becomes plain text; its fc_ id would need the reasoning pairing
    assert items[1]["type"] == "message"
    assert items[1]["content"][0]["text"] == "Hmm"
    assert items[2] == {
        "type": "function_call",
        "call_id": "call_9",
        "name": "read",
        "arguments": '{"path":"x"}',
    }
    assert items[3] == {"type": "function_call_output", "call_id": "call_9", "output": "X"}


async def test_another_providers_tool_call_ids_are_normalised(server: FakeServer) -> None:
    model = model_at(server)
    foreign = assistant(
        model,
        [{"type": "toolCall", "id": "toolu/01:abc|item.42__", "name": "read", "arguments": {}}],
        provider="anthropic",
        api="anthropic-messages",
        model="claude-sonnet-4-5",
    )
    context: Context = {
        "messages": [
            user("go"),
            foreign,
            tool_result("toolu/01:abc|item.42__", [{"type": "text", "text": "ok"}]),
        ]
    }
    body = await sent_body(server, model, context)
    call = next(item for item in body["input"] if item.get("type") == "function_call")
    output = next(item for item in body["input"] if item.get("type") == "function_call_output")
    assert call["call_id"] == "toolu_01_abc"
    assert call["id"] == "fc_item_42"
    assert output["call_id"] == "toolu_01_abc"


# -- pure id helpers -------------------------------------------------------------------------


def test_normalize_tool_call_id_rules() -> None:
    model: Any = None
    source: Any = {}
    assert normalize_tool_call_id("call_1|fc_1", model, source) == "call_1|fc_1"
    assert normalize_tool_call_id("call 1|abc", model, source) == "call_1|fc_abc"
    long = normalize_tool_call_id("c" * 80 + "|" + "fc" + "d" * 80, model, source)
    call, item = long.split("|")
    assert len(call) == 64
    assert len(item) == 64
    assert normalize_tool_call_id("call_|fc_x__", model, source) == "call|fc_x"
    assert normalize_tool_call_id("plain:id", model, source) == "plain_id"


def test_text_signature_reads_both_forms() -> None:
    assert parse_text_signature("msg_1") == ("msg_1", None)
    assert parse_text_signature('{"v":1,"id":"msg_2","phase":"final_answer"}') == (
        "msg_2",
        "final_answer",
    )
    assert parse_text_signature('{"v":1,"id":"msg_3","phase":"weird"}') == ("msg_3", None)
    assert parse_text_signature(None) == (None, None)


# -- reasoning and request options -----------------------------------------------------------


async def test_gpt5_without_a_level_gets_the_juice_off_developer_message(
    server: FakeServer,
) -> None:
    body = await sent_body(server, model_at(server), {"messages": [user("hi")]})
    assert body["input"][-1] == {
        "role": "developer",
        "content": [{"type": "input_text", "text": "# Juice: 0 !important"}],
    }
    assert "reasoning" not in body
    assert "include" not in body


async def test_off_level_is_no_reasoning_and_non_reasoning_models_get_neither(
    server: FakeServer,
) -> None:
    body = await sent_body(server, model_at(server), {"messages": [user("hi")]}, reasoning="off")
    assert "reasoning" not in body
    assert body["input"][-1]["role"] == "developer"
    body = await sent_body(
        server, model_at(server, "gpt-4.1"), {"messages": [user("hi")]}, reasoning="high"
    )
    assert "reasoning" not in body
    assert "include" not in body
    assert all(item.get("role") != "developer" for item in body["input"])


@pytest.mark.parametrize(
    ("model_id", "level", "effort"),
    [
        ("gpt-5-mini", "minimal", "minimal"),
        ("gpt-5-mini", "high", "high"),
        ("gpt-5-mini", "xhigh", "high"),
        ("gpt-5.2", "xhigh", "xhigh"),
        ("o3", "medium", "medium"),
    ],
)
async def test_thinking_level_maps_to_reasoning_effort(
    server: FakeServer, model_id: str, level: str, effort: str
) -> None:
    body = await sent_body(
        server, model_at(server, model_id), {"messages": [user("hi")]}, reasoning=level
    )
    assert body["reasoning"] == {"effort": effort, "summary": "auto"}
    assert body["include"] == ["reasoning.encrypted_content"]
    assert all("Juice" not in str(item) for item in body["input"])


async def test_session_id_becomes_the_prompt_cache_key(server: FakeServer) -> None:
    model = model_at(server)
    body = await sent_body(server, model, {"messages": [user("hi")]}, session_id="sess-42")
    assert body["prompt_cache_key"] == "sess-42"
    assert "prompt_cache_retention" not in body  # long retention only on api.openai.com
    body = await sent_body(
        server, model, {"messages": [user("hi")]}, session_id="sess-42", cache_retention="none"
    )
    assert "prompt_cache_key" not in body


async def test_model_and_option_headers_are_sent_with_options_winning(
    server: FakeServer,
) -> None:
    model = model_at(server, headers={"X-Team": "model", "X-Model-Only": "1"})
    await sent_body(
        server, model, {"messages": [user("hi")]}, headers={"X-Team": "options", "X-Trace": "t-1"}
    )
    headers = server.requests[-1].headers
    assert headers["x-team"] == "options"
    assert headers["x-model-only"] == "1"
    assert headers["x-trace"] == "t-1"


async def test_on_payload_can_replace_the_body_including_unknown_fields(
    server: FakeServer,
) -> None:
    seen: list[Any] = []

    def on_payload(payload: dict[str, Any], model: Model) -> dict[str, Any]:
        seen.append((payload["model"], model.id))
        return {**payload, "max_output_tokens": 99, "x_vendor_flag": True}

    body = await sent_body(
        server, model_at(server), {"messages": [user("hi")]}, on_payload=on_payload
    )
    assert seen == [("gpt-5-mini", "gpt-5-mini")]
    assert body["max_output_tokens"] == 99
    assert body["x_vendor_flag"] is True
    assert body["stream"] is True


async def test_tool_choice_is_passed_through(server: FakeServer) -> None:
    body = await sent_body(
        server,
        model_at(server),
        {"messages": [user("hi")], "tools": [READ_TOOL]},
        tool_choice={"type": "function", "name": "read"},
    )
    assert body["tool_choice"] == {"type": "function", "name": "read"}


def test_long_cache_retention_asks_openai_for_24h_only_on_api_openai_com() -> None:
    model = get_model("openai", "gpt-5-mini")
    assert model is not None
    context: Context = {"messages": [user("hi")]}
    options = StreamOptions(session_id="s-1", cache_retention="long")
    assert build_request(model, context, options)["prompt_cache_retention"] == "24h"
    proxied = model.replace(base_url="https://proxy.example.com/v1")
    assert "prompt_cache_retention" not in build_request(proxied, context, options)
    short = build_request(model, context, StreamOptions(session_id="s-1"))
    assert "prompt_cache_retention" not in short
    assert short["prompt_cache_key"] == "s-1"
