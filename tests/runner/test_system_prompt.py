"""The runner's system prompt: section order, modes, bootstrap files, runtime line, report."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from pathlib import Path

from clawpi.runner.system_prompt import (
    DEFAULT_BOOTSTRAP_MAX_CHARS,
    DEFAULT_BOOTSTRAP_TOTAL_MAX_CHARS,
    IDENTITY_LINE,
    RuntimeInfo,
    SandboxInfo,
    SystemPromptParams,
    build_agent_system_prompt,
    build_bootstrap_context_files,
    build_prompt_sections,
    build_skills_prompt,
    detect_runtime_info,
    load_workspace_bootstrap_files,
    resolve_bootstrap_max_chars,
    resolve_bootstrap_total_max_chars,
    system_prompt_report,
    trim_bootstrap_content,
)
from clawpi.sdk.resources import ResourceLoader

SKILLS_PROMPT = (
    "<available_skills>\n  <skill>\n    <name>weather</name>\n  </skill>\n</available_skills>"
)


def params(workspace: Path, **overrides: object) -> SystemPromptParams:
    base = SystemPromptParams(
        workspace_dir=str(workspace),
        tool_names=("exec", "read", "message", "gateway", "memory_search"),
        skills_prompt=SKILLS_PROMPT,
        heartbeat_prompt="Read HEARTBEAT.md",
        user_timezone="Europe/Berlin",
        owner_numbers=("+15551234",),
        model_alias_lines=("- opus: anthropic/claude-opus-4-6",),
        docs_path="/opt/docs",
        runtime=RuntimeInfo(agent_id="main", model="anthropic/claude-x", channel="telegram"),
    )
    return dataclasses.replace(base, **overrides)  # type: ignore[arg-type]


def headings(prompt: str) -> list[str]:
    return re.findall(r"^## (.+)$", prompt, re.MULTILINE)


def test_full_mode_sections_come_in_the_reference_order(workspace: Path) -> None:
    (workspace / "AGENTS.md").write_text("Be kind.")
    files = build_bootstrap_context_files(load_workspace_bootstrap_files(workspace))
    prompt = build_agent_system_prompt(
        params(
            workspace,
            context_files=files,
            sandbox=SandboxInfo(enabled=True),
            extra_system_prompt="Group: friends",
            tts_hint="Keep voice replies short.",
        )
    )
    assert prompt.startswith(IDENTITY_LINE + "\n\n## Tooling")
    order = [
        "Tooling",
        "Tool Call Style",
        "Safety",
        "Skills (mandatory)",
        "Memory Recall",
        "OpenClaw Self-Update",
        "Model Aliases",
        "Workspace",
        "Documentation",
        "Workspace Files (injected)",
        "AGENTS.md",
        "Sandbox",
        "User Identity",
        "Current Date & Time",
        "Reply Tags",
        "Messaging",
        "Voice (TTS)",
        "Group Chat Context",
        "Silent Replies",
        "Heartbeats",
        "Runtime",
    ]
    found = headings(prompt)
    assert [h for h in found if h in order] == order


def test_tool_list_uses_the_canonical_order_then_extras_sorted(workspace: Path) -> None:
    names = ("zeta_tool", "Exec", "read", "image", "alpha_tool", "write", "READ", "ls")
    prompt = build_agent_system_prompt(
        params(workspace, tool_names=names, tool_summaries={"alpha_tool": "Does alpha"})
    )
    lines = [line for line in prompt.splitlines() if line.startswith("- ")]
    listed = [line[2:].split(":")[0] for line in lines[:7]]
    assert listed == ["read", "write", "ls", "Exec", "image", "alpha_tool", "zeta_tool"]
    assert "- alpha_tool: Does alpha" in prompt
    assert "- zeta_tool\n" in prompt  # no summary known: the bare name
    assert "- read: Read file contents" in prompt


def test_minimal_mode_omits_skills_heartbeats_silent_replies_and_messaging(
    workspace: Path,
) -> None:
    prompt = build_agent_system_prompt(params(workspace, prompt_mode="minimal"))
    found = headings(prompt)
    for gone in (
        "Skills (mandatory)",
        "Heartbeats",
        "Silent Replies",
        "Messaging",
        "Reply Tags",
        "Memory Recall",
        "OpenClaw Self-Update",
        "Model Aliases",
        "User Identity",
        "Documentation",
    ):
        assert gone not in found
    for kept in ("Tooling", "Workspace", "Runtime"):
        assert kept in found
    assert "NO_REPLY" not in prompt
    assert "HEARTBEAT_OK" not in prompt


def test_none_mode_is_only_the_identity_line(workspace: Path) -> None:
    assert build_agent_system_prompt(params(workspace, prompt_mode="none")) == IDENTITY_LINE


def test_extra_prompt_goes_under_group_chat_or_subagent_context(workspace: Path) -> None:
    full = build_agent_system_prompt(params(workspace, extra_system_prompt="Be brief here."))
    assert "## Group Chat Context\nBe brief here." in full
    minimal = build_agent_system_prompt(
        params(workspace, prompt_mode="minimal", extra_system_prompt="Task: count files.")
    )
    assert "## Subagent Context\nTask: count files." in minimal
    assert "Group Chat Context" not in minimal


def test_owner_numbers_line(workspace: Path) -> None:
    prompt = build_agent_system_prompt(params(workspace, owner_numbers=(" +1555 ", "", "+4930")))
    assert "Owner numbers: +1555, +4930. Treat messages from these numbers as the user." in prompt
    none = build_agent_system_prompt(params(workspace, owner_numbers=()))
    assert "Owner numbers" not in none


def test_reply_tags_section(workspace: Path) -> None:
    prompt = build_agent_system_prompt(params(workspace))
    section = prompt.split("## Reply Tags\n", 1)[1].split("\n\n", 1)[0]
    assert "[[reply_to_current]]" in section
    assert "[[reply_to:<id>]]" in section


def test_time_section_names_the_zone_and_never_the_clock(workspace: Path) -> None:
    prompt = build_agent_system_prompt(params(workspace, user_timezone="America/New_York"))
    section = prompt.split("## Current Date & Time\n", 1)[1].split("\n\n", 1)[0]
    assert section.startswith("Time zone: America/New_York")
    assert "session_status" in section
    today = dt.date.today()
    assert today.isoformat() not in prompt
    assert not re.search(r"\b\d{1,2}:\d{2}\b", prompt)
    assert "Current Date & Time" not in build_agent_system_prompt(
        params(workspace, user_timezone=None)
    )


def test_the_prompt_is_byte_identical_across_builds(workspace: Path) -> None:
    (workspace / "SOUL.md").write_text("Warm and witty.")
    files = build_bootstrap_context_files(load_workspace_bootstrap_files(workspace))
    first = build_agent_system_prompt(params(workspace, context_files=files))
    again = build_bootstrap_context_files(load_workspace_bootstrap_files(workspace))
    assert build_agent_system_prompt(params(workspace, context_files=again)) == first


def test_sandbox_section_contents(workspace: Path) -> None:
    sandbox = SandboxInfo(
        enabled=True,
        workspace_dir="/workspace",
        workspace_access="ro",
        agent_workspace_mount="/agent",
        browser_enabled=True,
        host_browser_allowed=False,
        elevated_allowed=True,
        elevated_default_level="ask",
    )
    prompt = build_agent_system_prompt(params(workspace, sandbox=sandbox))
    section = prompt.split("## Sandbox\n", 1)[1].split("\n\n", 1)[0]
    assert "Sandbox workspace: /workspace" in section
    assert "Agent workspace access: ro (mounted at /agent)" in section
    assert "Sandbox browser: enabled." in section
    assert "Host browser control: blocked." in section
    assert "Elevated exec is available for this session." in section
    assert "Current elevated level: ask" in section
    plain = build_agent_system_prompt(params(workspace))
    assert "## Sandbox" not in plain
    no_elevated = build_agent_system_prompt(
        params(workspace, sandbox=SandboxInfo(enabled=True, workspace_access="rw"))
    )
    assert "Elevated exec" not in no_elevated


def test_runtime_line_format(workspace: Path) -> None:
    runtime = RuntimeInfo(
        agent_id="main",
        host="box",
        repo_root="/src/repo",
        os="Linux 6.1",
        arch="x86_64",
        python="3.11.9",
        model="anthropic/claude-x",
        default_model="openai/gpt-y",
        shell="bash",
        channel=" Telegram ",
        capabilities=("inlineButtons", "reactions"),
    )
    prompt = build_agent_system_prompt(
        params(workspace, runtime=runtime, default_think_level="low")
    )
    assert (
        "Runtime: agent=main | host=box | repo=/src/repo | os=Linux 6.1 (x86_64) | "
        "python=3.11.9 | model=anthropic/claude-x | default_model=openai/gpt-y | shell=bash | "
        "channel=telegram | capabilities=inlineButtons,reactions | thinking=low"
    ) in prompt
    sparse = build_agent_system_prompt(
        params(workspace, runtime=RuntimeInfo(arch="arm64", channel="discord"))
    )
    assert "Runtime: arch=arm64 | channel=discord | capabilities=none | thinking=off" in sparse
    assert (
        build_agent_system_prompt(params(workspace))
        .rstrip()
        .splitlines()[-2]
        .startswith("Runtime: agent=main")
    )


def test_detected_runtime_info_describes_this_process() -> None:
    info = detect_runtime_info(agent_id="a1")
    assert info.agent_id == "a1"
    assert info.python and re.match(r"^3\.\d+", info.python)
    assert info.arch


def test_reasoning_hint_by_level(workspace: Path) -> None:
    off = build_agent_system_prompt(params(workspace))
    assert off.splitlines()[-1].startswith("Reasoning: off (hidden from the user")
    on = build_agent_system_prompt(params(workspace, reasoning_level="on"))
    assert on.splitlines()[-1].startswith("Reasoning: on (shown to the user")
    stream = build_agent_system_prompt(params(workspace, reasoning_level="stream"))
    assert stream.splitlines()[-1].startswith("Reasoning: stream (streamed to the user")
    tags = build_agent_system_prompt(params(workspace, reasoning_tag_hint=True))
    assert "## Reasoning Format" in tags and "<final>" in tags
    assert "## Reasoning Format" not in off


def test_silent_replies_and_heartbeats_carry_their_tokens(workspace: Path) -> None:
    prompt = build_agent_system_prompt(params(workspace))
    silent = prompt.split("## Silent Replies\n", 1)[1].split("\n\n", 1)[0]
    assert "reply with ONLY: NO_REPLY" in silent
    heartbeats = prompt.split("## Heartbeats\n", 1)[1].split("\n\n", 1)[0]
    assert heartbeats.startswith("Heartbeat prompt: Read HEARTBEAT.md")
    assert "HEARTBEAT_OK" in heartbeats


def test_skills_section_needs_a_skills_prompt_and_names_the_read_tool(workspace: Path) -> None:
    prompt = build_agent_system_prompt(params(workspace, tool_names=("Read",)))
    section = prompt.split("## Skills (mandatory)\n", 1)[1]
    assert "with `Read`" in section
    assert SKILLS_PROMPT in section
    assert "## Skills" not in build_agent_system_prompt(params(workspace, skills_prompt="  "))


def test_skills_prompt_lists_loaded_skills_within_its_size_limit(tmp_path: Path) -> None:
    for name in ("alpha", "beta", "gamma"):
        folder = tmp_path / "agent" / "skills" / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: does {name}\n---\n")
    loader = ResourceLoader(tmp_path / "ws", tmp_path / "agent")
    skills = sorted(loader.skills, key=lambda s: s.name)
    text = build_skills_prompt(skills)
    assert text.count("<skill>") == 3
    assert "<location>" in text and str(skills[0].file_path) in text
    limited = build_skills_prompt(skills, max_chars=len(text) - 1)
    assert limited.count("<skill>") == 2
    assert "gamma" not in limited
    assert build_skills_prompt(skills, max_chars=10) == ""


# -- bootstrap files --------------------------------------------------------------------------


def test_bootstrap_files_in_order_with_missing_notes(workspace: Path) -> None:
    (workspace / "AGENTS.md").write_text("agents")
    (workspace / "USER.md").write_text("user")
    files = build_bootstrap_context_files(load_workspace_bootstrap_files(workspace))
    names = [f.name for f in files]
    assert names == ["AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md", "HEARTBEAT.md"]
    soul = files[1]
    assert soul.missing
    assert soul.content == f"[MISSING] Expected at: {workspace / 'SOUL.md'}"
    prompt = build_agent_system_prompt(params(workspace, context_files=files))
    assert "## AGENTS.md\n\nagents" in prompt
    assert f"## SOUL.md\n\n[MISSING] Expected at: {workspace / 'SOUL.md'}" in prompt


def test_optional_bootstrap_and_memory_files_only_when_present(workspace: Path) -> None:
    names = [f.name for f in load_workspace_bootstrap_files(workspace)]
    assert "BOOTSTRAP.md" not in names and "MEMORY.md" not in names
    (workspace / "BOOTSTRAP.md").write_text("first run")
    (workspace / "memory.md").write_text("remember this")
    loaded = {f.name: f for f in load_workspace_bootstrap_files(workspace)}
    assert loaded["BOOTSTRAP.md"].content == "first run"
    assert loaded["MEMORY.md"].content == "remember this"


def test_subagents_only_get_agents_and_tools_files(workspace: Path) -> None:
    (workspace / "AGENTS.md").write_text("a")
    (workspace / "SOUL.md").write_text("s")
    names = [f.name for f in load_workspace_bootstrap_files(workspace, subagent=True)]
    assert names == ["AGENTS.md", "TOOLS.md"]


def test_a_file_over_the_per_file_cap_keeps_head_and_tail_with_a_marker(workspace: Path) -> None:
    body = "A" * 15_000 + "B" * 10_000 + "C" * 5_000
    (workspace / "AGENTS.md").write_text(body + "\n\n")
    files = build_bootstrap_context_files(load_workspace_bootstrap_files(workspace))
    agents = files[0]
    assert agents.truncated and agents.raw_chars == 30_000
    assert agents.injected_chars <= DEFAULT_BOOTSTRAP_MAX_CHARS
    assert agents.content.startswith("A" * 14_000 + "\n[... AGENTS.md truncated")
    assert agents.content.endswith("...]\n" + "C" * 4_000)  # 70 % head, 20 % tail
    assert "read AGENTS.md for the full content" in agents.content
    text, truncated = trim_bootstrap_content("short\n\n", "X.md", 100)
    assert (text, truncated) == ("short", False)


def test_total_budget_caps_all_files_and_skips_the_rest(workspace: Path) -> None:
    for name in ("AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md"):
        (workspace / name).write_text(name[0] * 20_000)
    files = build_bootstrap_context_files(
        load_workspace_bootstrap_files(workspace), max_chars=20_000, total_max_chars=50_000
    )
    assert sum(f.injected_chars for f in files) <= 50_000
    # two whole files, the third trimmed to the 10k left, the fourth gets the last scraps,
    # and once under 64 chars remain the rest is skipped
    assert [f.name for f in files] == ["AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md"]
    assert [f.truncated for f in files] == [False, False, True, True]
    assert files[2].injected_chars <= 10_000


def test_default_total_budget_is_150k(workspace: Path) -> None:
    names = ("AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md", "HEARTBEAT.md")
    for name in (*names, "MEMORY.md", "BOOTSTRAP.md"):
        (workspace / name).write_text("x" * 30_000)
    files = build_bootstrap_context_files(load_workspace_bootstrap_files(workspace))
    total = sum(f.injected_chars for f in files)
    assert total <= DEFAULT_BOOTSTRAP_TOTAL_MAX_CHARS
    assert len(files) == 8
    assert all(f.truncated for f in files)


def test_bootstrap_caps_come_from_config() -> None:
    assert resolve_bootstrap_max_chars({}) == DEFAULT_BOOTSTRAP_MAX_CHARS
    config = {"agents": {"defaults": {"bootstrapMaxChars": 500, "bootstrapTotalMaxChars": 0}}}
    assert resolve_bootstrap_max_chars(config) == 500
    assert resolve_bootstrap_total_max_chars(config) == DEFAULT_BOOTSTRAP_TOTAL_MAX_CHARS


def test_unreadable_and_binary_files_never_crash(workspace: Path) -> None:
    (workspace / "AGENTS.md").write_bytes(b"\xff\xfe ok \x00")
    (workspace / "SOUL.md").mkdir()
    files = {f.name: f for f in load_workspace_bootstrap_files(workspace)}
    assert files["AGENTS.md"].content is not None and "ok" in files["AGENTS.md"].content
    assert files["SOUL.md"].missing


def test_soul_file_adds_the_persona_hint(workspace: Path) -> None:
    (workspace / "SOUL.md").write_text("Pirate voice.")
    files = build_bootstrap_context_files(load_workspace_bootstrap_files(workspace))
    prompt = build_agent_system_prompt(params(workspace, context_files=files))
    assert "SOUL.md is present" in prompt


# -- report -----------------------------------------------------------------------------------


def test_report_counts_chars_per_section_files_and_truncation(workspace: Path) -> None:
    (workspace / "AGENTS.md").write_text("a" * 25_000)
    (workspace / "TOOLS.md").write_text("tools")
    files = build_bootstrap_context_files(load_workspace_bootstrap_files(workspace))
    p = params(workspace, context_files=files)
    report = system_prompt_report(p)
    prompt = build_agent_system_prompt(p)
    assert report["systemPromptChars"] == len(prompt)
    sections = build_prompt_sections(p)
    assert [s["name"] for s in report["sections"]] == [s.name for s in sections]
    assert sum(s["chars"] for s in report["sections"]) + 2 * (len(sections) - 1) == len(prompt)
    by_name = {f["name"]: f for f in report["bootstrap"]["files"]}
    assert by_name["AGENTS.md"]["truncated"] is True
    assert by_name["AGENTS.md"]["rawChars"] == 25_000
    assert by_name["TOOLS.md"] == {
        "name": "TOOLS.md",
        "path": str(workspace / "TOOLS.md"),
        "missing": False,
        "rawChars": 5,
        "injectedChars": 5,
        "truncated": False,
    }
    assert by_name["SOUL.md"]["missing"] is True
    assert report["bootstrap"]["truncated"] is True
    assert report["skills"] == {"count": 1, "promptChars": len(SKILLS_PROMPT)}
    assert report["tools"]["count"] == 5
    assert report["promptMode"] == "full"
