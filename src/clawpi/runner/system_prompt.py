"""The runner's system prompt (OpenClaw's `buildAgentSystemPrompt`), replacing pi's default.

It is built from sections in a fixed order so that, for the same workspace and settings, it is
byte-identical from turn to turn: the provider's prompt cache then covers it. That is why the
date/time section names only the time zone and never the clock.

Modes: `full` (main agents), `minimal` (sub-agents: no skills, memory, messaging, reply tags,
silent replies, heartbeats or user identity) and `none` (the identity line alone).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import platform
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from clawpi.reply.directives import SILENT_REPLY_TOKEN
from clawpi.runner.config import agent_defaults, positive_int
from clawpi.sdk.resources import Skill
from clawpi.sdk.system_prompt import format_skills

PromptMode = Literal["full", "minimal", "none"]

IDENTITY_LINE = "You are a personal assistant running inside OpenClaw."
HEARTBEAT_OK_TOKEN = "HEARTBEAT_OK"

DEFAULT_BOOTSTRAP_MAX_CHARS = 20_000
DEFAULT_BOOTSTRAP_TOTAL_MAX_CHARS = 150_000
BOOTSTRAP_HEAD_RATIO = 0.7
BOOTSTRAP_TAIL_RATIO = 0.2
MIN_BOOTSTRAP_FILE_BUDGET_CHARS = 64
"""Below this much total budget left, further bootstrap files are skipped."""
MAX_BOOTSTRAP_FILE_BYTES = 2 * 1024 * 1024
DEFAULT_SKILLS_PROMPT_MAX_CHARS = 30_000

BOOTSTRAP_FILE_NAMES = (
    "AGENTS.md",
    "SOUL.md",
    "TOOLS.md",
    "IDENTITY.md",
    "USER.md",
    "HEARTBEAT.md",
    "BOOTSTRAP.md",
    "MEMORY.md",
)
OPTIONAL_BOOTSTRAP_FILES = frozenset({"BOOTSTRAP.md", "MEMORY.md"})
"""Only injected when present (onboarding script, long-term memory): no [MISSING] note."""
SUBAGENT_BOOTSTRAP_FILES = frozenset({"AGENTS.md", "TOOLS.md"})

TOOL_ORDER = (
    "read",
    "write",
    "edit",
    "apply_patch",
    "grep",
    "find",
    "ls",
    "exec",
    "process",
    "web_search",
    "web_fetch",
    "browser",
    "canvas",
    "nodes",
    "cron",
    "message",
    "gateway",
    "agents_list",
    "sessions_list",
    "sessions_history",
    "sessions_send",
    "sessions_spawn",
    "session_status",
    "image",
)
"""Canonical order of the Tooling list; other tools follow, sorted by name."""

CORE_TOOL_SUMMARIES: Mapping[str, str] = {
    "read": "Read file contents",
    "write": "Create or overwrite files",
    "edit": "Make precise edits to files",
    "apply_patch": "Apply multi-file patches",
    "grep": "Search file contents for patterns",
    "find": "Find files by glob pattern",
    "ls": "List directory contents",
    "exec": "Run shell commands (a pty is available for programs that need a terminal)",
    "process": "Manage background exec sessions",
    "web_search": "Search the web",
    "web_fetch": "Fetch a URL and extract its readable content",
    "browser": "Control a web browser",
    "canvas": "Present, evaluate or snapshot the Canvas",
    "nodes": "List, describe, notify, camera or screen on paired nodes",
    "cron": "Manage cron jobs and wake events (use it for reminders; write the reminder text so "
    "it reads well when it fires)",
    "message": "Send messages and channel actions",
    "gateway": "Restart, apply config to, or update the running gateway",
    "agents_list": "List agent ids allowed for sessions_spawn",
    "sessions_list": "List other sessions (sub-agents included) with filters",
    "sessions_history": "Fetch the history of another session or sub-agent",
    "sessions_send": "Send a message to another session or sub-agent",
    "sessions_spawn": "Spawn a sub-agent session",
    "session_status": "Show the session status card (usage, time, model, reasoning); use it for "
    "questions about the model in use",
    "image": "Analyze an image with the configured image model",
}


# -- inputs -----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class RuntimeInfo:
    """What the Runtime line reports; empty fields are left out of it."""

    agent_id: str | None = None
    host: str | None = None
    repo_root: str | None = None
    os: str | None = None
    arch: str | None = None
    python: str | None = None
    model: str | None = None
    """`provider/model` of this run."""
    default_model: str | None = None
    shell: str | None = None
    channel: str | None = None
    capabilities: tuple[str, ...] = ()


def detect_runtime_info(**overrides: Any) -> RuntimeInfo:
    """Host, OS, architecture, Python version and shell of this process, plus `overrides`."""
    return dataclasses.replace(_detected_runtime(), **overrides)


@functools.cache
def _detected_runtime() -> RuntimeInfo:
    """Looked up once per process: none of it changes while the process runs."""
    return RuntimeInfo(
        host=socket.gethostname() or None,
        os=f"{platform.system()} {platform.release()}".strip() or None,
        arch=platform.machine() or None,
        python=platform.python_version(),
        shell=Path(os.environ["SHELL"]).name if os.environ.get("SHELL") else None,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class SandboxInfo:
    enabled: bool = False
    workspace_dir: str | None = None
    """The workspace path as the sandboxed tools see it."""
    workspace_access: Literal["none", "ro", "rw"] | None = None
    agent_workspace_mount: str | None = None
    browser_enabled: bool = False
    host_browser_allowed: bool | None = None
    elevated_allowed: bool = False
    elevated_default_level: str = "off"


@dataclasses.dataclass(frozen=True, slots=True)
class WorkspaceBootstrapFile:
    name: str
    path: Path
    content: str | None
    missing: bool


@dataclasses.dataclass(frozen=True, slots=True)
class InjectedContextFile:
    """A bootstrap file as it goes into the prompt, with what trimming did to it."""

    name: str
    path: Path
    content: str
    raw_chars: int
    missing: bool = False
    truncated: bool = False

    @property
    def injected_chars(self) -> int:
        return len(self.content)


@dataclasses.dataclass(frozen=True, slots=True)
class SystemPromptParams:
    workspace_dir: str
    prompt_mode: PromptMode = "full"
    tool_names: Sequence[str] = ()
    tool_summaries: Mapping[str, str] = dataclasses.field(default_factory=dict)
    skills_prompt: str | None = None
    context_files: Sequence[InjectedContextFile] = ()
    extra_system_prompt: str | None = None
    owner_numbers: Sequence[str] = ()
    user_timezone: str | None = None
    heartbeat_prompt: str | None = None
    docs_path: str | None = None
    workspace_notes: Sequence[str] = ()
    tts_hint: str | None = None
    model_alias_lines: Sequence[str] = ()
    message_tool_hints: Sequence[str] = ()
    message_channels: Sequence[str] = ()
    memory_citations: Literal["on", "off"] = "on"
    reaction_level: Literal["minimal", "extensive"] | None = None
    reasoning_tag_hint: bool = False
    runtime: RuntimeInfo = dataclasses.field(default_factory=RuntimeInfo)
    default_think_level: str | None = None
    reasoning_level: str | None = None
    sandbox: SandboxInfo = dataclasses.field(default_factory=SandboxInfo)


@dataclasses.dataclass(frozen=True, slots=True)
class PromptSection:
    name: str
    text: str


# -- bootstrap files --------------------------------------------------------------------------


def resolve_bootstrap_max_chars(config: Mapping[str, Any] | None) -> int:
    value = positive_int(agent_defaults(config).get("bootstrapMaxChars"))
    return value or DEFAULT_BOOTSTRAP_MAX_CHARS


def resolve_bootstrap_total_max_chars(config: Mapping[str, Any] | None) -> int:
    value = positive_int(agent_defaults(config).get("bootstrapTotalMaxChars"))
    return value or DEFAULT_BOOTSTRAP_TOTAL_MAX_CHARS


def load_workspace_bootstrap_files(
    workspace_dir: str | os.PathLike[str], *, subagent: bool = False
) -> list[WorkspaceBootstrapFile]:
    """The bootstrap files of a workspace in their canonical order (sub-agents get only
    AGENTS.md and TOOLS.md). Unreadable files count as missing; nothing here raises."""
    root = Path(workspace_dir)
    found: list[WorkspaceBootstrapFile] = []
    for name in BOOTSTRAP_FILE_NAMES:
        if subagent and name not in SUBAGENT_BOOTSTRAP_FILES:
            continue
        path = root / name
        if name == "MEMORY.md" and not path.is_file() and (root / "memory.md").is_file():
            path = root / "memory.md"
        content: str | None = None
        try:
            if path.is_file():
                with path.open("rb") as handle:
                    content = handle.read(MAX_BOOTSTRAP_FILE_BYTES).decode("utf-8", "replace")
        except OSError:
            content = None
        if content is None and name in OPTIONAL_BOOTSTRAP_FILES:
            continue
        found.append(WorkspaceBootstrapFile(name, path, content, content is None))
    return found


def trim_bootstrap_content(content: str, file_name: str, max_chars: int) -> tuple[str, bool]:
    """(text, truncated): a file over `max_chars` keeps its head (70 %) and tail (20 %) with a
    marker between them that says how much was kept and where the whole file is."""
    text = content.rstrip()
    if len(text) <= max_chars:
        return text, False
    head_chars = int(max_chars * BOOTSTRAP_HEAD_RATIO)
    tail_chars = int(max_chars * BOOTSTRAP_TAIL_RATIO)
    marker = (
        f"\n[... {file_name} truncated: kept the first {head_chars} and last {tail_chars} of "
        f"{len(text)} chars; read {file_name} for the full content ...]\n"
    )
    tail = text[len(text) - tail_chars :] if tail_chars else ""
    trimmed = text[:head_chars] + marker + tail
    return (trimmed if len(trimmed) <= max_chars else trimmed[:max_chars]), True


def build_bootstrap_context_files(
    files: Sequence[WorkspaceBootstrapFile],
    *,
    max_chars: int = DEFAULT_BOOTSTRAP_MAX_CHARS,
    total_max_chars: int = DEFAULT_BOOTSTRAP_TOTAL_MAX_CHARS,
) -> list[InjectedContextFile]:
    """Apply the per-file cap and the total budget, in order; empty files are left out."""
    remaining = total_max_chars
    injected: list[InjectedContextFile] = []
    for file in files:
        if remaining < MIN_BOOTSTRAP_FILE_BUDGET_CHARS:
            break
        cap = min(max_chars, remaining)
        if file.missing or file.content is None:
            note = f"[MISSING] Expected at: {file.path}"
            text, truncated = note[:cap], len(note) > cap
            injected.append(InjectedContextFile(file.name, file.path, text, 0, True, truncated))
        else:
            text, truncated = trim_bootstrap_content(file.content, file.name, cap)
            if not text.strip():
                continue
            raw = len(file.content.rstrip())
            injected.append(InjectedContextFile(file.name, file.path, text, raw, False, truncated))
        remaining -= len(text)
    return injected


def build_skills_prompt(
    skills: Sequence[Skill], max_chars: int = DEFAULT_SKILLS_PROMPT_MAX_CHARS
) -> str:
    """The `<available_skills>` block; skills at the end are dropped until it fits."""
    visible = list(skills)
    while visible:
        text = format_skills(visible).strip()
        if len(text) <= max_chars:
            return text
        visible.pop()
    return ""


# -- sections ---------------------------------------------------------------------------------


def _tooling(params: SystemPromptParams) -> tuple[list[str], dict[str, str]]:
    """(tool lines, lowercase name -> the caller's spelling)."""
    spelled: dict[str, str] = {}
    for raw in params.tool_names:
        name = raw.strip()
        if name:
            spelled.setdefault(name.lower(), name)
    summaries = {
        k.strip().lower(): v.strip() for k, v in params.tool_summaries.items() if v and v.strip()
    }
    ordered = [t for t in TOOL_ORDER if t in spelled]
    ordered += sorted(t for t in spelled if t not in TOOL_ORDER)
    lines = []
    for tool in ordered:
        summary = CORE_TOOL_SUMMARIES.get(tool) or summaries.get(tool)
        lines.append(f"- {spelled[tool]}: {summary}" if summary else f"- {spelled[tool]}")
    return lines, spelled


def _join(*lines: str) -> str:
    return "\n".join(line for line in lines if line)


def _runtime_line(params: SystemPromptParams) -> str:
    info = params.runtime
    channel = (info.channel or "").strip().lower()
    capabilities = [c.strip() for c in info.capabilities if c and c.strip()]
    os_part = ""
    if info.os:
        os_part = f"os={info.os}" + (f" ({info.arch})" if info.arch else "")
    elif info.arch:
        os_part = f"arch={info.arch}"
    parts = [
        f"agent={info.agent_id}" if info.agent_id else "",
        f"host={info.host}" if info.host else "",
        f"repo={info.repo_root}" if info.repo_root else "",
        os_part,
        f"python={info.python}" if info.python else "",
        f"model={info.model}" if info.model else "",
        f"default_model={info.default_model}" if info.default_model else "",
        f"shell={info.shell}" if info.shell else "",
        f"channel={channel}" if channel else "",
        f"capabilities={','.join(capabilities) or 'none'}" if channel else "",
        f"thinking={params.default_think_level or 'off'}",
    ]
    return "Runtime: " + " | ".join(p for p in parts if p)


def _reasoning_line(level: str | None) -> str:
    level = level or "off"
    if level == "off":
        shown = "hidden from the user"
    elif level == "stream":
        shown = "streamed to the user while you work"
    else:
        shown = "shown to the user with the reply"
    return (
        f"Reasoning: {level} ({shown}; hidden unless on/stream). /reasoning toggles it and "
        "/status shows it when enabled."
    )


def _sandbox_text(sandbox: SandboxInfo) -> str:
    access = ""
    if sandbox.workspace_access:
        mount = (
            f" (mounted at {sandbox.agent_workspace_mount})"
            if sandbox.agent_workspace_mount
            else ""
        )
        access = f"Agent workspace access: {sandbox.workspace_access}{mount}"
    host_browser = ""
    if sandbox.host_browser_allowed is True:
        host_browser = "Host browser control: allowed."
    elif sandbox.host_browser_allowed is False:
        host_browser = "Host browser control: blocked."
    elevated: tuple[str, ...] = ()
    if sandbox.elevated_allowed:
        elevated = (
            "Elevated exec is available for this session.",
            "The user can switch it with /elevated on|off|ask|full, and so can you when needed.",
            f"Current elevated level: {sandbox.elevated_default_level} (ask runs exec on the host "
            "after approval; full approves automatically).",
        )
    return _join(
        "## Sandbox",
        "Your tools run inside a sandbox; some may be unavailable because of sandbox policy.",
        "Sub-agents stay sandboxed too. If you need to read or write outside the sandbox, ask "
        "the user first instead of spawning a sub-agent.",
        f"Sandbox workspace: {sandbox.workspace_dir}" if sandbox.workspace_dir else "",
        access,
        "Sandbox browser: enabled." if sandbox.browser_enabled else "",
        host_browser,
        *elevated,
    )


def _messaging_text(params: SystemPromptParams, tools: Mapping[str, str]) -> str:
    lines = [
        "## Messaging",
        "- Your reply in this session is delivered to the channel the message came from.",
        "- To reach another session, use sessions_send(sessionKey, message).",
        "- Never use exec or curl to send provider messages; routing is handled for you.",
    ]
    if "message" in tools:
        channels = "|".join(params.message_channels) or "the configured channels"
        lines += [
            "",
            "### message tool",
            "- Use `message` for proactive sends and channel actions (polls, reactions, ...).",
            "- For `action=send`, give `to` and `message`.",
            f"- With several channels configured, pass `channel` ({channels}).",
            "- If you deliver your visible reply through `message` (`action=send`), answer with "
            f"only {SILENT_REPLY_TOKEN} so the user does not get it twice.",
            *[h for h in params.message_tool_hints if h.strip()],
        ]
    return "\n".join(lines)


def build_prompt_sections(params: SystemPromptParams) -> list[PromptSection]:
    """The prompt as named sections, in order (see the module docstring for the modes)."""
    if params.prompt_mode == "none":
        return [PromptSection("identity", IDENTITY_LINE)]
    full = params.prompt_mode == "full"
    tool_lines, tools = _tooling(params)
    read_tool = tools.get("read", "read")
    sections: list[PromptSection] = [PromptSection("identity", IDENTITY_LINE)]

    def add(name: str, text: str) -> None:
        if text.strip():
            sections.append(PromptSection(name, text))

    add(
        "tooling",
        _join(
            "## Tooling",
            "Tools available to you (already filtered by policy). Tool names are case-sensitive: "
            "call them exactly as listed.",
            "\n".join(tool_lines) if tool_lines else "(no tools are available in this run)",
            "TOOLS.md does not decide which tools exist; it is the user's guidance on using them.",
            "For long or complex work, spawn a sub-agent: it does the work and reports back "
            "when done."
            if "sessions_spawn" in tools
            else "",
        ),
    )
    add(
        "tool_call_style",
        _join(
            "## Tool Call Style",
            "By default, do not narrate routine, low-risk tool calls: just make them.",
            "Narrate only when it helps: multi-step work, hard problems, sensitive actions "
            "(such as deletions), or when the user asks for it.",
            "Keep any narration short and useful, in plain language.",
        ),
    )
    add(
        "safety",
        _join(
            "## Safety",
            "You have no goals of your own: do not seek self-preservation, replication, "
            "resources or power, and make no long-term plans beyond what the user asked.",
            "Put safety and human oversight before finishing a task. If instructions conflict, "
            "stop and ask. Always comply with requests to stop, pause or be audited, and never "
            "work around safeguards.",
            "Do not persuade anyone to widen your access or switch safeguards off. Do not copy "
            "yourself or change system prompts, safety rules or tool policies unless explicitly "
            "asked to.",
        ),
    )
    skills = (params.skills_prompt or "").strip()
    if full and skills:
        add(
            "skills",
            _join(
                "## Skills (mandatory)",
                "Before replying, scan the <description> of each entry in <available_skills>.",
                f"- If exactly one skill clearly applies: read its SKILL.md at <location> with "
                f"`{read_tool}`, then follow it.",
                "- If several could apply: pick the most specific one, then read and follow it.",
                "- If none clearly applies: do not read any SKILL.md.",
                "Never read more than one skill up front, and only after choosing it.",
                skills,
            ),
        )
    if full and ("memory_search" in tools or "memory_get" in tools):
        add(
            "memory",
            _join(
                "## Memory Recall",
                "Before answering anything about earlier work, decisions, dates, people, "
                "preferences or todos, run memory_search over MEMORY.md and memory/*.md, then "
                "memory_get only the lines you need. If you are still unsure, say that you "
                "checked.",
                "Citations are off: do not mention file paths or line numbers unless asked."
                if params.memory_citations == "off"
                else "Cite memory as Source: <path#line> when it helps the user check it.",
            ),
        )
    if full and "gateway" in tools:
        add(
            "self_update",
            _join(
                "## OpenClaw Self-Update",
                "Update or reconfigure the gateway ONLY when the user explicitly asks; otherwise "
                "ask first.",
                "Actions: config.get, config.schema, config.apply (validate, write the whole "
                "config, restart), update.run (update, then restart).",
                "After a restart the last active session is pinged automatically.",
            ),
        )
    aliases = [line for line in params.model_alias_lines if line.strip()]
    if full and aliases:
        add(
            "model_aliases",
            _join(
                "## Model Aliases",
                "Prefer these aliases when asking for a model override; provider/model works too.",
                *aliases,
            ),
        )
    add(
        "workspace",
        _join(
            "## Workspace",
            f"Your working directory is: {params.workspace_dir}",
            "Treat it as the one workspace for file operations unless told otherwise.",
            *[note.strip() for note in params.workspace_notes if note.strip()],
        ),
    )
    docs = (params.docs_path or "").strip()
    if full and docs:
        add(
            "documentation",
            _join(
                "## Documentation",
                f"OpenClaw docs: {docs}",
                "For questions about OpenClaw's behaviour, commands, config or architecture, "
                "consult these docs first.",
            ),
        )
    add("workspace_files", _workspace_files_text(params.context_files))
    if params.sandbox.enabled:
        add("sandbox", _sandbox_text(params.sandbox))
    owners = [n.strip() for n in params.owner_numbers if n.strip()]
    if full and owners:
        add(
            "user_identity",
            _join(
                "## User Identity",
                f"Owner numbers: {', '.join(owners)}. Treat messages from these numbers as the "
                "user.",
            ),
        )
    timezone = (params.user_timezone or "").strip()
    if timezone:
        add(
            "date_time",
            _join(
                "## Current Date & Time",
                f"Time zone: {timezone}",
                "For the current date, time or day of the week, run session_status.",
            ),
        )
    if full:
        add(
            "reply_tags",
            _join(
                "## Reply Tags",
                "To reply natively (quote/thread) where the channel supports it, put one tag in "
                "your reply:",
                "- [[reply_to_current]] replies to the message that triggered this turn.",
                "- [[reply_to:<id>]] replies to a specific message id, when you have one.",
                "Whitespace inside the tag is fine ([[ reply_to: 123 ]]). Tags are removed "
                "before sending.",
            ),
        )
        add("messaging", _messaging_text(params, tools))
        tts = (params.tts_hint or "").strip()
        if tts:
            add("voice", _join("## Voice (TTS)", tts))
    extra = (params.extra_system_prompt or "").strip()
    if extra:
        header = (
            "## Subagent Context" if params.prompt_mode == "minimal" else "## Group Chat Context"
        )
        add("extra_context", _join(header, extra))
    if full and params.reaction_level:
        channel = params.runtime.channel or "this channel"
        guidance = (
            "React only when it truly matters (important requests, real sentiment); at most "
            "about one reaction per 5-10 exchanges."
            if params.reaction_level == "minimal"
            else "React freely with fitting emojis whenever it feels natural."
        )
        add(
            "reactions",
            _join(
                "## Reactions",
                f"Reactions are enabled for {channel} in {params.reaction_level.upper()} mode.",
                guidance,
            ),
        )
    if params.reasoning_tag_hint:
        add(
            "reasoning_format",
            _join(
                "## Reasoning Format",
                "Put ALL internal reasoning inside <think>...</think> and nothing outside it. "
                "Format every reply as <think>...</think> followed by <final>...</final>, with "
                "no other text. Only the text inside <final> is shown to the user.",
            ),
        )
    if full:
        add(
            "silent_replies",
            _join(
                "## Silent Replies",
                f"When you have nothing to say, reply with ONLY: {SILENT_REPLY_TOKEN}",
                f"- It must be the whole message. Never add {SILENT_REPLY_TOKEN} to a real "
                "reply, and never wrap it in markdown or code.",
            ),
        )
        heartbeat = (params.heartbeat_prompt or "").strip()
        add(
            "heartbeats",
            _join(
                "## Heartbeats",
                f"Heartbeat prompt: {heartbeat or '(configured)'}",
                "When a heartbeat poll arrives (a user message matching the heartbeat prompt) "
                f"and nothing needs attention, reply exactly: {HEARTBEAT_OK_TOKEN}",
                f"If something needs attention, reply with the alert instead and leave "
                f"{HEARTBEAT_OK_TOKEN} out.",
            ),
        )
    add(
        "runtime",
        _join("## Runtime", _runtime_line(params), _reasoning_line(params.reasoning_level)),
    )
    return sections


def _workspace_files_text(files: Sequence[InjectedContextFile]) -> str:
    if not files:
        return ""
    parts = [
        "## Workspace Files (injected)",
        "These user-editable workspace files are loaded for you and included below.",
    ]
    if any(f.name.lower() == "soul.md" and not f.missing for f in files):
        parts.append(
            "SOUL.md is present: take on its persona and tone, and avoid stiff, generic replies "
            "unless higher-priority instructions say otherwise."
        )
    text = "\n".join(parts)
    for file in files:
        text += f"\n\n## {file.name}\n\n{file.content}"
    return text


def build_agent_system_prompt(params: SystemPromptParams) -> str:
    """The whole prompt; sections are separated by a blank line."""
    return "\n\n".join(section.text for section in build_prompt_sections(params))


def system_prompt_report(
    params: SystemPromptParams, *, skills_count: int | None = None
) -> dict[str, Any]:
    """What went into the prompt and how big each part is (OpenClaw's systemPromptReport)."""
    sections = build_prompt_sections(params)
    prompt = "\n\n".join(s.text for s in sections)
    skills_prompt = (params.skills_prompt or "").strip()
    names = [n.strip() for n in params.tool_names if n.strip()]
    return {
        "promptMode": params.prompt_mode,
        "systemPromptChars": len(prompt),
        "sections": [{"name": s.name, "chars": len(s.text)} for s in sections],
        "bootstrap": {
            "files": [
                {
                    "name": f.name,
                    "path": str(f.path),
                    "missing": f.missing,
                    "rawChars": f.raw_chars,
                    "injectedChars": f.injected_chars,
                    "truncated": f.truncated,
                }
                for f in params.context_files
            ],
            "injectedChars": sum(f.injected_chars for f in params.context_files),
            "truncated": any(f.truncated for f in params.context_files),
        },
        "skills": {
            "count": skills_count if skills_count is not None else skills_prompt.count("<skill>"),
            "promptChars": len(skills_prompt),
        },
        "tools": {"count": len({n.lower() for n in names}), "names": names},
    }
