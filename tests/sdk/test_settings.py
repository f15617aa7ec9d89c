from __future__ import annotations

import json
from pathlib import Path

import pytest

from clawpi.errors import ConfigError
from clawpi.sdk.settings import SettingsManager


def write(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def test_defaults_match_pi(tmp_path: Path) -> None:
    settings = SettingsManager(tmp_path / "agent", tmp_path).settings
    assert settings.compaction.enabled is True
    assert settings.compaction.reserve_tokens == 16384
    assert settings.compaction.keep_recent_tokens == 20000
    assert settings.retry.max_retries == 3
    assert settings.retry.base_delay_ms == 2000
    assert settings.retry.max_delay_ms == 60000
    assert settings.steering_mode == "one-at-a-time"
    assert settings.transport == "sse"


def test_project_wins_and_nested_objects_merge_one_level(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    write(
        agent / "settings.json",
        {
            "defaultModel": "a",
            "compaction": {"enabled": False, "reserveTokens": 1000},
            "skills": ["g"],
        },
    )
    write(
        tmp_path / ".clawpi" / "settings.json",
        {"defaultModel": "b", "compaction": {"reserveTokens": 2000}, "skills": ["p"]},
    )
    settings = SettingsManager(agent, tmp_path).settings
    assert settings.default_model == "b"
    assert settings.compaction.enabled is False
    assert settings.compaction.reserve_tokens == 2000
    assert settings.skills == ["p"]  # arrays are replaced, not merged


def test_pi_project_dir_is_read(tmp_path: Path) -> None:
    write(tmp_path / ".pi" / "settings.json", {"defaultProvider": "anthropic"})
    assert SettingsManager(tmp_path / "agent", tmp_path).settings.default_provider == "anthropic"


def test_migrations_on_read(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    write(agent / "settings.json", {"queueMode": "all", "websockets": True})
    settings = SettingsManager(agent, tmp_path).settings
    assert settings.steering_mode == "all"
    assert settings.transport == "websocket"


def test_set_writes_only_its_key_and_keeps_external_edits(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    write(agent / "settings.json", {"theme": "light", "myExtensionKey": {"x": 1}})
    manager = SettingsManager(agent, tmp_path)
    # someone edits the file behind our back
    write(
        agent / "settings.json",
        {"theme": "light", "myExtensionKey": {"x": 1}, "quietStartup": True},
    )
    manager.set("defaultModel", "gpt-x")
    on_disk = json.loads((agent / "settings.json").read_text())
    assert on_disk == {
        "theme": "light",
        "myExtensionKey": {"x": 1},
        "quietStartup": True,
        "defaultModel": "gpt-x",
    }
    assert manager.settings.default_model == "gpt-x"
    assert manager.settings.quiet_startup is True


def test_invalid_values_give_a_clear_error(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    write(agent / "settings.json", {"compaction": {"reserveTokens": "lots"}})
    with pytest.raises(ConfigError, match=r"compaction\.reserveTokens"):
        SettingsManager(agent, tmp_path)


def test_broken_json_names_the_file(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "settings.json").write_text("{not json")
    with pytest.raises(ConfigError, match=r"settings\.json is not valid JSON"):
        SettingsManager(agent, tmp_path)


def test_runtime_overrides_win() -> None:
    manager = SettingsManager.in_memory({"compaction": {"enabled": True}})
    manager.apply_overrides({"compaction": {"enabled": False}})
    assert manager.get_compaction_settings().enabled is False
