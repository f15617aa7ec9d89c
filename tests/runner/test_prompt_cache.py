"""The attempt's system prompt is reused between turns, and rebuilt when an input changes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from clawpi.ai.models import get_model
from clawpi.runner.prompt_cache import attempt_system_prompt
from clawpi.sdk.resources import ResourceLoader


def _prompt(
    workspace: Path, loader: ResourceLoader, **overrides: Any
) -> tuple[str, dict[str, Any]]:
    model = get_model("anthropic", "claude-sonnet-4-5")
    assert model is not None
    args: dict[str, Any] = {
        "workspace_dir": str(workspace),
        "prompt_mode": "full",
        "config": {},
        "model": model,
        "tool_names": ["read", "deploy"],
        "tool_summaries": {"read": "Read a file", "deploy": "Ship the build"},
        "loader": loader,
        "extra_system_prompt": None,
        "thinking_level": "off",
        "reasoning_mode": None,
    }
    args.update(overrides)
    return attempt_system_prompt(**args)


def test_an_edited_bootstrap_file_is_in_the_next_prompt(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    loader = ResourceLoader(workspace, tmp_path / "agent")
    agents = workspace / "AGENTS.md"
    agents.write_text("Always answer in French.")
    first, _ = _prompt(workspace, loader)
    assert "Always answer in French." in first
    assert _prompt(workspace, loader)[0] == first
    agents.write_text("Always answer in German.")
    stat = agents.stat()  # same size, so only the mtime tells the change
    os.utime(agents, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    second, _ = _prompt(workspace, loader)
    assert "Always answer in German." in second and "French" not in second
    (workspace / "MEMORY.md").write_text("The user's name is Ada.")
    assert "The user's name is Ada." in _prompt(workspace, loader)[0]
    agents.unlink()
    assert "German" not in _prompt(workspace, loader)[0]


def test_tools_extra_prompt_and_model_each_change_the_prompt(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    loader = ResourceLoader(workspace, tmp_path / "agent")
    base, _ = _prompt(workspace, loader)
    assert "Ship the build" in base
    fewer, report = _prompt(workspace, loader, tool_names=["read"], tool_summaries={"read": "R"})
    assert "Ship the build" not in fewer and report["tools"]["names"] == ["read"]
    extra, _ = _prompt(workspace, loader, extra_system_prompt="You are on call tonight.")
    assert "You are on call tonight." in extra
    other = get_model("openai", "gpt-4o")
    assert other is not None
    assert "openai/gpt-4o" in _prompt(workspace, loader, model=other)[0]


def test_each_call_gets_its_own_report(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    loader = ResourceLoader(workspace, tmp_path / "agent")
    _, report = _prompt(workspace, loader)
    report["tools"]["names"].clear()
    _, again = _prompt(workspace, loader)
    assert again["tools"]["names"] == ["read", "deploy"]
