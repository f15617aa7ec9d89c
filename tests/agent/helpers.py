"""Small builders shared by the agent tests: tools and an event recorder."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from clawpi.agent import Agent, AgentTool, ToolResult
from clawpi.agent.events import AgentEvent

TEXT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
}


def echo_tool(name: str = "echo", log: list[str] | None = None) -> AgentTool:
    async def execute(
        tool_call_id: str, params: Any, signal: Any = None, on_update: Any = None
    ) -> ToolResult:
        if log is not None:
            log.append(f"{name}:{params['text']}")
        return ToolResult(content=[{"type": "text", "text": params["text"]}], details={})

    return AgentTool(
        name=name,
        label=name.title(),
        description="Echo text back",
        parameters=TEXT_SCHEMA,
        execute=execute,
    )


def tool(
    name: str,
    fn: Callable[[str, Any, Any, Any], Awaitable[ToolResult]],
    schema: dict[str, Any] | None = None,
) -> AgentTool:
    return AgentTool(
        name=name, description=f"{name} tool", parameters=schema or TEXT_SCHEMA, execute=fn
    )


class Recorder:
    """Every event an agent emits, in order."""

    def __init__(self, agent: Agent | None = None) -> None:
        self.events: list[AgentEvent] = []
        if agent is not None:
            agent.subscribe(self)

    def __call__(self, event: AgentEvent) -> None:
        self.events.append(event)

    async def emit(self, event: AgentEvent) -> None:
        self.events.append(event)

    @property
    def types(self) -> list[str]:
        return [event["type"] for event in self.events]

    def of(self, kind: str) -> list[Any]:
        return [event for event in self.events if event["type"] == kind]


def texts(message: Any) -> list[str]:
    return [block["text"] for block in message["content"] if block["type"] == "text"]


def roles(messages: list[Any]) -> list[str]:
    return [message["role"] for message in messages]
