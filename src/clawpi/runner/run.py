"""`run_embedded_agent`: the one call a messaging gateway makes per inbound message.

It queues the run in the session's lane (then the global lane), tries the configured models in
turn (`run_with_model_fallback`), and for each model loops over attempts (OpenClaw §2.4):
rotating auth profiles with cooldowns, falling back on thinking levels, compacting on context
overflow (at most 3 times), truncating oversized tool results once, compacting after a timeout
that filled the context, and finally turning what happened into payloads a user can be shown.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from clawpi.ai.abort import AbortSignal
from clawpi.ai.bounded import remember
from clawpi.ai.errors import (
    FailoverError,
    classify_failover_reason,
    coerce_to_failover_error,
    is_compaction_failure_error,
    is_failover_assistant_error,
    is_likely_context_overflow_error,
    is_role_ordering_error,
    parse_image_size_error,
)
from clawpi.ai.models import Model
from clawpi.ai.types import ThinkingLevel
from clawpi.errors import AbortedError, ClawpiError, ConfigError
from clawpi.reply.payloads import ReplyPayload, build_embedded_run_payloads
from clawpi.reply.subscribe import BlockReplyChunking
from clawpi.reply.user_text import (
    CONTEXT_OVERFLOW_TEXT,
    ROLE_ORDERING_TEXT,
    format_assistant_error_text,
)
from clawpi.runner.attempt import AttemptParams, AttemptResult, run_embedded_attempt
from clawpi.runner.auth_profiles import (
    is_profile_in_cooldown,
    mark_auth_profile_failure,
    mark_auth_profile_good,
    mark_auth_profile_used,
    resolve_api_key_for_profile,
    resolve_auth_profile_candidates,
    resolve_profiles_unavailable_reason,
)
from clawpi.runner.auth_store import load_auth_profile_store
from clawpi.runner.compact import compact_session_file
from clawpi.runner.config import (
    agent_defaults,
    config_key,
    configured_fallbacks,
    configured_primary,
    get_path,
    load_config,
    resolve_timeout_ms,
)
from clawpi.runner.fallback import run_with_model_fallback
from clawpi.runner.file_stamps import Stamp, file_stamps
from clawpi.runner.lanes import enqueue_in_lanes
from clawpi.runner.model_resolution import (
    evaluate_context_window_guard,
    resolve_context_window_info,
    resolve_model,
)
from clawpi.runner.redact import SecretRedactor
from clawpi.runner.result import (
    IMAGE_TOO_LARGE_TEXT,
    INCOMPLETE_TURN_MUTATED_TEXT,
    INCOMPLETE_TURN_TEXT,
    RETRY_LIMIT_TEXT,
    TIMEOUT_NO_RESPONSE_TEXT,
    TOOL_LOOP_ENDED_TEXT,
    AgentMeta,
    EmbeddedRunResult,
    RunError,
    RunMeta,
    add_usage,
)
from clawpi.runner.run_queue import RunQueue
from clawpi.runner.thinking import pick_fallback_thinking_level
from clawpi.runner.truncation import (
    session_likely_has_oversized_tool_results,
    truncate_oversized_tool_results_in_session,
)
from clawpi.runner.workspace import from_caller_cwd
from clawpi.sdk import AuthStorage, ModelRegistry
from clawpi.sdk.compaction import estimate_context_tokens
from clawpi.sdk.paths import agent_dir as default_agent_dir
from clawpi.session.background_sync import FsyncMode
from clawpi.tools.loop_detection import ToolCallHistory

MAX_OVERFLOW_COMPACTIONS = 3
MAX_TIMEOUT_COMPACTIONS = 2
TIMEOUT_COMPACTION_SHARE = 0.65
_MUTATING_TOOLS = frozenset({"write", "edit", "apply_patch", "exec", "process", "message"})


@dataclasses.dataclass(frozen=True, slots=True)
class BackoffPolicy:
    """The sleep before retrying after an overloaded provider (exponential with jitter)."""

    initial_ms: int = 250
    max_ms: int = 1500
    factor: float = 2.0
    jitter: float = 0.2


OVERLOAD_BACKOFF = BackoffPolicy()


def iteration_cap(candidate_count: int) -> int:
    return min(160, max(32, 24 + 8 * max(1, candidate_count)))


def overload_backoff_ms(
    attempt: int,
    rng: Callable[[], float] = random.random,
    policy: BackoffPolicy = OVERLOAD_BACKOFF,
) -> int:
    base = min(policy.initial_ms * policy.factor ** max(attempt - 1, 0), policy.max_ms)
    jitter = base * policy.jitter * (rng() * 2 - 1)
    return max(0, int(base + jitter))


_RETRY_AFTER = re.compile(
    r"(?:try again in|retry after|retry in|retry-after:?)\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|seconds?)?\b",
    re.IGNORECASE,
)


def retry_after_ms_from_error(text: str | None) -> int | None:
    """The wait a rate-limit or overload error asks for ("Please try again in 7s"), if any."""
    if not text:
        return None
    match = _RETRY_AFTER.search(text)
    if match is None:
        return None
    value = float(match.group(1))
    return int(value if (match.group(2) or "").lower() == "ms" else value * 1000)


async def _sleep_abortable(ms: int, signal: AbortSignal | None) -> None:
    if signal is None:
        await asyncio.sleep(ms / 1000)
        return
    try:
        await asyncio.wait_for(signal.wait(), ms / 1000)
    except TimeoutError:
        return
    raise AbortedError("Operation aborted")


_RESOLVED_CACHE_SIZE = 64
_resolved: dict[bytes, tuple[ModelRegistry, Model]] = {}
"""Resolved models by what resolution reads of the config; valid for the registry they were
resolved against (a new registry, after models.json or auth.json changed, resolves anew)."""


def _resolution_key(provider: str, model_id: str, config: Mapping[str, Any]) -> bytes | None:
    """Everything model resolution reads: the ids, `models` and `agents.defaults.contextTokens`
    (None when the config holds something JSON cannot: then nothing is cached)."""
    return config_key(
        [provider, model_id, config.get("models"), agent_defaults(config).get("contextTokens")]
    )


_REGISTRY_FILES = ("auth.json", "models.json")
_REGISTRY_CACHE_SIZE = 64
_registries: dict[str, tuple[list[Stamp], ModelRegistry]] = {}
"""By agent dir, the oldest let go past 64: a gateway with an agent dir per tenant would
otherwise keep every one's catalog for the life of the process."""


def agent_model_registry(agent_dir: Path) -> ModelRegistry:
    """The agent dir's model registry (catalog, models.json, auth.json keys), reused across runs
    until either file changes: building it takes a file lock and reparses both files, which
    would otherwise be paid on every inbound message."""
    key = str(agent_dir)
    stamp = file_stamps(key, _REGISTRY_FILES)
    cached = _registries.get(key)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    registry = ModelRegistry.for_agent_dir(AuthStorage.for_agent_dir(agent_dir), agent_dir)
    # AuthStorage creates auth.json when it is missing: stamp what is there now.
    remember(_registries, key, (file_stamps(key, _REGISTRY_FILES), registry), _REGISTRY_CACHE_SIZE)
    return registry


async def run_embedded_agent(
    session_id: str,
    session_key: str | None,
    session_file: str | Path,
    workspace_dir: str | Path,
    config: Mapping[str, Any] | str | Path | None,
    prompt: str,
    provider: str | None = None,
    model: str | None = None,
    timeout_ms: int | None = None,
    run_id: str | None = None,
    *,
    agent_dir: str | Path | None = None,
    images: Sequence[Mapping[str, Any]] | None = None,
    thinking_level: ThinkingLevel | None = None,
    auth_profile_id: str | None = None,
    auth_profile_id_source: str = "auto",
    client_tools: Sequence[Mapping[str, Any]] | None = None,
    extra_system_prompt: str | None = None,
    abort_signal: AbortSignal | None = None,
    on_block_reply: Callable[..., Any] | None = None,
    on_block_reply_flush: Callable[..., Any] | None = None,
    on_partial_reply: Callable[..., Any] | None = None,
    on_tool_result: Callable[..., Any] | None = None,
    on_reasoning_stream: Callable[..., Any] | None = None,
    on_agent_event: Callable[..., Any] | None = None,
    reasoning_mode: str = "off",
    verbose_level: str = "off",
    tool_result_format: str = "markdown",
    block_reply_break: str = "text_end",
    block_reply_chunking: BlockReplyChunking | None = None,
    enforce_final_tag: bool = False,
    current_message_id: str | None = None,
    lane: str | None = None,
    disable_tools: bool = False,
    sandbox: bool = False,
    trigger: str | None = None,
    prompt_mode: str = "full",
    run_queue: RunQueue | None = None,
    overload_backoff: BackoffPolicy = OVERLOAD_BACKOFF,
    session_fsync: FsyncMode = True,
    suppress_tool_error_warnings: bool = False,
) -> EmbeddedRunResult:
    """Run one inbound message to completion; always returns something a user can be shown.

    `session_fsync` is the session file's durability: each entry fsynced before the run goes
    on (the default), `"background"` fsynced by a worker thread so a slow disk does not stall
    the event loop (an OS crash may then lose the newest entries), or False.

    `suppress_tool_error_warnings` drops the "⚠️ <tool> failed" payloads altogether (e.g. for
    heartbeat runs); `messages.suppressToolErrors` in the config drops only those of tools
    that change nothing.

    Raises `FailoverError` only when every configured model failed for failover reasons,
    `ConfigError` for configuration mistakes, and cancellation when `abort_signal` fired while
    the run was still queued.
    """
    cfg = load_config(config)
    started = time.monotonic()
    runner = _Runner(
        session_id=session_id,
        session_key=session_key,
        session_file=from_caller_cwd(session_file),
        workspace=from_caller_cwd(workspace_dir),
        agent_dir=from_caller_cwd(agent_dir) if agent_dir is not None else default_agent_dir(),
        config=cfg,
        prompt=prompt,
        timeout_ms=resolve_timeout_ms(cfg, timeout_ms),
        run_id=run_id or str(uuid.uuid4()),
        images=list(images or ()),
        thinking_level=thinking_level,
        auth_profile_id=auth_profile_id,
        auth_profile_source=auth_profile_id_source,
        client_tools=list(client_tools or ()),
        extra_system_prompt=extra_system_prompt,
        abort_signal=abort_signal,
        overload_backoff=overload_backoff,
        redactor=SecretRedactor(),
        loop_history=ToolCallHistory(),
        suppress_tool_error_warnings=suppress_tool_error_warnings,
        callbacks={
            "on_block_reply": on_block_reply,
            "on_block_reply_flush": on_block_reply_flush,
            "on_partial_reply": on_partial_reply,
            "on_tool_result": on_tool_result,
            "on_reasoning_stream": on_reasoning_stream,
            "on_agent_event": on_agent_event,
        },
        options={
            "reasoning_mode": reasoning_mode,
            "verbose_level": verbose_level,
            "tool_result_format": tool_result_format,
            "block_reply_break": block_reply_break,
            "block_reply_chunking": block_reply_chunking,
            "enforce_final_tag": enforce_final_tag,
            "current_message_id": current_message_id,
            "disable_tools": disable_tools,
            "sandbox": sandbox,
            "trigger": trigger,
            "prompt_mode": prompt_mode,
            "session_fsync": session_fsync,
        },
    )
    primary_provider, primary_model = configured_primary(cfg)
    chosen_provider = (provider or "").strip() or primary_provider
    chosen_model = (model or "").strip() or primary_model

    async def task() -> EmbeddedRunResult:
        if configured_fallbacks(cfg):
            outcome = await run_with_model_fallback(
                cfg, chosen_provider, chosen_model, runner.run_model, agent_dir=runner.agent_dir
            )
            result: EmbeddedRunResult = outcome.result
            if result.meta.agent_meta is not None:
                result.meta.agent_meta.fallback_attempts = [
                    {"provider": a.provider, "model": a.model, "reason": a.reason, "error": a.error}
                    for a in outcome.attempts
                ]
            return result
        return await runner.run_model(chosen_provider, chosen_model)

    try:
        result = await enqueue_in_lanes(
            session_key or session_id,
            task,
            config=cfg,
            lane=lane,
            abort_signal=abort_signal,
            queue=run_queue,
        )
    except FailoverError as error:
        runner.redactor.error(error)
        raise
    runner.redactor.result(result)
    result.meta.duration_ms = int((time.monotonic() - started) * 1000)
    return result


class _Runner:
    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)
        self.session_id: str
        self.session_key: str | None
        self.session_file: Path
        self.workspace: Path
        self.agent_dir: Path
        self.config: dict[str, Any]
        self.prompt: str
        self.timeout_ms: int
        self.run_id: str
        self.images: list[Mapping[str, Any]]
        self.thinking_level: ThinkingLevel | None
        self.auth_profile_id: str | None
        self.auth_profile_source: str
        self.client_tools: list[Mapping[str, Any]]
        self.extra_system_prompt: str | None
        self.abort_signal: AbortSignal | None
        self.overload_backoff: BackoffPolicy
        self.redactor: SecretRedactor
        self.loop_history: ToolCallHistory
        self.suppress_tool_error_warnings: bool
        self.callbacks: dict[str, Any]
        self.options: dict[str, Any]

    # -- per model -------------------------------------------------------------------------

    def _resolve(self, provider: str, model_id: str) -> tuple[Model, ModelRegistry]:
        registry = agent_model_registry(self.agent_dir)
        key = _resolution_key(provider, model_id, self.config)
        cached = _resolved.get(key) if key is not None else None
        if cached is not None and cached[0] is registry:
            return cached[1], registry
        model = self._resolve_uncached(provider, model_id, registry)
        if key is not None:
            remember(_resolved, key, (registry, model), _RESOLVED_CACHE_SIZE)
        return model, registry

    def _resolve_uncached(self, provider: str, model_id: str, registry: ModelRegistry) -> Model:
        model, error = resolve_model(provider, model_id, registry, self.config)
        if model is None:
            raise FailoverError(
                error or f"Unknown model: {provider}/{model_id}",
                reason="model_not_found",
                provider=provider,
                model=model_id,
            )
        info = resolve_context_window_info(model, self.config)
        guard = evaluate_context_window_guard(info.tokens)
        if guard.should_block:
            raise FailoverError(
                f"Model context window too small ({info.tokens} tokens). Minimum is 16000.",
                reason="unknown",
                provider=provider,
                model=model_id,
            )
        if info.tokens < model.context_window:
            model = model.replace(context_window=info.tokens)
        return model

    def _env_key(self, model: Model, registry: ModelRegistry) -> str | None:
        configured = get_path(self.config, f"models.providers.{model.provider}.apiKey")
        if isinstance(configured, str) and configured:
            from clawpi.sdk.config_values import resolve_config_value

            return resolve_config_value(configured)
        return registry.get_api_key(model)

    async def run_model(self, provider: str, model_id: str) -> EmbeddedRunResult:
        model, registry = self._resolve(provider, model_id)
        has_fallbacks = bool(configured_fallbacks(self.config))
        store = load_auth_profile_store(self.agent_dir)
        candidates: list[str | None] = list(
            resolve_auth_profile_candidates(
                self.config,
                store,
                model.provider,
                profile_id=self.auth_profile_id,
                profile_source=self.auth_profile_source,  # type: ignore[arg-type]
                model=model.id,
            )
        )
        locked = self.auth_profile_source == "user" and self.auth_profile_id is not None
        if locked and candidates != [self.auth_profile_id]:
            raise ConfigError(
                f'Auth profile "{self.auth_profile_id}" is not configured for {model.provider}.'
            )
        for candidate in candidates:  # (a server may echo any of the provider's keys)
            self.redactor.add_credential(store.profile(candidate) if candidate else None)
        if not candidates:
            candidates = [None]
        usable = [
            c
            for c in candidates
            if c is None or locked or not is_profile_in_cooldown(store, c, model.id)
        ]
        if not usable:
            message = (
                f"No available auth profile for {model.provider} (all in cooldown or unavailable)."
            )
            if has_fallbacks:
                reason = resolve_profiles_unavailable_reason(
                    store, [c for c in candidates if c is not None], model=model.id
                )
                raise FailoverError(
                    message, reason=reason or "unknown", provider=model.provider, model=model.id
                )
            raise ClawpiError(message)
        loop = _AttemptLoop(self, model, registry, usable, has_fallbacks)
        return await loop.run()


class _AttemptLoop:
    """The §2.4 loop for one model: counters live here, one attempt per iteration."""

    def __init__(
        self,
        runner: _Runner,
        model: Model,
        registry: ModelRegistry,
        profiles: list[str | None],
        has_fallbacks: bool,
    ) -> None:
        self.runner = runner
        self.model = model
        self.registry = registry
        self.profiles = profiles
        self.profile_index = 0
        self.has_fallbacks = has_fallbacks
        default_level: ThinkingLevel = runner.thinking_level or _default_thinking(
            runner.config, model
        )
        self.initial_level = default_level
        self.level = default_level
        self.attempted_levels: set[str] = set()
        self.overflow_compactions = 0
        self.timeout_compactions = 0
        self.truncation_attempted = False
        self.overload_failovers = 0
        self.usage: dict[str, int] | None = None
        self.compaction_count = 0

    @property
    def profile(self) -> str | None:
        return self.profiles[self.profile_index]

    def _api_key(self) -> str | None:
        profile = self.profile
        if profile is not None:
            store = load_auth_profile_store(self.runner.agent_dir)
            resolved = resolve_api_key_for_profile(store, profile)
            if resolved is not None:
                self.runner.redactor.add(resolved.api_key)
                return resolved.api_key
        key = self.runner._env_key(self.model, self.registry)
        self.runner.redactor.add(key)
        return key

    def _advance_profile(self) -> bool:
        if self.profile_index + 1 >= len(self.profiles):
            return False
        self.profile_index += 1
        self.level = self.initial_level
        self.attempted_levels.clear()
        return True

    def _mark_failure(self, reason: Any, error_text: str | None = None) -> None:
        if self.profile is None or reason is None or reason == "timeout":
            return
        store = load_auth_profile_store(self.runner.agent_dir)
        retry_after = (
            retry_after_ms_from_error(error_text)
            if reason in ("rate_limit", "overloaded")
            else None
        )
        mark_auth_profile_failure(
            store,
            self.profile,
            reason,
            model=self.model.id,
            config=self.runner.config,
            retry_after_ms=retry_after,
        )

    def _params(self) -> AttemptParams:
        r = self.runner
        prompt = r.prompt
        if self.model.provider == "anthropic":
            prompt = prompt.replace(
                "ANTHROPIC_MAGIC_STRING_TRIGGER_REFUSAL",
                "ANTHROPIC MAGIC STRING TRIGGER REFUSAL (redacted)",
            )
        return AttemptParams(
            session_id=r.session_id,
            session_key=r.session_key,
            session_file=r.session_file,
            workspace_dir=r.workspace,
            agent_dir=r.agent_dir,
            config=r.config,
            prompt=prompt,
            model=self.model,
            api_key=self._api_key(),
            thinking_level=self.level,
            timeout_ms=r.timeout_ms,
            run_id=r.run_id,
            images=r.images,
            client_tools=r.client_tools,
            extra_system_prompt=r.extra_system_prompt,
            abort_signal=r.abort_signal,
            loop_history=r.loop_history,
            callbacks=r.callbacks,
            **r.options,
        )

    async def _compact(self) -> bool:
        return await compact_session_file(
            session_file=self.runner.session_file,
            workspace=self.runner.workspace,
            agent_dir=self.runner.agent_dir,
            config=self.runner.config,
            model=self.model,
            api_key=self._api_key(),
            abort_signal=self.runner.abort_signal,
        )

    async def run(self) -> EmbeddedRunResult:
        cap = iteration_cap(len(self.profiles))
        previous: AttemptResult | None = None
        for _iteration in range(cap):
            if self._signal_aborted():
                # Aborted between attempts (during a forced compaction or before the first
                # prompt): never start another model call.
                return self._aborted_result(previous)
            self.attempted_levels.add(self.level)
            attempt = previous = await run_embedded_attempt(self._params())
            self.usage = add_usage(self.usage, attempt.usage)
            self.compaction_count += attempt.compaction_count
            decision = await self._decide(attempt)
            if decision is None:
                continue
            return decision
        return self._error_result(None, RETRY_LIMIT_TEXT, "retry_limit")

    # -- the decision after one attempt ----------------------------------------------------

    async def _decide(self, attempt: AttemptResult) -> EmbeddedRunResult | None:
        """A result to return, or None to run another attempt. May raise FailoverError."""
        if (attempt.aborted and not attempt.timed_out) or attempt.timed_out_during_compaction:
            return self._result(attempt)  # never retried, rotated or failed over
        last = attempt.last_assistant
        error_text = self._error_text(attempt)

        timed_out = attempt.timed_out and not attempt.timed_out_during_compaction
        if timed_out and await self._timeout_compaction(attempt):
            return None
        if self._signal_aborted():
            return self._aborted_result(attempt)

        if error_text and is_likely_context_overflow_error(error_text):
            return await self._overflow(attempt, error_text)

        if attempt.prompt_error is not None:
            return await self._prompt_failure(attempt)

        if last is not None and last.get("stopReason") == "error":
            fallback_level = pick_fallback_thinking_level(
                last.get("errorMessage"), self.attempted_levels, provider=self.model.provider
            )
            if fallback_level is not None:
                self.level = fallback_level
                return None
        marked = False
        should_rotate = (last is not None and is_failover_assistant_error(last)) or (  # type: ignore[arg-type]
            attempt.timed_out and not attempt.timed_out_during_compaction
        )
        if should_rotate:
            text = (last or {}).get("errorMessage") or ""
            reason = (
                "timeout"
                if attempt.timed_out
                else classify_failover_reason(text, self.model.provider)
            )
            self._mark_failure(reason, text)
            marked = True
            if self._advance_profile():
                await self._overload_backoff(reason)
                return None
            if self.has_fallbacks:
                await self._overload_backoff(reason)
                message = _failover_message(last, reason, self.model.provider)
                raise FailoverError(
                    message,
                    reason=reason or "unknown",
                    provider=self.model.provider,
                    model=self.model.id,
                    profile_id=self.profile,
                    status=408 if attempt.timed_out else None,
                    raw_error=text or None,
                )
        return self._success(attempt, failure_marked=marked)

    def _error_text(self, attempt: AttemptResult) -> str | None:
        if attempt.prompt_error is not None:
            return str(attempt.prompt_error)
        last = attempt.last_assistant
        if last is not None and last.get("stopReason") == "error":
            return str(last.get("errorMessage") or "")
        return None

    async def _timeout_compaction(self, attempt: AttemptResult) -> bool:
        if self.timeout_compactions >= MAX_TIMEOUT_COMPACTIONS:
            return False
        usage = attempt.last_call_usage or {}
        prompt_tokens = (
            int(usage.get("input") or 0)
            + int(usage.get("cacheRead") or 0)
            + int(usage.get("cacheWrite") or 0)
        )
        if prompt_tokens <= 0:
            prompt_tokens = estimate_context_tokens(attempt.messages_snapshot)
        if prompt_tokens / max(self.model.context_window, 1) <= TIMEOUT_COMPACTION_SHARE:
            return False
        self.timeout_compactions += 1
        return await self._compact()

    async def _overflow(self, attempt: AttemptResult, error_text: str) -> EmbeddedRunResult | None:
        compaction_failure = is_compaction_failure_error(error_text)
        if not compaction_failure and self.overflow_compactions < MAX_OVERFLOW_COMPACTIONS:
            self.overflow_compactions += 1
            if attempt.compaction_count > 0:
                return None  # the session already compacted inside the attempt: just retry
            if await self._compact():
                return None
            if self._signal_aborted():
                return self._aborted_result(attempt)
        if not self.truncation_attempted and session_likely_has_oversized_tool_results(
            attempt.messages_snapshot, self.model.context_window
        ):
            self.truncation_attempted = True
            outcome = truncate_oversized_tool_results_in_session(
                self.runner.session_file, self.model.context_window
            )
            if outcome.truncated:
                return None
        kind = "compaction_failure" if compaction_failure else "context_overflow"
        return self._error_result(attempt, CONTEXT_OVERFLOW_TEXT, kind)

    async def _prompt_failure(self, attempt: AttemptResult) -> EmbeddedRunResult | None:
        error = attempt.prompt_error
        assert error is not None
        text = str(error)
        if is_role_ordering_error(text):
            return self._error_result(attempt, ROLE_ORDERING_TEXT, "role_ordering")
        size = parse_image_size_error(text)
        if size is not None:
            return self._error_result(
                attempt, IMAGE_TOO_LARGE_TEXT.format(mb=f"{size:g}"), "image_size"
            )
        failover = coerce_to_failover_error(
            error, provider=self.model.provider, model=self.model.id
        )
        reason = failover.reason if failover is not None else None
        self._mark_failure(reason, text)
        if reason is not None and reason != "timeout" and self._advance_profile():
            await self._overload_backoff(reason)
            return None
        fallback_level = pick_fallback_thinking_level(
            text, self.attempted_levels, provider=self.model.provider
        )
        if fallback_level is not None:
            self.level = fallback_level
            return None
        if self.has_fallbacks and failover is not None:
            await self._overload_backoff(reason)
            raise failover
        if isinstance(error, ClawpiError):
            raise error
        raise ClawpiError(f"Run failed before the model answered: {text}") from error

    async def _overload_backoff(self, reason: Any) -> None:
        if reason != "overloaded":
            return
        self.overload_failovers += 1
        delay = overload_backoff_ms(self.overload_failovers, policy=self.runner.overload_backoff)
        if delay > 0:
            await _sleep_abortable(delay, self.runner.abort_signal)

    # -- results ---------------------------------------------------------------------------

    def _meta(self, attempt: AttemptResult | None) -> RunMeta:
        last = attempt.last_assistant if attempt else None
        usage = dict(self.usage) if self.usage else None
        last_call = dict(attempt.last_call_usage) if attempt and attempt.last_call_usage else None
        if usage is not None and last_call is not None and "totalTokens" in last_call:
            usage["total"] = int(last_call["totalTokens"])
        prompt_tokens = None
        if last_call is not None:
            prompt_tokens = (
                int(last_call.get("input") or 0)
                + int(last_call.get("cacheRead") or 0)
                + int(last_call.get("cacheWrite") or 0)
            )
        agent_meta = AgentMeta(
            session_id=self.runner.session_id,
            provider=str((last or {}).get("provider") or self.model.provider),
            model=str((last or {}).get("model") or self.model.id),
            usage=usage,
            last_call_usage=last_call,
            prompt_tokens=prompt_tokens,
            compaction_count=self.compaction_count,
            auth_profile_id=self.profile,
        )
        stop_reason = (last or {}).get("stopReason")
        pending = list(attempt.client_tool_calls) if attempt else []
        if pending:
            stop_reason = "tool_calls"
        return RunMeta(
            duration_ms=0,
            agent_meta=agent_meta,
            aborted=bool(attempt and (attempt.aborted or attempt.timed_out_during_compaction)),
            stop_reason=stop_reason,
            pending_tool_calls=pending,
            system_prompt_report=attempt.system_prompt_report if attempt else None,
        )

    def _signal_aborted(self) -> bool:
        signal = self.runner.abort_signal
        return signal is not None and signal.aborted

    def _aborted_result(self, attempt: AttemptResult | None) -> EmbeddedRunResult:
        if attempt is None:
            meta = self._meta(None)
            meta.aborted = True
            return EmbeddedRunResult(payloads=[], meta=meta)
        result = self._result(attempt)
        result.meta.aborted = True
        return result

    def _error_result(
        self, attempt: AttemptResult | None, text: str, kind: Any
    ) -> EmbeddedRunResult:
        meta = self._meta(attempt)
        meta.error = RunError(kind=kind, message=text)
        return EmbeddedRunResult(payloads=[ReplyPayload(text=text, is_error=True)], meta=meta)

    def _payloads(self, attempt: AttemptResult) -> list[ReplyPayload]:
        options = self.runner.options
        payloads = build_embedded_run_payloads(
            assistant_texts=attempt.assistant_texts,
            tool_metas=attempt.tool_metas,
            last_assistant=attempt.last_assistant,
            # (after a loop the refused call is not news to the user; why the run stopped is)
            last_tool_error=None
            if attempt.tool_loop_ended or self.runner.suppress_tool_error_warnings
            else attempt.last_tool_error,
            provider=self.model.provider,
            verbose_level=options["verbose_level"],
            reasoning_level=options["reasoning_mode"],
            tool_result_format=options["tool_result_format"],
            did_send_via_messaging_tool=attempt.did_send_via_messaging_tool,
            messaging_tool_sent_texts=attempt.messaging_tool_sent_texts,
            current_message_id=options["current_message_id"],
            streamed_keys=attempt.block_reply_keys,
            suppress_tool_errors=get_path(self.runner.config, "messages.suppressToolErrors")
            is True,
        )
        if attempt.tool_loop_ended:
            payloads.append(ReplyPayload(text=TOOL_LOOP_ENDED_TEXT, is_error=True))
        return payloads

    def _result(self, attempt: AttemptResult) -> EmbeddedRunResult:
        meta = self._meta(attempt)
        if attempt.tool_loop_ended:
            meta.error = RunError(kind="tool_loop", message=TOOL_LOOP_ENDED_TEXT)
        return EmbeddedRunResult(
            payloads=self._payloads(attempt),
            meta=meta,
            did_send_via_messaging_tool=attempt.did_send_via_messaging_tool,
            messaging_tool_sent_texts=attempt.messaging_tool_sent_texts,
            messaging_tool_sent_media_urls=attempt.messaging_tool_sent_media_urls,
            messaging_tool_sent_targets=attempt.messaging_tool_sent_targets,
        )

    def _success(
        self, attempt: AttemptResult, *, failure_marked: bool = False
    ) -> EmbeddedRunResult:
        result = self._result(attempt)
        last = attempt.last_assistant
        if attempt.timed_out and not attempt.timed_out_during_compaction and not result.payloads:
            return self._error_result(attempt, TIMEOUT_NO_RESPONSE_TEXT, "timeout")
        incomplete = (
            not result.payloads
            and not attempt.client_tool_calls
            and attempt.last_tool_error is None
            and not attempt.did_send_via_messaging_tool
            and last is not None
            and last.get("stopReason") in ("toolUse", "error")
        )
        if incomplete:
            if not failure_marked:
                error = (last or {}).get("errorMessage")
                self._mark_failure(classify_failover_reason(error, self.model.provider), error)
            mutated = any(name in _MUTATING_TOOLS for name in attempt.ran_tools)
            return self._error_result(
                attempt,
                INCOMPLETE_TURN_MUTATED_TEXT if mutated else INCOMPLETE_TURN_TEXT,
                "incomplete_turn",
            )
        if self.profile is not None and (last is None or last.get("stopReason") != "error"):
            store = load_auth_profile_store(self.runner.agent_dir)
            mark_auth_profile_good(store, self.model.provider, self.profile)
            mark_auth_profile_used(store, self.profile, model=self.model.id)
        return result


def _default_thinking(config: Mapping[str, Any], model: Model) -> ThinkingLevel:
    value = get_path(config, "agents.defaults.thinkingDefault")
    if isinstance(value, str) and value in ("off", "minimal", "low", "medium", "high", "xhigh"):
        return value  # type: ignore[return-value]
    return "low" if model.reasoning else "off"


def _failover_message(last: Mapping[str, Any] | None, reason: Any, provider: str) -> str:
    if last is not None:
        formatted = format_assistant_error_text(last, provider)
        if formatted:
            return formatted
        raw = last.get("errorMessage")
        if raw:
            return str(raw)
    return {
        "timeout": "LLM request timed out.",
        "rate_limit": "LLM request rate limited.",
        "auth": "LLM request unauthorized.",
    }.get(str(reason), "LLM request failed.")
