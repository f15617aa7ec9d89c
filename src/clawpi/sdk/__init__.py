"""The high-level SDK: `create_agent_session` and the settings, credentials, models, resources,
compaction and extensions an `AgentSession` is built from."""

from clawpi.sdk.agent_session import AgentSession, AgentSessionError
from clawpi.sdk.auth import AuthStorage
from clawpi.sdk.extensions import ExtensionAPI, ExtensionContext, ExtensionRunner
from clawpi.sdk.factory import create_agent_session, find_initial_model
from clawpi.sdk.registry import ModelChoice, ModelRegistry
from clawpi.sdk.resources import ResourceLoader
from clawpi.sdk.settings import Settings, SettingsManager

__all__ = [
    "AgentSession",
    "AgentSessionError",
    "AuthStorage",
    "ExtensionAPI",
    "ExtensionContext",
    "ExtensionRunner",
    "ModelChoice",
    "ModelRegistry",
    "ResourceLoader",
    "Settings",
    "SettingsManager",
    "create_agent_session",
    "find_initial_model",
]
