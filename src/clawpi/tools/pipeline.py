"""`create_coding_tools`: seed 002's tool pipeline for one workspace.

Base tools (pi's read/write/edit/grep/find/ls, OpenClaw's exec/process replacing bash, and
`apply_patch` for OpenAI models when enabled), then the read-only and policy filters, then
Claude-style parameter aliases, schema cleaning for the model's provider, and abort wrapping.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence

from clawpi.agent.tool import AgentTool
from clawpi.ai.abort import AbortSignal
from clawpi.ai.models import Model
from clawpi.tools.apply_patch import create_apply_patch_tool
from clawpi.tools.edit import create_edit_tool
from clawpi.tools.exec import (
    DEFAULT_EXEC_TIMEOUT_SECONDS,
    DEFAULT_YIELD_MS,
    ExecConfig,
    create_exec_tool,
)
from clawpi.tools.exec_policy import DEFAULT_SAFE_BINS, ExecPolicy, ExecSecurity
from clawpi.tools.find import create_find_tool
from clawpi.tools.grep import create_grep_tool
from clawpi.tools.ls import create_ls_tool
from clawpi.tools.paths import Workspace
from clawpi.tools.policy import ToolPolicyConfig, filter_tools
from clawpi.tools.process import create_process_tool
from clawpi.tools.process_registry import ProcessRegistry, ProcessSession
from clawpi.tools.read import create_read_tool
from clawpi.tools.sandbox import Sandbox, SandboxConfig
from clawpi.tools.wrap import with_abort, with_clean_schema, with_param_aliases
from clawpi.tools.write import create_write_tool

APPLY_PATCH_PROVIDERS = frozenset({"openai", "openai-codex", "azure-openai-responses"})
ALIASED_TOOLS = frozenset({"read", "write", "edit"})
WRITE_TOOLS = frozenset({"write", "edit", "apply_patch"})


def _apply_patch_offered(
    enabled: bool, provider: str | None, model_id: str | None, allow_models: Iterable[str] | None
) -> bool:
    if not enabled or (provider or "").lower() not in APPLY_PATCH_PROVIDERS:
        return False
    if allow_models is None:
        return True
    allowed = {m.lower() for m in allow_models}
    return (model_id or "").lower() in allowed or f"{provider}/{model_id}".lower() in allowed


def create_coding_tools(
    cwd: str | os.PathLike[str],
    *,
    sandbox: bool | SandboxConfig | None = None,
    workspace_only: bool = False,
    read_only: bool = False,
    policy: ToolPolicyConfig | None = None,
    model: Model | None = None,
    provider: str | None = None,
    api: str | None = None,
    model_id: str | None = None,
    strict_schemas: bool = False,
    exec_security: ExecSecurity = "full",
    exec_allowlist: Sequence[str] = (),
    safe_bins: Iterable[str] | None = None,
    exec_timeout: float = DEFAULT_EXEC_TIMEOUT_SECONDS,
    yield_ms: int = DEFAULT_YIELD_MS,
    shell: str | None = None,
    path_prepend: Sequence[str] = (),
    exec_env: Mapping[str, str] | None = None,
    apply_patch: bool = False,
    apply_patch_models: Iterable[str] | None = None,
    signal: AbortSignal | None = None,
    process_registry: ProcessRegistry | None = None,
    scope_key: str | None = None,
    auto_resize_images: bool = True,
    on_background_exit: Callable[[ProcessSession], None] | None = None,
) -> list[AgentTool]:
    """The coding tools for `cwd`.

    `sandbox=True` (or a `SandboxConfig`) runs exec inside bubblewrap and confines every file
    tool to `cwd`; it raises `SandboxUnavailableError` when bwrap cannot run here rather than
    fall back to running unsandboxed. `workspace_only=True` confines the file tools without a
    sandbox. `read_only=True` drops write, edit and apply_patch (and mounts the workspace
    read-only in the sandbox). `model` (or `provider`/`api`/`model_id`) picks the schema dialect,
    provider policy overrides and whether `apply_patch` is offered. `on_background_exit` is
    called when a command that exec moved to the background finishes.
    """
    if model is not None:
        provider = provider or model.provider
        api = api or model.api
        model_id = model_id or model.id
    sandbox_config = SandboxConfig() if sandbox is True else (sandbox or None)
    confined = sandbox_config is not None or workspace_only
    workspace = Workspace.create(cwd, confined=confined, read_only=read_only)
    runner: Sandbox | None = None
    if sandbox_config is not None:
        runner = Sandbox(workspace.root, sandbox_config, read_only=read_only)
        runner.check()
    registry = process_registry or ProcessRegistry()
    exec_config = ExecConfig(
        timeout_seconds=exec_timeout,
        yield_ms=yield_ms,
        policy=ExecPolicy(
            security=exec_security,
            allowlist=tuple(exec_allowlist),
            safe_bins=frozenset(safe_bins) if safe_bins is not None else DEFAULT_SAFE_BINS,
        ),
        sandbox=runner,
        shell=shell,
        path_prepend=tuple(path_prepend),
        env=dict(exec_env or {}),
        scope_key=scope_key,
        on_background_exit=on_background_exit,
    )
    tools = [
        create_read_tool(workspace, auto_resize_images=auto_resize_images),
        create_write_tool(workspace),
        create_edit_tool(workspace),
        create_exec_tool(workspace, registry, exec_config),
        create_process_tool(registry, scope_key),
        create_grep_tool(workspace),
        create_find_tool(workspace),
        create_ls_tool(workspace),
    ]
    if _apply_patch_offered(apply_patch, provider, model_id, apply_patch_models):
        tools.append(create_apply_patch_tool(workspace))
    if read_only:
        tools = [tool for tool in tools if tool.name not in WRITE_TOOLS]
    tools = filter_tools(tools, policy, provider=provider, model_id=model_id)
    tools = [with_param_aliases(t) if t.name in ALIASED_TOOLS else t for t in tools]
    tools = [with_clean_schema(t, api=api, provider=provider, strict=strict_schemas) for t in tools]
    return [with_abort(tool, signal) for tool in tools]
