"""The default system prompt of an agent session, rebuilt whenever the active tools change.

Section order follows pi: identity, available tools, guidelines, appended text, project context
files, skills, then the date and working directory.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from xml.sax.saxutils import escape

from clawpi.sdk.resources import ContextFile, Skill

IDENTITY = (
    "You are an expert coding assistant running inside clawpi, an agent runtime. You help users "
    "by reading files, running commands, editing code and writing new files."
)

TOOL_SNIPPETS: Mapping[str, str] = {
    "read": "Read file contents",
    "bash": "Execute bash commands (ls, grep, find, etc.)",
    "exec": "Run shell commands (ls, grep, find, etc.)",
    "process": "Manage background commands started by exec",
    "edit": "Make surgical edits to files (find exact text and replace)",
    "write": "Create or overwrite files",
    "grep": "Search file contents for patterns (respects .gitignore)",
    "find": "Find files by glob pattern (respects .gitignore)",
    "ls": "List directory contents",
    "apply_patch": "Apply a multi-file patch",
}
_SHELL_TOOLS = ("bash", "exec")
_SEARCH_TOOLS = ("grep", "find", "ls")


def _guidelines(tools: Sequence[str], extra: Sequence[str]) -> list[str]:
    has = set(tools).__contains__
    shell = next((t for t in _SHELL_TOOLS if has(t)), None)
    lines: list[str] = []
    if shell and not any(has(t) for t in _SEARCH_TOOLS):
        lines.append(f"Use {shell} for file operations like ls, rg, find")
    elif shell:
        lines.append(
            f"Prefer grep/find/ls tools over {shell} for file exploration (faster, respects .gitignore)"
        )
    if has("read") and has("edit"):
        lines.append(
            "Use read to examine files before editing. You must use this tool instead of cat or sed."
        )
    if has("edit"):
        lines.append("Use edit for precise changes (old text must match exactly)")
    if has("write"):
        lines.append("Use write only for new files or complete rewrites")
    if has("edit") or has("write"):
        lines.append(
            "When summarizing your actions, output plain text directly - do not use cat or bash to display what you did"
        )
    lines.extend(extra)
    lines.append("Be concise in your responses")
    lines.append("Show file paths clearly when working with files")
    return list(dict.fromkeys(lines))


def format_skills(skills: Sequence[Skill]) -> str:
    visible = [s for s in skills if not s.disable_model_invocation]
    if not visible:
        return ""
    parts = [
        "\n\nThe following skills provide specialized instructions for specific tasks.",
        "Use the read tool to load a skill's file when the task matches its description.",
        "When a skill file references a relative path, resolve it against the skill directory.",
        "",
        "<available_skills>",
    ]
    for skill in visible:
        parts += [
            "  <skill>",
            f"    <name>{escape(skill.name)}</name>",
            f"    <description>{escape(skill.description)}</description>",
            f"    <location>{escape(str(skill.file_path))}</location>",
            "  </skill>",
        ]
    parts.append("</available_skills>")
    return "\n".join(parts)


def build_system_prompt(
    *,
    cwd: Path | str,
    tools: Sequence[str] = (),
    tool_snippets: Mapping[str, str] | None = None,
    extra_guidelines: Sequence[str] = (),
    custom_prompt: str | None = None,
    append_system_prompt: str | None = None,
    context_files: Sequence[ContextFile] = (),
    skills: Sequence[Skill] = (),
    today: _dt.date | None = None,
) -> str:
    """pi's default prompt; with `custom_prompt` only the appended sections follow it."""
    snippets = {**TOOL_SNIPPETS, **(tool_snippets or {})}
    if custom_prompt is not None:
        prompt = custom_prompt
    else:
        tool_lines = (
            "\n".join(f"- {name}: {snippets.get(name, name)}" for name in tools) or "(none)"
        )
        guidelines = "\n".join(f"- {line}" for line in _guidelines(tools, extra_guidelines))
        prompt = (
            f"{IDENTITY}\n\nAvailable tools:\n{tool_lines}\n\n"
            "In addition to the tools above, you may have access to other custom tools depending "
            f"on the project.\n\nGuidelines:\n{guidelines}"
        )
    if append_system_prompt:
        prompt += f"\n\n{append_system_prompt}"
    if context_files:
        prompt += "\n\n# Project Context\n\nProject-specific instructions and guidelines:\n\n"
        prompt += "".join(f"## {f.path}\n\n{f.content}\n\n" for f in context_files)
    if "read" in tools or (custom_prompt is not None and not tools):
        prompt += format_skills(skills)
    date = (today or _dt.date.today()).isoformat()
    prompt += f"\nCurrent date: {date}"
    prompt += f"\nCurrent working directory: {Path(cwd).as_posix()}"
    return prompt
