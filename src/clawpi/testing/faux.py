"""Scripted and function-driven model providers for tests (yours and clawpi's).

They stream real `AssistantMessageEvent`s through the same builder as the real providers, so
everything above the LLM layer runs unchanged on them.

    faux = FauxProvider(["Hello!", faux_tool_call("echo", {"text": "hi"}), "Done."])
    async for event in stream(faux.model, context): ...
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import itertools
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeAlias, TypedDict

import orjson
from typing_extensions import Unpack

from clawpi.ai.builder import AssistantMessageBuilder
from clawpi.ai.models import Model
from clawpi.ai.stream import ApiProvider, StreamOptions, register_api_provider
from clawpi.ai.types import (
    AssistantContent,
    AssistantMessageEvent,
    Context,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
)

FAUX_API = "faux"
FUNCTION_API = "function"
_CHARS_PER_TOKEN = 4


@dataclasses.dataclass(kw_only=True)
class FauxResponse:
    """One canned assistant turn."""

    content: list[AssistantContent] = dataclasses.field(default_factory=list)
    stop_reason: StopReason | None = None
    """Defaults to toolUse when the turn has tool calls, else stop."""
    usage: dict[str, int] | None = None
    """input/output/cacheRead/cacheWrite; estimated from text length when None."""
    error: str | None = None
    """End the turn with this error instead of `done` (after `error_after` events)."""
    error_after: int | None = None
    raise_error: BaseException | None = None
    """Raise this from inside the provider (tests the never-raise contract)."""
    delay: float | None = None
    """Seconds to wait before each event; None uses the provider's default."""
    chunk_size: int | None = None


Script: TypeAlias = FauxResponse | str | list[AssistantContent] | AssistantContent


def faux_text(text: str) -> TextContent:
    return {"type": "text", "text": text}


def faux_thinking(text: str, signature: str | None = None) -> ThinkingContent:
    block: ThinkingContent = {"type": "thinking", "thinking": text}
    if signature is not None:
        block["thinkingSignature"] = signature
    return block


_call_ids = itertools.count(1)


def faux_tool_call(name: str, arguments: dict[str, Any], call_id: str | None = None) -> ToolCall:
    return {
        "type": "toolCall",
        "id": call_id or f"call_{next(_call_ids)}",
        "name": name,
        "arguments": arguments,
    }


def to_response(script: Script) -> FauxResponse:
    if isinstance(script, FauxResponse):
        return script
    if isinstance(script, str):
        return FauxResponse(content=[faux_text(script)])
    if isinstance(script, dict):
        return FauxResponse(content=[script])
    return FauxResponse(content=list(script))


class ModelOptions(TypedDict, total=False):
    """How the scripted model looks and streams."""

    delay: float
    """Seconds before each event (a `FauxResponse` may override it)."""
    chunk_size: int
    """Characters per text/thinking/argument delta."""
    reasoning: bool
    context_window: int
    max_tokens: int
    input_kinds: tuple[str, ...]


_instances: weakref.WeakValueDictionary[str, _ScriptedBase] = weakref.WeakValueDictionary()
_instance_ids = itertools.count(1)


class _ScriptedBase:
    """Shared machinery: a model bound to this instance, request log, event streaming."""

    api: str = FAUX_API

    def __init__(self, *, provider: str, model_id: str, **options: Unpack[ModelOptions]) -> None:
        key = f"{self.api}://{next(_instance_ids)}"
        _instances[key] = self
        self.delay = options.get("delay", 0.0)
        self.chunk_size = max(1, options.get("chunk_size", 8))
        self.requests: list[Context] = []
        self.options: list[StreamOptions] = []
        self.model = Model(
            id=model_id,
            api=self.api,
            provider=provider,
            base_url=key,
            reasoning=options.get("reasoning", False),
            input=options.get("input_kinds", ("text", "image")),  # type: ignore[arg-type]
            context_window=options.get("context_window", 128_000),
            max_tokens=options.get("max_tokens", 16_384),
        )

    async def _next_response(self, context: Context, options: StreamOptions) -> FauxResponse:
        raise NotImplementedError

    def openclaw_config(self, **agent_defaults: Any) -> dict[str, Any]:
        """An OpenClaw config (`run_embedded_agent(config=...)`) whose primary model is this
        one, with a placeholder API key, and `agent_defaults` under `agents.defaults`."""
        model = self.model
        provider = {
            "api": model.api,
            "baseUrl": model.base_url,
            "apiKey": "x",
            "models": [{"id": model.id}],
        }
        primary = {"model": {"primary": f"{model.provider}/{model.id}"}}
        return {
            "models": {"providers": {model.provider: provider}},
            "agents": {"defaults": {**primary, **agent_defaults}},
        }

    async def _stream(
        self, model: Model, context: Context, options: StreamOptions
    ) -> AsyncIterator[AssistantMessageEvent]:
        # a snapshot of what was sent: the lists are copied, the finished messages are shared
        snapshot: Any = dict(context)
        if "messages" in snapshot:
            snapshot["messages"] = list(snapshot["messages"])
        if "tools" in snapshot:
            snapshot["tools"] = list(snapshot["tools"])
        self.requests.append(snapshot)
        self.options.append(options)
        response = await self._next_response(context, options)
        delay = self.delay if response.delay is None else response.delay
        chunk = response.chunk_size or self.chunk_size
        builder = AssistantMessageBuilder(model)
        budget = response.error_after
        if response.raise_error is not None and budget is None:
            raise response.raise_error
        events = _events(builder, response, chunk)
        emitted = 0
        while budget is None or emitted < budget:
            # the budget is checked before the next event is built: building mutates `partial`
            try:
                event = await anext(events)
            except StopAsyncIteration:
                break
            if delay:
                await asyncio.sleep(delay)
            emitted += 1
            yield event
        else:
            if response.raise_error is not None:
                raise response.raise_error
        _fill_usage(builder, context, response)
        if response.error is not None:
            yield builder.error(response.error)
            return
        if response.raise_error is not None:
            raise response.raise_error
        stop = response.stop_reason
        if stop is None:
            has_calls = any(b.get("type") == "toolCall" for b in builder.message["content"])
            stop = "toolUse" if has_calls else "stop"
        if stop in ("error", "aborted"):
            yield builder.error(response.error or "Scripted error", aborted=stop == "aborted")
        else:
            yield builder.done(stop)


async def _events(
    builder: AssistantMessageBuilder, response: FauxResponse, chunk: int
) -> AsyncIterator[AssistantMessageEvent]:
    yield builder.start()
    for block in response.content:
        kind = block.get("type")
        if kind == "text":
            text: Any = block
            event = builder.start_text(text.get("textSignature"))
            index = event["contentIndex"]
            yield event
            for piece in _chunks(text["text"], chunk):
                yield builder.text_delta(index, piece)
            yield builder.end_text(index)
        elif kind == "thinking":
            thinking: Any = block
            event = builder.start_thinking(
                thinking.get("thinkingSignature"), redacted=bool(thinking.get("redacted"))
            )
            index = event["contentIndex"]
            yield event
            for piece in _chunks(thinking["thinking"], chunk):
                yield builder.thinking_delta(index, piece)
            yield builder.end_thinking(index)
        elif kind == "toolCall":
            call: Any = block
            event = builder.start_tool_call(call["id"], call["name"], call.get("thoughtSignature"))
            index = event["contentIndex"]
            yield event
            raw = orjson.dumps(call.get("arguments") or {}).decode()
            for piece in _chunks(raw, chunk):
                yield builder.tool_call_delta(index, piece)
            yield builder.end_tool_call(index)


def _chunks(text: str, size: int) -> list[str]:
    if not text:
        return []
    return [text[i : i + size] for i in range(0, len(text), size)]


def _fill_usage(builder: AssistantMessageBuilder, context: Context, response: FauxResponse) -> None:
    usage = builder.message["usage"]
    given = response.usage or {}
    if "input" in given:
        usage["input"] = given["input"]
    else:
        size = len(context.get("systemPrompt") or "") + len(
            orjson.dumps(context.get("messages", []))
        )
        usage["input"] = size // _CHARS_PER_TOKEN
    if "output" in given:
        usage["output"] = given["output"]
    else:
        usage["output"] = len(orjson.dumps(builder.message["content"])) // _CHARS_PER_TOKEN
    usage["cacheRead"] = given.get("cacheRead", 0)
    usage["cacheWrite"] = given.get("cacheWrite", 0)
    usage["totalTokens"] = (
        usage["input"] + usage["output"] + usage["cacheRead"] + usage["cacheWrite"]
    )


class FauxProvider(_ScriptedBase):
    """Answers with the scripted turns in order; running out of script is an error turn."""

    api = FAUX_API

    def __init__(
        self,
        responses: Sequence[Script] = (),
        *,
        provider: str = "faux",
        model_id: str = "faux-1",
        **options: Unpack[ModelOptions],
    ) -> None:
        super().__init__(provider=provider, model_id=model_id, **options)
        self._queue: list[FauxResponse] = [to_response(r) for r in responses]

    def push(self, *responses: Script) -> None:
        """Queue more turns."""
        self._queue.extend(to_response(r) for r in responses)

    @property
    def remaining(self) -> int:
        return len(self._queue)

    async def _next_response(self, context: Context, options: StreamOptions) -> FauxResponse:
        if not self._queue:
            return FauxResponse(error="FauxProvider has no scripted response left")
        return self._queue.pop(0)


ResponseFunction: TypeAlias = Callable[[Context, StreamOptions], "Script | Awaitable[Script]"]


class FunctionProvider(_ScriptedBase):
    """Answers each request with whatever `function(context, options)` returns (sync or async)."""

    api = FUNCTION_API

    def __init__(
        self,
        function: ResponseFunction,
        *,
        provider: str = "function",
        model_id: str = "function-1",
        **options: Unpack[ModelOptions],
    ) -> None:
        super().__init__(provider=provider, model_id=model_id, **options)
        self.function = function

    async def _next_response(self, context: Context, options: StreamOptions) -> FauxResponse:
        result = self.function(context, options)
        if inspect.isawaitable(result):
            result = await result
        return to_response(result)


def _dispatch(
    model: Model, context: Context, options: StreamOptions
) -> AsyncIterator[AssistantMessageEvent]:
    instance = _instances.get(model.base_url)
    if instance is None:
        return _missing(model)
    return instance._stream(model, context, options)


async def _missing(model: Model) -> AsyncIterator[AssistantMessageEvent]:
    raise LookupError(
        f"No scripted provider is alive for model {model.provider}/{model.id} "
        f"({model.base_url}); keep a reference to the FauxProvider while it is used"
    )
    yield  # pragma: no cover


register_api_provider(ApiProvider(api=FAUX_API, stream=_dispatch))
register_api_provider(ApiProvider(api=FUNCTION_API, stream=_dispatch))
