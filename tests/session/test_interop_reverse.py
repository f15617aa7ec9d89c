"""Files clawpi writes open in pi (run with node) and build the same context there.

Needs node and an installed pi (`CLAWPI_PI_NODE_DIR`, see interop/README.md); skipped otherwise.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from clawpi.session import SessionManager
from tests.session.pi_compat import DATA_DIR, describe, normalize_ids, pi_node_dir, read_with_pi

PI_DIR = pi_node_dir()
pytestmark = pytest.mark.skipif(
    PI_DIR is None, reason="node or CLAWPI_PI_NODE_DIR with pi-coding-agent not available"
)


def _usage() -> dict[str, object]:
    cost = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}
    return {
        "input": 5,
        "output": 2,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 7,
        "cost": cost,
    }


def _assistant(text: str, ts: int, stop: str = "stop") -> dict[str, object]:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "api": "openai-completions",
        "provider": "stub",
        "model": "stub-model",
        "usage": _usage(),
        "stopReason": stop,
        "timestamp": ts,
    }


def _write_rich_session(directory: Path) -> SessionManager:
    sm = SessionManager.create("/work/project", directory)
    sm.append_model_change("stub", "stub-model")
    sm.append_thinking_level_change("medium")
    u1 = sm.append_message({"role": "user", "content": "List files", "timestamp": 1})
    sm.append_message(
        {
            **_assistant("", 2, "toolUse"),
            "content": [
                {"type": "thinking", "thinking": "ls", "thinkingSignature": "s"},
                {"type": "toolCall", "id": "call_1", "name": "bash", "arguments": {"c": "ls"}},
            ],
        }
    )
    sm.append_message(
        {
            "role": "toolResult",
            "toolCallId": "call_1",
            "toolName": "bash",
            "content": [{"type": "text", "text": "a\nb"}],
            "isError": False,
            "timestamp": 3,
        }
    )
    a2 = sm.append_message(_assistant("Two files ✓", 4))
    sm.append_label_change(u1, "first")
    sm.append_session_info("  reverse  ")
    sm.append_custom_entry("ext", {"n": 1})
    sm.append_custom_message_entry("ext", "injected", True, {"d": 1})
    sm.append_message({"role": "user", "content": "Delete", "timestamp": 5})
    sm.append_message(_assistant("Deleted", 6))
    sm.branch_with_summary(a2, "Deleted stuff, then came back", {"readFiles": []}, False)
    u3 = sm.append_message({"role": "user", "content": "Sizes?", "timestamp": 7})
    sm.append_message(_assistant("1 and 2", 8))
    sm.append_compaction("## Goal\nsizes", u3, 120, {"readFiles": [], "modifiedFiles": []})
    sm.append_message(
        {
            "role": "bashExecution",
            "command": "du",
            "output": "",
            "exitCode": 2,
            "cancelled": False,
            "truncated": False,
            "timestamp": 9,
        }
    )
    sm.append_message({"role": "user", "content": "thanks", "timestamp": 10})
    sm.append_message(_assistant("welcome", 11))
    return sm


def test_session_written_by_clawpi_builds_the_same_context_in_pi(tmp_path: Path) -> None:
    assert PI_DIR is not None
    sm = _write_rich_session(tmp_path / "sessions")
    assert sm.session_file is not None
    reopened = SessionManager.open(sm.session_file)
    assert read_with_pi(sm.session_file, PI_DIR) == describe(reopened)


def test_branched_and_forked_sessions_written_by_clawpi_open_in_pi(tmp_path: Path) -> None:
    assert PI_DIR is not None
    sm = _write_rich_session(tmp_path / "sessions")
    assert sm.session_file is not None
    first_assistant = next(
        e["id"] for e in sm.get_entries() if e.get("message", {}).get("role") == "assistant"
    )
    source = sm.session_file
    sm.create_branched_session(first_assistant)
    assert sm.session_file is not None and sm.session_file != source
    assert read_with_pi(sm.session_file, PI_DIR) == describe(SessionManager.open(sm.session_file))
    forked = SessionManager.fork_from(source, "/elsewhere", tmp_path / "forks")
    assert forked.session_file is not None
    assert read_with_pi(forked.session_file, PI_DIR) == describe(
        SessionManager.open(forked.session_file)
    )


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_legacy_file_migrated_by_clawpi_reads_the_same_in_pi(version: str, tmp_path: Path) -> None:
    assert PI_DIR is not None
    file = tmp_path / f"{version}.jsonl"
    shutil.copyfile(DATA_DIR / f"{version}.input.jsonl", file)
    ours = describe(SessionManager.open(file))
    before = file.read_bytes()
    theirs = read_with_pi(file, PI_DIR)
    assert file.read_bytes() == before  # pi found a v3 file: nothing to migrate
    assert theirs == ours
    assert normalize_ids(ours) == normalize_ids(
        read_with_pi(_copy(DATA_DIR / f"{version}.input.jsonl", tmp_path / "pi"), PI_DIR)
    )


def _copy(source: Path, directory: Path) -> Path:
    directory.mkdir()
    target = directory / source.name
    shutil.copyfile(source, target)
    return target
