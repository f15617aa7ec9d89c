"""`create_agent_session`: everything an `AgentSession` needs, with pi's defaults for the rest."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from clawpi.agent import Agent, AgentTool
from clawpi.ai.models import Model
from clawpi.ai.types import THINKING_LEVELS, ThinkingLevel
from clawpi.sdk.agent_session import AgentSession, AgentSessionError, is_local_model
from clawpi.sdk.auth import AuthStorage
from clawpi.sdk.extensions import ExtensionAPI, ExtensionRunner, discover_extension_paths
from clawpi.sdk.paths import agent_dir as default_agent_dir
from clawpi.sdk.registry import ModelRegistry
from clawpi.sdk.resources import ResourceLoader
from clawpi.sdk.settings import SettingsManager
from clawpi.session import SessionManager
from clawpi.session.paths import as_path, real_directory_path

DEFAULT_TOOLS = ("read", "exec", "process", "edit", "write")
DEFAULT_THINKING_LEVEL: ThinkingLevel = "medium"
PREFERRED_MODELS: Mapping[str, str] = {
    "anthropic": "claude-sonnet-4-6",
    "openai": "gpt-5.1",
    "google": "gemini-2.5-pro",
    "openrouter": "anthropic/claude-sonnet-4.6",
    "xai": "grok-4",
    "groq": "openai/gpt-oss-120b",
    "mistral": "devstral-medium-latest",
}
NO_MODELS_MESSAGE = (
    "No models available. Set an API key (e.g. ANTHROPIC_API_KEY, OPENAI_API_KEY or "
    "GEMINI_API_KEY), add one with `clawpi` to auth.json, or point clawpi at a local "
    "OpenAI-compatible server by adding it to models.json."
)

ExtensionSpec = str | Path | Callable[[ExtensionAPI], Any]


def find_initial_model(registry: ModelRegistry, settings: SettingsManager) -> Model | None:
    """Settings' default model if usable, else the first available (preferred ids first)."""
    provider, model_id = settings.get_default_model()
    if provider and model_id:
        model = registry.find(provider, model_id)
        if model is not None and (registry.get_api_key(model) or is_local_model(model)):
            return model
    available = registry.get_available()
    if not available:
        return None
    for candidate_provider, candidate_id in PREFERRED_MODELS.items():
        for model in available:
            if model.provider == candidate_provider and model.id == candidate_id:
                return model
    return available[0]


async def create_agent_session(
    cwd: str | os.PathLike[str] | None = None,
    agent_dir: str | os.PathLike[str] | None = None,
    auth_storage: AuthStorage | None = None,
    model_registry: ModelRegistry | None = None,
    model: Model | None = None,
    thinking_level: ThinkingLevel | None = None,
    tools: Sequence[str] | None = None,
    custom_tools: Sequence[AgentTool] = (),
    session_manager: SessionManager | None = None,
    settings_manager: SettingsManager | None = None,
    resource_loader: ResourceLoader | None = None,
    extensions: Sequence[ExtensionSpec] = (),
    *,
    discover_extensions: bool = True,
    sandbox: bool = False,
    workspace_only: bool = False,
    system_prompt: str | None = None,
) -> AgentSession:
    """A ready session. Unset pieces default to the agent dir's files (pi's layout).

    `system_prompt` replaces the one built from the tools, context files and skills (as
    `AgentSession.set_system_prompt` does later), so that one is never built."""
    root = real_directory_path(cwd or os.getcwd())
    directory = as_path(agent_dir) if agent_dir is not None else default_agent_dir()
    auth = auth_storage or AuthStorage.for_agent_dir(directory)
    registry = model_registry or ModelRegistry.for_agent_dir(auth, directory)
    settings = settings_manager or SettingsManager(directory, root)
    loader = resource_loader or ResourceLoader(root, directory)
    manager = session_manager or SessionManager.create(root)
    existing = manager.build_session_context()
    resumed = bool(existing.messages)
    fallback_message: str | None = None

    chosen = model
    if chosen is None and resumed and existing.model:
        restored = registry.find(existing.model["provider"], existing.model["modelId"])
        if restored is not None and (registry.get_api_key(restored) or is_local_model(restored)):
            chosen = restored
        else:
            fallback_message = (
                f"Could not restore model {existing.model['provider']}/{existing.model['modelId']}"
            )
    if chosen is None:
        chosen = find_initial_model(registry, settings)
    if chosen is None:
        raise AgentSessionError(NO_MODELS_MESSAGE)

    level = thinking_level
    branch_has_level = manager.latest_on_branch("thinking_level_change") is not None
    if level is None and resumed and branch_has_level:
        level = cast(ThinkingLevel, existing.thinking_level)
    if level is None:
        level = settings.settings.default_thinking_level or DEFAULT_THINKING_LEVEL
    if level not in THINKING_LEVELS or not chosen.reasoning:
        level = "off"

    runner = ExtensionRunner()
    specs: list[ExtensionSpec] = []
    if discover_extensions:
        specs.extend(discover_extension_paths(directory, root))
        specs.extend(settings.settings.extensions)
    specs.extend(extensions)
    for spec in specs:
        await runner.load_spec(spec)

    requested = list(tools) if tools is not None else list(DEFAULT_TOOLS)
    supplied = {t.name for t in custom_tools} | set(runner.tools)
    # the built-in set is only built when something asks for it (a runner that brings its own
    # tools passes tools=[] and skips the cost on every attempt)
    all_tools = (
        _build_tools(root, chosen, settings, sandbox=sandbox, workspace_only=workspace_only)
        if tools is None or any(name not in supplied for name in requested)
        else {}
    )
    for tool in custom_tools:
        all_tools[tool.name] = tool
    for name, registered in runner.tools.items():
        all_tools[name] = registered.tool
    active = requested + [t.name for t in custom_tools] + list(runner.tools)
    unknown = [name for name in active if name not in all_tools]
    if unknown:
        raise AgentSessionError(
            f"Unknown tool(s): {', '.join(unknown)}; available: {', '.join(all_tools)}"
        )

    settings_values = settings.settings

    async def get_api_key(provider: str) -> str | None:
        current = agent.state.model
        key = (
            registry.get_api_key(current)
            if current.provider == provider
            else auth.get_api_key(provider)
        )
        if key is None and not is_local_model(current):
            raise AgentSessionError(auth.describe_missing(provider))
        return key

    agent = Agent(
        model=chosen,
        thinking_level=level,
        messages=existing.agent_messages if resumed else (),
        get_api_key=get_api_key,
        steering_mode=settings_values.steering_mode,
        follow_up_mode=settings_values.follow_up_mode,
        session_id=manager.get_session_id(),
    )
    agent.stream_options.thinking_budgets = settings.get_thinking_budgets() or None
    agent.stream_options.headers = registry.request_headers(chosen, registry.get_api_key(chosen))

    session = AgentSession(
        agent=agent,
        session_manager=manager,
        settings_manager=settings,
        model_registry=registry,
        resource_loader=loader,
        extensions=runner,
        tools=all_tools,
        active_tools=list(dict.fromkeys(active)),
        cwd=root,
        system_prompt=system_prompt,
    )
    session.model_fallback_message = fallback_message
    if not resumed:
        manager.append_model_change(chosen.provider, chosen.id)
        manager.append_thinking_level_change(level)
    elif not branch_has_level:
        manager.append_thinking_level_change(level)
    if runner.has_handlers("session_start"):
        await runner.emit({"type": "session_start"}, session.ext_context())
    return session


def _build_tools(
    cwd: Path, model: Model, settings: SettingsManager, *, sandbox: bool, workspace_only: bool
) -> dict[str, AgentTool]:
    from clawpi.tools import create_coding_tools

    tools = create_coding_tools(
        cwd,
        sandbox=sandbox,
        workspace_only=workspace_only,
        model=model,
        policy=None,
        shell=settings.settings.shell_path,
        auto_resize_images=settings.settings.images.auto_resize,
    )
    return {tool.name: tool for tool in tools}
