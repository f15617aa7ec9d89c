"""The run's tools from OpenClaw's `tools.*` config: policy layers, exec settings, sandbox."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from clawpi.agent import AgentTool
from clawpi.ai.abort import AbortSignal
from clawpi.ai.models import Model
from clawpi.runner.config import agent_defaults, get_path, positive_int
from clawpi.runner.config_fields import finite_number
from clawpi.tools import ProcessRegistry, ToolPolicy, ToolPolicyConfig, create_coding_tools
from clawpi.tools.loop_detection import LoopDetectionConfig, ToolCallHistory
from clawpi.tools.loop_guard import ToolLoopGuard

_DEFAULT_YIELD_MS = 10_000
_DEFAULT_EXEC_TIMEOUT_S = 1_800
_process_registry = ProcessRegistry()


def _strings(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Sequence):
        return tuple(str(v) for v in value if isinstance(v, str))
    return ()


def tool_policy_from_config(section: Mapping[str, Any] | None) -> ToolPolicy:
    """One policy layer (`tools`, an agent's `tools`, a group's `tools`) as clawpi's `ToolPolicy`."""
    if not isinstance(section, Mapping):
        return ToolPolicy()
    by_provider_raw = section.get("byProvider")
    by_provider = (
        {str(k): tool_policy_from_config(v) for k, v in by_provider_raw.items()}
        if isinstance(by_provider_raw, Mapping)
        else {}
    )
    profile = section.get("profile")
    return ToolPolicy(
        profile=cast(Any, profile) if isinstance(profile, str) else None,
        allow=_strings(section.get("allow")),
        also_allow=_strings(section.get("alsoAllow")),
        deny=_strings(section.get("deny")),
        by_provider=by_provider,
    )


def build_run_tools(
    config: Mapping[str, Any],
    workspace: Path,
    model: Model,
    *,
    sandbox: bool,
    signal: AbortSignal | None,
    scope_key: str | None,
    is_subagent: bool = False,
) -> list[AgentTool]:
    tools_section = get_path(config, "tools", {})
    exec_section = get_path(config, "tools.exec", {})
    apply_patch = get_path(config, "tools.exec.applyPatch", {})
    sandbox_mode = get_path(config, "agents.defaults.sandbox.mode", "off")
    use_sandbox = sandbox or sandbox_mode == "all"
    policy = ToolPolicyConfig(
        tools=tool_policy_from_config(tools_section),
        sandbox=tool_policy_from_config(get_path(config, "tools.sandbox.tools"))
        if use_sandbox
        else None,
        subagent=tool_policy_from_config(get_path(config, "tools.subagents.tools"))
        if is_subagent
        else None,
        is_subagent=is_subagent,
    )
    security = exec_section.get("security", "full") if isinstance(exec_section, Mapping) else "full"
    exec_values = exec_section if isinstance(exec_section, Mapping) else {}
    timeout_s = _non_negative(exec_values.get("timeoutSec"), _DEFAULT_EXEC_TIMEOUT_S)
    yield_ms = _non_negative(exec_values.get("backgroundMs"), _DEFAULT_YIELD_MS)
    workspace_only = bool(get_path(config, "tools.fs.workspaceOnly", False))
    access = get_path(config, "agents.defaults.sandbox.workspaceAccess")
    return create_coding_tools(
        workspace,
        sandbox=use_sandbox,
        workspace_only=workspace_only,
        read_only=use_sandbox and access == "ro",  # a read-only sandbox has no write tools
        policy=policy,
        model=model,
        exec_security=cast(Any, security if security in ("deny", "allowlist", "full") else "full"),
        safe_bins=_strings(exec_section.get("safeBins")) or None
        if isinstance(exec_section, Mapping)
        else None,
        exec_timeout=float(timeout_s),
        yield_ms=int(yield_ms),
        path_prepend=_strings(exec_section.get("pathPrepend"))
        if isinstance(exec_section, Mapping)
        else (),
        apply_patch=bool(apply_patch.get("enabled")) if isinstance(apply_patch, Mapping) else False,
        apply_patch_models=_strings(apply_patch.get("allowModels")) or None
        if isinstance(apply_patch, Mapping)
        else None,
        signal=signal,
        process_registry=_process_registry,
        scope_key=scope_key,
        auto_resize_images=True,
    )


def _non_negative(value: Any, default: float) -> float:
    """A config number of 0 or more; anything else (null, a string, -1) reads as unset."""
    number = finite_number(value)
    return number if number is not None and number >= 0 else default


def image_max_dimension(config: Mapping[str, Any]) -> int | None:
    return positive_int(agent_defaults(config).get("imageMaxDimensionPx"))


def tool_loop_guard(
    config: Mapping[str, Any],
    history: ToolCallHistory | None,
    *,
    on_end_run: Callable[[], None],
    session: str,
) -> ToolLoopGuard | None:
    """The attempt's loop guard when `tools.loopDetection.enabled` is set, else None (then
    nothing is wrapped: the default costs a run nothing)."""
    loop_config = LoopDetectionConfig.from_config(get_path(config, "tools.loopDetection"))
    if not loop_config.enabled:
        return None
    return ToolLoopGuard(
        history if history is not None else ToolCallHistory(),
        loop_config,
        on_end_run=on_end_run,
        label=f"session {session}: ",
    )
