from __future__ import annotations

import datetime as dt
from pathlib import Path

from clawpi.sdk.resources import ContextFile, Skill
from clawpi.sdk.system_prompt import build_system_prompt

TODAY = dt.date(2026, 11, 21)


def test_default_prompt_sections_in_order(tmp_path: Path) -> None:
    skill = Skill(
        "pdf", "Work with <PDF> files", tmp_path / "pdf" / "SKILL.md", tmp_path / "pdf", "user"
    )
    prompt = build_system_prompt(
        cwd="/work/proj",
        tools=["read", "exec", "edit", "write"],
        append_system_prompt="Always answer in French.",
        context_files=[ContextFile(Path("/work/proj/AGENTS.md"), "Use tabs.")],
        skills=[skill],
        today=TODAY,
    )
    order = [
        "Available tools:\n- read: Read file contents\n- exec:",
        "Guidelines:\n- Use exec for file operations like ls, rg, find",
        "- Use read to examine files before editing",
        "- Be concise in your responses\n- Show file paths clearly when working with files",
        "Always answer in French.",
        "# Project Context",
        "## /work/proj/AGENTS.md\n\nUse tabs.",
        "<available_skills>",
        "<description>Work with &lt;PDF&gt; files</description>",
        "\nCurrent date: 2026-11-21\nCurrent working directory: /work/proj",
    ]
    positions = [prompt.index(part) for part in order]
    assert positions == sorted(positions)
    assert prompt.endswith("Current working directory: /work/proj")


def test_guidelines_depend_on_tools() -> None:
    with_search = build_system_prompt(cwd="/x", tools=["exec", "grep"], today=TODAY)
    assert "Prefer grep/find/ls tools over exec" in with_search
    assert "Use edit for precise changes" not in with_search
    none = build_system_prompt(cwd="/x", tools=[], today=TODAY)
    assert "Available tools:\n(none)" in none


def test_skills_need_read_and_hidden_skills_are_left_out(tmp_path: Path) -> None:
    hidden = Skill(
        "h", "internal", tmp_path / "h.md", tmp_path, "user", disable_model_invocation=True
    )
    shown = Skill("s", "shown", tmp_path / "s.md", tmp_path, "user")
    without_read = build_system_prompt(cwd="/x", tools=["exec"], skills=[shown], today=TODAY)
    assert "<available_skills>" not in without_read
    with_read = build_system_prompt(cwd="/x", tools=["read"], skills=[hidden, shown], today=TODAY)
    assert "<name>s</name>" in with_read
    assert "<name>h</name>" not in with_read


def test_custom_prompt_replaces_the_default_but_keeps_appended_sections() -> None:
    prompt = build_system_prompt(
        cwd="/x",
        tools=["read"],
        custom_prompt="You are a pirate.",
        append_system_prompt="Arr.",
        today=TODAY,
    )
    assert prompt.startswith("You are a pirate.\n\nArr.")
    assert "Available tools" not in prompt
    assert prompt.endswith("Current date: 2026-11-21\nCurrent working directory: /x")
