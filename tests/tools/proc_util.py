"""Looking for processes by a unique marker in their command line."""

from __future__ import annotations

import os
import secrets
import time


def marker_seconds() -> str:
    """A sleep duration unique enough to find its process again: `30.<random digits>`."""
    return f"30.{secrets.randbelow(10**8):08d}"


def live_pids_with(marker: str, *, argv0: str | None = None) -> list[int]:
    """Live processes whose command line contains `marker` (and starts with `argv0`)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                cmdline = handle.read()
            with open(f"/proc/{name}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if argv0 is not None and cmdline.split(b"\0")[0].rsplit(b"/", 1)[-1] != argv0.encode():
            continue
        if marker.encode() in cmdline and state != b"Z":
            found.append(int(name))
    return found


def wait_until_gone(marker: str, timeout: float = 3.0) -> list[int]:
    """The processes still alive with `marker` after waiting up to `timeout` for them to exit."""
    deadline = time.monotonic() + timeout
    while True:
        pids = live_pids_with(marker)
        if not pids or time.monotonic() > deadline:
            return pids
        time.sleep(0.02)


async def wait_for_sleepers(marker: str, count: int, timeout: float = 10.0) -> None:
    """Wait until `count` `sleep <marker>` processes run; fail the test if they never do."""
    import asyncio

    deadline = time.monotonic() + timeout
    while len(live_pids_with(marker, argv0="sleep")) < count:
        assert time.monotonic() < deadline, f"only {live_pids_with(marker, argv0='sleep')} started"
        await asyncio.sleep(0.02)
