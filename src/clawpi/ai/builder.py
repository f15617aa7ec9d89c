"""Builds the in-progress assistant message and the events that describe each change to it.

Every provider (and the scripted test providers) goes through this one class, so the event
protocol (start, block start/delta/end, done/error, `partial`, `contentIndex`) is produced in
exactly one place.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

from clawpi.ai.event_stream import empty_assistant_message
from clawpi.ai.models import Model, calculate_cost
from clawpi.ai.partial_json import StreamingJsonParser
from clawpi.ai.types import (
    AssistantMessage,
    BlockDeltaEvent,
    BlockStartEvent,
    DoneEvent,
    ErrorEvent,
    StartEvent,
    StopReason,
    TextContent,
    TextEndEvent,
    ThinkingContent,
    ToolCall,
    ToolCallEndEvent,
)


class AssistantMessageBuilder:
    """Owns `message` (the live `partial`) and returns one event per mutation."""

    __slots__ = ("_call_ids", "_tool_json", "message", "model")

    def __init__(self, model: Model) -> None:
        self.model = model
        self.message: AssistantMessage = empty_assistant_message(
            model.api, model.provider, model.id
        )
        self._tool_json: dict[int, StreamingJsonParser] = {}
        self._call_ids: dict[str, int] = {}  # ended tool calls: id's call part -> index

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> StartEvent:
        return {"type": "start", "partial": self.message}

    def done(self, stop_reason: StopReason | None = None) -> DoneEvent:
        """Finish successfully; cost and total tokens are computed from the usage so far."""
        message = self.message
        if stop_reason is not None:
            message["stopReason"] = stop_reason
        calculate_cost(self.model, message["usage"])
        reason = message["stopReason"]
        if reason not in ("stop", "length", "toolUse"):
            raise ValueError(f"done() with stop reason {reason!r}; use error()")
        return {"type": "done", "reason": reason, "message": message}

    def error(self, error_message: str, *, aborted: bool = False) -> ErrorEvent:
        message = self.message
        message["stopReason"] = "aborted" if aborted else "error"
        message["errorMessage"] = error_message
        calculate_cost(self.model, message["usage"])
        return {"type": "error", "reason": "aborted" if aborted else "error", "error": message}

    # -- text ------------------------------------------------------------------------------

    def start_text(self, signature: str | None = None) -> BlockStartEvent:
        block: TextContent = {"type": "text", "text": ""}
        if signature:
            block["textSignature"] = signature
        content = self.message["content"]
        content.append(block)
        return {"type": "text_start", "contentIndex": len(content) - 1, "partial": self.message}

    def text_delta(self, index: int, delta: str) -> BlockDeltaEvent:
        block: Any = self.message["content"][index]
        # take the string out of the dict first: with one reference left, CPython grows it in
        # place, so a long answer streams in linear rather than quadratic time
        text = block["text"]
        block["text"] = ""
        text += delta
        block["text"] = text
        return {
            "type": "text_delta",
            "contentIndex": index,
            "delta": delta,
            "partial": self.message,
        }

    def end_text(self, index: int) -> TextEndEvent:
        block: Any = self.message["content"][index]
        return {
            "type": "text_end",
            "contentIndex": index,
            "content": block["text"],
            "partial": self.message,
        }

    # -- thinking --------------------------------------------------------------------------

    def start_thinking(
        self, signature: str | None = None, *, redacted: bool = False
    ) -> BlockStartEvent:
        block: ThinkingContent = {"type": "thinking", "thinking": ""}
        if signature:
            block["thinkingSignature"] = signature
        if redacted:
            block["redacted"] = True
        content = self.message["content"]
        content.append(block)
        return {"type": "thinking_start", "contentIndex": len(content) - 1, "partial": self.message}

    def thinking_delta(self, index: int, delta: str) -> BlockDeltaEvent:
        block: Any = self.message["content"][index]
        thinking = block["thinking"]
        block["thinking"] = ""
        thinking += delta
        block["thinking"] = thinking
        return {
            "type": "thinking_delta",
            "contentIndex": index,
            "delta": delta,
            "partial": self.message,
        }

    def set_thinking_signature(self, index: int, signature: str, *, append: bool = False) -> None:
        block: Any = self.message["content"][index]
        if append:
            block["thinkingSignature"] = block.get("thinkingSignature", "") + signature
        else:
            block["thinkingSignature"] = signature

    def end_thinking(self, index: int) -> TextEndEvent:
        block: Any = self.message["content"][index]
        return {
            "type": "thinking_end",
            "contentIndex": index,
            "content": block["thinking"],
            "partial": self.message,
        }

    # -- tool calls ------------------------------------------------------------------------

    def start_tool_call(
        self, call_id: str, name: str, thought_signature: str | None = None
    ) -> BlockStartEvent:
        block: ToolCall = {"type": "toolCall", "id": call_id, "name": name, "arguments": {}}
        if thought_signature:
            block["thoughtSignature"] = thought_signature
        content = self.message["content"]
        content.append(block)
        index = len(content) - 1
        self._tool_json[index] = StreamingJsonParser()
        return {"type": "toolcall_start", "contentIndex": index, "partial": self.message}

    def tool_call_delta(self, index: int, fragment: str) -> BlockDeltaEvent:
        """Append a raw JSON fragment; the block's arguments become its partial-JSON parse."""
        parser = self._tool_json.get(index)
        if parser is None:
            parser = self._tool_json[index] = StreamingJsonParser()
        block: Any = self.message["content"][index]
        block["arguments"] = parser.feed(fragment)
        return {
            "type": "toolcall_delta",
            "contentIndex": index,
            "delta": fragment,
            "partial": self.message,
        }

    def tool_call_json(self, index: int) -> str:
        """The raw argument text received so far for the tool call at `index`."""
        parser = self._tool_json.get(index)
        return parser.text if parser is not None else ""

    def end_tool_call(
        self, index: int, arguments: dict[str, Any] | None = None
    ) -> ToolCallEndEvent:
        """Close a tool call; `arguments` (already parsed) wins over the streamed buffer.

        Its id is made unique in the message if a server sent one twice: every API rejects
        a history that answers two calls with one id."""
        block: Any = self.message["content"][index]
        parser = self._tool_json.pop(index, None)
        if arguments is not None:
            block["arguments"] = arguments
        elif parser is not None:
            block["arguments"] = parser.value()
        call_ids = self._call_ids
        call = _call_part(block)
        if call_ids.get(call, index) != index:
            block["id"] = _unique_call_id(str(block["id"]), call_ids)
            call = _call_part(block)
        call_ids[call] = index
        return {
            "type": "toolcall_end",
            "contentIndex": index,
            "toolCall": block,
            "partial": self.message,
        }

    def open_tool_calls(self) -> list[int]:
        """Indices of tool calls started but not yet ended (their JSON never closed)."""
        return list(self._tool_json)


def _call_part(block: Any) -> str:
    """The id a tool result answers: for a Responses id (`call_id|item_id`), its call id."""
    return str(block.get("id")).partition("|")[0]


def _unique_call_id(call_id: str, taken: Container[str]) -> str:
    """`call_id` with a numeric suffix on its call part, which no call in `taken` has."""
    call, bar, item = call_id.partition("|")
    number = 2
    while f"{call}_{number}" in taken:
        number += 1
    return f"{call}_{number}{bar}{item}"
