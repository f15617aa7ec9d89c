"""Built-in coding tools (read, write, edit, exec, process, grep, find, ls, apply_patch), the
workspace rules and bubblewrap sandbox that confine them, tool policy, schema cleaning and
tool-call loop detection."""

from clawpi.tools.errors import (
    CommandFailedError,
    ExecDeniedError,
    PatchError,
    PathEscapeError,
    SandboxUnavailableError,
    ToolError,
    ToolInputError,
    UnsafePathError,
)
from clawpi.tools.exec_policy import ExecPolicy, ExecSecurity
from clawpi.tools.loop_detection import LoopDetectionConfig, LoopVerdict, ToolCallHistory
from clawpi.tools.loop_guard import ToolLoopBlockedError, ToolLoopGuard
from clawpi.tools.paths import Workspace
from clawpi.tools.pipeline import create_coding_tools
from clawpi.tools.policy import (
    TOOL_GROUPS,
    TOOL_PROFILES,
    ToolPolicy,
    ToolPolicyConfig,
    filter_tools,
    resolve_allowed_tools,
)
from clawpi.tools.process_registry import ProcessRegistry, ProcessSession
from clawpi.tools.sandbox import Sandbox, SandboxConfig
from clawpi.tools.schema import clean_tool_schema

__all__ = [
    "TOOL_GROUPS",
    "TOOL_PROFILES",
    "CommandFailedError",
    "ExecDeniedError",
    "ExecPolicy",
    "ExecSecurity",
    "LoopDetectionConfig",
    "LoopVerdict",
    "PatchError",
    "PathEscapeError",
    "ProcessRegistry",
    "ProcessSession",
    "Sandbox",
    "SandboxConfig",
    "SandboxUnavailableError",
    "ToolCallHistory",
    "ToolError",
    "ToolInputError",
    "ToolLoopBlockedError",
    "ToolLoopGuard",
    "ToolPolicy",
    "ToolPolicyConfig",
    "UnsafePathError",
    "Workspace",
    "clean_tool_schema",
    "create_coding_tools",
    "filter_tools",
    "resolve_allowed_tools",
]
