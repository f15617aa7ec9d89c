"""Which environment variable holds each provider's API key."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

# Checked in order; the first non-empty one wins.
PROVIDER_ENV_VARS: Mapping[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "azure-openai-responses": ("AZURE_OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_OAUTH_TOKEN", "ANTHROPIC_API_KEY"),
    "google": ("GEMINI_API_KEY",),
    "google-vertex": ("GOOGLE_CLOUD_API_KEY",),
    "github-copilot": ("COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"),
    "groq": ("GROQ_API_KEY",),
    "cerebras": ("CEREBRAS_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "vercel-ai-gateway": ("AI_GATEWAY_API_KEY",),
    "zai": ("ZAI_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "minimax": ("MINIMAX_API_KEY",),
    "minimax-cn": ("MINIMAX_CN_API_KEY",),
    "huggingface": ("HF_TOKEN",),
    "opencode": ("OPENCODE_API_KEY",),
    "opencode-go": ("OPENCODE_API_KEY",),
    "kimi-coding": ("KIMI_API_KEY",),
}

AUTHENTICATED = "<authenticated>"
_AWS_MARKERS = (
    "AWS_PROFILE",
    "AWS_BEARER_TOKEN_BEDROCK",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
)


def env_vars_for(provider: str) -> tuple[str, ...]:
    return PROVIDER_ENV_VARS.get(provider, ())


def get_env_api_key(provider: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The provider's key from the environment, or `<authenticated>` for ambient cloud auth."""
    env = os.environ if environ is None else environ
    for name in PROVIDER_ENV_VARS.get(provider, ()):
        value = env.get(name)
        if value:
            return value
    if provider == "amazon-bedrock":
        has_keys = env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY")
        if has_keys or any(env.get(name) for name in _AWS_MARKERS):
            return AUTHENTICATED
    if provider == "google-vertex" and _has_vertex_adc(env):
        return AUTHENTICATED
    return None


def _has_vertex_adc(env: Mapping[str, str]) -> bool:
    credentials = env.get("GOOGLE_APPLICATION_CREDENTIALS")
    if credentials:
        has_file = Path(credentials).is_file()
    else:
        home = env.get("HOME")
        default = (
            Path(home) / ".config/gcloud/application_default_credentials.json" if home else None
        )
        has_file = default is not None and default.is_file()
    project = env.get("GOOGLE_CLOUD_PROJECT") or env.get("GCLOUD_PROJECT")
    return bool(has_file and project and env.get("GOOGLE_CLOUD_LOCATION"))
