from __future__ import annotations

import json
from pathlib import Path

import pytest

from clawpi.errors import ConfigError
from clawpi.sdk.auth import AuthStorage
from clawpi.sdk.registry import ModelRegistry


def registry_with(tmp_path: Path, models_json: object) -> ModelRegistry:
    (tmp_path / "models.json").write_text(json.dumps(models_json))
    return ModelRegistry.for_agent_dir(AuthStorage.for_agent_dir(tmp_path), tmp_path)


LOCAL = {
    "providers": {
        "local": {
            "baseUrl": "http://127.0.0.1:8080/v1",
            "api": "openai-completions",
            "apiKey": "LOCAL_LLM_KEY",
            "compat": {"supportsDeveloperRole": False},
            "models": [
                {
                    "id": "qwen3:8b",
                    "reasoning": True,
                    "contextWindow": 32768,
                    "maxTokens": 8192,
                    "compat": {"thinkingFormat": "qwen"},
                },
                {"id": "llama3"},
            ],
        }
    }
}


def test_custom_provider_models_in_pi_format(tmp_path: Path) -> None:
    registry = registry_with(tmp_path, LOCAL)
    assert registry.error is None
    model = registry.find("local", "qwen3:8b")
    assert model is not None
    assert model.api == "openai-completions"
    assert model.base_url == "http://127.0.0.1:8080/v1"
    assert model.context_window == 32768
    assert model.reasoning is True
    assert model.compat == {"supportsDeveloperRole": False, "thinkingFormat": "qwen"}
    defaults = registry.find("local", "llama3")
    assert defaults is not None
    assert (defaults.context_window, defaults.max_tokens, defaults.input) == (
        128000,
        16384,
        ("text",),
    )


def test_models_json_api_key_is_the_fallback_credential(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = registry_with(tmp_path, LOCAL)
    model = registry.find("local", "llama3")
    assert model is not None
    # the value names an env var that is not set, so the literal is used
    assert registry.get_api_key(model) == "LOCAL_LLM_KEY"
    monkeypatch.setenv("LOCAL_LLM_KEY", "secret")
    assert registry.get_api_key(model) == "secret"
    assert model in registry.get_available()


def test_custom_models_need_an_api_key(tmp_path: Path) -> None:
    data = {
        "providers": {
            "x": {"baseUrl": "http://h", "api": "openai-completions", "models": [{"id": "m"}]}
        }
    }
    registry = registry_with(tmp_path, data)
    assert registry.error is not None
    assert '"apiKey"' in registry.error
    assert registry.find("x", "m") is None


def test_provider_needs_some_configuration(tmp_path: Path) -> None:
    registry = registry_with(tmp_path, {"providers": {"empty": {"apiKey": "k"}}})
    assert registry.error is not None
    assert "needs at least one of" in registry.error


def test_broken_file_keeps_builtins_usable(tmp_path: Path) -> None:
    (tmp_path / "models.json").write_text("{oops")
    registry = ModelRegistry.for_agent_dir(AuthStorage.for_agent_dir(tmp_path), tmp_path)
    assert registry.error is not None
    assert "not valid JSON" in registry.error


def test_resolve_patterns_with_thinking_suffix(tmp_path: Path) -> None:
    registry = registry_with(tmp_path, LOCAL)
    choice = registry.resolve("local/qwen3:8b:high")
    assert choice.model.id == "qwen3:8b"
    assert choice.thinking_level == "high"
    assert registry.resolve("qwen3:8b").model.provider == "local"
    assert registry.resolve("llam").model.id == "llama3"
    assert registry.resolve("local/qwen*").model.id == "qwen3:8b"
    with pytest.raises(ConfigError, match="Unknown model"):
        registry.resolve("local/nope")


def test_model_overrides_and_auth_header(tmp_path: Path) -> None:
    data = json.loads(json.dumps(LOCAL))
    data["providers"]["local"]["modelOverrides"] = {"llama3": {"contextWindow": 8192}}
    data["providers"]["local"]["authHeader"] = True
    registry = registry_with(tmp_path, data)
    model = registry.find("local", "llama3")
    assert model is not None
    assert model.context_window == 8192
    assert registry.request_headers(model, "k") == {"Authorization": "Bearer k"}
