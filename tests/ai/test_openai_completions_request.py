"""What the openai-completions provider sends: message conversion, tools, thinking levels and the
compat flags that adapt one request shape to each OpenAI-compatible server."""

from __future__ import annotations

from typing import Any

import pytest

from clawpi.ai import Model, StreamOptions, get_model, list_models, stream
from clawpi.ai.providers.openai_compat import detect_compat, resolve_compat
from clawpi.ai.providers.openai_completions import is_loopback_url
from clawpi.ai.providers.openai_completions_convert import (
    build_request,
    mistral_tool_call_id,
    tool_call_id_normalizer,
)
from clawpi.ai.types import Context
from tests.fakes.http_server import FakeServer
from tests.fakes.openai_sse import completion_response, finish_chunk, role_chunk, text_chunk

KEY = "sk-test"
PNG = "iVBORw0KGgo="
JPEG = "/9j/4AAQSkZJRg=="


def local_model(**changes: Any) -> Model:
    base = Model(
        id="local-model",
        api="openai-completions",
        provider="local",
        base_url="http://127.0.0.1:8080/v1",
        reasoning=True,
        input=("text", "image"),
        max_tokens=8192,
    )
    return base.replace(**changes) if changes else base


def body_for(model: Model, context: Context, **options: Any) -> dict[str, Any]:
    return build_request(model, context, StreamOptions(**options), resolve_compat(model))


def assistant(model: Model, *content: Any, stop: str = "toolUse") -> Any:
    return {
        "role": "assistant",
        "content": list(content),
        "api": model.api,
        "provider": model.provider,
        "model": model.id,
        "usage": {},
        "stopReason": stop,
        "timestamp": 2,
    }


def tool_result(call_id: str, *content: Any, is_error: bool = False, name: str = "read") -> Any:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": list(content),
        "isError": is_error,
        "timestamp": 3,
    }


def text(value: str) -> Any:
    return {"type": "text", "text": value}


def image(data: str, mime: str = "image/png") -> Any:
    return {"type": "image", "data": data, "mimeType": mime}


def call(call_id: str, name: str, arguments: dict[str, Any]) -> Any:
    return {"type": "toolCall", "id": call_id, "name": name, "arguments": arguments}


# -- the whole conversation on the wire --------------------------------------------------------


async def test_history_is_converted_to_chat_messages_on_the_wire(server: FakeServer) -> None:
    model = local_model(base_url=f"{server.url}/v1")
    history: Any = [
        {"role": "user", "content": [text("Look at this"), image(PNG)], "timestamp": 1},
        assistant(
            model,
            {"type": "thinking", "thinking": "Two files.", "thinkingSignature": "reasoning"},
            text("Reading "),
            text("both."),
            call("call_1", "read", {"path": "a.png"}),
            call("call_2", "read", {"path": "missing.txt"}),
        ),
        tool_result("call_1", text("a.png, 2 KB"), image(JPEG, "image/jpeg")),
        tool_result("call_2", text("ENOENT: no such file"), is_error=True),
        {"role": "user", "content": "Thanks", "timestamp": 4},
    ]
    server.enqueue(completion_response([role_chunk(), text_chunk("ok"), finish_chunk("stop")]))
    context: Context = {"systemPrompt": "Be brief.", "messages": history}
    events = [e async for e in stream(model, context, api_key=KEY)]
    assert events[-1]["type"] == "done"
    assert server.requests[0].json()["messages"] == [
        {"role": "developer", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look at this"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
            ],
        },
        {
            "role": "assistant",
            "content": "Reading both.",
            "reasoning": "Two files.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"path":"a.png"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"path":"missing.txt"}'},
                },
            ],
        },
        {"role": "tool", "content": "a.png, 2 KB", "tool_call_id": "call_1"},
        {"role": "tool", "content": "ENOENT: no such file", "tool_call_id": "call_2"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Attached image(s) from tool result:"},
                {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{JPEG}"}},
            ],
        },
        {"role": "user", "content": "Thanks"},
    ]
    assert server.requests[0].json()["tools"] == []  # tool history but no tools given


def test_assistant_with_only_tool_calls_has_null_content() -> None:
    model = local_model()
    body = body_for(model, {"messages": [assistant(model, call("c1", "ls", {}))]})
    assert body["messages"][0]["content"] is None
    assert body["messages"][0]["tool_calls"][0]["function"]["arguments"] == "{}"


def test_empty_and_errored_assistant_turns_are_not_sent() -> None:
    model = local_model()
    history: Any = [
        {"role": "user", "content": "hi", "timestamp": 1},
        assistant(model, text("  "), stop="stop"),
        assistant(model, text("half an ans"), stop="error"),
        {"role": "user", "content": "again", "timestamp": 5},
    ]
    messages = body_for(model, {"messages": history})["messages"]
    assert [m["role"] for m in messages] == ["user", "user"]


def test_image_only_tool_result_gets_a_placeholder_text() -> None:
    model = local_model()
    history: Any = [
        assistant(model, call("c1", "screenshot", {})),
        tool_result("c1", image(PNG), name="screenshot"),
    ]
    messages = body_for(model, {"messages": history})["messages"]
    assert messages[1] == {"role": "tool", "content": "(see attached image)", "tool_call_id": "c1"}
    assert messages[2]["content"][1]["image_url"]["url"] == f"data:image/png;base64,{PNG}"


def test_text_only_model_gets_no_images() -> None:
    model = local_model(input=("text",))
    history: Any = [
        {"role": "user", "content": [text("see"), image(PNG)], "timestamp": 1},
        assistant(model, call("c1", "screenshot", {})),
        tool_result("c1", image(PNG), name="screenshot"),
    ]
    messages = body_for(model, {"messages": history})["messages"]
    assert messages[0] == {"role": "user", "content": [{"type": "text", "text": "see"}]}
    assert "image_url" not in str(messages)
    assert messages[-1]["role"] == "tool"


def test_lone_surrogates_are_removed_from_outgoing_text() -> None:
    model = local_model(reasoning=False)
    body = body_for(
        model,
        {
            "systemPrompt": "sys\ud800tem",
            "messages": [{"role": "user", "content": "bad \udc00 text 😀", "timestamp": 1}],
        },
    )
    assert body["messages"][0]["content"] == "system"
    assert body["messages"][1]["content"] == "bad  text 😀"


def test_another_models_thinking_becomes_plain_text() -> None:
    model = local_model()
    other = assistant(
        local_model(id="other-model"),
        {"type": "thinking", "thinking": "private", "thinkingSignature": "reasoning_content"},
        text("public"),
        stop="stop",
    )
    messages = body_for(model, {"messages": [other]})["messages"]
    assert messages == [{"role": "assistant", "content": "privatepublic"}]


def test_tools_carry_strict_false_unless_the_server_rejects_it() -> None:
    tool: Any = {"name": "ls", "description": "List", "parameters": {"type": "object"}}
    strict = body_for(local_model(), {"messages": [], "tools": [tool]})["tools"][0]
    assert strict["function"]["strict"] is False
    lax_model = local_model(compat={"supportsStrictMode": False})
    lax = body_for(lax_model, {"messages": [], "tools": [tool]})["tools"][0]
    assert "strict" not in lax["function"]


def test_tool_choice_is_passed_through() -> None:
    choice = {"type": "function", "function": {"name": "ls"}}
    body = body_for(local_model(), {"messages": []}, tool_choice=choice)
    assert body["tool_choice"] == choice


# -- tool call ids -----------------------------------------------------------------------------


def test_responses_style_ids_keep_only_the_sanitised_call_id() -> None:
    normalize = tool_call_id_normalizer(detect_compat(local_model()))
    source: Any = {}
    long_item = "fc_" + "x+/=" * 120
    assert normalize(f"call_a.b|{long_item}", local_model(), source) == "call_a_b"
    assert len(normalize("call_" + "z" * 60 + "|fc_1", local_model(), source)) == 40
    assert normalize("toolu_" + "q" * 60, local_model(), source) == "toolu_" + "q" * 60
    openai = local_model(provider="openai")
    assert normalize("toolu_" + "q" * 60, openai, source) == ("toolu_" + "q" * 60)[:40]


def test_handoff_rewrites_the_call_id_and_its_result_together() -> None:
    model = local_model()
    from_responses = {
        **assistant(local_model(id="gpt-5", provider="openai"), call("call_9|fc_abc", "ls", {})),
        "api": "openai-responses",
    }
    history: Any = [from_responses, tool_result("call_9|fc_abc", text("a b"), name="ls")]
    messages = body_for(model, {"messages": history})["messages"]
    assert messages[0]["tool_calls"][0]["id"] == "call_9"
    assert messages[1]["tool_call_id"] == "call_9"


def test_mistral_ids_are_nine_alphanumerics_and_stable() -> None:
    assert mistral_tool_call_id("abc123XYZ") == "abc123XYZ"
    derived = mistral_tool_call_id("call_abc|fc_1")
    assert len(derived) == 9
    assert derived.isalnum()
    assert derived == mistral_tool_call_id("call_abc|fc_1")
    assert derived != mistral_tool_call_id("call_abd|fc_1")


# -- thinking levels ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model_id", "level", "expected"),
    [
        ("local-model", "minimal", "minimal"),
        ("local-model", "medium", "medium"),
        ("local-model", "xhigh", "high"),
        ("gpt-5.2", "xhigh", "xhigh"),
    ],
)
def test_reasoning_effort_follows_the_level(model_id: str, level: str, expected: str) -> None:
    body = body_for(local_model(id=model_id), {"messages": []}, reasoning=level)
    assert body["reasoning_effort"] == expected


def test_no_reasoning_effort_when_off_or_the_model_does_not_reason() -> None:
    assert "reasoning_effort" not in body_for(local_model(), {"messages": []}, reasoning="off")
    assert "reasoning_effort" not in body_for(local_model(), {"messages": []})
    plain = local_model(reasoning=False)
    assert "reasoning_effort" not in body_for(plain, {"messages": []}, reasoning="high")


def test_groq_qwen3_maps_every_level_to_default() -> None:
    model = get_model("groq", "qwen/qwen3-32b")
    assert model is not None
    assert body_for(model, {"messages": []}, reasoning="high")["reasoning_effort"] == "default"


def test_reasoning_effort_map_from_compat() -> None:
    model = local_model(compat={"reasoningEffortMap": {"high": "max"}})
    assert body_for(model, {"messages": []}, reasoning="high")["reasoning_effort"] == "max"
    assert body_for(model, {"messages": []}, reasoning="low")["reasoning_effort"] == "low"


def test_zai_switches_thinking_with_enable_thinking() -> None:
    model = get_model("zai", "glm-5")
    assert model is not None
    on = body_for(model, {"messages": []}, reasoning="medium")
    off = body_for(model, {"messages": []})
    assert on["enable_thinking"] is True
    assert off["enable_thinking"] is False
    assert "reasoning_effort" not in on


def test_qwen_formats() -> None:
    qwen = local_model(compat={"thinkingFormat": "qwen"})
    assert body_for(qwen, {"messages": []}, reasoning="low")["enable_thinking"] is True
    template = local_model(compat={"thinkingFormat": "qwen-chat-template"})
    assert body_for(template, {"messages": []})["chat_template_kwargs"] == {
        "enable_thinking": False
    }


def test_xai_gets_no_reasoning_effort() -> None:
    model = get_model("xai", "grok-4")
    assert model is not None
    assert "reasoning_effort" not in body_for(model, {"messages": []}, reasoning="high")


# -- compat detection and overrides ------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "base_url", "store", "developer", "effort", "field"),
    [
        ("openai", "https://api.openai.com/v1", True, True, True, "max_completion_tokens"),
        ("groq", "https://api.groq.com/openai/v1", True, True, True, "max_completion_tokens"),
        ("openrouter", "https://openrouter.ai/api/v1", True, True, True, "max_completion_tokens"),
        ("cerebras", "https://api.cerebras.ai/v1", False, False, True, "max_completion_tokens"),
        ("xai", "https://api.x.ai/v1", False, False, False, "max_completion_tokens"),
        ("deepseek", "https://api.deepseek.com", False, False, True, "max_completion_tokens"),
        (
            "zai",
            "https://api.z.ai/api/coding/paas/v4",
            False,
            False,
            False,
            "max_completion_tokens",
        ),
        ("mistral", "https://api.mistral.ai/v1", False, False, False, "max_tokens"),
        ("custom", "https://llm.chutes.ai/v1", False, False, True, "max_tokens"),
        ("ollama", "http://127.0.0.1:11434/v1", True, True, True, "max_completion_tokens"),
    ],
)
def test_compat_is_detected_from_provider_and_base_url(
    provider: str, base_url: str, store: bool, developer: bool, effort: bool, field: str
) -> None:
    compat = detect_compat(local_model(provider=provider, base_url=base_url))
    assert compat.supports_store is store
    assert compat.supports_developer_role is developer
    assert compat.supports_reasoning_effort is effort
    assert compat.max_tokens_field == field
    assert compat.supports_usage_in_streaming is True
    assert compat.thinking_format == ("zai" if provider == "zai" else "openai")


def test_explicit_compat_overrides_detection() -> None:
    model = local_model(
        provider="xai",
        base_url="https://api.x.ai/v1",
        compat={
            "supportsStore": True,
            "supportsReasoningEffort": True,
            "supportsUsageInStreaming": False,
            "maxTokensField": "max_tokens",
        },
    )
    body = body_for(model, {"messages": []}, reasoning="low", max_tokens=99)
    assert body["store"] is False
    assert body["reasoning_effort"] == "low"
    assert "stream_options" not in body
    assert body["max_tokens"] == 99
    assert "max_completion_tokens" not in body


def test_servers_without_store_or_developer_role_get_neither() -> None:
    model = local_model(provider="deepseek", base_url="https://api.deepseek.com")
    body = body_for(model, {"systemPrompt": "S", "messages": []})
    assert "store" not in body
    assert body["messages"][0]["role"] == "system"


def test_mistral_names_tool_results_and_sends_thinking_as_text() -> None:
    model = get_model("mistral", "magistral-medium-latest")
    assert model is not None
    history: Any = [
        assistant(
            model,
            {"type": "thinking", "thinking": "Plan it."},
            text("Listing."),
            call("abcdefghi", "ls", {}),
        ),
        tool_result("abcdefghi", text("a.txt"), name="ls"),
    ]
    messages = body_for(model, {"messages": history}, max_tokens=500)["messages"]
    assert messages[0]["content"] == [
        {"type": "text", "text": "Plan it."},
        {"type": "text", "text": "Listing."},
    ]
    assert messages[1] == {
        "role": "tool",
        "content": "a.txt",
        "tool_call_id": "abcdefghi",
        "name": "ls",
    }


def test_assistant_bridge_between_tool_results_and_a_user_message() -> None:
    model = local_model(compat={"requiresAssistantAfterToolResult": True})
    history: Any = [
        assistant(model, call("c1", "ls", {})),
        tool_result("c1", text("a.txt"), name="ls"),
        {"role": "user", "content": "next", "timestamp": 9},
    ]
    messages = body_for(model, {"messages": history})["messages"]
    assert [m["role"] for m in messages] == ["assistant", "tool", "assistant", "user"]
    assert messages[0]["content"] == ""
    assert messages[2] == {"role": "assistant", "content": "I have processed the tool results."}


def test_openrouter_routing_and_anthropic_cache_point() -> None:
    model = get_model("openrouter", "anthropic/claude-sonnet-4.6")
    assert model is not None
    routed = model.replace(compat={"openRouterRouting": {"only": ["anthropic"]}})
    body = body_for(routed, {"messages": [{"role": "user", "content": "hi", "timestamp": 1}]})
    assert body["provider"] == {"only": ["anthropic"]}
    assert body["messages"][-1]["content"] == [
        {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}
    ]


def test_vercel_gateway_routing() -> None:
    model = local_model(
        base_url="https://ai-gateway.vercel.sh/v1",
        compat={"vercelGatewayRouting": {"order": ["bedrock", "anthropic"]}},
    )
    body = body_for(model, {"messages": []})
    assert body["providerOptions"] == {"gateway": {"order": ["bedrock", "anthropic"]}}


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:11434/v1", True),
        ("http://localhost:1234/v1", True),
        ("http://[::1]:8000/v1", True),
        ("http://127.0.1.1/v1", True),
        ("https://api.groq.com/openai/v1", False),
        ("http://192.168.1.20:11434/v1", False),
        ("", False),
    ],
)
def test_loopback_detection(url: str, local: bool) -> None:
    assert is_loopback_url(url) is local


# -- catalog -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "provider", ["groq", "openrouter", "xai", "cerebras", "mistral", "deepseek", "zai"]
)
def test_catalog_has_openai_compatible_models(provider: str) -> None:
    models = list_models(provider)
    assert models
    for model in models:
        assert model.api == "openai-completions"
        assert model.base_url.startswith("https://")
        assert model.context_window >= 8000
        assert 0 < model.max_tokens <= model.context_window
        assert model.cost.input >= 0
        assert model.cost.output >= 0


def test_catalog_entries_carry_real_numbers() -> None:
    groq = get_model("groq", "llama-3.3-70b-versatile")
    assert groq is not None
    assert (groq.context_window, groq.max_tokens) == (131072, 32768)
    assert (groq.cost.input, groq.cost.output) == (0.59, 0.79)
    mistral = get_model("mistral", "mistral-large-latest")
    assert mistral is not None
    assert mistral.base_url == "https://api.mistral.ai/v1"
    deepseek = get_model("deepseek", "deepseek-v4-flash")
    assert deepseek is not None
    assert (deepseek.cost.input, deepseek.cost.output) == (0.14, 0.28)
    assert deepseek.reasoning
    zai = get_model("zai", "glm-4.6")
    assert zai is not None
    assert zai.compat == {"supportsDeveloperRole": False, "thinkingFormat": "zai"}
