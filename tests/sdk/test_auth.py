from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from clawpi.sdk.auth import AuthStorage


def test_file_is_created_private(tmp_path: Path) -> None:
    storage = AuthStorage.for_agent_dir(tmp_path / "agent")
    assert storage.path is not None
    assert json.loads(storage.path.read_text()) == {}
    assert stat.S_IMODE(storage.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(storage.path.parent.stat().st_mode) == 0o700


def test_resolution_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    storage = AuthStorage.for_agent_dir(tmp_path)
    assert storage.get_api_key("openai") is None
    storage.set_fallback_resolver(lambda p: "from-models-json" if p == "openai" else None)
    assert storage.get_api_key("openai") == "from-models-json"
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    assert storage.get_api_key("openai") == "from-env"
    storage.set_api_key("openai", "from-file")
    assert storage.get_api_key("openai") == "from-file"
    storage.set_runtime_api_key("openai", "from-flag")
    assert storage.get_api_key("openai") == "from-flag"


def test_key_values_resolve_commands_and_env_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = AuthStorage.for_agent_dir(tmp_path)
    storage.set_api_key("groq", "!printf 'cmd-key\\n'")
    assert storage.get_api_key("groq") == "cmd-key"
    monkeypatch.setenv("MY_WORK_KEY", "env-named")
    storage.set_api_key("xai", "MY_WORK_KEY")
    assert storage.get_api_key("xai") == "env-named"
    storage.set_api_key("mistral", "literal-key")
    assert storage.get_api_key("mistral") == "literal-key"


def test_set_keeps_other_providers_and_stays_private(tmp_path: Path) -> None:
    storage = AuthStorage.for_agent_dir(tmp_path)
    storage.set_api_key("anthropic", "a")
    storage.set_api_key("openai", "o")
    assert storage.path is not None
    data = json.loads(storage.path.read_text())
    assert data == {
        "anthropic": {"type": "api_key", "key": "a"},
        "openai": {"type": "api_key", "key": "o"},
    }
    assert stat.S_IMODE(storage.path.stat().st_mode) == 0o600
    storage.remove("anthropic")
    assert storage.list_providers() == ["openai"]


def test_expired_oauth_token_is_not_used(tmp_path: Path) -> None:
    path = tmp_path / "auth.json"
    path.write_text(
        json.dumps(
            {
                "anthropic": {"type": "oauth", "access": "old", "refresh": "r", "expires": 1},
                "openai-codex": {
                    "type": "oauth",
                    "access": "fresh",
                    "refresh": "r",
                    "expires": 10**15,
                },
            }
        )
    )
    storage = AuthStorage(path)
    assert storage.get_api_key("anthropic") is None
    assert storage.get_api_key("openai-codex") == "fresh"


def test_missing_key_message_says_how_to_fix(tmp_path: Path) -> None:
    message = AuthStorage.for_agent_dir(tmp_path).describe_missing("anthropic")
    assert "ANTHROPIC_API_KEY" in message
    assert "auth.json" in message
    assert "--api-key" in message
