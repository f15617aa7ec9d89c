"""The remembered branch answers exactly what a fresh walk of the entries would.

`SessionTree` keeps the leaf's branch (its path, the latest entry of each type on it, the
resolved context) and extends it on appends, and it indexes the latest custom entry of each
type. Random sessions of every entry kind, with branching, merges from another process and
reloads, check each answer against one computed from the entries alone.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from clawpi.session import SessionManager
from clawpi.session.context import build_session_context, get_path


def _fresh_branch(sm: SessionManager) -> list[dict[str, Any]]:
    leaf = sm.get_leaf_entry()
    return get_path(sm._by_id, leaf) if leaf is not None else []


def _check(sm: SessionManager) -> None:
    branch = _fresh_branch(sm)
    assert [e["id"] for e in sm.get_branch()] == [e["id"] for e in branch]
    for kind in ("compaction", "thinking_level_change", "model_change", "custom", "message"):
        expected = next((e for e in reversed(branch) if e.get("type") == kind), None)
        assert sm.latest_on_branch(kind) is expected
    for custom_type in ("a", "b"):
        expected = next(
            (
                e
                for e in reversed(sm.get_entries())
                if e.get("type") == "custom" and e.get("customType") == custom_type
            ),
            None,
        )
        assert sm.last_custom_entry(custom_type) is expected
    fresh = build_session_context(sm.get_entries(), sm.get_leaf_id(), sm._by_id)
    got = sm.build_session_context()
    assert got == fresh
    got.messages.append({"role": "user", "content": "caller's change"})
    got.agent_messages.clear()
    assert sm.build_session_context() == fresh  # callers get copies


def _message(rng: random.Random, n: int) -> dict[str, Any]:
    role = rng.choice(["user", "assistant", "toolResult", "custom", "bashExecution"])
    if role == "assistant":
        return {
            "role": "assistant",
            "content": [{"type": "text", "text": f"a{n}"}],
            "provider": rng.choice(["p", "q"]),
            "model": f"m{n % 3}",
            "stopReason": "stop",
            "timestamp": n,
        }
    if role == "custom":
        return {"role": "custom", "customType": "x", "content": f"c{n}", "timestamp": n}
    if role == "bashExecution":
        return {"role": "bashExecution", "command": "ls", "output": "", "timestamp": n}
    if role == "toolResult":
        return {"role": "toolResult", "toolCallId": f"t{n}", "content": [], "timestamp": n}
    return {"role": "user", "content": f"u{n}", "timestamp": n}


def _step(sm: SessionManager, rng: random.Random, n: int) -> None:
    ids = [e["id"] for e in sm.get_entries()]
    op = rng.random()
    if op < 0.45:
        sm.append_message(_message(rng, n))
    elif op < 0.52:
        sm.append_custom_entry(rng.choice(["a", "b"]), {"n": n})
    elif op < 0.57:
        sm.append_thinking_level_change(rng.choice(["low", "high"]))
    elif op < 0.61:
        sm.append_model_change("p", f"mc{n}")
    elif op < 0.65 and ids:
        sm.append_compaction(f"summary {n}", rng.choice(ids), 100)
    elif op < 0.69:
        sm.append_custom_message_entry("ext", f"extra {n}", True)
    elif op < 0.72 and ids:
        sm.branch_with_summary(rng.choice(ids), f"left {n}")
    elif op < 0.76 and ids:
        sm.append_label_change(rng.choice(ids), f"l{n}")
    elif op < 0.78:
        sm.append_session_info(f"name {n}")
    elif op < 0.88 and ids:
        sm.branch(rng.choice(ids))
    elif op < 0.90:
        sm.reset_leaf()
    else:
        sm.get_branch(rng.choice(ids)) if ids else None


@pytest.mark.parametrize("seed", range(12))
def test_remembered_branch_and_indexes_equal_a_fresh_walk(seed: int) -> None:
    rng = random.Random(seed)
    sm = SessionManager.in_memory()
    for n in range(250):
        _step(sm, rng, n)
        _check(sm)


def test_entries_merged_from_another_process_and_reloads_are_seen(tmp_path: Path) -> None:
    rng = random.Random(7)
    sm = SessionManager.create("/p", tmp_path)
    sm.append_message({"role": "user", "content": "hi", "timestamp": 1})
    sm.append_message(_message(random.Random(0), 0) | {"role": "assistant", "content": []})
    assert sm.session_file is not None
    other = SessionManager.open(sm.session_file)
    for n in range(60):
        _step(sm, rng, n)
        _check(sm)
        if n % 7 == 0:
            other.append_custom_entry("a", {"from": "other", "n": n})
            other.append_message({"role": "user", "content": f"other {n}", "timestamp": n})
    reopened = SessionManager.open(sm.session_file)
    _check(reopened)
    assert [e["id"] for e in reopened.get_entries()] == [e["id"] for e in sm.get_entries()]
