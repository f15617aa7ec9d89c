"""Running one assistant message's tool calls: prepare, execute, finalize, report.

Every failure (unknown tool, invalid arguments, a block by `before_tool_call`, an exception in
`execute` or in a hook, an abort) becomes an error tool result the model can read; nothing here
raises into the loop. Results are always reported in the order the model made the calls.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from clawpi.agent.config import (
    AfterToolCallContext,
    AfterToolCallResult,
    AgentContext,
    AgentLoopConfig,
    BeforeToolCallContext,
    BeforeToolCallResult,
    is_awaitable,
)
from clawpi.agent.events import AgentEvent, AgentMessage
from clawpi.agent.tool import AgentTool, ToolResult
from clawpi.ai.abort import AbortSignal
from clawpi.ai.types import AssistantMessage, ToolCall, ToolResultMessage

Emit = Callable[[AgentEvent], Awaitable[None]]

SKIPPED_MESSAGE = "Skipped due to queued user message."
ABORTED_MESSAGE = "Operation aborted"
BLOCKED_MESSAGE = "Tool execution was blocked"


@dataclasses.dataclass(slots=True)
class ToolBatch:
    results: list[ToolResultMessage]
    steering: list[AgentMessage]
    """Steering messages drained while the batch ran, for the loop to inject next."""


@dataclasses.dataclass(slots=True)
class _Prepared:
    call: ToolCall
    tool: AgentTool
    args: Any


@dataclasses.dataclass(slots=True)
class _Outcome:
    result: ToolResult
    is_error: bool


def error_result(text: str) -> ToolResult:
    return ToolResult(content=[{"type": "text", "text": text}], details={})


def describe_exception(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def tool_call_blocks(message: AssistantMessage) -> list[ToolCall]:
    return [block for block in message["content"] if block["type"] == "toolCall"]


async def execute_tool_calls(
    context: AgentContext,
    message: AssistantMessage,
    calls: Sequence[ToolCall],
    config: AgentLoopConfig,
    signal: AbortSignal | None,
    emit: Emit,
) -> ToolBatch:
    """Run `calls` in the configured mode; steering polled mid-batch skips the calls not run."""
    run = _Batch(context, message, config, signal, emit)
    if message["stopReason"] == "length":
        return await run.fail_truncated(calls)
    if config.tool_execution == "sequential":
        return await run.sequential(calls)
    return await run.parallel(calls)


class _Batch:
    __slots__ = ("config", "context", "emit", "message", "signal", "steering", "tools")

    def __init__(
        self,
        context: AgentContext,
        message: AssistantMessage,
        config: AgentLoopConfig,
        signal: AbortSignal | None,
        emit: Emit,
    ) -> None:
        self.context = context
        self.message = message
        self.config = config
        self.signal = signal
        self.emit = emit
        self.steering: list[AgentMessage] = []
        self.tools = {tool.name: tool for tool in context.tools}

    # -- modes ---------------------------------------------------------------------------------

    async def sequential(self, calls: Sequence[ToolCall]) -> ToolBatch:
        results: list[ToolResultMessage] = []
        for call in calls:
            await self._emit_start(call)
            if self.steering:
                outcome = _Outcome(error_result(SKIPPED_MESSAGE), True)
            elif self._aborted():
                outcome = _Outcome(error_result(ABORTED_MESSAGE), True)
            else:
                prepared = await self._prepare(call)
                if isinstance(prepared, _Outcome):
                    outcome = prepared
                else:
                    outcome = (await _await_all(self._run_tasks([prepared])))[0]
                    outcome = await self._finalize(prepared, outcome)
            await self._emit_end(call, outcome)
            results.append(await self._emit_result_message(call, outcome))
            if not self.steering and not self._aborted():
                self.steering = await self._poll_steering()
        return ToolBatch(results, self.steering)

    async def parallel(self, calls: Sequence[ToolCall]) -> ToolBatch:
        slots: list[_Outcome | _Prepared] = []
        for call in calls:
            await self._emit_start(call)
            if self.steering or self._aborted():
                text = SKIPPED_MESSAGE if self.steering else ABORTED_MESSAGE
                outcome = _Outcome(error_result(text), True)
                await self._emit_end(call, outcome)
                slots.append(outcome)
                continue
            prepared = await self._prepare(call)
            if isinstance(prepared, _Outcome):
                await self._emit_end(call, prepared)
            slots.append(prepared)
            if not self._aborted():
                self.steering = await self._poll_steering()
            if self.steering or self._aborted():
                # prepared calls have not started yet: report them now, without a second start
                text = SKIPPED_MESSAGE if self.steering else ABORTED_MESSAGE
                for index, slot in enumerate(slots):
                    if isinstance(slot, _Prepared):
                        skipped = _Outcome(error_result(text), True)
                        slots[index] = skipped
                        await self._emit_end(slot.call, skipped)
        runnable = [slot for slot in slots if isinstance(slot, _Prepared)]
        tasks = self._run_tasks(runnable) if runnable else []
        pending = iter(tasks)
        outcomes: list[_Outcome] = []
        try:
            for slot in slots:
                if isinstance(slot, _Prepared):
                    outcome = await self._finalize(slot, await next(pending))
                    await self._emit_end(slot.call, outcome)
                    outcomes.append(outcome)
                else:
                    outcomes.append(slot)
        except BaseException:
            _cancel_all(tasks)
            raise
        results = [
            await self._emit_result_message(call, outcome)
            for call, outcome in zip(calls, outcomes, strict=True)
        ]
        if not self.steering and not self._aborted():
            self.steering = await self._poll_steering()
        return ToolBatch(results, self.steering)

    async def fail_truncated(self, calls: Sequence[ToolCall]) -> ToolBatch:
        """A `length` stop may have cut the arguments short: run none of the calls."""
        results: list[ToolResultMessage] = []
        for call in calls:
            await self._emit_start(call)
            outcome = _Outcome(
                error_result(
                    f'Tool call "{call["name"]}" was not run: the response reached the output '
                    "token limit, so its arguments may be incomplete. Make the call again with "
                    "complete arguments."
                ),
                True,
            )
            await self._emit_end(call, outcome)
            results.append(await self._emit_result_message(call, outcome))
        return ToolBatch(results, [])

    # -- steps ---------------------------------------------------------------------------------

    def _aborted(self) -> bool:
        return self.signal is not None and self.signal.aborted

    async def _poll_steering(self) -> list[AgentMessage]:
        source = self.config.get_steering_messages
        if source is None:
            return []
        messages: Any = source()
        if is_awaitable(messages):
            messages = await messages
        return list(messages) if messages else []

    async def _prepare(self, call: ToolCall) -> _Prepared | _Outcome:
        tool = self.tools.get(call["name"])
        if tool is None:
            return _Outcome(error_result(f"Tool {call['name']} not found"), True)
        try:
            args = tool.validate_arguments(call.get("arguments"))
            hook = self.config.before_tool_call
            if hook is not None:
                context = BeforeToolCallContext(self.message, call, args, self.context)
                decision: Any = hook(context, self.signal)
                if is_awaitable(decision):
                    decision = await decision
                block, reason = _read_before(decision)
                if self._aborted():
                    return _Outcome(error_result(ABORTED_MESSAGE), True)
                if block:
                    return _Outcome(error_result(reason or BLOCKED_MESSAGE), True)
            if self._aborted():
                return _Outcome(error_result(ABORTED_MESSAGE), True)
        except Exception as exc:
            return _Outcome(error_result(describe_exception(exc)), True)
        return _Prepared(call, tool, args)

    def _run_tasks(self, prepared: Sequence[_Prepared]) -> list[asyncio.Future[_Outcome]]:
        """Start every call at once; on abort, calls still running after a grace are cancelled."""
        tasks = [asyncio.ensure_future(self._execute(item)) for item in prepared]
        signal = self.signal
        if signal is None:
            return tasks  # type: ignore[return-value]
        loop = asyncio.get_running_loop()
        timer: list[asyncio.TimerHandle] = []

        def on_abort() -> None:
            timer.append(loop.call_later(self.config.tool_abort_grace, _cancel_all, tasks))

        remove = signal.add_listener(on_abort)

        def cleanup(_: object) -> None:
            if all(task.done() for task in tasks):
                remove()
                for handle in timer:
                    handle.cancel()

        for task in tasks:
            task.add_done_callback(cleanup)
        return tasks  # type: ignore[return-value]

    async def _execute(self, prepared: _Prepared) -> _Outcome:
        call = prepared.call
        updates: list[asyncio.Future[None]] = []
        accepting = True

        def on_update(partial: ToolResult) -> None:
            if not accepting:
                return
            event: AgentEvent = {
                "type": "tool_execution_update",
                "toolCallId": call["id"],
                "toolName": call["name"],
                "args": call.get("arguments"),
                "partialResult": _result_dict(partial),
            }
            previous = updates[-1] if updates else None
            updates.append(asyncio.ensure_future(self._emit_after(previous, event)))

        try:
            raw: Any = prepared.tool.execute(call["id"], prepared.args, self.signal, on_update)
            if is_awaitable(raw):  # a plain function may return its result directly
                raw = await raw
            outcome = _Outcome(_as_tool_result(raw, prepared.tool.name), False)
        except asyncio.CancelledError:
            if not self._aborted():
                raise
            outcome = _Outcome(error_result(ABORTED_MESSAGE), True)
        except Exception as exc:
            outcome = _Outcome(error_result(describe_exception(exc)), True)
        accepting = False
        if updates:
            await updates[-1]
        return outcome

    async def _emit_after(self, previous: asyncio.Future[None] | None, event: AgentEvent) -> None:
        if previous is not None:
            await previous
        await self.emit(event)

    async def _finalize(self, prepared: _Prepared, outcome: _Outcome) -> _Outcome:
        hook = self.config.after_tool_call
        if hook is None:
            return outcome
        context = AfterToolCallContext(
            self.message,
            prepared.call,
            prepared.args,
            outcome.result,
            outcome.is_error,
            self.context,
        )
        try:
            change: Any = hook(context, self.signal)
            if is_awaitable(change):
                change = await change
        except Exception as exc:
            return _Outcome(error_result(describe_exception(exc)), True)
        if change is None:
            return outcome
        if isinstance(change, Mapping):
            change = AfterToolCallResult(
                content=change.get("content"),
                details=change.get("details"),
                is_error=change.get("isError", change.get("is_error")),
            )
        result = outcome.result
        return _Outcome(
            ToolResult(
                content=result.content if change.content is None else change.content,
                details=result.details if change.details is None else change.details,
            ),
            outcome.is_error if change.is_error is None else change.is_error,
        )

    # -- reporting -----------------------------------------------------------------------------

    async def _emit_start(self, call: ToolCall) -> None:
        await self.emit(
            {
                "type": "tool_execution_start",
                "toolCallId": call["id"],
                "toolName": call["name"],
                "args": call.get("arguments"),
            }
        )

    async def _emit_end(self, call: ToolCall, outcome: _Outcome) -> None:
        await self.emit(
            {
                "type": "tool_execution_end",
                "toolCallId": call["id"],
                "toolName": call["name"],
                "result": _result_dict(outcome.result),
                "isError": outcome.is_error,
            }
        )

    async def _emit_result_message(self, call: ToolCall, outcome: _Outcome) -> ToolResultMessage:
        message: ToolResultMessage = {
            "role": "toolResult",
            "toolCallId": call["id"],
            "toolName": call["name"],
            "content": outcome.result.content,
        }  # type: ignore[typeddict-item]
        if outcome.result.details is not None:
            # pi leaves `details` out when a tool has none (JSON has no undefined)
            message["details"] = outcome.result.details
        message["isError"] = outcome.is_error
        message["timestamp"] = int(time.time() * 1000)
        await self.emit({"type": "message_start", "message": message})
        await self.emit({"type": "message_end", "message": message})
        return message


async def _await_all(tasks: list[asyncio.Future[_Outcome]]) -> list[_Outcome]:
    """Every outcome, in call order; if the run itself is cancelled, so are the tools."""
    try:
        return [await task for task in tasks]
    except BaseException:
        _cancel_all(tasks)
        raise


def _cancel_all(tasks: Sequence[asyncio.Future[Any]]) -> None:
    for task in tasks:
        task.cancel()


def _read_before(decision: Any) -> tuple[bool, str | None]:
    if decision is None:
        return False, None
    if isinstance(decision, BeforeToolCallResult):
        return decision.block, decision.reason
    if isinstance(decision, Mapping):
        return bool(decision.get("block")), decision.get("reason")
    raise TypeError(
        f"before_tool_call returned {type(decision).__name__}; "
        "return BeforeToolCallResult(block=..., reason=...) or None"
    )


def _result_dict(result: ToolResult) -> dict[str, Any]:
    return {"content": result.content, "details": result.details}


def _as_tool_result(raw: Any, tool_name: str) -> ToolResult:
    """Accept what tools commonly return; anything else is the tool's bug, said plainly."""
    if isinstance(raw, ToolResult):
        return raw
    if isinstance(raw, str):
        return ToolResult.text(raw)
    if isinstance(raw, Mapping) and isinstance(raw.get("content"), list):
        return ToolResult(content=list(raw["content"]), details=raw.get("details"))
    raise TypeError(f"Tool {tool_name} returned {type(raw).__name__}; it must return a ToolResult")
