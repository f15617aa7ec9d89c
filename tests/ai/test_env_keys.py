from __future__ import annotations

from pathlib import Path

from clawpi.ai.env_keys import AUTHENTICATED, get_env_api_key


def test_provider_variables_in_order() -> None:
    env = {"ANTHROPIC_API_KEY": "api", "ANTHROPIC_OAUTH_TOKEN": "oauth"}
    assert get_env_api_key("anthropic", env) == "oauth"
    assert get_env_api_key("anthropic", {"ANTHROPIC_API_KEY": "api"}) == "api"
    assert get_env_api_key("google", {"GEMINI_API_KEY": "g"}) == "g"
    assert get_env_api_key("github-copilot", {"GITHUB_TOKEN": "t"}) == "t"
    assert get_env_api_key("openai", {}) is None
    assert get_env_api_key("unknown-provider", {"OPENAI_API_KEY": "x"}) is None


def test_empty_variable_is_ignored() -> None:
    assert get_env_api_key("openai", {"OPENAI_API_KEY": ""}) is None


def test_bedrock_ambient_credentials() -> None:
    assert get_env_api_key("amazon-bedrock", {"AWS_PROFILE": "dev"}) == AUTHENTICATED
    pair = {"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"}
    assert get_env_api_key("amazon-bedrock", pair) == AUTHENTICATED
    assert get_env_api_key("amazon-bedrock", {"AWS_ACCESS_KEY_ID": "a"}) is None


def test_vertex_needs_credentials_project_and_location(tmp_path: Path) -> None:
    creds = tmp_path / "adc.json"
    creds.write_text("{}")
    env = {"GOOGLE_APPLICATION_CREDENTIALS": str(creds), "GOOGLE_CLOUD_PROJECT": "p"}
    assert get_env_api_key("google-vertex", env) is None
    env["GOOGLE_CLOUD_LOCATION"] = "us-central1"
    assert get_env_api_key("google-vertex", env) == AUTHENTICATED
    assert get_env_api_key("google-vertex", {"GOOGLE_CLOUD_API_KEY": "k"}) == "k"
