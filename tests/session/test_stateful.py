"""A session driven through random operations (messages of every role, model and thinking
changes, compactions, custom entries, labels, branching, branch summaries, resetting the leaf):
after every step, the context the manager keeps incrementally equals a full resolution of its
entries, and a fresh `SessionManager.open` of the file sees the same entries, leaf and context."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from clawpi.session import SessionManager
from clawpi.session.context import build_session_context

texts = st.text(max_size=8)


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1}


def _assistant(text: str, call: str | None) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    if call is not None:
        content.append({"type": "toolCall", "id": call, "name": "read", "arguments": {}})
    return {
        "role": "assistant",
        "content": content,
        "api": "faux",
        "provider": "faux",
        "model": "m",
        "stopReason": "toolUse" if call else "stop",
        "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2},
        "timestamp": 2,
    }


def _context(context: Any) -> tuple[Any, ...]:
    return (context.messages, context.agent_messages, context.thinking_level, context.model)


class SessionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self._tmp = tempfile.TemporaryDirectory()
        self.root = Path(self._tmp.name)
        self.manager = SessionManager.create(self.root, self.root / "sessions", fsync=False)
        self.calls = 0

    def teardown(self) -> None:
        self.manager.close()
        self._tmp.cleanup()

    def _ids(self) -> list[str]:
        return [entry["id"] for entry in self.manager.get_entries()]

    @rule(text=texts)
    def user(self, text: str) -> None:
        self.manager.append_message(_user(text))

    @rule(text=texts, with_call=st.booleans())
    def assistant(self, text: str, with_call: bool) -> None:
        self.calls += 1
        self.manager.append_message(_assistant(text, f"c{self.calls}" if with_call else None))

    @rule(text=texts)
    def tool_result(self, text: str) -> None:
        self.manager.append_message(
            {
                "role": "toolResult",
                "toolCallId": f"c{self.calls}",
                "toolName": "read",
                "content": [{"type": "text", "text": text}],
                "isError": False,
                "timestamp": 3,
            }
        )

    @rule(level=st.sampled_from(["off", "low", "high"]))
    def thinking(self, level: str) -> None:
        self.manager.append_thinking_level_change(level)

    @rule(model=st.sampled_from(["m1", "m2"]))
    def model(self, model: str) -> None:
        self.manager.append_model_change("faux", model)

    @precondition(lambda self: bool(self.manager.get_entries()))
    @rule(data=st.data(), summary=texts)
    def compaction(self, data: st.DataObject, summary: str) -> None:
        kept = data.draw(st.sampled_from(self._ids()))
        self.manager.append_compaction(summary, kept, 100)

    @rule(kind=st.sampled_from(["state", "other"]), value=st.integers())
    def custom(self, kind: str, value: int) -> None:
        self.manager.append_custom_entry(kind, {"n": value})

    @rule(text=texts, display=st.booleans())
    def custom_message(self, text: str, display: bool) -> None:
        self.manager.append_custom_message_entry("note", text, display)

    @precondition(lambda self: bool(self.manager.get_entries()))
    @rule(data=st.data(), label=st.none() | texts)
    def label(self, data: st.DataObject, label: str | None) -> None:
        self.manager.append_label_change(data.draw(st.sampled_from(self._ids())), label)

    @precondition(lambda self: bool(self.manager.get_entries()))
    @rule(data=st.data())
    def branch(self, data: st.DataObject) -> None:
        self.manager.branch(data.draw(st.sampled_from(self._ids())))

    @precondition(lambda self: bool(self.manager.get_entries()))
    @rule(data=st.data(), summary=texts)
    def branch_with_summary(self, data: st.DataObject, summary: str) -> None:
        target = data.draw(st.none() | st.sampled_from(self._ids()))
        self.manager.branch_with_summary(target, summary)

    @rule()
    def reset_leaf(self) -> None:
        self.manager.reset_leaf()

    @invariant()
    def incremental_context_equals_a_full_resolution(self) -> None:
        manager = self.manager
        by_id = {entry["id"]: entry for entry in manager.get_entries()}
        full = build_session_context(manager.get_entries(), manager.get_leaf_id(), by_id)
        assert _context(manager.build_session_context()) == _context(full)

    @invariant()
    def the_file_reopened_is_the_same_session(self) -> None:
        manager = self.manager
        path = manager.get_session_file()
        if path is None or not path.exists():
            return  # nothing written yet: pi writes the file with the first assistant message
        reopened = SessionManager.open(path, fsync=False)
        try:
            assert reopened.get_entries() == manager.get_entries()
            # the leaf on disk is the last entry; a branch or reset not yet followed by an
            # entry lives only in memory (as in pi)
            last = manager.get_entries()[-1]["id"]
            assert reopened.get_leaf_id() == last
            if manager.get_leaf_id() == last:
                assert _context(reopened.build_session_context()) == _context(
                    manager.build_session_context()
                )
        finally:
            reopened.close()


SessionMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_session_state_machine = SessionMachine.TestCase
