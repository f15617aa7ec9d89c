"""Extensions: every hook kind, loading from files, and a raising handler never killing the run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clawpi.agent import AgentTool, ToolResult
from clawpi.ai import Model
from clawpi.errors import ConfigError
from clawpi.sdk import ExtensionAPI
from clawpi.testing import FauxProvider, FunctionProvider, faux_tool_call
from tests.fakes.http_server import FakeServer
from tests.fakes.openai_sse import (
    completion_response,
    finish_chunk,
    role_chunk,
    text_chunk,
    usage_chunk,
)
from tests.sdk.conftest import SessionFactory, record


async def test_before_agent_start_injects_a_message_and_replaces_the_system_prompt(
    make_session: SessionFactory,
) -> None:
    def extension(api: ExtensionAPI) -> None:
        api.on(
            "before_agent_start",
            lambda event, ctx: {
                "message": {
                    "customType": "memory",
                    "content": f"Recall for: {event['prompt']}",
                    "display": False,
                },
                "systemPrompt": event["systemPrompt"] + "\nBe brief.",
            },
        )

    faux = FauxProvider(["ok"])
    session = await make_session(faux.model, extensions=[extension])
    await session.prompt("what did I say?")
    request = faux.requests[0]
    assert request["systemPrompt"].endswith("\nBe brief.")
    assert request["messages"][1]["content"] == [
        {"type": "text", "text": "Recall for: what did I say?"}
    ]
    custom = [e for e in session.session_manager.get_entries() if e["type"] == "custom_message"]
    assert custom[0]["customType"] == "memory"


async def test_context_handler_rewrites_what_the_model_sees_but_not_the_session(
    make_session: SessionFactory,
) -> None:
    def extension(api: ExtensionAPI) -> None:
        def redact(event: dict[str, Any], ctx: Any) -> dict[str, Any]:
            messages = event["messages"]
            for message in messages:
                if message["role"] == "user":
                    message["content"] = [{"type": "text", "text": "[redacted]"}]
            return {"messages": messages}

        api.on("context", redact)

    faux = FauxProvider(["ok"])
    session = await make_session(faux.model, extensions=[extension])
    await session.prompt("my secret is 42")
    assert faux.requests[0]["messages"][0]["content"] == [{"type": "text", "text": "[redacted]"}]
    stored = session.session_manager.get_entries()[-2]["message"]
    assert stored["content"][0]["text"] == "my secret is 42"


async def test_tool_call_can_be_blocked_and_a_raising_check_blocks_too(
    make_session: SessionFactory, workspace: Path
) -> None:
    def extension(api: ExtensionAPI) -> None:
        def guard(event: dict[str, Any], ctx: Any) -> dict[str, Any] | None:
            if event["toolName"] == "write":
                return {"block": True, "reason": "writes are not allowed here"}
            if event["input"].get("path") == "boom":
                raise RuntimeError("policy service down")
            return None

        api.on("tool_call", guard)

    faux = FauxProvider(
        [
            [
                faux_tool_call("write", {"path": "x.txt", "content": "hi"}),
                faux_tool_call("read", {"path": "boom"}),
            ],
            "done",
        ]
    )
    session = await make_session(faux.model, extensions=[extension])
    events = record(session)
    await session.prompt("try")
    results = [m for m in session.messages if m["role"] == "toolResult"]
    assert results[0]["isError"] is True
    assert results[0]["content"][0]["text"] == "writes are not allowed here"
    assert results[1]["isError"] is True
    assert "policy service down" in results[1]["content"][0]["text"]
    assert not (workspace / "x.txt").exists()
    assert any(e["type"] == "extension_error" and e["event"] == "tool_call" for e in events)


async def test_tool_result_overrides_content_field_wise_for_successful_results(
    make_session: SessionFactory, workspace: Path
) -> None:
    (workspace / "a.txt").write_text("original\n")

    def extension(api: ExtensionAPI) -> None:
        api.on(
            "tool_result", lambda event, ctx: {"content": [{"type": "text", "text": "rewritten"}]}
        )

    faux = FauxProvider(
        [
            [
                faux_tool_call("read", {"path": "a.txt"}),
                faux_tool_call("read", {"path": "missing.txt"}),
            ],
            "done",
        ]
    )
    session = await make_session(faux.model, extensions=[extension])
    await session.prompt("read")
    results = [m for m in session.messages if m["role"] == "toolResult"]
    assert results[0]["content"] == [{"type": "text", "text": "rewritten"}]
    assert results[0]["isError"] is False
    assert results[1]["isError"] is True  # error results are left alone
    assert results[1]["content"][0]["text"] != "rewritten"


async def test_input_transform_and_handled(make_session: SessionFactory) -> None:
    def extension(api: ExtensionAPI) -> None:
        def on_input(event: dict[str, Any], ctx: Any) -> dict[str, Any]:
            if event["text"] == "ping":
                return {"action": "handled"}
            return {"action": "transform", "text": event["text"].upper()}

        api.on("input", on_input)

    faux = FauxProvider(["ok"])
    session = await make_session(faux.model, extensions=[extension])
    await session.prompt("ping")
    assert faux.requests == []
    await session.prompt("shout this")
    assert faux.requests[0]["messages"][0]["content"][0]["text"] == "SHOUT THIS"


async def test_turn_message_tool_and_lifecycle_events_reach_extensions(
    make_session: SessionFactory, workspace: Path
) -> None:
    seen: list[tuple[str, Any]] = []

    def extension(api: ExtensionAPI) -> None:
        for kind in (
            "session_start",
            "agent_start",
            "turn_start",
            "turn_end",
            "message_start",
            "message_end",
            "tool_execution_start",
            "tool_execution_end",
            "agent_end",
            "session_shutdown",
        ):
            api.on(kind, lambda event, ctx: seen.append((event["type"], event.get("turnIndex"))))

    (workspace / "f.txt").write_text("x")
    faux = FauxProvider([faux_tool_call("read", {"path": "f.txt"}), "done"])
    session = await make_session(faux.model, extensions=[extension])
    await session.prompt("go")
    await session.dispose()
    kinds = [k for k, _ in seen]
    assert kinds[0] == "session_start"
    assert kinds[-1] == "session_shutdown"
    assert ("turn_start", 0) in seen
    assert ("turn_end", 1) in seen
    assert kinds.count("tool_execution_end") == 1
    assert kinds.index("tool_execution_start") < kinds.index("tool_execution_end")


async def test_session_before_compact_can_supply_the_summary(make_session: SessionFactory) -> None:
    def extension(api: ExtensionAPI) -> None:
        api.on(
            "session_before_compact",
            lambda event, ctx: {
                "compaction": {
                    "summary": "extension summary",
                    "firstKeptEntryId": event["preparation"].first_kept_entry_id,
                    "tokensBefore": 123,
                }
            },
        )

    faux = FauxProvider(["a" * 4000, "b"])
    session = await make_session(
        faux.model, extensions=[extension], settings={"compaction": {"keepRecentTokens": 5}}
    )
    await session.prompt("long question " * 100)
    await session.prompt("next")
    result = await session.compact()
    assert result is not None
    assert result.summary == "extension summary"
    entry = next(e for e in session.session_manager.get_entries() if e["type"] == "compaction")
    assert entry["fromHook"] is True
    assert entry["tokensBefore"] == 123
    assert len(faux.requests) == 2  # no summary call was made


async def test_cancelled_compaction(make_session: SessionFactory) -> None:
    from clawpi.sdk.compaction import CompactionError

    def extension(api: ExtensionAPI) -> None:
        api.on("session_before_compact", lambda event, ctx: {"cancel": True})

    faux = FauxProvider(["a" * 4000, "b"])
    session = await make_session(
        faux.model, extensions=[extension], settings={"compaction": {"keepRecentTokens": 5}}
    )
    await session.prompt("q " * 400)
    await session.prompt("next")
    with pytest.raises(CompactionError, match="Compaction cancelled"):
        await session.compact()


async def test_raising_handler_is_reported_and_the_run_goes_on(
    make_session: SessionFactory,
) -> None:
    def extension(api: ExtensionAPI) -> None:
        def broken(event: dict[str, Any], ctx: Any) -> None:
            raise ValueError("bug in extension")

        api.on("message_end", broken)
        api.on("before_agent_start", broken)

    faux = FauxProvider(["still answered"])
    session = await make_session(faux.model, extensions=[extension])
    events = record(session)
    await session.prompt("hi")
    assert session.get_last_assistant_text() == "still answered"
    errors = [e for e in events if e["type"] == "extension_error"]
    assert {e["event"] for e in errors} == {"message_end", "before_agent_start"}
    assert "ValueError: bug in extension" in errors[0]["error"]


async def test_registered_tool_command_and_entry(make_session: SessionFactory) -> None:
    calls: list[str] = []

    async def run_stamp(
        tool_call_id: str, params: Any, signal: Any = None, on_update: Any = None
    ) -> ToolResult:
        return ToolResult.text(f"stamped {params['label']}")

    def extension(api: ExtensionAPI) -> None:
        api.register_tool(
            AgentTool(
                name="stamp",
                description="Stamp a label",
                execute=run_stamp,
                parameters={
                    "type": "object",
                    "properties": {"label": {"type": "string"}},
                    "required": ["label"],
                },
            ),
            prompt_snippet="Stamp things",
        )

        async def remember(args: str, ctx: Any) -> None:
            calls.append(args)
            api.append_entry("remembered", {"text": args})

        api.register_command("remember", remember, "Remember text")

    faux = FunctionProvider(
        lambda context, options: (
            [faux_tool_call("stamp", {"label": "A"})]
            if context["messages"][-1]["role"] == "user"
            else "done"
        )
    )
    session = await make_session(faux.model, extensions=[extension])
    assert "stamp" in session.active_tool_names
    assert "- stamp: Stamp things" in session.system_prompt
    await session.prompt("/remember buy milk")
    assert calls == ["buy milk"]
    assert faux.requests == []  # commands run without a model call
    custom = next(e for e in session.session_manager.get_entries() if e["type"] == "custom")
    assert custom["data"] == {"text": "buy milk"}
    await session.prompt("stamp it")
    result = next(m for m in session.messages if m["role"] == "toolResult")
    assert result["content"][0]["text"] == "stamped A"


async def test_extensions_load_from_files_and_bad_specs_say_why(
    make_session: SessionFactory, tmp_path: Path
) -> None:
    ext_file = tmp_path / "greeter.py"
    ext_file.write_text(
        "def extension(api):\n"
        "    api.on('before_agent_start', lambda e, ctx: {'systemPrompt': 'FROM FILE'})\n"
    )
    faux = FauxProvider(["hi"])
    session = await make_session(faux.model, extensions=[str(ext_file)])
    await session.prompt("x")
    assert faux.requests[0]["systemPrompt"] == "FROM FILE"
    no_factory = tmp_path / "empty_ext.py"
    no_factory.write_text("x = 1\n")
    with pytest.raises(ConfigError, match="has no factory"):
        await make_session(faux.model, extensions=[str(no_factory)])
    with pytest.raises(ConfigError, match="Cannot load extension"):
        await make_session(faux.model, extensions=["no_such_module_xyz"])


async def test_provider_payload_hook_rewrites_the_real_request(
    make_session: SessionFactory, server: FakeServer
) -> None:
    def extension(api: ExtensionAPI) -> None:
        api.on(
            "before_provider_request",
            lambda event, ctx: {**event["payload"], "user": "tenant-7"},
        )

    server.enqueue(
        completion_response(
            [role_chunk(), text_chunk("hi"), finish_chunk("stop"), usage_chunk(5, 1)]
        )
    )
    model = Model(
        id="local-model", api="openai-completions", provider="local", base_url=server.url + "/v1"
    )
    session = await make_session(model, extensions=[extension])
    await session.prompt("x")
    assert session.get_last_assistant_text() == "hi"
    body = server.requests[0].json()
    assert body["user"] == "tenant-7"
    assert body["model"] == "local-model"


async def test_a_custom_message_arriving_in_a_later_turn_is_still_converted(
    make_session: SessionFactory,
) -> None:
    """The model-roles check reads only what a turn added: a plain history, then a custom
    message, must still reach the model as a user message."""
    turns = {"n": 0}

    def extension(api: ExtensionAPI) -> None:
        def inject(event: dict[str, Any], ctx: Any) -> dict[str, Any] | None:
            turns["n"] += 1
            if turns["n"] < 3:
                return None
            return {"message": {"customType": "memory", "content": "Recall: 42", "display": False}}

        api.on("before_agent_start", inject)

    faux = FauxProvider(["one", "two", "three"])
    session = await make_session(faux.model, extensions=[extension])
    for prompt in ("a", "b", "c"):
        await session.prompt(prompt)
    roles = [m["role"] for m in faux.requests[2]["messages"]]
    assert roles == ["user", "assistant", "user", "assistant", "user", "user"]
    assert faux.requests[2]["messages"][-1]["content"] == [{"type": "text", "text": "Recall: 42"}]
