"""`AgentSession`: an `Agent` bound to a session file, settings, credentials and extensions.

Every message is persisted through the `SessionManager` as it ends; transient provider failures
are retried with backoff; the context is compacted when it nears the window or overflows (one
compact-and-retry per overflow); extensions see and shape every step.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import operator
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias, cast

from clawpi.agent import Agent, AgentTool, default_convert_to_llm, user_message
from clawpi.agent.config import (
    AfterToolCallContext,
    AfterToolCallResult,
    BeforeToolCallContext,
    BeforeToolCallResult,
)
from clawpi.ai.abort import AbortSignal
from clawpi.ai.models import Model, supports_xhigh
from clawpi.ai.prefix_memo import PrefixMemo, ResumableMemo
from clawpi.ai.types import THINKING_LEVELS, ImageContent, ThinkingLevel
from clawpi.errors import ClawpiError
from clawpi.sdk.compaction import (
    CompactionResult,
    estimate_context_tokens,
)
from clawpi.sdk.extensions import ExtensionContext, ExtensionRunner
from clawpi.sdk.registry import ModelRegistry
from clawpi.sdk.resources import ResourceLoader, split_frontmatter
from clawpi.sdk.retry import RETRY_CANCELLED, is_retryable_error, retry_delay_ms
from clawpi.sdk.session_compaction import SessionCompaction
from clawpi.sdk.settings import SettingsManager
from clawpi.sdk.system_prompt import build_system_prompt
from clawpi.session import SessionManager
from clawpi.session.context import convert_to_llm, has_only_model_roles, llm_conversion_pass

log = logging.getLogger(__name__)

_model_roles_only = PrefixMemo(has_only_model_roles, operator.and_)
"""Per session manager: a long session's history, model roles only until a turn adds another,
is read again on each model call only for what is new (see `PrefixMemo`)."""
_llm_conversions = ResumableMemo(llm_conversion_pass)
"""Per session manager, the conversion of a history with other roles (after a compaction)."""

SessionListener: TypeAlias = Callable[[dict[str, Any]], Awaitable[None] | None]

IMAGE_BLOCKED_TEXT = "Image reading is disabled."


class AgentSessionError(ClawpiError):
    """A session call that cannot proceed (busy, no model, no key, ...); the message says why."""


class AgentSession:
    """A persistent, resumable agent. Create it with `create_agent_session(...)`."""

    def __init__(
        self,
        *,
        agent: Agent,
        session_manager: SessionManager,
        settings_manager: SettingsManager,
        model_registry: ModelRegistry,
        resource_loader: ResourceLoader,
        extensions: ExtensionRunner,
        tools: Mapping[str, AgentTool],
        active_tools: Sequence[str],
        cwd: Path,
        system_prompt: str | None = None,
    ) -> None:
        self.agent = agent
        self.session_manager = session_manager
        self.settings_manager = settings_manager
        self.model_registry = model_registry
        self.resource_loader = resource_loader
        self.extensions = extensions
        self.cwd = cwd
        self.model_fallback_message: str | None = None
        self._tools = dict(tools)
        self._active = [name for name in active_tools if name in self._tools]
        self._listeners: list[SessionListener] = []
        self._background: set[asyncio.Future[Any]] = set()
        self._turn_index = 0
        self._retry_attempt = 0
        self._retry_cancel: asyncio.Event | None = None
        self.compaction = SessionCompaction(
            self, enabled=settings_manager.settings.compaction.enabled
        )
        self._auto_retry = settings_manager.settings.retry.enabled
        self._next_turn: list[dict[str, Any]] = []
        self._base_system_prompt = ""
        self._system_prompt_override = system_prompt
        self._unsubscribe_agent = agent.subscribe(self._on_agent_event)
        agent.convert_to_llm = self._convert_to_llm
        agent.transform_context = self._transform_context
        agent.before_tool_call = self._before_tool_call
        agent.after_tool_call = self._after_tool_call
        agent.stream_options.on_payload = self._on_payload
        # the session's history outlives this agent: providers keep their work on it there
        agent.stream_options.history_owner = session_manager
        extensions.session = self
        extensions.on_error = lambda error: self._emit_nowait(error.to_event())
        self._apply_tools()

    # -- public state ----------------------------------------------------------------------

    @property
    def model(self) -> Model:
        return self.agent.state.model

    @property
    def thinking_level(self) -> ThinkingLevel:
        return self.agent.state.thinking_level

    @property
    def messages(self) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], self.agent.state.messages)

    @property
    def is_streaming(self) -> bool:
        return self.agent.state.is_streaming

    @property
    def is_compacting(self) -> bool:
        return self.compaction.running

    @property
    def session_file(self) -> Path | None:
        return self.session_manager.get_session_file()

    @property
    def session_id(self) -> str:
        return self.session_manager.get_session_id()

    @property
    def system_prompt(self) -> str:
        return self.agent.state.system_prompt

    @property
    def auto_compaction_enabled(self) -> bool:
        return self.compaction.enabled

    def set_auto_compaction_enabled(self, enabled: bool) -> None:
        self.compaction.enabled = enabled

    def set_auto_retry_enabled(self, enabled: bool) -> None:
        self._auto_retry = enabled

    @property
    def active_tool_names(self) -> list[str]:
        return list(self._active)

    @property
    def all_tool_names(self) -> list[str]:
        return list(self._tools)

    def set_active_tools(self, names: Sequence[str]) -> None:
        unknown = [n for n in names if n not in self._tools]
        if unknown:
            raise AgentSessionError(
                f"Unknown tool(s): {', '.join(unknown)}; available: {', '.join(self._tools)}"
            )
        self._active = list(dict.fromkeys(names))
        self._apply_tools()

    def set_system_prompt(self, prompt: str | None) -> None:
        """Use `prompt` as the whole system prompt from now on (None restores the default)."""
        self._system_prompt_override = prompt
        self._apply_tools()

    # -- listeners -------------------------------------------------------------------------

    def subscribe(self, listener: SessionListener) -> Callable[[], None]:
        """Every agent event plus the session's own (auto_compaction_*, auto_retry_*, ...)."""
        self._listeners = [*self._listeners, listener]

        def unsubscribe() -> None:
            self._listeners = [item for item in self._listeners if item is not listener]

        return unsubscribe

    async def compact(self, custom_instructions: str | None = None) -> CompactionResult | None:
        """Compact now (the running turn is aborted first). None when there is nothing to do."""
        return await self.compaction.compact_now(custom_instructions)

    async def emit(self, event: dict[str, Any]) -> None:
        """Send a session-level event to the listeners (after the agent's own events)."""
        await self._emit(event)

    async def _emit(self, event: dict[str, Any]) -> None:
        pending = self._dispatch(event)
        if pending is not None:
            await pending

    def _dispatch(self, event: dict[str, Any]) -> Awaitable[None] | None:
        """Call the listeners in order; from the first that returns an awaitable on, the rest
        run in the returned coroutine, after it. Listeners are usually plain functions: then
        an event costs no coroutine at all (a turn has a few dozen events)."""
        listeners = self._listeners
        for index, listener in enumerate(listeners):
            try:
                result = listener(event)
            except Exception:
                log.exception("session listener failed on %s", event.get("type"))
                continue
            if result is not None and inspect.isawaitable(result):
                return self._dispatch_rest(event, result, listeners[index + 1 :])
        return None

    async def _dispatch_rest(
        self, event: dict[str, Any], pending: Awaitable[Any], listeners: list[SessionListener]
    ) -> None:
        try:
            await pending
        except Exception:
            log.exception("session listener failed on %s", event.get("type"))
        for listener in listeners:
            try:
                result = listener(event)
                if result is not None and inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("session listener failed on %s", event.get("type"))

    def _emit_nowait(self, event: dict[str, Any]) -> None:
        for listener in self._listeners:
            try:
                result = listener(event)
                if result is not None and inspect.iscoroutine(result):
                    task = asyncio.ensure_future(result)
                    self._background.add(task)
                    task.add_done_callback(self._background.discard)
            except Exception:
                log.exception("session listener failed on %s", event.get("type"))

    # -- agent hooks -----------------------------------------------------------------------

    def ext_context(self) -> ExtensionContext:
        return ExtensionContext(
            cwd=self.cwd,
            session_manager=self.session_manager,
            model_registry=self.model_registry,
            model=self.model,
            is_idle=lambda: not self.is_streaming,
            abort=self.agent.abort,
            has_pending_messages=self.agent.has_queued_messages,
            get_system_prompt=lambda: self.system_prompt,
        )

    def _convert_to_llm(self, messages: list[Any]) -> list[Any]:
        if _model_roles_only(self.session_manager, messages):
            converted = convert_to_llm(messages, model_roles_only=True)
        else:  # a summary or a custom message: converted once, then only what is new
            converted = _llm_conversions(self.session_manager, messages)
        if self.settings_manager.settings.images.block_images:
            converted = [_block_images(message) for message in converted]
        return converted

    async def _transform_context(
        self, messages: list[Any], signal: AbortSignal | None
    ) -> list[Any]:
        if not self.extensions.has_handlers("context"):
            return messages  # (no extension context built for nobody)
        return await self.extensions.emit_context(messages, self.ext_context())

    def _on_payload(self, payload: dict[str, Any], model: Model) -> dict[str, Any] | None:
        if not self.extensions.has_handlers("before_provider_request"):
            return None
        return self.extensions.emit_before_provider_request(payload, self.ext_context())

    async def _before_tool_call(
        self, ctx: BeforeToolCallContext, signal: AbortSignal | None
    ) -> BeforeToolCallResult | None:
        if not self.extensions.has_handlers("tool_call"):
            return None
        reason = await self.extensions.emit_tool_call(
            ctx.tool_call["name"], ctx.tool_call["id"], ctx.args, self.ext_context()
        )
        return BeforeToolCallResult(block=True, reason=reason) if reason is not None else None

    async def _after_tool_call(
        self, ctx: AfterToolCallContext, signal: AbortSignal | None
    ) -> AfterToolCallResult | None:
        if not self.extensions.has_handlers("tool_result"):
            return None
        content, details = await self.extensions.emit_tool_result(
            ctx.tool_call["name"],
            ctx.tool_call["id"],
            ctx.args,
            list(ctx.result.content),
            ctx.result.details,
            ctx.is_error,
            self.ext_context(),
        )
        return AfterToolCallResult(content=content, details=details)

    def _on_agent_event(self, event: Any) -> Awaitable[None] | None:
        """Persist, then extensions, then the session's listeners, then the turn count; an
        awaitable only when an extension or a listener needs awaiting."""
        kind = event["type"]
        if kind == "agent_start":
            self._turn_index = 0
        elif kind == "message_start" and event["message"].get("role") == "user":
            self.compaction.overflow_attempted = False
        elif kind == "message_end":
            self._persist(event["message"])
        if self.extensions.has_handlers(kind):
            return self._on_agent_event_async(event, kind)
        pending = self._dispatch(event)
        if pending is not None:
            return self._count_turn_after(pending, kind)
        if kind == "turn_end":
            self._turn_index += 1
        return None

    async def _on_agent_event_async(self, event: Any, kind: str) -> None:
        ext_event = dict(event)
        if kind in ("turn_start", "turn_end"):
            ext_event["turnIndex"] = self._turn_index
            ext_event["timestamp"] = int(time.time() * 1000)
        await self.extensions.emit(ext_event, self.ext_context())
        await self._emit(event)
        if kind == "turn_end":
            self._turn_index += 1

    async def _count_turn_after(self, pending: Awaitable[None], kind: str) -> None:
        await pending
        if kind == "turn_end":
            self._turn_index += 1

    def _persist(self, message: Mapping[str, Any]) -> None:
        role = message.get("role")
        if role == "custom":
            self.session_manager.append_custom_message_entry(
                str(message.get("customType")),
                message.get("content") or "",
                bool(message.get("display", True)),
                message.get("details"),
            )
        elif role in ("user", "assistant", "toolResult", "bashExecution"):
            self.session_manager.append_message(dict(message))
            if role == "assistant" and message.get("stopReason") != "error":
                self.compaction.overflow_attempted = False

    # -- tools and system prompt -----------------------------------------------------------

    def _apply_tools(self) -> None:
        active = [self._tools[name] for name in self._active]
        self.agent.state.tools = active
        snippets = {
            name: registered.prompt_snippet
            for name, registered in self.extensions.tools.items()
            if registered.prompt_snippet
        }
        guidelines = [
            line
            for name, registered in self.extensions.tools.items()
            if name in self._active
            for line in registered.prompt_guidelines
        ]
        if self._system_prompt_override is not None:
            self._base_system_prompt = self._system_prompt_override
            self.agent.state.system_prompt = self._base_system_prompt
            return
        loader = self.resource_loader
        self._base_system_prompt = build_system_prompt(
            cwd=self.cwd,
            tools=self._active,
            tool_snippets={
                **{t.name: t.description for t in active if t.name not in _BUILTINS},
                **snippets,
            },
            extra_guidelines=guidelines,
            custom_prompt=loader.system_prompt,
            append_system_prompt=loader.append_system_prompt,
            context_files=loader.context_files,
            skills=loader.skills,
        )
        self.agent.state.system_prompt = self._base_system_prompt

    # -- prompting -------------------------------------------------------------------------

    async def prompt(
        self,
        text: str,
        *,
        images: Sequence[ImageContent] | None = None,
        streaming_behavior: str | None = None,
        expand_prompt_templates: bool = True,
        source: str = "interactive",
    ) -> None:
        """Send a user message and return when the run (with retries and compaction) is over."""
        if expand_prompt_templates and text.startswith("/") and await self._run_command(text):
            return
        image_list = list(images or [])
        if self.extensions.has_handlers("input"):  # (no extension context built for nobody)
            text, image_list, handled = await self.extensions.emit_input(
                text, image_list, source, self.ext_context()
            )
            if handled:
                return
        if expand_prompt_templates:
            text = self._expand(text)
        if self.is_streaming:
            if streaming_behavior in ("steer", "follow_up", "followUp"):
                self._queue(text, image_list, streaming_behavior)
                return
            raise AgentSessionError(
                "Agent is already processing. Specify streaming_behavior ('steer' or "
                "'follow_up') to queue the message."
            )
        await self._require_credentials()
        last = self._last_assistant()
        if last is not None:
            await self.compaction.check(last, before_prompt=True)
        messages: list[Any] = [user_message(text, image_list)]
        messages.extend(self._next_turn)
        self._next_turn = []
        injected: list[dict[str, Any]] = []
        system_prompt: str | None = None
        if self.extensions.has_handlers("before_agent_start"):
            injected, system_prompt = await self.extensions.emit_before_agent_start(
                text, image_list, self._base_system_prompt, self.ext_context()
            )
        messages.extend(_custom_message(item) for item in injected)
        self.agent.state.system_prompt = system_prompt or self._base_system_prompt
        await self._run(self.agent.prompt(messages))

    async def steer(self, text: str, images: Sequence[ImageContent] | None = None) -> None:
        """Deliver a message into the running turn (between tool calls)."""
        self._queue(self._expand(self._refuse_command(text)), list(images or []), "steer")

    async def follow_up(self, text: str, images: Sequence[ImageContent] | None = None) -> None:
        """Queue a message for when the agent would otherwise stop."""
        self._queue(self._expand(self._refuse_command(text)), list(images or []), "follow_up")

    def _queue(self, text: str, images: list[Any], behavior: str) -> None:
        message = user_message(text, images)
        if behavior == "steer":
            self.agent.steer(message)
        else:
            self.agent.follow_up(message)

    def _refuse_command(self, text: str) -> str:
        name = text[1:].split(" ", 1)[0] if text.startswith("/") else ""
        if name and name in self.extensions.commands:
            raise AgentSessionError(
                f'Extension command "/{name}" cannot be queued; send it when the agent is idle'
            )
        return text

    async def _run_command(self, text: str) -> bool:
        name, _, args = text[1:].partition(" ")
        command = self.extensions.commands.get(name)
        if command is None:
            return False
        try:
            result = command.handler(args, self.ext_context())
            if inspect.isawaitable(result):
                await result
        except Exception as exc:
            self.extensions._report(command.extension, f"command:{name}", exc)
        return True

    def _expand(self, text: str) -> str:
        if text.startswith("/skill:"):
            name, _, args = text[len("/skill:") :].partition(" ")
            skill = next((s for s in self.resource_loader.skills if s.name == name), None)
            if skill is not None:
                body = skill.file_path.read_text(encoding="utf-8")
                with contextlib.suppress(ValueError):
                    body = split_frontmatter(body)[1]
                expanded = (
                    f'<skill name="{skill.name}" location="{skill.file_path}">\n'
                    f"References are relative to {skill.base_dir}.\n\n{body.strip()}\n</skill>"
                )
                return expanded + (f"\n\n{args}" if args.strip() else "")
        return self.resource_loader.expand_prompt_template(text)

    async def _require_credentials(self) -> None:
        model = self.model
        if self.model_registry.get_api_key(model) is None and not is_local_model(model):
            raise AgentSessionError(
                self.model_registry.auth_storage.describe_missing(model.provider)
            )

    def _last_assistant(self) -> dict[str, Any] | None:
        for message in reversed(self.messages):
            if message.get("role") == "assistant":
                return cast(dict[str, Any], message)
        return None

    async def _run(self, start: Awaitable[None]) -> None:
        """Run, then keep going while a retry or a compaction says the turn should continue."""
        await start
        while True:
            last = self._last_assistant()
            if last is None:
                return
            if self._auto_retry and is_retryable_error(last, self.model.context_window):
                if await self._retry(last):
                    continue
                return
            if self._retry_attempt:
                await self._emit(
                    {"type": "auto_retry_end", "success": True, "attempt": self._retry_attempt}
                )
                self._retry_attempt = 0
            if await self.compaction.check(last):
                await self.agent.continue_()
                continue
            return

    async def _retry(self, last: dict[str, Any]) -> bool:
        settings = self.settings_manager.settings.retry
        self._retry_attempt += 1
        if self._retry_attempt > settings.max_retries:
            await self._emit(
                {
                    "type": "auto_retry_end",
                    "success": False,
                    "attempt": settings.max_retries,
                    "finalError": last.get("errorMessage"),
                }
            )
            self._retry_attempt = 0
            return False
        delay = retry_delay_ms(self._retry_attempt, settings.base_delay_ms, settings.max_delay_ms)
        await self._emit(
            {
                "type": "auto_retry_start",
                "attempt": self._retry_attempt,
                "maxAttempts": settings.max_retries,
                "delayMs": delay,
                "errorMessage": last.get("errorMessage"),
            }
        )
        self.drop_from_context(last)
        cancel = self._retry_cancel = asyncio.Event()
        try:
            await asyncio.wait_for(cancel.wait(), delay / 1000)
            cancelled = True
        except TimeoutError:
            cancelled = False
        finally:
            self._retry_cancel = None
        if cancelled:
            await self._emit(
                {
                    "type": "auto_retry_end",
                    "success": False,
                    "attempt": self._retry_attempt,
                    "finalError": RETRY_CANCELLED,
                }
            )
            self._retry_attempt = 0
            return False
        await self.agent.continue_()
        return True

    def drop_from_context(self, message: Mapping[str, Any]) -> None:
        """Out of the model's context; the session file keeps it."""
        messages = self.agent.state.messages
        for index in range(len(messages) - 1, -1, -1):
            if messages[index] is message:
                del messages[index]
                return

    def abort_retry(self) -> None:
        if self._retry_cancel is not None:
            self._retry_cancel.set()

    def abort_compaction(self) -> None:
        """Stop a running compaction's summary call (the compaction then fails, writing nothing)."""
        self.compaction.abort()

    async def abort(self) -> None:
        """Stop the running turn, a pending retry and a running compaction; wait until idle."""
        self.abort_retry()
        self.abort_compaction()
        self.agent.abort()
        await self.agent.wait_for_idle()

    # -- model and thinking ----------------------------------------------------------------

    def available_thinking_levels(self) -> list[ThinkingLevel]:
        model = self.model
        if not model.reasoning:
            return ["off"]
        levels: list[ThinkingLevel] = ["off", "minimal", "low", "medium", "high"]
        if supports_xhigh(model):
            levels.append("xhigh")
        return levels

    def _clamp_level(self, level: ThinkingLevel) -> ThinkingLevel:
        available = self.available_thinking_levels()
        if level in available:
            return level
        order = list(THINKING_LEVELS)
        wanted = order.index(level)
        for candidate in order[wanted:] + order[:wanted][::-1]:
            if candidate in available:
                return candidate
        return "off"

    def set_thinking_level(self, level: ThinkingLevel) -> ThinkingLevel:
        """Set (clamped to what the model supports); persisted only when it changes."""
        clamped = self._clamp_level(level)
        if clamped != self.agent.state.thinking_level:
            self.agent.state.thinking_level = clamped
            self.session_manager.append_thinking_level_change(clamped)
            if self.model.reasoning:
                self.settings_manager.set("defaultThinkingLevel", clamped)
        return clamped

    async def set_model(self, model: Model) -> None:
        if self.model_registry.get_api_key(model) is None and not is_local_model(model):
            raise AgentSessionError(f"No API key for {model.provider}/{model.id}")
        previous = self.model
        self.agent.state.model = model
        self.session_manager.append_model_change(model.provider, model.id)
        self.settings_manager.set("defaultProvider", model.provider)
        self.settings_manager.set("defaultModel", model.id)
        wanted = self.settings_manager.settings.default_thinking_level or self.thinking_level
        self.set_thinking_level(wanted if model.reasoning else "off")
        if self.extensions.has_handlers("model_select"):
            await self.extensions.emit(
                {
                    "type": "model_select",
                    "model": model,
                    "previousModel": previous,
                    "source": "set",
                },
                self.ext_context(),
            )

    # -- queries ---------------------------------------------------------------------------

    def get_last_assistant_text(self) -> str | None:
        last = self._last_assistant()
        if last is None:
            return None
        return "".join(
            b.get("text", "") for b in last.get("content", []) if b.get("type") == "text"
        )

    def get_context_usage(self) -> dict[str, Any]:
        tokens = estimate_context_tokens(self.messages) if self.messages else 0
        window = self.model.context_window
        return {"tokens": tokens, "contextWindow": window, "percent": tokens / window * 100}

    def get_session_stats(self) -> dict[str, Any]:
        counts = {"user": 0, "assistant": 0, "toolResult": 0}
        tokens = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}
        cost = 0.0
        tool_calls = 0
        for entry in self.session_manager.get_entries():
            message = entry.get("message") if entry.get("type") == "message" else None
            if not isinstance(message, dict):
                continue
            role = message.get("role")
            if role in counts:
                counts[role] += 1
            if role == "assistant":
                usage = message.get("usage") or {}
                for key in ("input", "output", "cacheRead", "cacheWrite"):
                    tokens[key] += int(usage.get(key) or 0)
                tokens["total"] += int(usage.get("totalTokens") or 0)
                cost += float((usage.get("cost") or {}).get("total") or 0)
                tool_calls += sum(
                    1 for b in message.get("content", []) if b.get("type") == "toolCall"
                )
        return {
            "sessionFile": str(self.session_file) if self.session_file else None,
            "sessionId": self.session_id,
            "userMessages": counts["user"],
            "assistantMessages": counts["assistant"],
            "toolCalls": tool_calls,
            "toolResults": counts["toolResult"],
            "totalMessages": sum(counts.values()),
            "tokens": tokens,
            "cost": cost,
        }

    # -- extension actions (SessionActions) ------------------------------------------------

    def ext_append_entry(self, custom_type: str, data: Any) -> str:
        return self.session_manager.append_custom_entry(custom_type, data)

    async def ext_send_message(
        self, message: Mapping[str, Any], trigger_turn: bool, deliver_as: str | None
    ) -> None:
        custom = _custom_message(message)
        if deliver_as == "nextTurn":
            self._next_turn.append(custom)
        elif self.is_streaming:
            if deliver_as in ("followUp", "follow_up"):
                self.agent.follow_up(custom)
            else:
                self.agent.steer(custom)
        elif trigger_turn:
            await self._require_credentials()
            await self._run(self.agent.prompt(custom))
        else:
            self.agent.state.messages.append(custom)
            self._persist(custom)
            await self._emit({"type": "message_start", "message": custom})
            await self._emit({"type": "message_end", "message": custom})

    async def ext_send_user_message(self, content: Any, deliver_as: str | None) -> None:
        text = content if isinstance(content, str) else ""
        if self.is_streaming:
            self._queue(
                text, [], "follow_up" if deliver_as in ("followUp", "follow_up") else "steer"
            )
        else:
            await self.prompt(text, expand_prompt_templates=False, source="extension")

    def ext_set_session_name(self, name: str) -> None:
        self.session_manager.append_session_info(name)

    def ext_get_session_name(self) -> str | None:
        return self.session_manager.get_session_name()

    def ext_set_label(self, entry_id: str, label: str | None) -> None:
        self.session_manager.append_label_change(entry_id, label)

    def ext_get_active_tools(self) -> list[str]:
        return self.active_tool_names

    def ext_set_active_tools(self, names: Sequence[str]) -> None:
        self.set_active_tools(names)

    def ext_get_thinking_level(self) -> str:
        return self.thinking_level

    def ext_set_thinking_level(self, level: str) -> None:
        if level not in THINKING_LEVELS:
            raise AgentSessionError(f"Unknown thinking level {level!r}")
        self.set_thinking_level(level)

    # -- lifecycle -------------------------------------------------------------------------

    async def dispose(self) -> None:
        """Abort anything running, tell extensions, release the session."""
        if self.is_streaming:
            await self.abort()
        if self.extensions.has_handlers("session_shutdown"):
            await self.extensions.emit({"type": "session_shutdown"}, self.ext_context())
        self._unsubscribe_agent()
        self._unsubscribe_agent = _nothing
        self.extensions.session = None
        self.extensions.on_error = None
        # break the agent <-> session reference cycles so both are freed without the cyclic GC
        agent = self.agent
        agent.get_api_key = None
        agent.transform_context = None
        agent.convert_to_llm = default_convert_to_llm
        agent.before_tool_call = None
        agent.after_tool_call = None
        agent.stream_options.on_payload = None
        agent.stream_options.history_owner = None
        self._listeners = []
        self.session_manager.flush()


_BUILTINS = frozenset(
    {"read", "write", "edit", "exec", "process", "grep", "find", "ls", "apply_patch"}
)


def _nothing() -> None:
    pass


def _custom_message(message: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "role": "custom",
        "customType": str(message.get("customType", "extension")),
        "content": message.get("content", ""),
        "display": bool(message.get("display", True)),
        "details": message.get("details"),
        "timestamp": int(time.time() * 1000),
    }


def _block_images(message: Any) -> Any:
    content = message.get("content")
    if not isinstance(content, list) or not any(p.get("type") == "image" for p in content):
        return message
    parts: list[dict[str, Any]] = []
    for part in content:
        replacement = (
            {"type": "text", "text": IMAGE_BLOCKED_TEXT} if part.get("type") == "image" else part
        )
        if replacement.get("text") == IMAGE_BLOCKED_TEXT and parts and parts[-1] == replacement:
            continue  # consecutive duplicates collapse to one notice
        parts.append(replacement)
    return {**message, "content": parts}


def is_local_model(model: Model) -> bool:
    """Loopback servers and the scripted test providers need no real API key."""
    from urllib.parse import urlparse

    host = urlparse(model.base_url).hostname or ""
    return host in ("127.0.0.1", "localhost", "::1") or model.api in ("faux", "function")
