"""Running and recently finished exec commands, so `process` can find them again.

A session is a spawned command: its output buffer, stdin, exit status and timers. Finished
sessions that went to the background stay listed for a TTL (30 minutes by default) and are
then forgotten; sessions of one scope (a chat) are invisible to another.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import secrets
import signal as signals
import time
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Literal

from clawpi.tools.errors import ToolError
from clawpi.tools.output_buffer import OutputBuffer
from clawpi.tools.proctree import kill_tree

DEFAULT_JOB_TTL_SECONDS = 30 * 60
MIN_JOB_TTL_SECONDS = 60
MAX_JOB_TTL_SECONDS = 3 * 60 * 60
OUTPUT_GRACE_SECONDS = 0.5

Status = Literal["running", "completed", "failed", "killed", "timeout", "aborted"]


def job_ttl_from_env() -> float:
    """`PI_BASH_JOB_TTL_MS` as OpenClaw reads it, clamped to 1 minute .. 3 hours."""
    raw = os.environ.get("PI_BASH_JOB_TTL_MS")
    try:
        seconds = int(raw) / 1000 if raw else DEFAULT_JOB_TTL_SECONDS
    except ValueError:
        seconds = DEFAULT_JOB_TTL_SECONDS
    return min(MAX_JOB_TTL_SECONDS, max(MIN_JOB_TTL_SECONDS, seconds))


run_scope: ContextVar[str | None] = ContextVar("clawpi_process_scope", default=None)
"""The scope of the run a tool call belongs to, used by exec and process tools built without
a scope of their own: the runner shares one tool set between sessions and sets this per run."""


def resolve_scope(scope_key: str | None) -> str | None:
    """A tool's own scope if it has one, else the current run's."""
    return scope_key if scope_key is not None else run_scope.get()


@dataclasses.dataclass(eq=False)
class ProcessSession:
    """One spawned command: its output, stdin, exit status and the tasks that watch it."""

    id: str
    command: str
    cwd: str
    scope_key: str | None
    process: asyncio.subprocess.Process
    output: OutputBuffer
    started_at: float
    timeout: float | None
    clock: Callable[[], float]
    status: Status = "running"
    exit_code: int | None = None
    exit_signal: int | None = None
    ended_at: float | None = None
    backgrounded: bool = False
    poll_offset: int = 0
    _done: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    _changed: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = dataclasses.field(default_factory=list)
    _listeners: list[Callable[[], None]] = dataclasses.field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def runtime(self) -> float:
        return (self.ended_at if self.ended_at is not None else self.clock()) - self.started_at

    def kill(self, reason: Status = "killed") -> None:
        """Kill the command's whole tree; the exit is then recorded with `reason`."""
        if self.status == "running" and self.process.returncode is None:
            self.status = reason
            kill_tree(self.process.pid, signals.SIGKILL)

    def add_listener(self, listener: Callable[[], None]) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait for the exit (at most `timeout` seconds); True when it has exited."""
        if timeout is None:
            await self._done.wait()
            return True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._done.wait(), timeout)
        return self._done.is_set()

    async def wait_for_output(self, timeout: float) -> None:
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)

    async def write(self, data: str, eof: bool = False) -> None:
        stdin = self.process.stdin
        if not self.running or stdin is None or stdin.is_closing():
            raise ToolError(
                f"Session {self.id} is not accepting input (it has exited or stdin is closed)."
            )
        try:
            if data:
                stdin.write(data.encode("utf-8"))
                await stdin.drain()
            if eof:
                stdin.close()
        except (BrokenPipeError, ConnectionResetError):
            raise ToolError(f"Session {self.id} closed its input.") from None

    def _notify(self) -> None:
        self._changed.set()
        for listener in list(self._listeners):
            listener()

    async def _pump(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        while True:
            chunk = await stream.read(65536)
            if not chunk:
                break
            self.output.feed(chunk)
            self._notify()

    async def _run(self) -> None:
        pump = asyncio.create_task(self._pump())
        try:
            await self.process.wait()
            # A child left running in the background may hold the pipe open: read what is
            # already there, then stop listening rather than wait for it.
            try:
                await asyncio.wait_for(asyncio.shield(pump), OUTPUT_GRACE_SECONDS)
            except TimeoutError:
                pump.cancel()
                await asyncio.gather(pump, return_exceptions=True)
                transport = getattr(self.process, "_transport", None)
                if transport is not None:
                    transport.close()
        except asyncio.CancelledError:
            self.kill()
            pump.cancel()
            raise
        finally:
            self.output.close()
        code = self.process.returncode
        self.ended_at = self.clock()
        if code is not None and code < 0:
            self.exit_signal = -code
        else:
            self.exit_code = code
        if self.status == "running":
            self.status = "completed" if code == 0 else "failed"
        if self.process.stdin is not None and not self.process.stdin.is_closing():
            self.process.stdin.close()
        self._done.set()
        self._notify()

    async def _watch_timeout(self) -> None:
        assert self.timeout is not None
        if not await self.wait(self.timeout):
            self.kill("timeout")


class ProcessRegistry:
    """All sessions of one tool set (or of a gateway, when shared and scoped)."""

    def __init__(
        self, *, ttl_seconds: float | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl_seconds = job_ttl_from_env() if ttl_seconds is None else ttl_seconds
        self.clock = clock
        self._sessions: dict[str, ProcessSession] = {}

    async def spawn(
        self,
        argv: list[str],
        *,
        command: str,
        cwd: str,
        env: Mapping[str, str],
        timeout: float | None,
        scope_key: str | None = None,
        log_dir: str | None = None,
    ) -> ProcessSession:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
        )
        session = ProcessSession(
            id=secrets.token_hex(4),
            command=command,
            cwd=cwd,
            scope_key=scope_key,
            process=process,
            output=OutputBuffer(log_dir),
            started_at=self.clock(),
            timeout=timeout,
            clock=self.clock,
        )
        session._tasks.append(asyncio.create_task(session._run()))
        if timeout is not None and timeout > 0:
            session._tasks.append(asyncio.create_task(session._watch_timeout()))
        self._sessions[session.id] = session
        return session

    def sweep(self) -> None:
        """Forget finished sessions older than the TTL."""
        now = self.clock()
        for key, session in list(self._sessions.items()):
            if session.ended_at is not None and now - session.ended_at >= self.ttl_seconds:
                del self._sessions[key]

    def list(self, scope_key: str | None = None) -> list[ProcessSession]:
        self.sweep()
        return [
            s for s in self._sessions.values()
            if s.scope_key == scope_key and (s.backgrounded or s.running)
        ]  # fmt: skip

    def get(self, session_id: str, scope_key: str | None = None) -> ProcessSession:
        self.sweep()
        session = self._sessions.get(session_id)
        if session is None or session.scope_key != scope_key:
            raise ToolError(
                f"No process session {session_id!r}. Use process with action=list to see sessions."
            )
        return session

    def forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    async def shutdown(self) -> None:
        """Kill every running session and wait for them (for a gateway's shutdown or tests)."""
        for session in list(self._sessions.values()):
            session.kill()
        for session in list(self._sessions.values()):
            await session.wait()
            for task in session._tasks:
                if not task.done():
                    task.cancel()
            await asyncio.gather(*session._tasks, return_exceptions=True)
        self._sessions.clear()
