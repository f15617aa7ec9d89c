"""`AgentEvent`: what the loop reports, as plain dicts with pi's keys.

They serialise as they are (json mode, RPC, session persistence) and match pi's event stream
field for field. Order within a run:

    agent_start, turn_start, (message_start, message_end) per prompt,
    message_start, message_update*, message_end            (the assistant)
    (tool_execution_start, tool_execution_update*, tool_execution_end,
     message_start, message_end)* per tool call            (the tool results)
    turn_end, [turn_start ... turn_end]*, agent_end
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias, TypedDict

from clawpi.ai.types import AssistantMessage, AssistantMessageEvent, Message, ToolResultMessage

AgentMessage: TypeAlias = Message | dict[str, Any]
"""A pi message, or an app-defined message (any dict with a `role`) kept in the transcript."""


class AgentStartEvent(TypedDict):
    type: Literal["agent_start"]


class AgentEndEvent(TypedDict):
    type: Literal["agent_end"]
    messages: list[AgentMessage]
    """The messages added during this run, prompts included."""


class TurnStartEvent(TypedDict):
    type: Literal["turn_start"]


class TurnEndEvent(TypedDict):
    type: Literal["turn_end"]
    message: AssistantMessage
    toolResults: list[ToolResultMessage]


class MessageStartEvent(TypedDict):
    type: Literal["message_start"]
    message: AgentMessage


class MessageUpdateEvent(TypedDict):
    type: Literal["message_update"]
    message: AssistantMessage
    assistantMessageEvent: AssistantMessageEvent


class MessageEndEvent(TypedDict):
    type: Literal["message_end"]
    message: AgentMessage


class ToolExecutionStartEvent(TypedDict):
    type: Literal["tool_execution_start"]
    toolCallId: str
    toolName: str
    args: Any


class ToolExecutionUpdateEvent(TypedDict):
    type: Literal["tool_execution_update"]
    toolCallId: str
    toolName: str
    args: Any
    partialResult: dict[str, Any]
    """`{"content": [...], "details": ...}`"""


class ToolExecutionEndEvent(TypedDict):
    type: Literal["tool_execution_end"]
    toolCallId: str
    toolName: str
    result: dict[str, Any]
    """`{"content": [...], "details": ...}`"""
    isError: bool


AgentEvent: TypeAlias = (
    AgentStartEvent
    | AgentEndEvent
    | TurnStartEvent
    | TurnEndEvent
    | MessageStartEvent
    | MessageUpdateEvent
    | MessageEndEvent
    | ToolExecutionStartEvent
    | ToolExecutionUpdateEvent
    | ToolExecutionEndEvent
)

AGENT_EVENT_TYPES: tuple[str, ...] = (
    "agent_start",
    "agent_end",
    "turn_start",
    "turn_end",
    "message_start",
    "message_update",
    "message_end",
    "tool_execution_start",
    "tool_execution_update",
    "tool_execution_end",
)
