"""The agent loop (pi-agent-core): a model plus tools, streamed, steerable and abortable."""

from clawpi.agent.agent import Agent, AgentListener, AgentState, user_message
from clawpi.agent.config import (
    AfterToolCallContext,
    AfterToolCallResult,
    AgentContext,
    AgentLoopConfig,
    BeforeToolCallContext,
    BeforeToolCallResult,
    QueueMode,
    ToolExecutionMode,
    default_convert_to_llm,
)
from clawpi.agent.errors import AgentBusyError, AgentError
from clawpi.agent.events import AgentEvent, AgentMessage
from clawpi.agent.loop import run_agent_loop, run_agent_loop_continue
from clawpi.agent.queue import MessageQueue
from clawpi.agent.tool import AgentTool, ToolResult, ToolUpdateCallback
from clawpi.agent.tool_execution import ABORTED_MESSAGE, BLOCKED_MESSAGE, SKIPPED_MESSAGE
from clawpi.ai.abort import AbortController, AbortSignal
from clawpi.ai.validation import ToolArgumentsError

__all__ = [
    "ABORTED_MESSAGE",
    "BLOCKED_MESSAGE",
    "SKIPPED_MESSAGE",
    "AbortController",
    "AbortSignal",
    "AfterToolCallContext",
    "AfterToolCallResult",
    "Agent",
    "AgentBusyError",
    "AgentContext",
    "AgentError",
    "AgentEvent",
    "AgentListener",
    "AgentLoopConfig",
    "AgentMessage",
    "AgentState",
    "AgentTool",
    "BeforeToolCallContext",
    "BeforeToolCallResult",
    "MessageQueue",
    "QueueMode",
    "ToolArgumentsError",
    "ToolExecutionMode",
    "ToolResult",
    "ToolUpdateCallback",
    "default_convert_to_llm",
    "run_agent_loop",
    "run_agent_loop_continue",
    "user_message",
]
