"""`clawpi models` and `clawpi sessions ...`: plain tables and transcripts on stdout."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from clawpi.cli.output import error, write_text


def print_models(provider: str | None, available_only: bool, agent_dir: Path | None) -> int:
    from clawpi.sdk import AuthStorage, ModelRegistry
    from clawpi.sdk.paths import agent_dir as default_agent_dir

    directory = agent_dir or default_agent_dir()
    auth = AuthStorage.for_agent_dir(directory)
    registry = ModelRegistry.for_agent_dir(auth, directory)
    if registry.error:
        error(f"warning: {registry.error}")
    models = [m for m in registry.get_all() if provider in (None, m.provider)]
    if provider is not None and not models:
        error(f"No models for provider {provider!r}")
        return 1
    has_auth: dict[str, bool] = {}
    rows = []
    for model in models:
        if model.provider not in has_auth:
            has_auth[model.provider] = auth.has_auth(model.provider)
        if available_only and not has_auth[model.provider]:
            continue
        rows.append(
            (
                f"{model.provider}/{model.id}",
                model.api,
                f"{model.context_window:,}",
                f"{model.max_tokens:,}",
                "yes" if model.reasoning else "",
                "yes" if has_auth[model.provider] else "-",
            )
        )
    header = ("model", "api", "context", "max out", "thinking", "key")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]
    write_text("\n".join(lines) + "\n")
    return 0


def print_sessions(cwd: Path | None, session_dir: Path | None) -> int:
    from clawpi.sdk.paths import sessions_dir
    from clawpi.session import SessionManager

    directory = session_dir or sessions_dir()
    infos = SessionManager.list_sessions(os.fspath(cwd or Path.cwd()), directory)
    if cwd is not None:
        wanted = os.path.realpath(cwd)
        infos = [i for i in infos if i.cwd and os.path.realpath(i.cwd) == wanted]
    if not infos:
        write_text(f"No sessions in {directory}\n")
        return 0
    for info in infos:
        name = f" [{info.name}]" if info.name else ""
        first = info.first_message.replace("\n", " ")[:60]
        write_text(
            f"{info.modified:%Y-%m-%d %H:%M}  {info.message_count:>4} msgs  {info.path}{name}\n"
            f"    {first}\n"
        )
    return 0


def _open(path: Path) -> Any:
    from clawpi.session import SessionManager

    if not path.is_file():
        error(f"No session file at {path}")
        return None
    return SessionManager.open(path)


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        kind = block.get("type")
        if kind == "text":
            parts.append(block.get("text", ""))
        elif kind == "thinking":
            parts.append(f"(thinking) {block.get('thinking', '')}")
        elif kind == "toolCall":
            parts.append(f"-> {block.get('name')}({block.get('arguments')})")
        elif kind == "image":
            parts.append("[image]")
    return "\n".join(parts)


def print_session(path: Path) -> int:
    manager = _open(path)
    if manager is None:
        return 1
    context = manager.build_session_context()
    for message in context.agent_messages:
        role = message.get("role")
        if role in ("compactionSummary", "branchSummary"):
            write_text(f"[{role}]\n{message.get('summary', '')}\n\n")
        elif role == "toolResult":
            flag = " (error)" if message.get("isError") else ""
            write_text(f"[tool {message.get('toolName')}{flag}]\n{_text(message)[:2000]}\n\n")
        else:
            extra = f" ({message.get('errorMessage')})" if message.get("errorMessage") else ""
            write_text(f"[{role}{extra}]\n{_text(message)}\n\n")
    return 0


def print_tree(path: Path) -> int:
    manager = _open(path)
    if manager is None:
        return 1
    leaf = manager.get_leaf_id()
    lines: list[str] = []
    stack = [(node, 0) for node in reversed(manager.get_tree())]
    while stack:
        node, depth = stack.pop()
        entry = node.entry
        kind = entry.get("type")
        if kind == "message":
            message = entry.get("message", {})
            summary = (
                f"{message.get('role')}: {_text(message).splitlines()[0] if _text(message) else ''}"
            )
        else:
            summary = kind
        label = f" [{node.label}]" if node.label else ""
        marker = " *" if entry.get("id") == leaf else ""
        lines.append(f"{'  ' * depth}{entry.get('id')} {summary[:80]}{label}{marker}")
        stack.extend((child, depth + 1) for child in reversed(node.children))
    write_text("\n".join(lines) + "\n")
    return 0
