"""Per-event overhead of `clawpi.ai.stream` over iterating the raw vendor SDK stream.

For each of the four APIs both sides read the same SSE body from the same local fake server in
the same process, taking turns, so network, SSE parsing and SDK model construction cancel out
and the ratio is what clawpi adds per event (building the partial message and the event dicts).
Target: <= 1.2x. The openai-responses provider parses the SSE itself instead of using the SDK's
event stream, and the openai-completions provider has the SDK's stream hand over each chunk as
its JSON dict instead of a model built per chunk (see their module docstrings); their baselines
are the SDK's own typed iteration (`create(stream=True)`), so their ratios are well below 1.

Also: the cost per delta of a tool call's arguments as they stream (the partial arguments are
parsed on every delta), for arguments of growing size: it must stay flat, not grow with them.

    python bench/bench_stream.py [--events 2000] [--rounds 15] [--api NAME ...] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fakes import gemini_sse as gem
from tests.fakes.http_server import FakeResponse, FakeServer, sse_frame
from tests.fakes.responses_sse import ResponsesStream

from clawpi.ai import Model, stream
from clawpi.ai.builder import AssistantMessageBuilder


def openai_frames(events: int) -> list[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return sse_frame(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "m",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
        )

    frames = [chunk({"role": "assistant", "content": ""})]
    frames += [chunk({"content": "word "}) for _ in range(events)]
    frames.append(chunk({}, "stop"))
    frames.append(
        sse_frame(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "m",
                "choices": [],
                "usage": {
                    "prompt_tokens": 10,
                    "completion_tokens": events,
                    "total_tokens": 10 + events,
                },
            }
        )
    )
    frames.append(b"data: [DONE]\n\n")
    return [b"".join(frames)]


def anthropic_frames(events: int) -> list[bytes]:
    frames = [
        sse_frame(
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": "m",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 1},
                },
            },
            "message_start",
        ),
        sse_frame(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
            "content_block_start",
        ),
    ]
    delta = sse_frame(
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "word "},
        },
        "content_block_delta",
    )
    frames += [delta] * events
    frames += [
        sse_frame({"type": "content_block_stop", "index": 0}, "content_block_stop"),
        sse_frame(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": events},
            },
            "message_delta",
        ),
        sse_frame({"type": "message_stop"}, "message_stop"),
    ]
    return [b"".join(frames)]


def responses_frames(events: int) -> list[bytes]:
    return [b"".join(ResponsesStream("m").message(["word "] * events).completed().frames())]


def gemini_frames(events: int) -> list[bytes]:
    frames = [gem.chunk(gem.text("word ")) for _ in range(events)]
    frames.append(gem.chunk(gem.text("."), finish_reason="STOP", usage=gem.usage(10, events + 1)))
    return [b"".join(frames)]


RawRun = Callable[[], Awaitable[int]]


def openai_setup(server: FakeServer, events: int) -> tuple[Model, list[bytes], RawRun]:
    import openai

    model = Model(id="m", api="openai-completions", provider="bench", base_url=server.url + "/v1")
    client = openai.AsyncOpenAI(api_key="k", base_url=server.url + "/v1", max_retries=0)

    async def raw() -> int:
        count = 0
        response = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        async for _ in response:
            count += 1
        return count

    return model, openai_frames(events), raw


def anthropic_setup(server: FakeServer, events: int) -> tuple[Model, list[bytes], RawRun]:
    import anthropic

    model = Model(id="m", api="anthropic-messages", provider="bench", base_url=server.url)
    client = anthropic.AsyncAnthropic(api_key="k", base_url=server.url, max_retries=0)

    async def raw() -> int:
        count = 0
        response = await client.messages.create(
            model="m",
            max_tokens=100,
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
        )
        async for _ in response:
            count += 1
        return count

    return model, anthropic_frames(events), raw


def responses_setup(server: FakeServer, events: int) -> tuple[Model, list[bytes], RawRun]:
    """The provider reads the SSE itself (see its docstring); the baseline is the SDK's own
    `responses.create(stream=True)` iteration, which validates every event with pydantic."""
    import openai

    model = Model(id="m", api="openai-responses", provider="bench", base_url=server.url + "/v1")
    client = openai.AsyncOpenAI(api_key="k", base_url=server.url + "/v1", max_retries=0)

    async def raw() -> int:
        count = 0
        response = await client.responses.create(
            model="m",
            input=[{"role": "user", "content": "hi"}],
            stream=True,
            store=False,
        )
        async for _ in response:
            count += 1
        return count

    return model, responses_frames(events), raw


def gemini_setup(server: FakeServer, events: int) -> tuple[Model, list[bytes], RawRun]:
    from google import genai
    from google.genai import types as genai_types

    model = Model(
        id="gemini-2.5-flash",
        api="google-generative-ai",
        provider="bench",
        base_url=server.url + "/v1beta",
    )
    client = genai.Client(
        api_key="k",
        http_options=genai_types.HttpOptions(
            base_url=server.url,
            api_version="v1beta",
            retry_options=genai_types.HttpRetryOptions(attempts=1),
        ),
    )

    async def raw() -> int:
        count = 0
        response = await client.aio.models.generate_content_stream(
            model="gemini-2.5-flash", contents="hi"
        )
        async for _ in response:
            count += 1
        return count

    return model, gemini_frames(events), raw


SETUPS: dict[str, Callable[[FakeServer, int], tuple[Model, list[bytes], RawRun]]] = {
    "openai-completions": openai_setup,
    "anthropic-messages": anthropic_setup,
    "openai-responses": responses_setup,
    "google-generative-ai": gemini_setup,
}


async def time_once(run: RawRun) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of this thread, events). The fake server runs in another
    thread, so thread CPU time is the client's own work and stays stable on a busy machine."""
    wall, cpu = time.perf_counter(), time.thread_time()
    count = await run()
    return time.perf_counter() - wall, time.thread_time() - cpu, count


async def bench_api(name: str, server: FakeServer, events: int, rounds: int) -> dict[str, Any]:
    context: Any = {"messages": [{"role": "user", "content": "hi", "timestamp": 1}]}
    model, body, raw = SETUPS[name](server, events)

    async def ours() -> int:
        count = 0
        async for event in stream(model, context, api_key="k"):
            count += 1
            if event["type"] == "error":
                raise RuntimeError(f"{name}: {event['error'].get('errorMessage')}")
        return count

    server.handler = lambda request: FakeResponse.sse(body)
    raw_wall: list[float] = []
    raw_cpu: list[float] = []
    our_wall: list[float] = []
    our_cpu: list[float] = []
    raw_events = our_events = 0
    for _ in range(2):  # warm up connections, imports and the SDKs' schema caches
        await raw()
        await ours()
    for _ in range(rounds):  # alternate so drift in machine load hits both sides alike
        wall, cpu, raw_events = await time_once(raw)
        raw_wall.append(wall)
        raw_cpu.append(cpu)
        wall, cpu, our_events = await time_once(ours)
        our_wall.append(wall)
        our_cpu.append(cpu)
    raw_ms, our_ms = statistics.median(raw_wall) * 1000, statistics.median(our_wall) * 1000
    raw_cpu_ms, our_cpu_ms = statistics.median(raw_cpu) * 1000, statistics.median(our_cpu) * 1000
    return {
        "api": name,
        "raw_events": raw_events,
        "events": our_events,
        "raw_ms": raw_ms,
        "clawpi_ms": our_ms,
        "raw_us_per_event": raw_ms / max(raw_events, 1) * 1000,
        "clawpi_us_per_event": our_ms / max(our_events, 1) * 1000,
        "ratio": our_ms / raw_ms,
        "raw_cpu_ms": raw_cpu_ms,
        "clawpi_cpu_ms": our_cpu_ms,
        "cpu_ratio": our_cpu_ms / raw_cpu_ms,
    }


async def main_async(events: int, rounds: int, apis: list[str]) -> list[dict[str, Any]]:
    rows = []
    with FakeServer() as server:
        for api in apis:
            rows.append(await bench_api(api, server, events, rounds))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--api", action="append", choices=list(SETUPS), help="repeatable")
    parser.add_argument("--json", action="store_true", help="print rows as JSON")
    args = parser.parse_args()
    rows = asyncio.run(main_async(args.events, args.rounds, args.api or list(SETUPS)))
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(
        f"stream() vs raw SDK iteration, {args.events} text deltas, median of {args.rounds} "
        "alternating rounds (wall clock; cpu = this thread's CPU time)"
    )
    header = (
        f"{'api':<21} {'raw ev':>7} {'our ev':>7} {'raw ms':>9} {'clawpi ms':>10} "
        f"{'raw us/ev':>10} {'clawpi us/ev':>13} {'ratio':>6} {'cpu ratio':>10}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        print(
            f"{row['api']:<21} {row['raw_events']:>7} {row['events']:>7} {row['raw_ms']:>9.1f} "
            f"{row['clawpi_ms']:>10.1f} {row['raw_us_per_event']:>10.1f} "
            f"{row['clawpi_us_per_event']:>13.1f} {row['ratio']:>5.2f}x {row['cpu_ratio']:>9.2f}x"
        )

    print(
        "\ntool-call arguments streamed in 16-char deltas (a file written through a tool):"
        " CPU per delta of building the partial message with its arguments parsed so far"
    )
    print(f"{'arguments':>10} {'deltas':>8} {'ms':>9} {'us/delta':>9}")
    for size in (1_000, 10_000, 50_000, 200_000):
        deltas, seconds = tool_call_arguments(size)
        print(f"{size:>10,} {deltas:>8,} {seconds * 1000:>9.1f} {seconds / deltas * 1e6:>9.1f}")


def tool_call_arguments(size: int) -> tuple[int, float]:
    """(deltas, CPU seconds) to stream a `write` call whose content is `size` characters."""
    line = 'def f(x):\n    return x * 2  # "quoted" \\ and é\n'
    content = (line * (size // len(line) + 1))[:size]
    raw = json.dumps({"path": "src/app.py", "content": content})
    model = Model(id="m", name="m", api="openai-completions", provider="p", base_url="")
    builder = AssistantMessageBuilder(model)
    builder.start()
    index = builder.start_tool_call("call_1", "write")["contentIndex"]
    started = time.process_time()
    for at in range(0, len(raw), 16):
        builder.tool_call_delta(index, raw[at : at + 16])
    arguments = builder.end_tool_call(index)["toolCall"]["arguments"]
    seconds = time.process_time() - started
    assert arguments["content"] == content
    return len(range(0, len(raw), 16)), seconds


if __name__ == "__main__":
    main()
