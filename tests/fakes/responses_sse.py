"""OpenAI Responses API streams as the server sends them, for the fake HTTP server.

Each event is an SSE frame `event: <type>` / `data: <json>` with a growing `sequence_number`,
and the shapes follow the API reference (and the `openai` SDK's types): `response.created`, per
output item `response.output_item.added` ... `response.output_item.done`, then
`response.completed` / `response.incomplete` / `response.failed` carrying the whole response.
"""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.http_server import FakeResponse, sse_frame

RESPONSE_ID = "resp_0a1b2c3d4e5f"


def usage_json(
    input_tokens: int = 12, output_tokens: int = 7, cached: int = 0, reasoning: int = 0
) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input_tokens + output_tokens,
    }


def response_json(
    *,
    status: str,
    model: str = "gpt-5-mini",
    output: list[dict[str, Any]] | None = None,
    usage: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
    incomplete_reason: str | None = None,
    service_tier: str = "default",
) -> dict[str, Any]:
    return {
        "id": RESPONSE_ID,
        "object": "response",
        "created_at": 1_741_290_958,
        "status": status,
        "error": error,
        "incomplete_details": {"reason": incomplete_reason} if incomplete_reason else None,
        "instructions": None,
        "max_output_tokens": None,
        "model": model,
        "output": output or [],
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "service_tier": service_tier,
        "store": False,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": usage,
        "user": None,
        "metadata": {},
    }


class ResponsesStream:
    """Builds one streamed response item by item; `frames()` / `response()` for the server."""

    def __init__(self, model: str = "gpt-5-mini") -> None:
        self.model = model
        self.events: list[dict[str, Any]] = []
        self.output: list[dict[str, Any]] = []
        self.emit("response.created", response=response_json(status="in_progress", model=model))
        self.emit("response.in_progress", response=response_json(status="in_progress", model=model))

    def emit(self, event_type: str, **fields: Any) -> ResponsesStream:
        self.events.append({"type": event_type, "sequence_number": len(self.events), **fields})
        return self

    # -- output items ---------------------------------------------------------------------

    def reasoning(
        self,
        summary: list[list[str]],
        *,
        item_id: str = "rs_68c1f0a2b3",
        encrypted: str = "gAAAAABoENCRYPTED==",
    ) -> ResponsesStream:
        """A reasoning item whose summary parts stream as the given chunks."""
        index = len(self.output)
        self.emit(
            "response.output_item.added",
            output_index=index,
            item={"id": item_id, "type": "reasoning", "summary": [], "encrypted_content": None},
        )
        parts: list[dict[str, Any]] = []
        for part_index, chunks in enumerate(summary):
            part = {"type": "summary_text", "text": ""}
            self.emit(
                "response.reasoning_summary_part.added",
                item_id=item_id,
                output_index=index,
                summary_index=part_index,
                part=part,
            )
            for chunk in chunks:
                self.emit(
                    "response.reasoning_summary_text.delta",
                    item_id=item_id,
                    output_index=index,
                    summary_index=part_index,
                    delta=chunk,
                )
            text = "".join(chunks)
            self.emit(
                "response.reasoning_summary_text.done",
                item_id=item_id,
                output_index=index,
                summary_index=part_index,
                text=text,
            )
            done_part = {"type": "summary_text", "text": text}
            self.emit(
                "response.reasoning_summary_part.done",
                item_id=item_id,
                output_index=index,
                summary_index=part_index,
                part=done_part,
            )
            parts.append(done_part)
        item = {
            "id": item_id,
            "type": "reasoning",
            "summary": parts,
            "encrypted_content": encrypted,
        }
        return self._item_done(index, item)

    def message(
        self,
        chunks: list[str],
        *,
        item_id: str = "msg_68c1f0a2c4",
        phase: str | None = None,
        done: bool = True,
    ) -> ResponsesStream:
        index = len(self.output)
        added: dict[str, Any] = {
            "id": item_id,
            "type": "message",
            "status": "in_progress",
            "role": "assistant",
            "content": [],
        }
        if phase:
            added["phase"] = phase
        self.emit("response.output_item.added", output_index=index, item=added)
        self.emit(
            "response.content_part.added",
            item_id=item_id,
            output_index=index,
            content_index=0,
            part={"type": "output_text", "text": "", "annotations": []},
        )
        for chunk in chunks:
            self.emit(
                "response.output_text.delta",
                item_id=item_id,
                output_index=index,
                content_index=0,
                delta=chunk,
                logprobs=[],
            )
        if not done:
            return self
        text = "".join(chunks)
        part = {"type": "output_text", "text": text, "annotations": []}
        self.emit(
            "response.output_text.done",
            item_id=item_id,
            output_index=index,
            content_index=0,
            text=text,
            logprobs=[],
        )
        self.emit(
            "response.content_part.done",
            item_id=item_id,
            output_index=index,
            content_index=0,
            part=part,
        )
        item = {**added, "status": "completed", "content": [part]}
        return self._item_done(index, item)

    def function_call(
        self,
        name: str,
        argument_chunks: list[str],
        *,
        call_id: str = "call_abc123",
        item_id: str = "fc_68c1f0a2d5",
        done: bool = True,
    ) -> ResponsesStream:
        index = len(self.output)
        added = {
            "id": item_id,
            "type": "function_call",
            "status": "in_progress",
            "arguments": "",
            "call_id": call_id,
            "name": name,
        }
        self.emit("response.output_item.added", output_index=index, item=added)
        for chunk in argument_chunks:
            self.emit(
                "response.function_call_arguments.delta",
                item_id=item_id,
                output_index=index,
                delta=chunk,
            )
        if not done:
            return self
        arguments = "".join(argument_chunks)
        self.emit(
            "response.function_call_arguments.done",
            item_id=item_id,
            output_index=index,
            arguments=arguments,
        )
        return self._item_done(index, {**added, "status": "completed", "arguments": arguments})

    def _item_done(self, index: int, item: dict[str, Any]) -> ResponsesStream:
        self.output.append(item)
        return self.emit("response.output_item.done", output_index=index, item=item)

    # -- endings --------------------------------------------------------------------------

    def completed(self, usage: dict[str, Any] | None = None, **extra: Any) -> ResponsesStream:
        return self.emit(
            "response.completed",
            response=response_json(
                status="completed",
                model=self.model,
                output=self.output,
                usage=usage or usage_json(),
                **extra,
            ),
        )

    def incomplete(self, reason: str, usage: dict[str, Any] | None = None) -> ResponsesStream:
        return self.emit(
            "response.incomplete",
            response=response_json(
                status="incomplete",
                model=self.model,
                output=self.output,
                usage=usage or usage_json(),
                incomplete_reason=reason,
            ),
        )

    def failed(self, code: str, message: str) -> ResponsesStream:
        return self.emit(
            "response.failed",
            response=response_json(
                status="failed",
                model=self.model,
                output=self.output,
                error={"code": code, "message": message},
            ),
        )

    def error(self, code: str, message: str) -> ResponsesStream:
        return self.emit("error", code=code, message=message, param=None)

    # -- wire -----------------------------------------------------------------------------

    def frames(self) -> list[bytes]:
        return [sse_frame(json.dumps(event), event=event["type"]) for event in self.events]

    def response(self, **kwargs: Any) -> FakeResponse:
        return FakeResponse.sse(self.frames(), **kwargs)


def error_body(message: str, error_type: str, code: str | None, param: str | None = None) -> dict:
    """An OpenAI HTTP error body."""
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}
