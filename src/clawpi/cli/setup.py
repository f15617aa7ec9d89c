"""Turning `clawpi run` flags into an `AgentSession` (model, credentials, session file, tools)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from clawpi.ai.models import Model
from clawpi.ai.types import THINKING_LEVELS, ThinkingLevel
from clawpi.errors import ConfigError
from clawpi.sdk import AgentSession, AuthStorage, ModelRegistry, ResourceLoader, SettingsManager
from clawpi.sdk.agent_session import is_local_model
from clawpi.sdk.factory import create_agent_session, find_initial_model
from clawpi.sdk.paths import agent_dir as default_agent_dir
from clawpi.session import SessionManager

LOCAL_SERVER_HINT = (
    "To use a local OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio) instead, run:\n"
    "  clawpi run --provider local --model <model-id> --base-url http://127.0.0.1:11434/v1 "
    '"your prompt"\n'
    "or add it to models.json in the agent directory:\n"
    '  {"providers": {"local": {"baseUrl": "http://127.0.0.1:11434/v1", '
    '"api": "openai-completions", "apiKey": "none", "models": [{"id": "<model-id>"}]}}}'
)


@dataclasses.dataclass
class RunOptions:
    prompts: list[str]
    provider: str | None = None
    model: str | None = None
    thinking: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    session: Path | None = None
    continue_session: bool = False
    no_session: bool = False
    mode: str = "text"
    tools: str | None = None
    no_tools: bool = False
    system_prompt: str | None = None
    append_system_prompt: str | None = None
    extensions: list[str] = dataclasses.field(default_factory=list)
    cwd: Path | None = None
    agent_dir: Path | None = None
    sandbox: bool = False


def resolve_model(
    options: RunOptions, registry: ModelRegistry, settings: SettingsManager
) -> tuple[Model | None, ThinkingLevel | None]:
    level: ThinkingLevel | None = None
    if options.thinking:
        if options.thinking not in THINKING_LEVELS:
            raise ConfigError(
                f"Unknown thinking level {options.thinking!r}; use one of {', '.join(THINKING_LEVELS)}"
            )
        level = options.thinking
    model: Model | None = None
    if options.model:
        try:
            choice = registry.resolve(options.model, options.provider)
            model, level = choice.model, level or choice.thinking_level
        except ConfigError:
            if not options.base_url:
                raise
            model_id = (
                options.model.split("/", 1)[1]
                if options.provider is None and "/" in options.model
                else options.model
            )
            model = Model(
                id=model_id,
                api="openai-completions",
                provider=options.provider or "custom",
                base_url=options.base_url,
            )
    elif options.provider:
        candidates = [m for m in registry.get_all() if m.provider == options.provider]
        if not candidates:
            if options.base_url:
                raise ConfigError(
                    f"--provider {options.provider} with --base-url needs --model <model-id>"
                )
            raise ConfigError(
                f"Unknown provider {options.provider!r}. Run `clawpi models` to list providers."
            )
        default = find_initial_model(registry, settings)
        model = (
            default
            if default is not None and default.provider == options.provider
            else candidates[0]
        )
    if model is not None and options.base_url:
        model = model.replace(base_url=options.base_url)
    return model, level


def _credentials_error(model: Model, auth: AuthStorage) -> ConfigError:
    return ConfigError(f"{auth.describe_missing(model.provider)}.\n{LOCAL_SERVER_HINT}")


def _session_manager(options: RunOptions, cwd: Path, agent: Path) -> SessionManager:
    if options.no_session:
        return SessionManager.in_memory(cwd)
    if options.session is not None:
        path = options.session.expanduser()
        if path.exists():
            return SessionManager.open(path)
        manager = SessionManager.create(cwd, path.parent)
        manager.set_session_file(path)
        return manager
    if options.continue_session:
        return SessionManager.continue_recent(cwd)
    return SessionManager.create(cwd)


async def build_session(options: RunOptions) -> AgentSession:
    cwd = Path(os.path.realpath(options.cwd or Path.cwd()))
    agent = Path(options.agent_dir) if options.agent_dir else default_agent_dir()
    auth = AuthStorage.for_agent_dir(agent)
    registry = ModelRegistry.for_agent_dir(auth, agent)
    settings = SettingsManager(agent, cwd)
    model, level = resolve_model(options, registry, settings)
    if options.api_key:
        auth.set_runtime_api_key(
            model.provider if model else (options.provider or ""), options.api_key
        )
    if model is not None and registry.get_api_key(model) is None and not is_local_model(model):
        raise _credentials_error(model, auth)
    if model is None and find_initial_model(registry, settings) is None:
        raise ConfigError(
            "No model is configured and no provider has credentials. Set an API key such as "
            "ANTHROPIC_API_KEY, OPENAI_API_KEY or GEMINI_API_KEY, or pass --api-key with "
            f"--provider.\n{LOCAL_SERVER_HINT}"
        )
    loader = ResourceLoader(
        cwd,
        agent,
        system_prompt=options.system_prompt,
        append_system_prompt=options.append_system_prompt,
    )
    tools: list[str] | None = None
    if options.no_tools:
        tools = []
    elif options.tools:
        tools = [name.strip() for name in options.tools.split(",") if name.strip()]
    manager = _session_manager(options, cwd, agent)
    session_kwargs: dict[str, Any] = {}
    return await create_agent_session(
        cwd=cwd,
        agent_dir=agent,
        auth_storage=auth,
        model_registry=registry,
        model=model,
        thinking_level=level,
        tools=tools,
        session_manager=manager,
        settings_manager=settings,
        resource_loader=loader,
        extensions=options.extensions,
        sandbox=options.sandbox,
        **session_kwargs,
    )
