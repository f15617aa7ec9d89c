"""The `exec` tool: a shell command with a timeout, pi's output caps, and a background hand-off.

A command that is still running after the yield window (10 s by default) keeps running as a
process session that the `process` tool can poll, read, write to and kill. With a sandbox the
command runs inside bubblewrap; on timeout or abort its whole process tree is killed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
from collections.abc import Callable, Mapping
from typing import Any

from clawpi.agent.tool import AgentTool, ToolResult, ToolUpdateCallback
from clawpi.ai.abort import AbortSignal
from clawpi.errors import AbortedError
from clawpi.tools.errors import CommandFailedError, ToolError, ToolInputError
from clawpi.tools.exec_policy import ExecPolicy, check_command, check_env
from clawpi.tools.output_buffer import OutputBuffer
from clawpi.tools.params import as_mapping, get_bool, get_float, get_int, get_str, require_str
from clawpi.tools.paths import Workspace
from clawpi.tools.process_registry import ProcessRegistry, ProcessSession, resolve_scope
from clawpi.tools.sandbox import Sandbox
from clawpi.tools.truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, format_size, truncate_tail

DEFAULT_EXEC_TIMEOUT_SECONDS = 1800.0
DEFAULT_YIELD_MS = 10_000
MIN_YIELD_MS = 10
MAX_YIELD_MS = 120_000
UPDATE_INTERVAL_SECONDS = 0.1

EXEC_DESCRIPTION = (
    "Execute a shell command in the workspace. Returns stdout and stderr. Output is truncated "
    f"to the last {DEFAULT_MAX_LINES} lines or {DEFAULT_MAX_BYTES // 1024}KB (whichever is hit "
    "first); the full output is then saved to a file. A command still running after yieldMs "
    "(default 10000) continues in the background: use the process tool to poll, read its log, "
    "write to it or kill it. background=true returns at once."
)

EXEC_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "Shell command to execute"},
        "workdir": {"type": "string", "description": "Working directory (default: workspace)"},
        "env": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "description": "Extra environment variables",
        },
        "yieldMs": {
            "type": "number",
            "description": "Milliseconds to wait before backgrounding (default 10000)",
        },
        "background": {"type": "boolean", "description": "Run in the background immediately"},
        "timeout": {
            "type": "number",
            "description": "Timeout in seconds; the command is killed after it (default 1800)",
        },
    },
    "required": ["command"],
}


@dataclasses.dataclass(slots=True)
class ExecConfig:
    """How `exec` runs commands; `create_coding_tools` fills it from its arguments."""

    timeout_seconds: float = DEFAULT_EXEC_TIMEOUT_SECONDS
    yield_ms: int = DEFAULT_YIELD_MS
    policy: ExecPolicy = dataclasses.field(default_factory=ExecPolicy)
    sandbox: Sandbox | None = None
    shell: str | None = None
    path_prepend: tuple[str, ...] = ()
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    scope_key: str | None = None
    log_dir: str | None = None
    # Called once when a command that went to the background exits (OpenClaw's notifyOnExit:
    # the embedder can tell the model, e.g. with a follow-up message).
    on_background_exit: Callable[[ProcessSession], None] | None = None


def resolve_shell(configured: str | None, sandboxed: bool) -> str:
    if configured:
        return configured
    if sandboxed:
        return "/bin/bash" if os.path.exists("/usr/bin/bash") else "/bin/sh"
    return shutil.which("bash") or "/bin/sh"


def format_output(
    output: OutputBuffer, readable: set[str] | None = None
) -> tuple[str, dict[str, Any] | None]:
    """Tail-truncated output with pi's notice and the full-output file when cut; the file is
    added to `readable` so confined `read` may open it."""
    trunc = truncate_tail(output.text)
    total_lines = output.newlines + 1
    if not trunc.truncated and output.start == 0:
        return trunc.content or "(no output)", None
    path = output.persist()
    if readable is not None:
        readable.add(os.path.realpath(path))
    end = total_lines
    start = end - trunc.output_lines + 1
    if trunc.last_line_partial:
        line_size = len(output.text.rsplit("\n", 1)[-1].encode("utf-8"))
        notice = (
            f"[Showing last {format_size(trunc.output_bytes)} of line {end} "
            f"(line is {format_size(line_size)}). Full output: {path}]"
        )
    elif trunc.truncated_by == "bytes":
        notice = (
            f"[Showing lines {start}-{end} of {total_lines} "
            f"({format_size(DEFAULT_MAX_BYTES)} limit). Full output: {path}]"
        )
    else:
        notice = f"[Showing lines {start}-{end} of {total_lines}. Full output: {path}]"
    trunc.total_lines = total_lines
    trunc.total_bytes = output.total_bytes
    details = {"truncation": trunc.to_dict(), "fullOutputPath": path}
    return f"{trunc.content}\n\n{notice}", details


def running_result(session: ProcessSession, readable: set[str] | None = None) -> ToolResult:
    tail = format_output(session.output, readable)[0] if session.output.total_bytes else ""
    text = (
        f"Command still running (session {session.id}, pid {session.pid}). Use the process "
        f"tool (action poll/log/write/kill, sessionId {session.id}) to follow it."
    )
    if tail:
        text += f"\n\n{tail}"
    return ToolResult.text(
        text,
        details={"status": "running", "sessionId": session.id, "pid": session.pid,
                 "cwd": session.cwd, "command": session.command},
    )  # fmt: skip


def finished_result(session: ProcessSession, readable: set[str] | None = None) -> ToolResult:
    """The result of a finished foreground command, or the error that reports it."""
    text, details = format_output(session.output, readable)
    if session.status == "timeout":
        raise CommandFailedError(
            f"{text}\n\nCommand timed out after {session.timeout:g} seconds",
            exit_code=session.exit_code,
        )
    if session.status == "aborted":
        raise AbortedError(f"{text}\n\nCommand aborted")
    if session.status == "killed":
        raise CommandFailedError(f"{text}\n\nCommand was killed", exit_code=session.exit_code)
    if session.exit_signal is not None:
        raise CommandFailedError(f"{text}\n\nCommand was killed by signal {session.exit_signal}")
    if session.exit_code != 0:
        raise CommandFailedError(
            f"{text}\n\nCommand exited with code {session.exit_code}", exit_code=session.exit_code
        )
    info = {"status": "completed", "exitCode": 0, "durationMs": round(session.runtime * 1000)}
    return ToolResult.text(text, details={**info, **(details or {})})


class ExecTool:
    """Holds the configuration; `execute` is the AgentTool's callable."""

    def __init__(self, workspace: Workspace, registry: ProcessRegistry, config: ExecConfig) -> None:
        self.workspace = workspace
        self.registry = registry
        self.config = config

    def _workdir(self, raw: str | None) -> str:
        if raw is None:
            workdir = self.workspace.cwd
        else:
            workdir = self.workspace.resolve(raw, label="workdir", for_write=True)
        if not os.path.isdir(workdir):
            raise ToolError(
                f"Working directory does not exist: {raw or workdir}\nCannot execute commands."
            )
        return workdir

    def _argv_env(
        self, command: str, workdir: str, extra: dict[str, str]
    ) -> tuple[list[str], dict[str, str]]:
        sandbox = self.config.sandbox
        shell = resolve_shell(self.config.shell, sandbox is not None)
        argv = [shell, "-c", command]
        if sandbox is not None:
            env = {**self.config.env, **extra, "CLAWPI_SHELL": "exec"}
            return sandbox.wrap(argv, workdir, env), {"PATH": os.environ.get("PATH", "")}
        env = {**os.environ, **self.config.env, **extra, "CLAWPI_SHELL": "exec"}
        if self.config.path_prepend:
            env["PATH"] = os.pathsep.join([*self.config.path_prepend, env.get("PATH", "")])
        return argv, env

    async def execute(
        self,
        tool_call_id: str,
        params: Any,
        signal: AbortSignal | None = None,
        on_update: ToolUpdateCallback | None = None,
    ) -> ToolResult:
        args = as_mapping(params, "exec")
        command = require_str(args, "command", "exec")
        if not command.strip():
            raise ToolInputError("exec: command is empty.")
        raw_env = args.get("env")
        if raw_env is not None and not isinstance(raw_env, Mapping):
            raise ToolInputError("exec: env must be an object of string values.")
        extra_env = check_env(raw_env)
        timeout = get_float(args, "timeout", "exec")
        if timeout is None or timeout <= 0:
            timeout = self.config.timeout_seconds
        yield_ms = get_int(args, "yieldMs", "exec")
        yield_ms = self.config.yield_ms if yield_ms is None else yield_ms
        yield_ms = min(MAX_YIELD_MS, max(MIN_YIELD_MS, yield_ms))
        background = bool(get_bool(args, "background", "exec"))
        check_command(command, self.config.policy)
        workdir = self._workdir(get_str(args, "workdir", "exec"))
        if signal is not None:
            signal.throw_if_aborted()
        argv, env = self._argv_env(command, workdir, extra_env)
        session = await self.registry.spawn(
            argv, command=command, cwd=workdir, env=env, timeout=timeout,
            scope_key=resolve_scope(self.config.scope_key), log_dir=self.config.log_dir,
        )  # fmt: skip
        if background:
            return self._to_background(session)
        remove_abort = (
            signal.add_listener(lambda: session.kill("aborted")) if signal is not None else None
        )
        remove_update = (
            session.add_listener(self._updater(session, on_update)) if on_update else None
        )
        try:
            finished = await session.wait(yield_ms / 1000)
            if not finished and signal is not None and signal.aborted:
                finished = await session.wait()
        except asyncio.CancelledError:
            session.kill("aborted")  # the caller gave up on the call: nothing runs on unseen
            raise
        finally:
            if remove_abort is not None:
                remove_abort()
            if remove_update is not None:
                remove_update()
        if not finished:
            return self._to_background(session)
        self.registry.forget(session.id)
        return finished_result(session, self.workspace.readable_files)

    def _to_background(self, session: ProcessSession) -> ToolResult:
        session.backgrounded = True
        callback = self.config.on_background_exit
        if callback is not None:
            notified = [False]

            def on_change() -> None:
                if not session.running and session.ended_at is not None and not notified[0]:
                    notified[0] = True
                    callback(session)

            session.add_listener(on_change)
            on_change()
        return running_result(session, self.workspace.readable_files)

    def _updater(self, session: ProcessSession, on_update: ToolUpdateCallback) -> Any:
        last = [0.0]

        def update() -> None:
            now = session.clock()
            if now - last[0] < UPDATE_INTERVAL_SECONDS and session.running:
                return
            last[0] = now
            trunc = truncate_tail(session.output.text)
            on_update(ToolResult.text(trunc.content, details={}))

        return update


def create_exec_tool(
    workspace: Workspace, registry: ProcessRegistry, config: ExecConfig
) -> AgentTool:
    tool = ExecTool(workspace, registry, config)
    return AgentTool(
        name="exec", label="exec", description=EXEC_DESCRIPTION,
        parameters=EXEC_PARAMETERS, execute=tool.execute,
    )  # fmt: skip
