"""What the fake Gemini server receives: the google provider's request conversion, end to end."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from clawpi.ai import Model, get_model, stream
from clawpi.ai.models import ModelCost
from clawpi.ai.providers.google_convert import split_base_url
from clawpi.ai.stream import StreamOptions
from clawpi.ai.types import AssistantMessage, Context, Message
from tests.fakes import gemini_sse as g
from tests.fakes.http_server import FakeServer

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n fake image bytes").decode()
JPEG = base64.b64encode(b"\xff\xd8\xff\xe0 another image").decode()


def gemini(server: FakeServer, model_id: str = "gemini-2.5-flash") -> Model:
    model = get_model("google", model_id)
    assert model is not None
    return model.replace(base_url=server.url + "/v1beta")


async def send(server: FakeServer, model: Model, context: Context, **options: Any) -> Any:
    """Run one turn and return the JSON body the server received."""
    server.enqueue(g.text_stream("ok"))
    options.setdefault("api_key", "key")
    result = await stream(model, context, StreamOptions(**options)).result()
    assert result["stopReason"] == "stop", result.get("errorMessage")
    return server.requests[-1].json()


def assistant(model: Model, *content: Any, stop: str = "toolUse") -> AssistantMessage:
    message: Any = {
        "role": "assistant",
        "content": list(content),
        "api": model.api,
        "provider": model.provider,
        "model": model.id,
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
    }
    return message  # type: ignore[no-any-return]


def tool_result(call_id: str, name: str, *content: Any, error: bool = False) -> Message:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": list(content),
        "isError": error,
        "timestamp": 3,
    }


def thinking_of(body: Any) -> dict[str, Any]:
    """The SDK sends thinkingConfig with proto field names (include_thoughts); both spellings
    are valid protobuf JSON, so compare in the REST API's camelCase."""
    raw = body["generationConfig"]["thinkingConfig"]
    return {
        key.split("_")[0] + "".join(w.title() for w in key.split("_")[1:]): value
        for key, value in raw.items()
    }


def field(obj: Any, name: str) -> Any:
    """`obj[name]` under its REST camelCase name or its proto snake_case name (the SDK sends
    some nested messages with proto names; the API accepts both)."""
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in name)
    return obj[name] if name in obj else obj[snake]


def decoded(data: str) -> bytes:
    return base64.urlsafe_b64decode(data.replace("+", "-").replace("/", "_"))


# -- config ----------------------------------------------------------------------------------


async def test_system_prompt_max_tokens_and_temperature(server: FakeServer) -> None:
    model = gemini(server)
    body = await send(
        server,
        model,
        {
            "systemPrompt": "Be brief.",
            "messages": [{"role": "user", "content": "Hi", "timestamp": 1}],
        },
        temperature=0.2,
    )
    assert (
        server.requests[0].path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    )
    assert server.requests[0].headers["x-goog-api-key"] == "key"
    assert body["systemInstruction"]["parts"] == [{"text": "Be brief."}]
    assert body["contents"] == [{"role": "user", "parts": [{"text": "Hi"}]}]
    assert body["generationConfig"]["maxOutputTokens"] == 32000  # min(model max 65536, 32k)
    assert body["generationConfig"]["temperature"] == 0.2
    assert "thinkingConfig" not in body["generationConfig"]
    assert "tools" not in body


async def test_explicit_max_tokens_wins(server: FakeServer) -> None:
    body = await send(
        server,
        gemini(server),
        {"messages": [{"role": "user", "content": "x", "timestamp": 1}]},
        max_tokens=777,
    )
    assert body["generationConfig"]["maxOutputTokens"] == 777


async def test_headers_from_model_and_options_are_sent(server: FakeServer) -> None:
    model = gemini(server).replace(headers={"X-Model": "m", "X-Both": "model"})
    await send(
        server,
        model,
        {"messages": [{"role": "user", "content": "x", "timestamp": 1}]},
        headers={"X-Option": "o", "X-Both": "option"},
    )
    headers = server.requests[0].headers
    assert headers["x-model"] == "m"
    assert headers["x-option"] == "o"
    assert headers["x-both"] == "option"


async def test_on_payload_sees_and_may_replace_the_request(server: FakeServer) -> None:
    seen: list[Any] = []

    def hook(payload: dict[str, Any], model: Model) -> dict[str, Any]:
        seen.append(payload)
        return {**payload, "config": {**payload["config"], "maxOutputTokens": 5}}

    body = await send(
        server,
        gemini(server),
        {"messages": [{"role": "user", "content": "x", "timestamp": 1}]},
        on_payload=hook,
    )
    assert seen[0]["model"] == "gemini-2.5-flash"
    assert seen[0]["contents"] == [{"role": "user", "parts": [{"text": "x"}]}]
    assert body["generationConfig"]["maxOutputTokens"] == 5


@pytest.mark.parametrize(
    ("model_id", "level", "expected"),
    [
        ("gemini-2.5-pro", "minimal", {"thinkingBudget": 128}),
        ("gemini-2.5-pro", "high", {"thinkingBudget": 32768}),
        ("gemini-2.5-pro", "xhigh", {"thinkingBudget": 32768}),
        ("gemini-2.5-flash", "low", {"thinkingBudget": 2048}),
        ("gemini-2.5-flash", "medium", {"thinkingBudget": 8192}),
        ("gemini-2.5-flash", "high", {"thinkingBudget": 24576}),
        ("gemini-flash-latest", "high", {"thinkingBudget": -1}),
        ("gemini-3-pro-preview", "minimal", {"thinkingLevel": "LOW"}),
        ("gemini-3-pro-preview", "low", {"thinkingLevel": "LOW"}),
        ("gemini-3.1-pro-preview", "medium", {"thinkingLevel": "HIGH"}),
        ("gemini-3-pro-preview", "high", {"thinkingLevel": "HIGH"}),
        ("gemini-3-flash-preview", "minimal", {"thinkingLevel": "MINIMAL"}),
        ("gemini-3-flash-preview", "low", {"thinkingLevel": "LOW"}),
        ("gemini-3-flash-preview", "medium", {"thinkingLevel": "MEDIUM"}),
        ("gemini-3-flash-preview", "high", {"thinkingLevel": "HIGH"}),
    ],
)
async def test_thinking_level_mapping(
    server: FakeServer, model_id: str, level: str, expected: dict[str, Any]
) -> None:
    body = await send(
        server,
        gemini(server, model_id),
        {"messages": [{"role": "user", "content": "x", "timestamp": 1}]},
        reasoning=level,
    )
    assert server.requests[0].path.startswith(f"/v1beta/models/{model_id}:streamGenerateContent")
    assert thinking_of(body) == {"includeThoughts": True, **expected}


async def test_custom_thinking_budgets_win_and_off_sends_no_thinking(server: FakeServer) -> None:
    model = gemini(server, "gemini-2.5-pro")
    context: Context = {"messages": [{"role": "user", "content": "x", "timestamp": 1}]}
    body = await send(server, model, context, reasoning="low", thinking_budgets={"low": 999})
    assert thinking_of(body) == {
        "includeThoughts": True,
        "thinkingBudget": 999,
    }
    body = await send(server, model, context, reasoning="off")
    assert "thinkingConfig" not in body["generationConfig"]
    body = await send(server, gemini(server, "gemini-2.0-flash"), context, reasoning="high")
    assert "thinkingConfig" not in body["generationConfig"]  # not a reasoning model


# -- tools -----------------------------------------------------------------------------------


async def test_tools_become_function_declarations_with_cleaned_schemas(server: FakeServer) -> None:
    tools: Any = [
        {
            "name": "read",
            "description": "Read a file",
            "parameters": {
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "path": {"type": "string", "minLength": 1, "description": "File path"},
                    "mode": {
                        "anyOf": [
                            {"const": "text", "type": "string"},
                            {"const": "bytes", "type": "string"},
                        ]
                    },
                    "limit": {"type": ["integer", "null"], "minimum": 1},
                },
                "required": ["path"],
            },
        },
        {
            "name": "now",
            "description": "Current time",
            "parameters": {"type": "object", "properties": {}},
        },
    ]
    body = await send(
        server,
        gemini(server),
        {"messages": [{"role": "user", "content": "x", "timestamp": 1}], "tools": tools},
        tool_choice="any",
    )
    [tool_group] = body["tools"]
    read, now = tool_group["functionDeclarations"]
    assert read["name"] == "read"
    assert read["description"] == "Read a file"
    schema = read.get("parametersJsonSchema", read.get("parameters_json_schema"))
    assert schema == {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path"},
            "mode": {"type": "string", "enum": ["text", "bytes"]},
            "limit": {"type": "integer"},
        },
        "required": ["path"],
    }
    assert now["name"] == "now"
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}


# -- messages --------------------------------------------------------------------------------


async def test_user_text_and_images(server: FakeServer) -> None:
    context: Context = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image", "data": PNG, "mimeType": "image/png"},
                    {"type": "text", "text": ""},
                ],
                "timestamp": 1,
            }
        ]
    }
    body = await send(server, gemini(server), context)
    [turn] = body["contents"]
    assert turn["role"] == "user"
    text, image = turn["parts"]
    assert text == {"text": "What is this?"}
    assert field(image["inlineData"], "mimeType") == "image/png"
    assert decoded(image["inlineData"]["data"]) == base64.b64decode(PNG)


async def test_images_are_dropped_for_a_text_only_model(server: FakeServer) -> None:
    model = gemini(server).replace(input=("text",))
    context: Context = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Look"},
                    {"type": "image", "data": PNG, "mimeType": "image/png"},
                ],
                "timestamp": 1,
            }
        ]
    }
    body = await send(server, model, context)
    assert body["contents"] == [{"role": "user", "parts": [{"text": "Look"}]}]


async def test_assistant_history_and_tool_results(server: FakeServer) -> None:
    model = gemini(server)
    sig = g.signature("call")
    context: Context = {
        "messages": [
            {"role": "user", "content": "List and read", "timestamp": 1},
            assistant(
                model,
                {
                    "type": "thinking",
                    "thinking": "Plan it.",
                    "thinkingSignature": g.signature("think"),
                },
                {"type": "text", "text": "On it."},
                {"type": "text", "text": "  "},
                {
                    "type": "toolCall",
                    "id": "c1",
                    "name": "ls",
                    "arguments": {"path": "."},
                    "thoughtSignature": sig,
                },
                {"type": "toolCall", "id": "c2", "name": "read", "arguments": {"path": "x.png"}},
            ),
            tool_result(
                "c1", "ls", {"type": "text", "text": "a.txt"}, {"type": "text", "text": "x.png"}
            ),
            tool_result("c2", "read", {"type": "text", "text": "ENOENT"}, error=True),
            {"role": "user", "content": "thanks", "timestamp": 4},
        ]
    }
    body = await send(server, model, context)
    user, model_turn, results, last = body["contents"]
    assert user == {"role": "user", "parts": [{"text": "List and read"}]}
    assert model_turn["role"] == "model"
    thinking, text, call1, call2 = model_turn["parts"]
    assert thinking["thought"] is True
    assert thinking["text"] == "Plan it."
    assert decoded(thinking["thoughtSignature"]) == decoded(g.signature("think"))
    assert text == {"text": "On it."}
    assert call1["functionCall"] == {"name": "ls", "args": {"path": "."}}
    assert decoded(call1["thoughtSignature"]) == decoded(sig)
    assert call2 == {"functionCall": {"name": "read", "args": {"path": "x.png"}}}
    assert results == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "ls", "response": {"output": "a.txt\nx.png"}}},
            {"functionResponse": {"name": "read", "response": {"error": "ENOENT"}}},
        ],
    }
    assert last == {"role": "user", "parts": [{"text": "thanks"}]}


async def test_tool_result_images_follow_the_responses_before_gemini_3(server: FakeServer) -> None:
    model = gemini(server)
    context: Context = {
        "messages": [
            {"role": "user", "content": "show", "timestamp": 1},
            assistant(
                model,
                {"type": "toolCall", "id": "c1", "name": "shot", "arguments": {}},
                {"type": "toolCall", "id": "c2", "name": "shot", "arguments": {}},
            ),
            tool_result("c1", "shot", {"type": "image", "data": PNG, "mimeType": "image/png"}),
            tool_result(
                "c2",
                "shot",
                {"type": "text", "text": "second"},
                {"type": "image", "data": JPEG, "mimeType": "image/jpeg"},
            ),
        ]
    }
    body = await send(server, model, context)
    _, _, responses, images = body["contents"]
    assert responses["parts"] == [
        {"functionResponse": {"name": "shot", "response": {"output": "(see attached image)"}}},
        {"functionResponse": {"name": "shot", "response": {"output": "second"}}},
    ]
    assert images["role"] == "user"
    label, first, second = images["parts"]
    assert label == {"text": "Tool result image:"}
    assert decoded(first["inlineData"]["data"]) == base64.b64decode(PNG)
    assert field(second["inlineData"], "mimeType") == "image/jpeg"


async def test_gemini_3_nests_result_images_and_signs_unsigned_calls(server: FakeServer) -> None:
    model = gemini(server, "gemini-3-flash-preview")
    other = gemini(server, "gemini-2.5-pro")
    context: Context = {
        "messages": [
            {"role": "user", "content": "show", "timestamp": 1},
            assistant(
                other,
                {
                    "type": "thinking",
                    "thinking": "From another model.",
                    "thinkingSignature": g.signature("o"),
                },
                {
                    "type": "toolCall",
                    "id": "c1",
                    "name": "shot",
                    "arguments": {"n": 1},
                    "thoughtSignature": g.signature("o2"),
                },
            ),
            tool_result("c1", "shot", {"type": "image", "data": PNG, "mimeType": "image/png"}),
        ]
    }
    body = await send(server, model, context)
    _, model_turn, results = body["contents"]
    text, call = model_turn["parts"]
    assert text == {"text": "From another model."}  # foreign thinking becomes plain text
    assert call == {
        "functionCall": {"name": "shot", "args": {"n": 1}},
        "thoughtSignature": "skip_thought_signature_validator",
    }
    [response] = results["parts"]
    nested = response["functionResponse"]["parts"]
    assert decoded(field(nested[0], "inlineData")["data"]) == base64.b64decode(PNG)
    assert response["functionResponse"]["response"] == {"output": "(see attached image)"}


async def test_errored_turns_are_dropped_and_orphan_calls_get_a_result(server: FakeServer) -> None:
    model = gemini(server)
    context: Context = {
        "messages": [
            {"role": "user", "content": "go", "timestamp": 1},
            assistant(model, {"type": "text", "text": "boom"}, stop="error"),
            assistant(model, {"type": "toolCall", "id": "c1", "name": "ls", "arguments": {}}),
            {"role": "user", "content": "never mind", "timestamp": 5},
        ]
    }
    body = await send(server, model, context)
    roles = [turn["role"] for turn in body["contents"]]
    assert roles == ["user", "model", "user", "user"]
    assert body["contents"][2]["parts"] == [
        {"functionResponse": {"name": "ls", "response": {"error": "No result provided"}}}
    ]


async def test_unpaired_surrogates_are_removed_from_outgoing_text(server: FakeServer) -> None:
    body = await send(
        server,
        gemini(server),
        {
            "systemPrompt": "sys\ud800",
            "messages": [{"role": "user", "content": "bad \udc00 text 🙂", "timestamp": 1}],
        },
    )
    assert body["contents"][0]["parts"] == [{"text": "bad  text 🙂"}]
    assert body["systemInstruction"]["parts"] == [{"text": "sys"}]


async def test_claude_through_google_sends_sanitised_ids(server: FakeServer) -> None:
    model = Model(
        id="claude-sonnet-4-5",
        api="google-generative-ai",
        provider="google",
        base_url=server.url + "/v1beta",
        cost=ModelCost(),
    )
    openai_turn: Any = {
        **assistant(
            model, {"type": "toolCall", "id": "call|abc.def", "name": "ls", "arguments": {}}
        ),
        "provider": "openai",
        "api": "openai-responses",
        "model": "gpt-5",
    }
    context: Context = {
        "messages": [
            {"role": "user", "content": "go", "timestamp": 1},
            openai_turn,
            tool_result("call|abc.def", "ls", {"type": "text", "text": "ok"}),
        ]
    }
    body = await send(server, model, context)
    call = body["contents"][1]["parts"][0]["functionCall"]
    response = body["contents"][2]["parts"][0]["functionResponse"]
    assert call["id"] == "call_abc_def"
    assert response["id"] == "call_abc_def"


# -- base URL --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base_url", "expected"),
    [
        (
            "https://generativelanguage.googleapis.com/v1beta",
            ("https://generativelanguage.googleapis.com", "v1beta"),
        ),
        (
            "https://generativelanguage.googleapis.com/v1/",
            ("https://generativelanguage.googleapis.com", "v1"),
        ),
        ("http://127.0.0.1:8080", ("http://127.0.0.1:8080", "v1beta")),
        (
            "https://gw.example.com/google-ai-studio/v1alpha",
            ("https://gw.example.com/google-ai-studio", "v1alpha"),
        ),
        ("https://gw.example.com/proxy/", ("https://gw.example.com/proxy", "v1beta")),
        ("", ("https://generativelanguage.googleapis.com", "v1beta")),
    ],
)
def test_base_url_is_split_into_host_and_api_version(
    base_url: str, expected: tuple[str, str]
) -> None:
    assert split_base_url(base_url) == expected
