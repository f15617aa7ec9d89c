"""Context pruning (cache-TTL mode): what is trimmed, what is protected, and the TTL gate."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import orjson

from clawpi.runner.cache_ttl import append_cache_ttl_timestamp
from clawpi.runner.extensions.context_pruning import (
    DEFAULT_TTL_MS,
    ContextPruningRuntime,
    ContextPruningSettings,
    build_context_pruning_extension,
    compute_effective_settings,
    context_pruning_extension,
    make_tool_prunable_predicate,
    parse_duration_ms,
    prune_context_messages,
)
from clawpi.sdk import SettingsManager, create_agent_session
from clawpi.session import SessionManager
from clawpi.testing import FunctionProvider, faux_tool_call

WINDOW = 10_000  # tokens -> 40,000 chars


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 0}


def assistant(text: str = "ok", call: str | None = None, tool: str = "exec") -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    if call:
        content.append({"type": "toolCall", "id": call, "name": tool, "arguments": {}})
    return {"role": "assistant", "content": content, "stopReason": "stop", "timestamp": 0}


def result(call: str, text: str, tool: str = "exec", image: bool = False) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    if image:
        content.append({"type": "image", "data": "AAAA", "mimeType": "image/png"})
    return {
        "role": "toolResult",
        "toolCallId": call,
        "toolName": tool,
        "content": content,
        "isError": False,
        "timestamp": 0,
    }


def conversation(sizes: list[int], tool: str = "exec") -> list[dict[str, Any]]:
    """A user turn, then one tool round per size, then three plain assistant turns."""
    messages: list[dict[str, Any]] = [user("go")]
    for index, size in enumerate(sizes):
        messages.append(assistant(call=f"c{index}", tool=tool))
        messages.append(result(f"c{index}", f"{index}" * size, tool=tool))
    for _ in range(3):
        messages += [assistant("done"), user("more")]
    return messages


def text_of(message: dict[str, Any]) -> str:
    return "".join(b["text"] for b in message["content"] if b["type"] == "text")


SETTINGS = ContextPruningSettings()


def test_below_the_soft_trim_ratio_nothing_changes() -> None:
    messages = conversation([5_000])  # 12.5% of the window
    assert prune_context_messages(messages, SETTINGS, WINDOW) is messages


def test_soft_trim_keeps_head_and_tail_with_the_exact_note() -> None:
    body = "H" * 1500 + "M" * 7000 + "T" * 1500
    messages = conversation([100])
    messages[2] = result("c0", body)
    messages.insert(3, user("x" * 5_000))  # lift the ratio over 0.3 without hard clearing
    pruned = prune_context_messages(messages, SETTINGS, WINDOW)
    assert pruned is not messages
    expected = (
        "H" * 1500
        + "\n...\n"
        + "T" * 1500
        + "\n\n[Tool result trimmed: kept first 1500 chars and last 1500 chars of 10000 chars.]"
    )
    assert text_of(pruned[2]) == expected
    assert text_of(messages[2]) == body  # the input list is untouched


def test_results_before_the_first_user_message_are_never_pruned() -> None:
    bootstrap = [assistant(call="boot", tool="read"), result("boot", "S" * 30_000, tool="read")]
    messages = bootstrap + conversation([10_000])
    pruned = prune_context_messages(messages, SETTINGS, WINDOW)
    assert text_of(pruned[1]) == "S" * 30_000
    assert text_of(pruned[4]) != "0" * 10_000


def test_results_of_the_last_three_assistants_are_protected() -> None:
    messages = [user("go")]
    for index in range(4):
        messages += [assistant(call=f"c{index}"), result(f"c{index}", f"{index}" * 9_000)]
    pruned = prune_context_messages(messages, SETTINGS, WINDOW)
    # the 4 assistants are at 1, 3, 5, 7; the last three (3, 5, 7) protect what follows them
    assert text_of(pruned[2]).startswith("0" * 1500 + "\n...\n")
    for index in (4, 6, 8):
        assert text_of(pruned[index]) == text_of(messages[index])


def test_fewer_assistants_than_protected_turns_prunes_nothing() -> None:
    messages = [user("go"), assistant(call="c0"), result("c0", "x" * 50_000)]
    assert prune_context_messages(messages, SETTINGS, WINDOW) is messages


def test_hard_clear_replaces_oldest_results_until_under_the_ratio() -> None:
    # 16 results just under the soft-trim size: soft trim cannot help, hard clear must
    messages = conversation([3_900] * 16)
    pruned = prune_context_messages(messages, SETTINGS, WINDOW)
    placeholder = SETTINGS.hard_clear_placeholder
    texts = [text_of(m) for m in pruned if m["role"] == "toolResult"]
    cleared = [t == placeholder for t in texts]
    assert cleared[0] and not cleared[-1]
    first_kept = cleared.index(False)
    assert all(cleared[:first_kept]) and not any(cleared[first_kept:])  # oldest first
    total = sum(len(text_of(m)) for m in pruned)
    assert total / (WINDOW * 4) < SETTINGS.hard_clear_ratio
    # one fewer cleared result would have left the ratio at or above the threshold
    restored = total - len(placeholder) + 3_900
    assert restored / (WINDOW * 4) >= SETTINGS.hard_clear_ratio


def test_soft_trim_alone_when_it_brings_the_ratio_under_hard_clear() -> None:
    messages = conversation([30_000, 30_000, 30_000])
    pruned = prune_context_messages(messages, SETTINGS, WINDOW)
    for index, digit in ((2, "0"), (4, "1"), (6, "2")):
        assert text_of(pruned[index]).startswith(digit * 1500 + "\n...\n")


def test_hard_clear_needs_min_prunable_tool_chars() -> None:
    # a big user message makes the ratio high, but the prunable results are small
    messages = conversation([3_000, 3_000])
    messages.insert(1, user("u" * 40_000))
    pruned = prune_context_messages(messages, SETTINGS, WINDOW)
    assert all("cleared" not in text_of(m) for m in pruned if m["role"] == "toolResult")
    lowered = dataclasses.replace(SETTINGS, min_prunable_tool_chars=1_000)
    cleared = prune_context_messages(messages, lowered, WINDOW)
    assert any(text_of(m) == SETTINGS.hard_clear_placeholder for m in cleared)


def test_hard_clear_can_be_disabled() -> None:
    messages = conversation([30_000, 30_000, 30_000])
    settings = dataclasses.replace(SETTINGS, hard_clear_enabled=False)
    pruned = prune_context_messages(messages, settings, WINDOW)
    assert all(SETTINGS.hard_clear_placeholder not in text_of(m) for m in pruned)


def test_results_with_images_are_skipped() -> None:
    messages = conversation([20_000, 20_000])
    messages[2] = result("c0", "i" * 20_000, image=True)
    pruned = prune_context_messages(messages, SETTINGS, WINDOW)
    assert text_of(pruned[2]) == "i" * 20_000
    assert len(pruned[2]["content"]) == 2
    assert text_of(pruned[4]) != "1" * 20_000


def test_tool_globs_are_case_insensitive_and_deny_wins_over_allow() -> None:
    prunable = make_tool_prunable_predicate(allow=["exec", "web_*"], deny=["WEB_FETCH"])
    assert prunable("exec")
    assert prunable("Web_Search")
    assert not prunable("web_fetch")
    assert not prunable("read")
    everything = make_tool_prunable_predicate()
    assert everything("anything")
    only_denied = make_tool_prunable_predicate(deny=["re*"])
    assert not only_denied("read")
    assert only_denied("exec")


def test_deny_listed_tools_keep_their_results() -> None:
    messages = conversation([20_000, 20_000], tool="read")
    settings = dataclasses.replace(SETTINGS, tools_deny=("read",))
    assert prune_context_messages(messages, settings, WINDOW) is messages


def test_settings_parser_defaults_clamps_and_rejects_a_bad_ttl() -> None:
    assert compute_effective_settings(None) is None
    assert compute_effective_settings({"mode": "off"}) is None
    defaults = compute_effective_settings({"mode": "cache-ttl"})
    assert defaults == ContextPruningSettings()
    assert defaults.ttl_ms == 300_000
    parsed = compute_effective_settings(
        {
            "mode": "cache-ttl",
            "ttl": "1h",
            "keepLastAssistants": -2,
            "softTrimRatio": 1.7,
            "hardClearRatio": -0.5,
            "minPrunableToolChars": 10.9,
            "softTrim": {"maxChars": 100, "headChars": 10, "tailChars": "x"},
            "hardClear": {"enabled": False, "placeholder": "  [gone]  "},
            "tools": {"allow": ["exec"], "deny": "read"},
        }
    )
    assert parsed is not None
    assert parsed.ttl_ms == 3_600_000
    assert parsed.keep_last_assistants == 0
    assert parsed.soft_trim_ratio == 1.0
    assert parsed.hard_clear_ratio == 0.0
    assert parsed.min_prunable_tool_chars == 10
    assert (parsed.soft_trim_max_chars, parsed.soft_trim_head_chars) == (100, 10)
    assert parsed.soft_trim_tail_chars == 1_500
    assert parsed.hard_clear_enabled is False
    assert parsed.hard_clear_placeholder == "[gone]"
    assert (parsed.tools_allow, parsed.tools_deny) == (("exec",), ("read",))
    bad_ttl = compute_effective_settings({"mode": "cache-ttl", "ttl": "soon"})
    assert bad_ttl is not None and bad_ttl.ttl_ms == DEFAULT_TTL_MS


def test_durations_parse_with_units() -> None:
    assert parse_duration_ms("30s") == 30_000
    assert parse_duration_ms("5m") == 300_000
    assert parse_duration_ms("2") == 120_000
    assert parse_duration_ms("250ms") == 250
    assert parse_duration_ms("1.5h") == 5_400_000


def test_only_cache_ttl_mode_on_an_eligible_provider_builds_the_extension() -> None:
    config = {"agents": {"defaults": {"contextPruning": {"mode": "cache-ttl"}}}}
    assert build_context_pruning_extension(config, provider="anthropic", model_id="c") is not None
    assert build_context_pruning_extension(config, provider="openai", model_id="gpt") is None
    off = {"agents": {"defaults": {"contextPruning": {"mode": "off"}}}}
    assert build_context_pruning_extension(off, provider="anthropic", model_id="c") is None
    assert build_context_pruning_extension({}, provider="anthropic", model_id="c") is None


# -- through a real session -------------------------------------------------------------------


async def _run_session(
    tmp_path: Path, workspace: Path, runtime: ContextPruningRuntime
) -> tuple[FunctionProvider, SessionManager]:
    """Four tool rounds with big outputs, then a final answer; every request is recorded."""
    calls = {"n": 0}

    def respond(context: Any, options: Any) -> Any:
        calls["n"] += 1
        if calls["n"] <= 4:
            return faux_tool_call("dump", {}, call_id=f"d{calls['n']}")
        return "finished"

    from clawpi.agent import AgentTool, ToolResult

    async def dump(call_id: str, params: dict[str, Any], signal: Any, update: Any) -> ToolResult:
        return ToolResult(content=[{"type": "text", "text": "z" * 20_000}])

    tool = AgentTool(name="dump", description="dump", parameters={"type": "object"}, execute=dump)
    provider = FunctionProvider(respond, context_window=200_000)
    manager = SessionManager.create(workspace, tmp_path / "sessions")
    session = await create_agent_session(
        cwd=workspace,
        agent_dir=tmp_path / "agent",
        model=provider.model,
        session_manager=manager,
        settings_manager=SettingsManager.in_memory({}),
        extensions=[context_pruning_extension(runtime)],
        tools=[],
        custom_tools=[tool],
        discover_extensions=False,
    )
    await session.prompt("dump things")
    return provider, manager


def _sent_tool_texts(provider: FunctionProvider) -> list[str]:
    last = provider.requests[-1]["messages"]
    return [text_of(m) for m in last if m["role"] == "toolResult"]  # type: ignore[arg-type]


async def test_within_the_ttl_the_request_is_left_intact(tmp_path: Path, workspace: Path) -> None:
    now = 10_000_000
    runtime = ContextPruningRuntime(
        settings=SETTINGS,
        context_window_tokens=WINDOW,
        last_cache_touch_at=now - 60_000,
        now_ms=lambda: now,
    )
    provider, _ = await _run_session(tmp_path, workspace, runtime)
    assert _sent_tool_texts(provider) == ["z" * 20_000] * 4
    assert runtime.pruned_calls == 0


async def test_after_the_ttl_requests_are_pruned_but_the_session_file_is_not(
    tmp_path: Path, workspace: Path
) -> None:
    clock = {"now": 10_000_000}
    runtime = ContextPruningRuntime(
        settings=SETTINGS,
        context_window_tokens=WINDOW,
        last_cache_touch_at=clock["now"] - DEFAULT_TTL_MS - 1,
        now_ms=lambda: clock["now"],
    )
    provider, manager = await _run_session(tmp_path, workspace, runtime)
    sent = _sent_tool_texts(provider)
    assert runtime.pruned_calls == 1
    assert runtime.last_cache_touch_at == clock["now"]  # pruning re-warms the cache: touch reset
    assert any(text != "z" * 20_000 for text in sent)
    assert manager.session_file is not None
    on_disk = [orjson.loads(line) for line in manager.session_file.read_bytes().splitlines()]
    results = [e["message"] for e in on_disk if e.get("message", {}).get("role") == "toolResult"]
    assert [text_of(r) for r in results] == ["z" * 20_000] * 4


async def test_last_touch_is_read_from_the_session_file(tmp_path: Path, workspace: Path) -> None:
    manager = SessionManager.create(workspace, tmp_path / "sessions")
    manager.append_message(user("hi"))
    manager.append_message(assistant("hello"))
    append_cache_ttl_timestamp(manager, provider="anthropic", model_id="c", timestamp=42_000)
    config = {"agents": {"defaults": {"contextPruning": {"mode": "cache-ttl", "ttl": "10m"}}}}
    built = build_context_pruning_extension(
        config, provider="anthropic", model_id="c", session=manager, context_window_tokens=WINDOW
    )
    assert built is not None
    _, runtime = built
    assert runtime.last_cache_touch_at == 42_000
    assert runtime.settings.ttl_ms == 600_000
    assert runtime.context_window_tokens == WINDOW


async def test_through_the_runner_an_anthropic_run_past_the_ttl_prunes_old_tool_results(
    tmp_path: Path, workspace: Path
) -> None:
    """The extension as `run_embedded_agent` builds it: an Anthropic model, cache-TTL pruning on,
    the last cache touch long ago. The request is pruned; the session file keeps everything."""
    from clawpi.runner import run_embedded_agent
    from clawpi.runner.lanes import CommandQueue

    provider = FunctionProvider(
        lambda context, options: "fine", provider="anthropic", model_id="claude-test"
    )
    sessions = tmp_path / "sessions"
    manager = SessionManager.create(workspace, sessions)
    for message in conversation([25_000, 25_000, 25_000]):
        manager.append_message(message)
    append_cache_ttl_timestamp(manager, provider="anthropic", model_id="claude-test", timestamp=1)
    assert manager.session_file is not None
    config = {
        "models": {
            "providers": {
                "anthropic": {
                    "api": provider.model.api,
                    "baseUrl": provider.model.base_url,
                    "apiKey": "x",
                    "models": [{"id": "claude-test", "contextWindow": 20_000}],
                }
            }
        },
        "agents": {
            "defaults": {
                "model": {"primary": "anthropic/claude-test"},
                "contextPruning": {"mode": "cache-ttl", "ttl": "5m", "keepLastAssistants": 1},
                "compaction": {"enabled": False},
            }
        },
    }
    result = await run_embedded_agent(
        session_id="pruned",
        session_key="agent:main:test:pruned",
        session_file=manager.session_file,
        workspace_dir=workspace,
        config=config,
        prompt="and now?",
        agent_dir=tmp_path / "agent",
        run_queue=CommandQueue(),
        disable_tools=True,
    )
    assert [p.text for p in result.payloads] == ["fine"]
    sent = _sent_tool_texts(provider)
    assert len(sent) == 3 and any(len(text) < 25_000 for text in sent)  # pruned in the request
    on_disk = SessionManager.open(manager.session_file).build_session_context().messages
    kept = [text_of(m) for m in on_disk if m.get("role") == "toolResult"]
    assert [len(text) for text in kept] == [25_000] * 3  # never in the file
