from __future__ import annotations

from pathlib import Path

import pytest

from clawpi.errors import ConfigError
from clawpi.runner.config import (
    agent_defaults,
    configured_fallbacks,
    configured_primary,
    get_path,
    load_config,
    resolve_llm_idle_timeout_ms,
    resolve_timeout_ms,
)
from clawpi.runner.model_resolution import (
    evaluate_context_window_guard,
    resolve_context_window_info,
    resolve_model,
)
from clawpi.sdk import AuthStorage, ModelRegistry


@pytest.fixture
def registry(tmp_path: Path) -> ModelRegistry:
    return ModelRegistry.for_agent_dir(AuthStorage.for_agent_dir(tmp_path), tmp_path)


CONFIG = {
    "agents": {
        "defaults": {
            "model": {
                "primary": "openai/gpt-5.1",
                "fallbacks": ["anthropic/claude-sonnet-4-6", ""],
            },
            "contextTokens": 100_000,
            "timeoutSeconds": 30,
        }
    },
    "models": {
        "providers": {
            "local": {
                "baseUrl": "http://127.0.0.1:9/v1",
                "api": "openai-completions",
                "models": [{"id": "small", "contextWindow": 8192, "maxTokens": 1024}],
            }
        }
    },
}


def test_builtin_catalog_model(registry: ModelRegistry) -> None:
    model, error = resolve_model("anthropic", "claude-sonnet-4-6", registry, {})
    assert error is None and model is not None
    assert model.api == "anthropic-messages"


def test_config_provider_model_inherits_base_url_and_api(registry: ModelRegistry) -> None:
    model, error = resolve_model("local", "small", registry, CONFIG)
    assert error is None and model is not None
    assert (model.api, model.base_url, model.context_window) == (
        "openai-completions",
        "http://127.0.0.1:9/v1",
        8192,
    )


def test_unknown_id_of_a_configured_provider_is_synthesised_from_its_first_model(
    registry: ModelRegistry,
) -> None:
    model, _ = resolve_model("LOCAL", "other", registry, CONFIG)
    assert model is not None
    assert (model.id, model.context_window, model.reasoning, model.input) == (
        "other",
        8192,
        False,
        ("text",),
    )


def test_mock_models_and_unknown_models(registry: ModelRegistry) -> None:
    mock, _ = resolve_model("whoever", "mock-1", registry, {})
    assert mock is not None and mock.api == "openai-responses"
    missing, error = resolve_model("nobody", "nothing", registry, {})
    assert missing is None
    assert error == "Unknown model: nobody/nothing"


def test_context_window_sources_and_cap(registry: ModelRegistry) -> None:
    model, _ = resolve_model("local", "small", registry, CONFIG)
    assert model is not None
    info = resolve_context_window_info(model, CONFIG)
    assert (info.tokens, info.source) == (8192, "modelsConfig")
    big, _ = resolve_model("anthropic", "claude-sonnet-4-6", registry, {})
    assert big is not None
    capped = resolve_context_window_info(big, CONFIG)
    assert (capped.tokens, capped.source) == (100_000, "agentContextTokens")
    assert (
        resolve_context_window_info(big, {"agents": {"defaults": {"contextTokens": -5}}}).source
        == "model"
    )


def test_context_window_guard_thresholds() -> None:
    assert evaluate_context_window_guard(8000).should_block
    guard = evaluate_context_window_guard(20_000)
    assert guard.should_warn and not guard.should_block
    assert not evaluate_context_window_guard(64_000).should_warn
    assert not evaluate_context_window_guard(0).should_block


def test_config_helpers(tmp_path: Path) -> None:
    assert configured_primary(CONFIG) == ("openai", "gpt-5.1")
    assert configured_primary({}) == ("anthropic", "claude-opus-4-6")
    assert configured_fallbacks(CONFIG) == ["anthropic/claude-sonnet-4-6"]
    assert resolve_timeout_ms(CONFIG, None) == 30_000
    assert resolve_timeout_ms(CONFIG, 5_000) == 5_000
    assert resolve_timeout_ms({}, 0) == 600_000
    assert resolve_llm_idle_timeout_ms({}) == 60_000
    assert resolve_llm_idle_timeout_ms({}, "cron") == 0
    assert (
        resolve_llm_idle_timeout_ms({"agents": {"defaults": {"llm": {"idleTimeoutSeconds": 0}}}})
        == 0
    )
    assert get_path(CONFIG, "agents.defaults.missing.deep", 7) == 7
    assert agent_defaults(CONFIG)["timeoutSeconds"] == 30
    # Missing, null or mistyped levels read as no defaults, wherever the config goes wrong.
    for broken in (None, {}, {"agents": None}, {"agents": "x"}, {"agents": {"defaults": [1]}}):
        assert dict(agent_defaults(broken)) == {}
        assert resolve_timeout_ms(broken or {}, None) == 600_000
    path = tmp_path / "openclaw.json"
    path.write_text('{"agents": {"defaults": {"timeoutSeconds": 9}}}')
    assert load_config(str(path))["agents"]["defaults"]["timeoutSeconds"] == 9
    path.write_text("{nope")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_config(path)
