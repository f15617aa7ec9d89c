"""The errors tools raise; the agent loop turns each message into an error result for the model."""

from __future__ import annotations

from clawpi.errors import ClawpiError


class ToolError(ClawpiError):
    """A tool call failed or was refused; the message says why and what to do instead."""


class ToolInputError(ToolError):
    """The arguments of a tool call are missing or malformed."""


class PathEscapeError(ToolError):
    """A path resolves outside the workspace the tools are confined to."""


class UnsafePathError(ToolError):
    """A path is not acceptable on its own: NUL bytes, too long, a device, a hard link."""


class SandboxUnavailableError(ToolError):
    """Sandbox mode was requested but bubblewrap cannot run here; nothing runs unsandboxed."""


class ExecDeniedError(ToolError):
    """The exec security mode does not allow this command."""


class CommandFailedError(ToolError):
    """A shell command exited non-zero, timed out or was aborted; the message keeps its output."""

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class PatchError(ToolError):
    """An `apply_patch` patch is malformed or does not apply to the files on disk."""
