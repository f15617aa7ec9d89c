"""Cache-TTL bookkeeping on a real session file."""

from __future__ import annotations

from pathlib import Path

import orjson

from clawpi.runner.cache_ttl import (
    CACHE_TTL_CUSTOM_TYPE,
    append_cache_ttl_timestamp,
    is_cache_ttl_eligible_provider,
    read_last_cache_ttl_timestamp,
)
from clawpi.session import SessionManager


def _session(tmp_path: Path, workspace: Path) -> SessionManager:
    manager = SessionManager.create(workspace, tmp_path / "sessions")
    manager.append_message({"role": "user", "content": "hi", "timestamp": 1})
    manager.append_message(
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "hello"}],
            "api": "anthropic-messages",
            "provider": "anthropic",
            "model": "claude-x",
            "usage": {},
            "stopReason": "stop",
            "timestamp": 2,
        }
    )
    return manager


def test_anthropic_and_openrouter_anthropic_models_are_cache_ttl_eligible() -> None:
    assert is_cache_ttl_eligible_provider("anthropic", "claude-sonnet-4-5")
    assert is_cache_ttl_eligible_provider("Anthropic", None)
    assert is_cache_ttl_eligible_provider("openrouter", "anthropic/claude-opus-4")
    assert not is_cache_ttl_eligible_provider("openrouter", "openai/gpt-5")
    assert not is_cache_ttl_eligible_provider("openai", "gpt-5")
    assert not is_cache_ttl_eligible_provider(None, None)


def test_appended_timestamp_is_a_custom_entry_on_disk_and_reads_back(
    tmp_path: Path, workspace: Path
) -> None:
    manager = _session(tmp_path, workspace)
    assert read_last_cache_ttl_timestamp(manager) is None
    append_cache_ttl_timestamp(manager, provider="anthropic", model_id="claude-x", timestamp=1000)
    manager.append_message({"role": "user", "content": "later", "timestamp": 3})
    append_cache_ttl_timestamp(manager, provider="anthropic", model_id="claude-x", timestamp=5000)
    assert read_last_cache_ttl_timestamp(manager) == 5000

    assert manager.session_file is not None
    lines = [orjson.loads(line) for line in manager.session_file.read_bytes().splitlines()]
    touches = [e for e in lines if e.get("customType") == CACHE_TTL_CUSTOM_TYPE]
    assert [e["type"] for e in touches] == ["custom", "custom"]
    assert touches[-1]["data"] == {
        "timestamp": 5000,
        "provider": "anthropic",
        "modelId": "claude-x",
    }

    reopened = SessionManager.open(manager.session_file)
    assert read_last_cache_ttl_timestamp(reopened) == 5000


def test_last_touch_defaults_to_now_and_damaged_data_falls_back_to_entry_time(
    tmp_path: Path, workspace: Path
) -> None:
    manager = _session(tmp_path, workspace)
    append_cache_ttl_timestamp(manager, provider="anthropic", model_id="claude-x")
    first = read_last_cache_ttl_timestamp(manager)
    assert first is not None and first > 1_600_000_000_000
    manager.append_custom_entry(CACHE_TTL_CUSTOM_TYPE, {"timestamp": "not a number"})
    fallback = read_last_cache_ttl_timestamp(manager)
    assert fallback is not None and abs(fallback - first) < 60_000
