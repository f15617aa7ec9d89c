"""The agent loop: stream a reply, run its tool calls, feed the results back, repeat.

`run_agent_loop` starts from new prompt messages, `run_agent_loop_continue` from the context as
it is (a retry, or tool results already present). Both report everything through `emit` and
return the messages the run added. The loop stops when the model stops calling tools and no
steering or follow-up message is waiting, when a reply ends in error or abort, or when the
signal fires; after an abort it drains no further queued messages, so none is lost.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from clawpi.agent.config import AgentContext, AgentLoopConfig, is_awaitable, with_options
from clawpi.agent.errors import AgentError
from clawpi.agent.events import AgentEvent, AgentMessage
from clawpi.agent.tool_execution import execute_tool_calls, tool_call_blocks
from clawpi.ai.abort import AbortSignal
from clawpi.ai.event_stream import AssistantMessageEventStream
from clawpi.ai.stream import StreamOptions
from clawpi.ai.types import AssistantMessage, Context, ToolResultMessage

Emit = Callable[[AgentEvent], Awaitable[None]]


async def run_agent_loop(
    prompts: Sequence[AgentMessage],
    context: AgentContext,
    config: AgentLoopConfig,
    emit: Emit,
    signal: AbortSignal | None = None,
    *,
    poll_steering_first: bool = True,
) -> list[AgentMessage]:
    """Add `prompts` to (a copy of) `context` and run until the agent stops."""
    new_messages: list[AgentMessage] = list(prompts)
    current = AgentContext(
        context.system_prompt, [*context.messages, *prompts], list(context.tools)
    )
    await emit({"type": "agent_start"})
    await emit({"type": "turn_start"})
    for prompt in prompts:
        await emit({"type": "message_start", "message": prompt})
        await emit({"type": "message_end", "message": prompt})
    await _run(current, new_messages, config, signal, emit, poll_steering_first)
    return new_messages


async def run_agent_loop_continue(
    context: AgentContext,
    config: AgentLoopConfig,
    emit: Emit,
    signal: AbortSignal | None = None,
) -> list[AgentMessage]:
    """Run from the context as it is; its last message must not be the assistant's."""
    check_can_continue(context.messages)
    new_messages: list[AgentMessage] = []
    current = AgentContext(context.system_prompt, list(context.messages), list(context.tools))
    await emit({"type": "agent_start"})
    await emit({"type": "turn_start"})
    await _run(current, new_messages, config, signal, emit, True)
    return new_messages


def check_can_continue(messages: Sequence[AgentMessage]) -> None:
    if not messages:
        raise AgentError("Cannot continue: no messages in context")
    role = messages[-1].get("role")
    if role == "assistant":
        raise AgentError("Cannot continue from message role: assistant")


async def _run(
    context: AgentContext,
    new_messages: list[AgentMessage],
    config: AgentLoopConfig,
    signal: AbortSignal | None,
    emit: Emit,
    poll_steering_first: bool,
) -> None:
    options = with_options(config.options, signal=signal)
    pending = await _poll(config.get_steering_messages) if poll_steering_first else []
    first_turn = True
    while True:
        more_tool_calls = True
        while more_tool_calls or pending:
            if not first_turn:
                if signal is not None and signal.aborted:
                    break  # queued messages stay with their owner
                await emit({"type": "turn_start"})
            first_turn = False
            for message in pending:
                await emit({"type": "message_start", "message": message})
                await emit({"type": "message_end", "message": message})
                context.messages.append(message)
                new_messages.append(message)
            pending = []

            reply = await stream_assistant_response(context, config, options, emit)
            new_messages.append(reply)
            if reply["stopReason"] in ("error", "aborted"):
                await emit({"type": "turn_end", "message": reply, "toolResults": []})
                await emit({"type": "agent_end", "messages": new_messages})
                return

            calls = tool_call_blocks(reply)
            results: list[ToolResultMessage] = []
            more_tool_calls = bool(calls)
            if calls:
                batch = await execute_tool_calls(context, reply, calls, config, signal, emit)
                results = batch.results
                context.messages.extend(results)
                new_messages.extend(results)
                pending = batch.steering
            await emit({"type": "turn_end", "message": reply, "toolResults": results})
            if signal is not None and signal.aborted:
                break
            if not pending:
                pending = await _poll(config.get_steering_messages)
        if signal is not None and signal.aborted:
            break
        pending = await _poll(config.get_follow_up_messages)
        if not pending:
            break
    await emit({"type": "agent_end", "messages": new_messages})


async def _poll(source: Callable[[], object] | None) -> list[AgentMessage]:
    if source is None:
        return []
    messages: Any = source()
    if is_awaitable(messages):
        messages = await messages
    return list(messages) if messages else []


async def stream_assistant_response(
    context: AgentContext,
    config: AgentLoopConfig,
    options: StreamOptions,
    emit: Emit,
) -> AssistantMessage:
    """One model call: hooks, key, stream; the partial reply lives in `context` as it grows.

    `options` already carry the run's signal; the API key is resolved here, before every call,
    so an expiring token is fresh each time.
    """
    signal = options.signal
    messages: Any = context.messages
    if config.transform_context is not None:
        messages = config.transform_context(messages, signal)
        if is_awaitable(messages):
            messages = await messages
    llm_messages: Any = config.convert_to_llm(messages)
    if is_awaitable(llm_messages):
        llm_messages = await llm_messages
    llm_context: Context = {
        "systemPrompt": context.system_prompt,
        "messages": llm_messages,
        "tools": [tool.definition for tool in context.tools],
    }
    if config.get_api_key is not None:
        api_key: Any = config.get_api_key(config.model.provider)
        if is_awaitable(api_key):
            api_key = await api_key
        if api_key:
            options = with_options(options, api_key=api_key)
    produced: Any = config.stream_fn(config.model, llm_context, options)
    if is_awaitable(produced):
        produced = await produced
    response: AssistantMessageEventStream = produced

    history = context.messages
    started = False
    try:
        async for event in response:
            kind = event["type"]
            if kind == "start":
                partial: AssistantMessage = event["partial"]  # type: ignore[typeddict-item]
                history.append(partial)
                started = True
                await emit({"type": "message_start", "message": {**partial}})
            elif kind == "done" or kind == "error":
                break
            elif started:
                partial = event["partial"]  # type: ignore[typeddict-item]
                history[-1] = partial
                await emit(
                    {
                        "type": "message_update",
                        "message": {**partial},
                        "assistantMessageEvent": event,
                    }
                )
        final = await response.result()
    finally:
        await response.aclose()
    if started:
        history[-1] = final
    else:
        history.append(final)
        await emit({"type": "message_start", "message": {**final}})
    await emit({"type": "message_end", "message": final})
    return final
