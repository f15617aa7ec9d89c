"""Child processes for the crash and concurrency tests: forked, so they start in milliseconds."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clawpi.session import SessionManager


def fork(target: Callable[[], None]) -> int:
    """Run `target` in a forked child that never returns into pytest."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 0
        try:
            target()
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
        os._exit(code)
    return pid


def message(rng: random.Random, n: int) -> dict[str, Any]:
    kind = rng.random()
    if kind < 0.3:
        size = rng.choice([10, 1_500, 20_000, 200_000])
        return {
            "role": "toolResult",
            "toolCallId": f"call_{n}",
            "toolName": "bash",
            "content": [{"type": "text", "text": "x" * size}],
            "isError": False,
            "timestamp": n,
        }
    if kind < 0.6:
        return {"role": "user", "content": f"question {n}", "timestamp": n}
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": f"answer {n} " + "y" * rng.randint(0, 5000)}],
        "provider": "p",
        "model": "m",
        "stopReason": "stop",
        "timestamp": n,
    }


def append_forever(path: Path, report_fd: int, seed: int) -> None:
    """Append entries until killed, reporting each id once its append has returned."""
    rng = random.Random(seed)
    sm = SessionManager.open(path)
    n = 0
    while True:
        entry_id = sm.append_message(message(rng, n))
        os.write(report_fd, f"{entry_id}\n".encode())
        n += 1


def append_n(path: Path, count: int, seed: int, report_fd: int, ready_fd: int, go_fd: int) -> None:
    """Open the session, say so, wait for the start signal, append `count` entries."""
    rng = random.Random(seed)
    sm = SessionManager.open(path)
    os.write(ready_fd, b"r")
    os.read(go_fd, 1)
    for n in range(count):
        entry_id = sm.append_message(message(rng, n))
        os.write(report_fd, f"{entry_id}\n".encode())
