"""Framework overhead of one agent run: one tool call, then a final text, no I/O.

The same scenario runs, in the same process and taking turns, on:

- clawpi: `Agent` on a scripted provider streaming real events through `stream()`, one
  JSON-Schema tool validated with coercion, every event dispatched to one listener;
- pydantic-ai: `Agent` on `FunctionModel`;
- openai-agents: `Runner.run` on a scripted `Model` subclass (the SDK ships none), tracing off;
- a bare Python loop doing the same validation and serialisation by hand (the floor).

Every tool is an async function, so no framework pays for a worker thread.
Competitors are dev-only bench dependencies and are skipped when not importable:

    python -m venv --system-site-packages /tmp/benchvenv
    /tmp/benchvenv/bin/pip install pydantic-ai-slim openai-agents
    /tmp/benchvenv/bin/python bench/bench_agent.py [--runs 2000] [--rounds 7]

Target: clawpi <= 0.1x openai-agents.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson
from jsonschema import Draft202012Validator

from clawpi.agent import Agent, AgentTool, ToolResult
from clawpi.ai import (
    ApiProvider,
    AssistantMessageBuilder,
    Context,
    Model,
    StreamOptions,
    register_api_provider,
)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
}
ARGS = {"text": "hello"}
ARGS_JSON = json.dumps(ARGS)
FINAL = "Done."

Scenario = Callable[[], Awaitable[str]]


# -- clawpi -----------------------------------------------------------------------------------


_SCRIPT_API = "bench-scripted"


async def _scripted(model: Model, context: Context, options: StreamOptions) -> Any:
    """A scripted model: a tool call first, the final text once a tool result is present.

    It streams through the real builder and `stream()` wrapper like every provider, and unlike
    `FauxProvider` keeps no deep copy of each request (which is test bookkeeping, not framework).
    """
    builder = AssistantMessageBuilder(model)
    yield builder.start()
    if context["messages"][-1]["role"] == "toolResult":
        index = builder.start_text()["contentIndex"]
        yield builder.text_delta(index, FINAL)
        yield builder.end_text(index)
        yield builder.done("stop")
    else:
        index = builder.start_tool_call("call_1", "echo")["contentIndex"]
        yield builder.tool_call_delta(index, ARGS_JSON)
        yield builder.end_tool_call(index)
        yield builder.done("toolUse")


def clawpi_scenario() -> Scenario:
    register_api_provider(ApiProvider(api=_SCRIPT_API, stream=_scripted))
    model = Model(id="scripted", api=_SCRIPT_API, provider="bench")

    async def echo(call_id: str, params: Any, signal: Any = None, on_update: Any = None) -> Any:
        return ToolResult(content=[{"type": "text", "text": params["text"]}], details={})

    tool = AgentTool(name="echo", description="Echo text back", parameters=SCHEMA, execute=echo)
    seen: list[str] = []

    async def run() -> str:
        agent = Agent(model=model, system_prompt="You echo.", tools=[tool])
        agent.subscribe(lambda event: seen.append(event["type"]))
        await agent.prompt("say hello")
        seen.clear()
        return agent.state.messages[-1]["content"][0]["text"]  # type: ignore[no-any-return]

    return run


def clawpi_faux_scenario() -> Scenario:
    """The same run on the shipped `FauxProvider`, which also deep-copies every request."""
    from clawpi.testing import FauxProvider, faux_tool_call

    async def echo(call_id: str, params: Any, signal: Any = None, on_update: Any = None) -> Any:
        return ToolResult(content=[{"type": "text", "text": params["text"]}], details={})

    tool = AgentTool(name="echo", description="Echo text back", parameters=SCHEMA, execute=echo)
    faux = FauxProvider(chunk_size=1 << 16)
    seen: list[str] = []

    async def run() -> str:
        faux.push(faux_tool_call("echo", ARGS, "call_1"), FINAL)
        agent = Agent(model=faux.model, system_prompt="You echo.", tools=[tool])
        agent.subscribe(lambda event: seen.append(event["type"]))
        await agent.prompt("say hello")
        seen.clear()
        faux.requests.clear()
        faux.options.clear()
        return agent.state.messages[-1]["content"][0]["text"]  # type: ignore[no-any-return]

    return run


# -- bare loop --------------------------------------------------------------------------------


def bare_scenario() -> Scenario:
    validator = Draft202012Validator(SCHEMA)

    async def run() -> str:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "say hello"}]
        call = {"type": "toolCall", "id": "call_1", "name": "echo", "arguments": dict(ARGS)}
        messages.append({"role": "assistant", "content": [call]})
        orjson.dumps(messages)
        if not validator.is_valid(call["arguments"]):
            raise ValueError("invalid")
        text = call["arguments"]["text"]
        messages.append({"role": "toolResult", "toolCallId": "call_1", "content": [text]})
        orjson.dumps(messages)
        messages.append({"role": "assistant", "content": [{"type": "text", "text": FINAL}]})
        return FINAL

    return run


# -- pydantic-ai ------------------------------------------------------------------------------


def pydantic_ai_scenario() -> Scenario | None:
    try:
        from pydantic_ai import Agent as PAgent
        from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
        from pydantic_ai.models.function import AgentInfo, FunctionModel
    except ImportError:
        return None

    def respond(messages: list[Any], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if any(isinstance(part, ToolReturnPart) for part in last.parts):
            return ModelResponse(parts=[TextPart(FINAL)])
        return ModelResponse(parts=[ToolCallPart("echo", dict(ARGS), tool_call_id="call_1")])

    agent = PAgent(FunctionModel(respond), system_prompt="You echo.")

    @agent.tool_plain
    async def echo(text: str) -> str:
        """Echo text back."""
        return text

    async def run() -> str:
        result = await agent.run("say hello")
        return str(result.output)

    return run


# -- openai-agents ----------------------------------------------------------------------------


def openai_agents_scenario() -> Scenario | None:
    try:
        from agents import Agent as OAgent
        from agents import RunConfig, Runner, Usage, function_tool
        from agents.items import ModelResponse
        from agents.models.interface import Model
        from openai.types.responses import (
            ResponseFunctionToolCall,
            ResponseOutputMessage,
            ResponseOutputText,
        )
    except ImportError:
        return None

    class ScriptedModel(Model):
        """Answers with a tool call, then with the final text once a tool output is present."""

        async def get_response(
            self, system_instructions: Any, input: Any, *args: Any, **kw: Any
        ) -> Any:
            has_output = isinstance(input, list) and any(
                isinstance(item, dict) and item.get("type") == "function_call_output"
                for item in input
            )
            if has_output:
                text = ResponseOutputText(type="output_text", text=FINAL, annotations=[])
                output: list[Any] = [
                    ResponseOutputMessage(
                        id="msg_1",
                        type="message",
                        role="assistant",
                        status="completed",
                        content=[text],
                    )
                ]
            else:
                output = [
                    ResponseFunctionToolCall(
                        id="fc_1",
                        call_id="call_1",
                        type="function_call",
                        name="echo",
                        arguments=json.dumps(ARGS),
                    )
                ]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    @function_tool
    async def echo(text: str) -> str:
        """Echo text back."""
        return text

    agent = OAgent(name="echo", instructions="You echo.", tools=[echo], model=ScriptedModel())
    config = RunConfig(tracing_disabled=True)

    async def run() -> str:
        result = await Runner.run(agent, "say hello", run_config=config)
        return str(result.final_output)

    return run


# -- harness ----------------------------------------------------------------------------------


async def measure(scenarios: list[tuple[str, Scenario, int]], rounds: int) -> dict[str, float]:
    """Median seconds per run; rounds interleave the frameworks so load drift hits all alike."""
    for name, run, count in scenarios:
        for _ in range(max(20, count // 20)):
            result = await run()
        if result != FINAL:
            raise RuntimeError(f"{name} answered {result!r}, expected {FINAL!r}")
    samples: dict[str, list[float]] = {name: [] for name, _, _ in scenarios}
    for _ in range(rounds):
        for name, run, count in scenarios:
            gc.collect()
            start = time.perf_counter()
            for _ in range(count):
                await run()
            samples[name].append((time.perf_counter() - start) / count)
    return {name: statistics.median(values) for name, values in samples.items()}


async def main_async(runs: int, rounds: int) -> list[dict[str, Any]]:
    candidates: list[tuple[str, Scenario | None, int]] = [
        ("clawpi", clawpi_scenario(), runs),
        ("clawpi on FauxProvider", clawpi_faux_scenario(), runs),
        ("bare python loop", bare_scenario(), runs),
        ("pydantic-ai FunctionModel", pydantic_ai_scenario(), max(1, runs // 10)),
        ("openai-agents scripted Model", openai_agents_scenario(), max(1, runs // 10)),
    ]
    present = [(name, run, count) for name, run, count in candidates if run is not None]
    times = await measure(present, rounds)
    ours = times["clawpi"]
    rows = []
    for name, _, _ in candidates:
        elapsed = times.get(name)
        rows.append(
            {
                "framework": name,
                "us_per_run": None if elapsed is None else elapsed * 1e6,
                "clawpi_ratio": None if elapsed is None else ours / elapsed,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print rows as JSON")
    args = parser.parse_args()
    rows = asyncio.run(main_async(args.runs, args.rounds))
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"one agent run (tool call + final text, no I/O), median of {args.rounds} rounds")
    header = f"{'framework':<30} {'us/run':>10} {'clawpi / this':>14}"
    print(header)
    print("-" * len(header))
    for row in rows:
        if row["us_per_run"] is None:
            print(f"{row['framework']:<30} {'skipped (not installed)':>25}")
            continue
        print(f"{row['framework']:<30} {row['us_per_run']:>10.1f} {row['clawpi_ratio']:>13.3f}x")


if __name__ == "__main__":
    main()
