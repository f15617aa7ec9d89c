"""Re-record `multi_turn_events.json`: python -m tests.reply.data.record_replay

Assistant turns come from the real `clawpi.ai.stream` over the faux provider (wrapped the way
the agent loop wraps them); tool and compaction events are written as pi emits them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
from tests.reply.events import faux_turn_events, tool_events

from clawpi.testing import FauxProvider, FauxResponse, faux_text, faux_tool_call

OUT = Path(__file__).with_name("multi_turn_events.json")
OVERFLOW = "prompt is too long: 208423 tokens > 200000 maximum"


async def record() -> list[dict[str, Any]]:
    provider = FauxProvider(
        [
            [
                faux_text("Let me check the files."),
                faux_tool_call("exec", {"command": "ls"}, "call_ls"),
            ],
            [
                faux_text(
                    "<think>Two files; read the first.</think>There are two files:\n\n- a.py\n- b.py"
                ),
                faux_tool_call("read", {"path": "a.py"}, "call_read"),
            ],
            FauxResponse(error=OVERFLOW),
            [
                faux_text(
                    "[[reply_to_current]] Here is the summary after compaction.\n\n"
                    "```python\nprint('hello')\n```\n\n"
                    "The chart:\nMEDIA: https://cdn.example.com/chart.png\n\nNO_REPLY"
                )
            ],
        ],
        chunk_size=7,
    )
    user = {"role": "user", "content": "what is in this repo?", "timestamp": 1}
    events: list[dict[str, Any]] = [
        {"type": "agent_start"},
        {"type": "turn_start"},
        {"type": "message_start", "message": user},
        {"type": "message_end", "message": user},
    ]
    events += await faux_turn_events(provider, {"messages": []})
    events += tool_events("exec", {"command": "ls"}, "call_ls", "a.py\nb.py")
    events += [{"type": "turn_end"}, {"type": "turn_start"}]
    events += await faux_turn_events(provider, {"messages": []})
    events += tool_events(
        "read", {"path": "a.py"}, "call_read", "ENOENT: no such file", is_error=True
    )
    events += [{"type": "turn_end"}, {"type": "turn_start"}]
    events += await faux_turn_events(provider, {"messages": []})
    events += [
        {"type": "turn_end"},
        {"type": "agent_end", "messages": []},
        {"type": "auto_compaction_start", "reason": "overflow"},
        {
            "type": "auto_compaction_end",
            "result": {"summary": "earlier turns"},
            "aborted": False,
            "willRetry": True,
        },
        {"type": "agent_start"},
        {"type": "turn_start"},
    ]
    events += await faux_turn_events(provider, {"messages": []})
    events += [{"type": "turn_end"}, {"type": "agent_end", "messages": []}]
    for event in events:  # timestamps vary per recording; keep the file stable
        for key in ("message",):
            if isinstance(event.get(key), dict):
                event[key]["timestamp"] = 1
        update = event.get("assistantMessageEvent")
        if isinstance(update, dict):
            update.get("partial", {})["timestamp"] = 1
    return events


if __name__ == "__main__":
    OUT.write_bytes(orjson.dumps(asyncio.run(record()), option=orjson.OPT_INDENT_2) + b"\n")
    print(f"wrote {OUT}")
