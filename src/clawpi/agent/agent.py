"""`Agent`: the loop with state, queues, abort and listeners around it.

    agent = Agent(model=model, system_prompt="...", tools=[echo])
    unsubscribe = agent.subscribe(print)
    await agent.prompt("hello")        # returns when the run has ended
    agent.state.messages

Listeners see every `AgentEvent` after the agent has updated its state for it. Async listeners
are awaited in subscription order before the loop moves on, so a listener that persists messages
has written each one before the next event happens.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TypeAlias

from clawpi.agent.config import (
    TOOL_ABORT_GRACE_SECONDS,
    AfterToolCall,
    AgentContext,
    AgentLoopConfig,
    BeforeToolCall,
    ConvertToLlm,
    GetApiKey,
    QueueMode,
    StreamFn,
    ToolExecutionMode,
    TransformContext,
    default_convert_to_llm,
    with_options,
)
from clawpi.agent.errors import AgentBusyError, AgentError
from clawpi.agent.events import AgentEvent, AgentMessage
from clawpi.agent.loop import check_can_continue, run_agent_loop, run_agent_loop_continue
from clawpi.agent.queue import MessageQueue
from clawpi.agent.tool import AgentTool
from clawpi.ai.abort import AbortController, AbortSignal
from clawpi.ai.event_stream import empty_assistant_message
from clawpi.ai.models import Model
from clawpi.ai.stream import StreamOptions, stream
from clawpi.ai.types import AssistantMessage, ImageContent, ThinkingLevel, UserMessage

log = logging.getLogger(__name__)

AgentListener: TypeAlias = Callable[[AgentEvent], Awaitable[None] | None]
PromptInput: TypeAlias = str | AgentMessage | Sequence[AgentMessage]


@dataclasses.dataclass(kw_only=True)
class AgentState:
    """What the agent knows; safe to read at any time, and to change between runs."""

    model: Model
    system_prompt: str = ""
    thinking_level: ThinkingLevel = "off"
    tools: list[AgentTool] = dataclasses.field(default_factory=list)
    messages: list[AgentMessage] = dataclasses.field(default_factory=list)
    is_streaming: bool = False
    stream_message: AgentMessage | None = None
    """The message being streamed right now (a copy of the partial), else None."""
    pending_tool_calls: set[str] = dataclasses.field(default_factory=set)
    error: str | None = None
    """The last run's error message, if its final reply failed."""


def user_message(text: str, images: Iterable[ImageContent] = ()) -> UserMessage:
    return {
        "role": "user",
        "content": [{"type": "text", "text": text}, *images],
        "timestamp": int(time.time() * 1000),
    }


class Agent:
    """A stateful agent: prompt it, steer it while it works, queue follow-ups, abort it."""

    def __init__(
        self,
        *,
        model: Model,
        system_prompt: str = "",
        tools: Iterable[AgentTool] = (),
        messages: Iterable[AgentMessage] = (),
        thinking_level: ThinkingLevel = "off",
        convert_to_llm: ConvertToLlm = default_convert_to_llm,
        transform_context: TransformContext | None = None,
        get_api_key: GetApiKey | None = None,
        steering_mode: QueueMode = "one-at-a-time",
        follow_up_mode: QueueMode = "one-at-a-time",
        tool_execution: ToolExecutionMode = "parallel",
        before_tool_call: BeforeToolCall | None = None,
        after_tool_call: AfterToolCall | None = None,
        stream_fn: StreamFn = stream,
        stream_options: StreamOptions | None = None,
        session_id: str | None = None,
        tool_abort_grace: float = TOOL_ABORT_GRACE_SECONDS,
    ) -> None:
        if tool_execution not in ("parallel", "sequential"):
            raise ValueError(
                f"tool_execution must be 'parallel' or 'sequential', not {tool_execution!r}"
            )
        self.state = AgentState(
            model=model,
            system_prompt=system_prompt,
            thinking_level=thinking_level,
            tools=list(tools),
            messages=list(messages),
        )
        self.convert_to_llm = convert_to_llm
        self.transform_context = transform_context
        self.get_api_key = get_api_key
        self.tool_execution: ToolExecutionMode = tool_execution
        self.before_tool_call = before_tool_call
        self.after_tool_call = after_tool_call
        self.stream_fn = stream_fn
        self.stream_options = stream_options or StreamOptions()
        self.session_id = session_id
        self.tool_abort_grace = tool_abort_grace
        self._steering = MessageQueue(steering_mode)
        self._follow_up = MessageQueue(follow_up_mode)
        self._listeners: list[AgentListener] = []
        self._controller: AbortController | None = None
        self._idle: asyncio.Event | None = None

    # -- listeners -------------------------------------------------------------------------

    def subscribe(self, listener: AgentListener) -> Callable[[], None]:
        """Call `listener` with every event (sync or async); returns the unsubscribe function."""
        # copy-on-write, so a listener may unsubscribe (or subscribe) while events dispatch
        self._listeners = [*self._listeners, listener]

        def unsubscribe() -> None:
            self._listeners = [item for item in self._listeners if item is not listener]

        return unsubscribe

    # -- queues ----------------------------------------------------------------------------

    @property
    def steering_mode(self) -> QueueMode:
        return self._steering.mode

    @steering_mode.setter
    def steering_mode(self, mode: QueueMode) -> None:
        self._steering.set_mode(mode)

    @property
    def follow_up_mode(self) -> QueueMode:
        return self._follow_up.mode

    @follow_up_mode.setter
    def follow_up_mode(self, mode: QueueMode) -> None:
        self._follow_up.set_mode(mode)

    def steer(self, message: str | AgentMessage) -> None:
        """Deliver `message` after the current tool call; calls not yet run are skipped."""
        self._steering.push(_as_message(message))

    def follow_up(self, message: str | AgentMessage) -> None:
        """Deliver `message` once the agent would otherwise stop."""
        self._follow_up.push(_as_message(message))

    @property
    def steering_queue(self) -> list[AgentMessage]:
        return self._steering.messages

    @property
    def follow_up_queue(self) -> list[AgentMessage]:
        return self._follow_up.messages

    def clear_steering_queue(self) -> list[AgentMessage]:
        return self._steering.clear()

    def clear_follow_up_queue(self) -> list[AgentMessage]:
        return self._follow_up.clear()

    def clear_all_queues(self) -> list[AgentMessage]:
        """Drop every queued message; returns them (steering first) so a UI can restore them."""
        return self._steering.clear() + self._follow_up.clear()

    def has_queued_messages(self) -> bool:
        return bool(len(self._steering) or len(self._follow_up))

    # -- runs ------------------------------------------------------------------------------

    async def prompt(
        self, input: PromptInput, images: Iterable[ImageContent] | None = None
    ) -> None:
        """Send text (with optional images) or message(s); returns when the run has ended."""
        self._check_idle()
        if images and not isinstance(input, str):
            raise AgentError("images= goes with a text prompt; put images in the message instead")
        if isinstance(input, str):
            prompts: list[AgentMessage] = [user_message(input, images or ())]
        elif isinstance(input, Mapping):
            prompts = [input]
        else:
            prompts = list(input)
        await self._run(prompts, poll_steering_first=True)

    async def continue_(self) -> None:
        """Run again from the current transcript (after an error, or with queued messages)."""
        self._check_idle()
        messages = self.state.messages
        if messages and messages[-1].get("role") == "assistant":
            steering = self._steering.drain()
            if steering:
                await self._run(steering, poll_steering_first=False)
                return
            follow_ups = self._follow_up.drain()
            if follow_ups:
                await self._run(follow_ups, poll_steering_first=True)
                return
        check_can_continue(messages)
        await self._run(None, poll_steering_first=True)

    def abort(self, reason: str | None = None) -> None:
        """Stop the current run: the stream and every running tool see the same signal."""
        if self._controller is not None:
            self._controller.abort(reason)

    async def wait_for_idle(self) -> None:
        """Return once no run is in progress."""
        idle = self._idle
        if idle is not None:
            await idle.wait()

    def reset(self) -> None:
        """Forget the transcript, queued messages and the last error."""
        state = self.state
        state.messages = []
        state.stream_message = None
        state.pending_tool_calls = set()
        state.error = None
        self.clear_all_queues()

    # -- internals -------------------------------------------------------------------------

    def _check_idle(self) -> None:
        if self.state.is_streaming:
            raise AgentBusyError()

    def _loop_config(self, signal: AbortSignal) -> AgentLoopConfig:
        state = self.state
        options = with_options(  # the loop's own `signal=` then finds it set: no second copy
            self.stream_options,
            reasoning=None if state.thinking_level == "off" else state.thinking_level,
            session_id=self.session_id or self.stream_options.session_id,
            signal=signal,
        )
        return AgentLoopConfig(
            model=state.model,
            convert_to_llm=self.convert_to_llm,
            transform_context=self.transform_context,
            get_api_key=self.get_api_key,
            options=options,
            get_steering_messages=self._steering.drain,
            get_follow_up_messages=self._follow_up.drain,
            tool_execution=self.tool_execution,
            before_tool_call=self.before_tool_call,
            after_tool_call=self.after_tool_call,
            stream_fn=self.stream_fn,
            tool_abort_grace=self.tool_abort_grace,
        )

    async def _run(self, prompts: list[AgentMessage] | None, *, poll_steering_first: bool) -> None:
        state = self.state
        controller = self._controller = AbortController()
        idle = self._idle = asyncio.Event()
        state.is_streaming = True
        state.stream_message = None
        state.error = None
        # The loop copies both lists before its first await: a copy here would be a second one
        # of the whole history on every run.
        context = AgentContext(state.system_prompt, state.messages, state.tools)
        config = self._loop_config(controller.signal)
        finished = False
        try:
            if prompts is None:
                await run_agent_loop_continue(context, config, self._emit, controller.signal)
            else:
                await run_agent_loop(
                    prompts,
                    context,
                    config,
                    self._emit,
                    controller.signal,
                    poll_steering_first=poll_steering_first,
                )
            finished = True
        except Exception as exc:
            finished = True
            await self._fail(exc, aborted=controller.signal.aborted)
        finally:
            if not finished:  # cancelled from outside: stop the stream and the tools too
                controller.abort("Run cancelled")
            self._steering.restore()
            self._follow_up.restore()
            state.is_streaming = False
            state.stream_message = None
            state.pending_tool_calls = set()
            self._controller = None
            self._idle = None
            idle.set()

    async def _fail(self, exc: Exception, *, aborted: bool) -> None:
        """The loop itself broke (a hook or listener raised): record it as a failed reply."""
        log.debug("agent run failed", exc_info=exc)
        model = self.state.model
        message: AssistantMessage = empty_assistant_message(model.api, model.provider, model.id)
        message["content"] = [{"type": "text", "text": ""}]
        message["stopReason"] = "aborted" if aborted else "error"
        message["errorMessage"] = str(exc) or type(exc).__name__
        self.state.messages.append(message)
        self.state.error = message["errorMessage"]
        event: AgentEvent = {"type": "agent_end", "messages": [message]}
        for listener in tuple(self._listeners):
            try:
                result = listener(event)
                if result is not None and inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("agent listener failed on agent_end")

    async def _emit(self, event: AgentEvent) -> None:
        state = self.state
        kind = event["type"]
        if kind == "message_update" or kind == "message_start":
            state.stream_message = event["message"]  # type: ignore[typeddict-item]
        elif kind == "message_end":
            message = event["message"]  # type: ignore[typeddict-item]
            state.stream_message = None
            state.messages.append(message)
            if not self._steering.commit(message):
                self._follow_up.commit(message)
        elif kind == "tool_execution_start":
            state.pending_tool_calls.add(event["toolCallId"])  # type: ignore[typeddict-item]
        elif kind == "tool_execution_end":
            state.pending_tool_calls.discard(event["toolCallId"])  # type: ignore[typeddict-item]
        elif kind == "turn_end":
            error = event["message"].get("errorMessage")  # type: ignore[typeddict-item]
            if isinstance(error, str) and error:
                state.error = error
        elif kind == "agent_end":
            state.stream_message = None
        for listener in self._listeners:
            result = listener(event)
            if result is not None and inspect.isawaitable(result):
                await result


def _as_message(message: str | AgentMessage) -> AgentMessage:
    if isinstance(message, str):
        return user_message(message)
    if not isinstance(message, Mapping) or "role" not in message:
        raise TypeError(f"expected text or a message dict with a 'role', got {message!r}")
    return message
