"""Per-event overhead of `clawpi.ai.stream` over iterating the raw vendor SDK stream.

Both sides read the same SSE body from the same local fake server in the same process, taking
turns, so network, SSE parsing and SDK model construction cancel out and the ratio is what
clawpi adds per event (building the partial message and the event dicts). Target: <= 1.2x.

    python bench/bench_stream.py [--events 2000] [--rounds 15]
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

from tests.fakes.http_server import FakeResponse, FakeServer, sse_frame

from clawpi.ai import Model, stream


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


async def time_once(run: Callable[[], Awaitable[int]]) -> tuple[float, int]:
    start = time.perf_counter()
    count = await run()
    return time.perf_counter() - start, count


async def bench_api(name: str, server: FakeServer, events: int, rounds: int) -> dict[str, Any]:
    context: Any = {"messages": [{"role": "user", "content": "hi", "timestamp": 1}]}
    if name == "openai-completions":
        import openai

        body = openai_frames(events)
        model = Model(id="m", api=name, provider="bench", base_url=server.url + "/v1")
        client = openai.AsyncOpenAI(api_key="k", base_url=server.url + "/v1", max_retries=0)

        async def raw() -> int:
            count = 0
            response = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            async for _ in response:
                count += 1
            return count
    else:
        import anthropic

        body = anthropic_frames(events)
        model = Model(id="m", api=name, provider="bench", base_url=server.url)
        aclient = anthropic.AsyncAnthropic(api_key="k", base_url=server.url, max_retries=0)

        async def raw() -> int:
            count = 0
            response = await aclient.messages.create(
                model="m",
                max_tokens=100,
                messages=[{"role": "user", "content": "hi"}],
                stream=True,
            )
            async for _ in response:
                count += 1
            return count

    async def ours() -> int:
        count = 0
        async for _ in stream(model, context, api_key="k"):
            count += 1
        return count

    server.handler = lambda request: FakeResponse.sse(body)
    raw_times: list[float] = []
    our_times: list[float] = []
    raw_events = our_events = 0
    for _ in range(2):  # warm up connections and imports
        await raw()
        await ours()
    for _ in range(rounds):
        elapsed, raw_events = await time_once(raw)
        raw_times.append(elapsed)
        elapsed, our_events = await time_once(ours)
        our_times.append(elapsed)
    raw_median = statistics.median(raw_times)
    our_median = statistics.median(our_times)
    return {
        "api": name,
        "events": our_events,
        "raw_ms": raw_median * 1000,
        "clawpi_ms": our_median * 1000,
        "raw_us_per_event": raw_median / max(raw_events, 1) * 1e6,
        "clawpi_us_per_event": our_median / max(our_events, 1) * 1e6,
        "ratio": our_median / raw_median,
    }


async def main_async(events: int, rounds: int) -> list[dict[str, Any]]:
    rows = []
    with FakeServer() as server:
        for api in ("openai-completions", "anthropic-messages"):
            rows.append(await bench_api(api, server, events, rounds))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json", action="store_true", help="print rows as JSON")
    args = parser.parse_args()
    rows = asyncio.run(main_async(args.events, args.rounds))
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"stream() vs raw SDK iteration, {args.events} text deltas, median of {args.rounds}")
    header = f"{'api':<20} {'events':>7} {'raw ms':>9} {'clawpi ms':>10} {'raw us/ev':>10} {'clawpi us/ev':>13} {'ratio':>6}"
    print(header)
    print("-" * len(header))
    for row in rows:
        print(
            f"{row['api']:<20} {row['events']:>7} {row['raw_ms']:>9.1f} {row['clawpi_ms']:>10.1f} "
            f"{row['raw_us_per_event']:>10.1f} {row['clawpi_us_per_event']:>13.1f} {row['ratio']:>5.2f}x"
        )


if __name__ == "__main__":
    main()
