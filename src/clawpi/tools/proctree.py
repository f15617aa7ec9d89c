"""Killing a command with every process it started, not just the shell."""

from __future__ import annotations

import os
import signal


def _parent_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        # The command name may hold spaces or parentheses; fields resume after the last ')'.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(name))
    return children


def descendants(pid: int) -> list[int]:
    """Every live descendant of `pid` (best effort: /proc is read once)."""
    try:
        children = _parent_map()
    except OSError:
        return []
    found: list[int] = []
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def kill_tree(pid: int, sig: int = signal.SIGKILL) -> None:
    """Signal the process group led by `pid` and every descendant, including ones that
    started their own session or group."""
    tree = descendants(pid)
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    for child in [pid, *tree]:
        try:
            os.kill(child, sig)
        except (ProcessLookupError, PermissionError):
            pass
