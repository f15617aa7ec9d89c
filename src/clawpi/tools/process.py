"""The `process` tool: follow the commands `exec` sent to the background."""

from __future__ import annotations

import time
from typing import Any

from clawpi.agent.tool import AgentTool, ToolResult, ToolUpdateCallback
from clawpi.ai.abort import AbortSignal
from clawpi.tools.errors import ToolError, ToolInputError
from clawpi.tools.params import as_mapping, get_bool, get_int, get_str, require_str
from clawpi.tools.process_registry import ProcessRegistry, ProcessSession, resolve_scope
from clawpi.tools.truncate import truncate_tail

DEFAULT_LOG_LINES = 200
MAX_POLL_WAIT_MS = 120_000
ACTIONS = ("list", "poll", "log", "write", "submit", "paste", "kill", "clear", "remove")

PROCESS_DESCRIPTION = (
    "Manage commands that exec moved to the background: list sessions, poll for new output and "
    "exit status, read the log (offset/limit lines, default the last 200), write to stdin "
    "(eof=true closes it; submit adds a newline; paste is write), kill, clear a finished "
    "session, or remove (kill and forget)."
)

PROCESS_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": list(ACTIONS), "description": "What to do"},
        "sessionId": {"type": "string", "description": "Session id (all actions except list)"},
        "data": {"type": "string", "description": "Text for stdin (write, submit, paste)"},
        "eof": {"type": "boolean", "description": "Close stdin after writing (write)"},
        "offset": {"type": "number", "description": "First log line, 0-based (log)"},
        "limit": {"type": "number", "description": "Number of log lines (log)"},
        "timeout": {
            "type": "number",
            "description": "Milliseconds to wait for new output or exit (poll)",
        },
    },
    "required": ["action"],
}


def _status_line(session: ProcessSession) -> str:
    if session.running:
        return "running"
    if session.status in ("completed", "failed"):
        if session.exit_signal is not None:
            return f"exited by signal {session.exit_signal}"
        return f"exited with code {session.exit_code}"
    return session.status


def _details(session: ProcessSession) -> dict[str, Any]:
    return {
        "sessionId": session.id,
        "status": session.status,
        "exitCode": session.exit_code,
        "pid": session.pid,
        "command": session.command,
        "runtimeMs": round(session.runtime * 1000),
    }


class ProcessTool:
    def __init__(self, registry: ProcessRegistry, scope_key: str | None = None) -> None:
        self.registry = registry
        self.scope_key = scope_key

    async def execute(
        self,
        tool_call_id: str,
        params: Any,
        signal: AbortSignal | None = None,
        on_update: ToolUpdateCallback | None = None,
    ) -> ToolResult:
        args = as_mapping(params, "process")
        action = require_str(args, "action", "process")
        if action not in ACTIONS:
            raise ToolInputError(
                f"process: unknown action {action!r}; use one of {', '.join(ACTIONS)}."
            )
        if action == "list":
            return self._list()
        session_id = get_str(args, "sessionId", "process")
        if not session_id:
            raise ToolInputError(f"process: action {action!r} needs a sessionId.")
        session = self.registry.get(session_id, resolve_scope(self.scope_key))
        if action == "poll":
            return await self._poll(
                session, get_int(args, "timeout", "process", minimum=0) or 0, signal
            )
        if action == "log":
            return self._log(session, get_int(args, "offset", "process", minimum=0),
                             get_int(args, "limit", "process", minimum=1))  # fmt: skip
        if action in ("write", "submit", "paste"):
            data = get_str(args, "data", "process") or ""
            if action == "submit":
                data += "\n"
            eof = bool(get_bool(args, "eof", "process"))
            await session.write(data, eof)
            note = " and closed stdin" if eof else ""
            return ToolResult.text(f"Wrote {len(data)} characters to session {session.id}{note}.",
                                   details=_details(session))  # fmt: skip
        if action == "kill":
            if not session.running:
                return ToolResult.text(f"Session {session.id} already {_status_line(session)}.",
                                       details=_details(session))  # fmt: skip
            session.kill()
            await session.wait()
            return ToolResult.text(f"Killed session {session.id}.", details=_details(session))
        if action == "clear":
            if session.running:
                raise ToolError(
                    f"Session {session.id} is still running; kill it first or use remove."
                )
            self.registry.forget(session.id)
            return ToolResult.text(f"Cleared session {session.id}.")
        session.kill()
        await session.wait()
        self.registry.forget(session.id)
        return ToolResult.text(f"Removed session {session.id}.")

    def _list(self) -> ToolResult:
        sessions = self.registry.list(resolve_scope(self.scope_key))
        if not sessions:
            return ToolResult.text("No running or recent sessions.")
        lines = [
            f"{s.id} {_status_line(s)} {s.runtime:.1f}s {s.command[:120]}"
            for s in sorted(sessions, key=lambda s: s.started_at)
        ]
        return ToolResult.text(
            "\n".join(lines), details={"sessions": [_details(s) for s in sessions]}
        )

    async def _poll(
        self, session: ProcessSession, wait_ms: int, signal: AbortSignal | None
    ) -> ToolResult:
        deadline = time.monotonic() + min(wait_ms, MAX_POLL_WAIT_MS) / 1000
        while session.running and session.output.end <= session.poll_offset:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or (signal is not None and signal.aborted):
                break
            await session.wait_for_output(remaining)
        fresh = session.output.since(session.poll_offset)
        session.poll_offset = session.output.end
        text = truncate_tail(fresh).content if fresh else "(no new output)"
        status = (
            "Process still running." if session.running else f"Process {_status_line(session)}."
        )
        return ToolResult.text(f"{text}\n\n{status}", details=_details(session))

    def _log(self, session: ProcessSession, offset: int | None, limit: int | None) -> ToolResult:
        lines = session.output.text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if offset is None:
            count = limit or DEFAULT_LOG_LINES
            chosen = lines[-count:]
            first = len(lines) - len(chosen)
        else:
            count = limit or DEFAULT_LOG_LINES
            chosen = lines[offset : offset + count]
            first = offset
        body = truncate_tail("\n".join(chosen)).content if chosen else "(no output)"
        header = f"[lines {first}-{first + len(chosen)} of {len(lines)}; {_status_line(session)}]"
        return ToolResult.text(f"{body}\n\n{header}", details=_details(session))


def create_process_tool(registry: ProcessRegistry, scope_key: str | None = None) -> AgentTool:
    tool = ProcessTool(registry, scope_key)
    return AgentTool(
        name="process", label="process", description=PROCESS_DESCRIPTION,
        parameters=PROCESS_PARAMETERS, execute=tool.execute,
    )  # fmt: skip
