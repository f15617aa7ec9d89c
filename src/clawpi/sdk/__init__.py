"""The high-level SDK: settings, credentials, model registry and (soon) agent sessions."""

from clawpi.sdk.auth import AuthStorage
from clawpi.sdk.registry import ModelChoice, ModelRegistry
from clawpi.sdk.settings import Settings, SettingsManager

__all__ = ["AuthStorage", "ModelChoice", "ModelRegistry", "Settings", "SettingsManager"]
