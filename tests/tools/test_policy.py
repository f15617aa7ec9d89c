"""Tool policy: each profile, groups, globs, aliases, deny-wins, per-provider overrides and the
order of the stages, on the real tool set where it matters."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from clawpi.errors import ConfigError
from clawpi.tools import ToolPolicy, ToolPolicyConfig, create_coding_tools, resolve_allowed_tools

ALL = [
    "read", "write", "edit", "apply_patch", "exec", "process", "grep", "find", "ls",
    "session_status", "sessions_list", "sessions_history", "sessions_send", "sessions_spawn",
    "message", "memory_search", "memory_get", "image", "browser", "cron", "gateway", "web_search",
]  # fmt: skip


def allowed(config: ToolPolicyConfig, **kw: str) -> list[str]:
    return resolve_allowed_tools(ALL, config, **kw)


def test_no_policy_allows_everything() -> None:
    assert resolve_allowed_tools(ALL, None) == ALL
    assert allowed(ToolPolicyConfig()) == ALL


def test_minimal_profile_is_session_status_only() -> None:
    assert allowed(ToolPolicyConfig(tools=ToolPolicy(profile="minimal"))) == ["session_status"]


def test_coding_profile_expands_its_groups() -> None:
    result = allowed(ToolPolicyConfig(tools=ToolPolicy(profile="coding")))
    assert result == [
        "read", "write", "edit", "apply_patch", "exec", "process", "grep", "find", "ls",
        "session_status", "sessions_list", "sessions_history", "sessions_send", "sessions_spawn",
        "memory_search", "memory_get", "image",
    ]  # fmt: skip


def test_messaging_profile() -> None:
    result = allowed(ToolPolicyConfig(tools=ToolPolicy(profile="messaging")))
    assert result == [
        "session_status",
        "sessions_list",
        "sessions_history",
        "sessions_send",
        "message",
    ]


def test_full_profile_has_no_restriction() -> None:
    assert allowed(ToolPolicyConfig(tools=ToolPolicy(profile="full"))) == ALL


def test_also_allow_extends_the_profile() -> None:
    config = ToolPolicyConfig(tools=ToolPolicy(profile="minimal", also_allow=("read", "group:web")))
    assert allowed(config) == ["read", "session_status", "web_search"]


def test_deny_wins_over_allow_and_profile() -> None:
    config = ToolPolicyConfig(
        tools=ToolPolicy(profile="coding", allow=("read", "write", "process"), deny=("write",))
    )
    assert allowed(config) == ["read", "process"]


def test_deny_group_and_glob_and_bash_alias() -> None:
    assert "exec" not in allowed(ToolPolicyConfig(tools=ToolPolicy(deny=("BASH",))))
    result = allowed(ToolPolicyConfig(tools=ToolPolicy(deny=("group:fs", "sessions_*"))))
    assert result == [
        "exec", "process", "session_status", "message", "memory_search", "memory_get", "image",
        "browser", "cron", "gateway", "web_search",
    ]  # fmt: skip


def test_allowing_exec_also_allows_apply_patch() -> None:
    assert allowed(ToolPolicyConfig(tools=ToolPolicy(allow=("exec",)))) == ["apply_patch", "exec"]


def test_allowlist_of_only_unknown_names_is_dropped_with_warning(caplog) -> None:
    with caplog.at_level(logging.WARNING):
        result = allowed(ToolPolicyConfig(tools=ToolPolicy(allow=("my_plugin_tool",))))
    assert result == ALL
    assert "names no known tool" in caplog.text


def test_provider_override_narrows_and_model_key_wins() -> None:
    tools = ToolPolicy(
        profile="coding",
        by_provider={
            "google": ToolPolicy(deny=("exec",)),
            "google/gemini-2.5-pro": ToolPolicy(deny=("write",)),
            "openai": ToolPolicy(profile="minimal"),
        },
    )
    config = ToolPolicyConfig(tools=tools)
    flash = allowed(config, provider="google", model_id="gemini-2.5-flash")
    assert "exec" not in flash and "write" in flash
    pro = allowed(config, provider="google", model_id="gemini-2.5-pro")
    assert "exec" in pro and "write" not in pro
    assert allowed(config, provider="openai", model_id="gpt-5") == ["session_status"]
    assert "exec" in allowed(config, provider="anthropic")


def test_later_stages_only_narrow() -> None:
    config = ToolPolicyConfig(
        tools=ToolPolicy(profile="coding"),
        agent=ToolPolicy(allow=("read", "exec", "message")),  # message is not in the profile
        group=ToolPolicy(deny=("exec",)),
        sandbox=ToolPolicy(allow=("read", "exec", "apply_patch")),
    )
    # apply_patch rides on the agent's exec allowance, as in OpenClaw; exec itself is denied.
    assert allowed(config) == ["read", "apply_patch"]


def test_subagents_lose_session_management_by_default() -> None:
    result = allowed(ToolPolicyConfig(is_subagent=True))
    for name in ("sessions_spawn", "sessions_send", "gateway", "cron", "memory_get"):
        assert name not in result
    assert "read" in result and "session_status" in result


def test_unknown_profile_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="Unknown tool profile 'coder'"):
        allowed(ToolPolicyConfig(tools=ToolPolicy(profile="coder")))  # type: ignore[arg-type]


def test_create_coding_tools_applies_policy(workspace: Path) -> None:
    config = ToolPolicyConfig(tools=ToolPolicy(profile="coding", deny=("group:runtime", "grep")))
    names = [t.name for t in create_coding_tools(workspace, policy=config)]
    assert names == ["read", "write", "edit", "find", "ls"]
    minimal = create_coding_tools(
        workspace, policy=ToolPolicyConfig(tools=ToolPolicy(profile="minimal"))
    )
    assert minimal == []
