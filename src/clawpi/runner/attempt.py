"""One attempt of a run (seed 001, OpenClaw §4.7): set up, prompt once, report what happened.

Set-up order: workspace and skill env, session file (repair, prewarm, tool-result guard,
orphaned-user repair), tools, system prompt, agent session, history preparation (sanitize,
turn validation, history limit), subscription, active-run handle, timers. Everything is undone
in `finally`, in reverse, whatever happened: env restored, pending tool results flushed after
the agent is idle, the session released.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from clawpi.ai.abort import AbortSignal
from clawpi.ai.bounded import remember
from clawpi.ai.models import Model
from clawpi.ai.types import ThinkingLevel
from clawpi.errors import ConfigError
from clawpi.reply import subscribe_embedded_session
from clawpi.reply.payloads import ToolErrorInfo, ToolMeta
from clawpi.reply.subscribe import BlockReplyChunking, EmbeddedSubscription, UsageTotals
from clawpi.runner.cache_ttl import append_cache_ttl_timestamp, is_cache_ttl_eligible_provider
from clawpi.runner.client_tools import PendingToolCall, make_client_tools
from clawpi.runner.compact import resolve_compaction_timeout_ms
from clawpi.runner.config import (
    agent_defaults,
    compaction_settings,
    config_key,
    resolve_llm_idle_timeout_ms,
)
from clawpi.runner.extensions.compaction_safeguard import (
    compaction_safeguard_extension,
    is_safeguard_mode,
    resolve_compaction_safeguard_runtime,
)
from clawpi.runner.extensions.context_pruning import build_context_pruning_extension
from clawpi.runner.history import (
    branch_past_orphaned_user_message,
    get_history_limit_from_session_key,
    limit_history_turns,
)
from clawpi.runner.images import detect_and_load_prompt_images, resolve_image_limits
from clawpi.runner.prompt_cache import attempt_system_prompt
from clawpi.runner.runs import clear_active_embedded_run, set_active_embedded_run
from clawpi.runner.sanitize import sanitize_session_history
from clawpi.runner.skills_env import apply_skill_env_overrides
from clawpi.runner.timeouts import COMPACTION_WAIT_TIMEOUT_S, AttemptTimers
from clawpi.runner.tool_setup import build_run_tools, tool_loop_guard
from clawpi.runner.transcript_policy import resolve_transcript_policy
from clawpi.runner.turn_validation import validate_replay_turns
from clawpi.runner.workspace import workspace_cwd
from clawpi.sdk import AgentSession, AuthStorage, ModelRegistry, ResourceLoader, SettingsManager
from clawpi.sdk.factory import create_agent_session
from clawpi.session import FsyncMode, SessionManager, SessionManagerCache
from clawpi.session.guard import install_tool_result_guard
from clawpi.session.paths import parent_path
from clawpi.tools.loop_detection import ToolCallHistory
from clawpi.tools.process_registry import run_scope

log = logging.getLogger(__name__)

IDLE_FLUSH_TIMEOUT_S = 30.0
CLIENT_TOOL_ABORT_REASON = "client tool call"
TOOL_LOOP_ABORT_REASON = "tool loop"


@dataclasses.dataclass(kw_only=True)
class AttemptParams:
    session_id: str
    session_key: str | None
    session_file: Path
    workspace_dir: Path
    agent_dir: Path
    config: Mapping[str, Any]
    prompt: str
    model: Model
    api_key: str | None
    thinking_level: ThinkingLevel
    timeout_ms: int
    run_id: str
    images: Sequence[Mapping[str, Any]] = ()
    client_tools: Sequence[Mapping[str, Any]] = ()
    extra_system_prompt: str | None = None
    abort_signal: AbortSignal | None = None
    disable_tools: bool = False
    sandbox: bool = False
    trigger: str | None = None
    prompt_mode: str = "full"
    session_fsync: FsyncMode = True
    reasoning_mode: str = "off"
    verbose_level: str = "off"
    tool_result_format: str = "markdown"
    block_reply_break: str = "text_end"
    block_reply_chunking: BlockReplyChunking | None = None
    enforce_final_tag: bool = False
    current_message_id: str | None = None
    callbacks: Mapping[str, Callable[..., Any] | None] = dataclasses.field(default_factory=dict)
    loop_history: ToolCallHistory | None = None
    """The run's tool calls so far, shared by its attempts, for `tools.loopDetection`."""


@dataclasses.dataclass(kw_only=True)
class AttemptResult:
    aborted: bool = False
    timed_out: bool = False
    idle_timed_out: bool = False
    timed_out_during_compaction: bool = False
    prompt_error: BaseException | None = None
    messages_snapshot: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    assistant_texts: list[str] = dataclasses.field(default_factory=list)
    tool_metas: list[ToolMeta] = dataclasses.field(default_factory=list)
    last_assistant: dict[str, Any] | None = None
    last_tool_error: ToolErrorInfo | None = None
    did_send_via_messaging_tool: bool = False
    messaging_tool_sent_texts: list[str] = dataclasses.field(default_factory=list)
    messaging_tool_sent_media_urls: list[str] = dataclasses.field(default_factory=list)
    messaging_tool_sent_targets: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    usage: UsageTotals | None = None
    last_call_usage: Mapping[str, Any] | None = None
    compaction_count: int = 0
    client_tool_calls: list[PendingToolCall] = dataclasses.field(default_factory=list)
    block_reply_keys: set[str] = dataclasses.field(default_factory=set)
    system_prompt_report: dict[str, Any] | None = None
    ran_tools: list[str] = dataclasses.field(default_factory=list)
    tool_loop_ended: bool = False
    """The loop guard ended the run: the model kept repeating a call it was refused."""


class _RunHandle:
    """What the active-run registry sees of this attempt."""

    def __init__(self, session: AgentSession, subscription: EmbeddedSubscription) -> None:
        self.session = session
        self.subscription = subscription
        self.stopped = False

    async def queue_message(self, text: str) -> None:
        await self.session.steer(text)

    def is_streaming(self) -> bool:
        return self.session.is_streaming

    def is_compacting(self) -> bool:
        return self.session.is_compacting or self.subscription.is_compacting()

    def is_stopped(self) -> bool:
        return self.stopped

    def abort(self) -> None:
        self.session.abort_retry()
        self.session.agent.abort("aborted by request")


_managers = SessionManagerCache()
_busy: set[int] = set()
"""Managers an attempt is using now: a run on the same file meanwhile opens its own."""


def _open_session(path: Path, workspace: Path, fsync: FsyncMode) -> SessionManager:
    """The session's manager: the one the last turn left open when the file is as it left it
    (no re-parse of the whole history on every message), else the file opened anew."""
    if os.path.exists(path):
        manager = _managers.get(path)
        if id(manager) in _busy:
            manager = SessionManager.open(path)
        manager.fsync = fsync  # this run's setting, whichever run opened the manager
    else:
        manager = SessionManager.create(
            workspace, parent_path(path), fsync=fsync, session_file=path
        )
        _managers.put(path, manager)  # a new chat's next message need not read its file back
    _busy.add(id(manager))
    return manager


_PATH_ERRORS = (
    FileExistsError,
    FileNotFoundError,
    IsADirectoryError,
    NotADirectoryError,
    PermissionError,
)
"""What a path the caller gave can raise when it names something that cannot be used; other
OS errors (a full disk, too many open files) are the machine's and stay as they are."""


def _unusable(what: str, path: Path, exc: OSError, wanted: str) -> ConfigError:
    if isinstance(exc, FileExistsError | NotADirectoryError):
        reason = "a file is in the way"
    else:
        reason = (exc.strerror or str(exc)).lower()
    where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(path) else ""
    return ConfigError(
        f"{what} {path} cannot be used: {reason}{where}. Pass a path to {wanted} that exists"
        " or can be created there."
    )


def _settings(config: Mapping[str, Any]) -> SettingsManager:
    """The agent session's settings: compaction per config with OpenClaw's reserve floor; pi's
    own retry off, because the run loop rotates profiles and models instead."""
    return SettingsManager.in_memory(
        {"compaction": compaction_settings(config), "retry": {"enabled": False}}
    )


def _extensions(params: AttemptParams, manager: SessionManager) -> list[Any]:
    factories: list[Any] = []
    config = params.config
    model = params.model
    if is_safeguard_mode(config):
        runtime = resolve_compaction_safeguard_runtime(
            config, api_key=params.api_key, workspace_dir=str(params.workspace_dir)
        )
        factories.append(compaction_safeguard_extension(runtime))
    pruning = build_context_pruning_extension(
        config,
        provider=model.provider,
        model_id=model.id,
        session=manager,
        context_window_tokens=model.context_window,
    )
    if pruning is not None:
        factory, _runtime = pruning
        factories.append(factory)
    return factories


def _prepare_history(session: AgentSession, params: AttemptParams, allowed: Sequence[str]) -> None:
    """Sanitize, validate turns and apply the history limit to what the model will see."""
    model = params.model
    policy = resolve_transcript_policy(model.api, model.provider, model.id)
    history = session.messages
    if not history:
        return
    sanitized = sanitize_session_history(
        history,
        policy,
        model_api=model.api,
        provider=model.provider,
        model_id=model.id,
        allowed_tool_names=allowed,
        session_manager=session.session_manager,
        image_limits=resolve_image_limits(params.config),
    )
    validated = validate_replay_turns(sanitized, policy, session.session_manager)
    limit = get_history_limit_from_session_key(params.session_key, params.config)
    session.agent.state.messages = limit_history_turns(validated, limit)  # type: ignore[assignment]


RESOURCE_CACHE_TTL_S = 30.0
_TOOL_CACHE_SIZE = 64
_loader_cache: dict[tuple[str, str], tuple[float, ResourceLoader]] = {}
_tool_cache: dict[bytes, list[Any]] = {}


def _resource_loader(workspace: Path, agent_dir: Path) -> ResourceLoader:
    """Skills are discovered at most every 30 s per workspace, not on every message."""
    key = (str(workspace), str(agent_dir))
    now = time.monotonic()
    cached = _loader_cache.get(key)
    if cached is not None and now - cached[0] < RESOURCE_CACHE_TTL_S:
        return cached[1]
    loader = ResourceLoader(workspace, agent_dir, load_context_files=False)
    remember(_loader_cache, key, (now, loader), _TOOL_CACHE_SIZE)
    return loader


def _run_tools(params: AttemptParams) -> list[Any]:
    """The run's tools, built once per workspace, model and tool config. They take the abort
    signal per call from the agent (which the run's signal aborts) and the session's process
    scope from `run_scope`, so they can be shared between runs and sessions."""
    model = params.model
    key = config_key(
        [
            str(params.workspace_dir),
            model.api,
            model.provider,
            model.id,
            params.sandbox,
            params.prompt_mode,
            params.config.get("tools"),
            agent_defaults(params.config).get("sandbox"),
        ]
    )
    tools = _tool_cache.get(key) if key is not None else None
    if tools is None:
        tools = build_run_tools(
            params.config,
            params.workspace_dir,
            model,
            sandbox=params.sandbox,
            signal=None,
            scope_key=None,  # per run: `run_scope`, set by the attempt
            is_subagent=params.prompt_mode == "minimal",
        )
        if key is not None:
            remember(_tool_cache, key, tools, _TOOL_CACHE_SIZE)
    return list(tools)


async def flush_pending_tool_results_after_idle(session: AgentSession, guard: Any) -> None:
    """Once the agent is idle, give unanswered tool calls their synthetic results; if it never
    goes idle, drop the pending list instead of writing results for tools still running."""
    if session.is_streaming:  # usually over already: no task or timer for the wait then
        try:
            await asyncio.wait_for(session.agent.wait_for_idle(), IDLE_FLUSH_TIMEOUT_S)
        except TimeoutError:
            if guard is not None:
                guard.clear_pending_tool_results()
            return
    if guard is not None:
        guard.flush_pending_tool_results()


async def run_embedded_attempt(params: AttemptParams) -> AttemptResult:
    result = AttemptResult()
    if not os.path.isdir(params.workspace_dir):
        try:
            params.workspace_dir.mkdir(parents=True, exist_ok=True)
        except _PATH_ERRORS as exc:
            raise _unusable("Workspace", params.workspace_dir, exc, "a directory") from exc
    restore_env: Callable[[], None] = lambda: None  # noqa: E731
    session: AgentSession | None = None
    manager: SessionManager | None = None
    guard: Any = None
    holder: dict[str, AgentSession] = {}  # lets a client tool abort the session it runs in
    scope = run_scope.set(params.session_key or params.session_id)
    with workspace_cwd(params.workspace_dir):
        try:
            loader = _resource_loader(params.workspace_dir, params.agent_dir)
            restore_env = apply_skill_env_overrides(loader.skills, params.config)
            try:
                manager = _open_session(
                    params.session_file, params.workspace_dir, params.session_fsync
                )
            except _PATH_ERRORS as exc:
                raise _unusable("Session file", params.session_file, exc, "a file") from exc
            branch_past_orphaned_user_message(manager)

            pending: list[PendingToolCall] = []

            def on_client_call(call: PendingToolCall) -> None:
                pending.append(call)
                current = holder.get("session")
                if current is not None:
                    current.agent.abort(CLIENT_TOOL_ABORT_REASON)

            def end_run_for_loop() -> None:
                result.tool_loop_ended = True
                current = holder.get("session")
                if current is not None:
                    current.agent.abort(TOOL_LOOP_ABORT_REASON)

            tools = [] if params.disable_tools else _run_tools(params)
            loop_guard = tool_loop_guard(
                params.config,
                params.loop_history,
                on_end_run=end_run_for_loop,
                session=params.session_key or params.session_id,
            )
            if loop_guard is not None:
                tools = loop_guard.wrap_tools(tools)
            tools += make_client_tools(params.client_tools, on_client_call)
            allowed = [tool.name for tool in tools]
            policy = resolve_transcript_policy(
                params.model.api, params.model.provider, params.model.id
            )
            guard = install_tool_result_guard(
                manager,
                allow_synthetic_tool_results=getattr(policy, "allow_synthetic_tool_results", True),
                allowed_tool_names=allowed,
            )
            system_prompt, result.system_prompt_report = attempt_system_prompt(
                workspace_dir=str(params.workspace_dir),
                prompt_mode=params.prompt_mode,
                config=params.config,
                model=params.model,
                tool_names=allowed,
                tool_summaries={tool.name: tool.description for tool in tools},
                loader=loader,
                extra_system_prompt=params.extra_system_prompt,
                thinking_level=params.thinking_level,
                reasoning_mode=params.reasoning_mode,
            )
            auth = AuthStorage.in_memory(
                {params.model.provider: params.api_key} if params.api_key else {}
            )
            session = await create_agent_session(
                cwd=params.workspace_dir,
                agent_dir=params.agent_dir,
                auth_storage=auth,
                model_registry=ModelRegistry(auth),
                model=params.model,
                thinking_level=params.thinking_level,
                tools=[],
                custom_tools=tools,
                session_manager=manager,
                settings_manager=_settings(params.config),
                resource_loader=loader,
                extensions=_extensions(params, manager),
                discover_extensions=False,
                system_prompt=system_prompt,
            )
            holder["session"] = session
            if loop_guard is not None:
                session.subscribe(loop_guard.observe)
            _prepare_history(session, params, allowed)
            await _prompt(session, params, result, pending)
        finally:
            if session is not None:
                await flush_pending_tool_results_after_idle(session, guard)
                with contextlib.suppress(Exception):
                    await session.dispose()
            if guard is not None:
                guard.uninstall()
            if manager is not None:
                _busy.discard(id(manager))
            restore_env()
            holder.clear()  # the tools outlive the attempt in caches and logs; the session need not
            run_scope.reset(scope)
    return result


async def _prompt(
    session: AgentSession,
    params: AttemptParams,
    result: AttemptResult,
    pending: list[PendingToolCall],
) -> None:
    callbacks = {name: fn for name, fn in params.callbacks.items() if fn is not None}
    subscription = subscribe_embedded_session(
        session,
        params.run_id,
        reasoning_mode=params.reasoning_mode,
        verbose_level=params.verbose_level,
        tool_result_format=params.tool_result_format,
        block_reply_break=params.block_reply_break,
        block_reply_chunking=params.block_reply_chunking,
        enforce_final_tag=params.enforce_final_tag,
        current_message_id=params.current_message_id,
        **callbacks,
    )
    timers = AttemptTimers(
        timeout_ms=params.timeout_ms,
        idle_timeout_ms=resolve_llm_idle_timeout_ms(params.config, params.trigger),
        abort=lambda reason: session.agent.abort(reason),
        is_compacting=lambda: session.is_compacting or subscription.is_compacting(),
        compaction_grace_ms=resolve_compaction_timeout_ms(params.config),
    )
    ran_tools: list[str] = []
    answers: list[dict[str, Any]] = []

    def watch(event: dict[str, Any]) -> None:
        timers.on_event(event)
        kind = event.get("type")
        if kind == "tool_execution_start":
            ran_tools.append(str(event.get("toolName")))
        elif kind == "message_end":
            message = event.get("message")
            if isinstance(message, dict) and message.get("role") == "assistant":
                answers.append(message)
        elif kind == "agent_end":
            # A loop that broke (a session write that failed, say) ends with a failed reply
            # no message_end announced: it is this attempt's answer, so the error is shown.
            ended = event.get("messages") or []
            last = ended[-1] if ended else None
            if (
                isinstance(last, dict)
                and last.get("role") == "assistant"
                and last.get("stopReason") in ("error", "aborted")
                and not any(last is answer for answer in answers)
            ):
                answers.append(last)

    unsubscribe_timers = session.subscribe(watch)
    handle = _RunHandle(session, subscription)
    set_active_embedded_run(params.session_id, handle, params.session_key)
    remove_abort: Callable[[], None] = lambda: None  # noqa: E731
    if params.abort_signal is not None:
        remove_abort = params.abort_signal.add_listener(
            lambda: session.agent.abort(params.abort_signal.reason if params.abort_signal else None)
        )
    timers.start()
    try:
        images = detect_and_load_prompt_images(
            params.prompt,
            params.workspace_dir,
            model=params.model,
            limits=resolve_image_limits(params.config),
            existing_images=params.images,
        )
        try:
            await session.prompt(
                params.prompt,
                images=images.images,  # type: ignore[arg-type]
                expand_prompt_templates=False,
                source=params.trigger or "user",
            )
        except Exception as exc:  # a failure before or around the model call
            result.prompt_error = exc
        await subscription.wait_for_deliveries()
        try:
            await subscription.wait_for_compaction_retry(COMPACTION_WAIT_TIMEOUT_S)
        except (TimeoutError, Exception):
            result.timed_out_during_compaction = subscription.is_compacting()
        await subscription.wait_for_deliveries()
    finally:
        handle.stopped = True
        timers.stop()
        unsubscribe_timers()
        subscription.unsubscribe()
        clear_active_embedded_run(params.session_id, handle, params.session_key)
        remove_abort()
    _collect(session, params, result, subscription, timers, pending, ran_tools, answers)


def _collect(
    session: AgentSession,
    params: AttemptParams,
    result: AttemptResult,
    subscription: EmbeddedSubscription,
    timers: AttemptTimers,
    pending: list[PendingToolCall],
    ran_tools: list[str],
    answers: list[dict[str, Any]],
) -> None:
    result.timed_out = timers.timed_out
    result.idle_timed_out = timers.idle_timed_out
    result.timed_out_during_compaction = (
        result.timed_out_during_compaction or timers.timed_out_during_compaction
    )
    result.client_tool_calls = list(pending)
    signal_aborted = params.abort_signal is not None and params.abort_signal.aborted
    snapshot = list(session.messages)
    result.messages_snapshot = snapshot
    # This attempt's last answer, not the history's: when the session drops a failed answer
    # (overflow recovery), the latest assistant message in the snapshot is an earlier turn's.
    last = answers[-1] if answers else None
    result.last_assistant = last
    result.aborted = signal_aborted or (
        last is not None
        and last.get("stopReason") == "aborted"
        and not pending
        and not timers.timed_out
    )
    result.assistant_texts = list(subscription.assistant_texts)
    result.tool_metas = list(subscription.tool_metas)
    result.last_tool_error = subscription.last_tool_error
    result.did_send_via_messaging_tool = subscription.did_send_via_messaging_tool()
    result.messaging_tool_sent_texts = subscription.messaging_tool_sent_texts
    result.messaging_tool_sent_media_urls = subscription.messaging_tool_sent_media_urls
    result.messaging_tool_sent_targets = subscription.messaging_tool_sent_targets
    result.usage = subscription.usage_totals()
    result.last_call_usage = subscription.last_call_usage
    result.compaction_count = subscription.compaction_count
    result.block_reply_keys = set(subscription.block_reply_keys)
    result.ran_tools = ran_tools
    model = params.model
    if (
        result.compaction_count == 0
        and not result.timed_out_during_compaction
        and is_cache_ttl_eligible_provider(model.provider, model.id)
    ):
        try:
            append_cache_ttl_timestamp(
                session.session_manager, provider=model.provider, model_id=model.id
            )
        except Exception:
            log.warning("could not record the cache-TTL timestamp", exc_info=True)
