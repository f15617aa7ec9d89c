"""What one agent run is given: the context, the loop's settings and its hooks.

Every callback may be a plain function or a coroutine function; the loop awaits whatever comes
back when it is awaitable.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, TypeAlias, TypeVar

from clawpi.agent.events import AgentMessage
from clawpi.agent.tool import AgentTool, ToolResult
from clawpi.ai.abort import AbortSignal
from clawpi.ai.event_stream import AssistantMessageEventStream
from clawpi.ai.models import Model
from clawpi.ai.stream import StreamOptions, stream
from clawpi.ai.types import AssistantMessage, Context, Message, ToolCall, UserContent

T = TypeVar("T")
MaybeAwaitable: TypeAlias = T | Awaitable[T]

ToolExecutionMode: TypeAlias = Literal["parallel", "sequential"]
QueueMode: TypeAlias = Literal["all", "one-at-a-time"]

LLM_ROLES = frozenset(("user", "assistant", "toolResult"))
TOOL_ABORT_GRACE_SECONDS = 2.0
"""How long a tool may take to wind down after the abort signal before it is cancelled."""


@dataclasses.dataclass(slots=True)
class AgentContext:
    """The conversation a run works on; the loop appends to its own copy of `messages`."""

    system_prompt: str
    messages: list[AgentMessage]
    tools: Sequence[AgentTool] = ()


@dataclasses.dataclass(slots=True)
class BeforeToolCallContext:
    assistant_message: AssistantMessage
    tool_call: ToolCall
    args: Any
    """The validated (and coerced) arguments `execute` would receive."""
    context: AgentContext


@dataclasses.dataclass(slots=True)
class BeforeToolCallResult:
    """Returned by `before_tool_call` to stop a call; `reason` is what the model reads."""

    block: bool = False
    reason: str | None = None


@dataclasses.dataclass(slots=True)
class AfterToolCallContext:
    assistant_message: AssistantMessage
    tool_call: ToolCall
    args: Any
    result: ToolResult
    is_error: bool
    context: AgentContext


@dataclasses.dataclass(slots=True)
class AfterToolCallResult:
    """Field-wise replacement of a tool's result; None keeps the original field."""

    content: list[UserContent] | None = None
    details: Any = None
    is_error: bool | None = None


ConvertToLlm: TypeAlias = Callable[[list[AgentMessage]], MaybeAwaitable[list[Message]]]
TransformContext: TypeAlias = Callable[
    [list[AgentMessage], AbortSignal | None], MaybeAwaitable[list[AgentMessage]]
]
GetApiKey: TypeAlias = Callable[[str], MaybeAwaitable[str | None]]
MessageSource: TypeAlias = Callable[[], MaybeAwaitable[list[AgentMessage]]]
BeforeToolCall: TypeAlias = Callable[
    [BeforeToolCallContext, AbortSignal | None],
    MaybeAwaitable[BeforeToolCallResult | Mapping[str, Any] | None],
]
AfterToolCall: TypeAlias = Callable[
    [AfterToolCallContext, AbortSignal | None],
    MaybeAwaitable[AfterToolCallResult | Mapping[str, Any] | None],
]
StreamFn: TypeAlias = Callable[
    [Model, Context, StreamOptions], MaybeAwaitable[AssistantMessageEventStream]
]


def is_awaitable(value: object) -> bool:
    """Cheaper than `inspect.isawaitable` for the plain values most callbacks return."""
    return value is not None and hasattr(value, "__await__")


def with_options(options: StreamOptions, **changes: Any) -> StreamOptions:
    """`options` with `changes` applied, copying only when something actually changes."""
    for name, value in changes.items():
        current = getattr(options, name)
        if current is not value and current != value:
            return options.replace(**changes)
    return options


def default_convert_to_llm(messages: list[AgentMessage]) -> list[Message]:
    """Keep what a model understands (user, assistant, toolResult); drop app-only messages."""
    return [message for message in messages if message.get("role") in LLM_ROLES]  # type: ignore[misc]


@dataclasses.dataclass(slots=True, kw_only=True)
class AgentLoopConfig:
    """Settings for one run of the loop.

    `options` are the stream options every model call starts from; the loop fills in the API
    key (from `get_api_key`, resolved before each call, else `options.api_key`) and the signal.
    """

    model: Model
    convert_to_llm: ConvertToLlm = default_convert_to_llm
    transform_context: TransformContext | None = None
    get_api_key: GetApiKey | None = None
    options: StreamOptions = dataclasses.field(default_factory=StreamOptions)
    get_steering_messages: MessageSource | None = None
    get_follow_up_messages: MessageSource | None = None
    tool_execution: ToolExecutionMode = "parallel"
    before_tool_call: BeforeToolCall | None = None
    after_tool_call: AfterToolCall | None = None
    stream_fn: StreamFn = stream
    tool_abort_grace: float = TOOL_ABORT_GRACE_SECONDS
    """Seconds a tool gets to stop on its own after an abort before its task is cancelled."""
