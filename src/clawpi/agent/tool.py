"""`AgentTool` and `ToolResult`: what a tool is to the agent loop.

A tool signals failure by raising; the loop turns the exception's message into an error result
the model can read and act on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from clawpi.ai.abort import AbortSignal
from clawpi.ai.types import Tool, UserContent


@dataclasses.dataclass(slots=True)
class ToolResult:
    """What a tool returns: content for the model, details for UIs and the session file."""

    content: list[UserContent]
    details: Any = None

    @classmethod
    def text(cls, text: str, details: Any = None) -> ToolResult:
        return cls(content=[{"type": "text", "text": text}], details=details)


ToolUpdateCallback = Callable[[ToolResult], None]


class ToolExecute(Protocol):
    def __call__(
        self,
        tool_call_id: str,
        params: Any,
        signal: AbortSignal | None = None,
        on_update: ToolUpdateCallback | None = None,
    ) -> Awaitable[ToolResult]: ...


@dataclasses.dataclass(kw_only=True)
class AgentTool:
    """A tool the model may call.

    `parameters` is a JSON Schema object, or a pydantic model class from which the schema is
    generated (the model then receives validated instances of it as `params`).
    """

    name: str
    description: str
    parameters: dict[str, Any] | type[Any]
    execute: ToolExecute
    label: str = ""

    def __post_init__(self) -> None:
        if not self.label:
            self.label = self.name
