"""The root of clawpi's exception hierarchy, so callers can catch everything clawpi raises."""

from __future__ import annotations


class ClawpiError(Exception):
    """Base class of every error clawpi raises on purpose."""


class ConfigError(ClawpiError):
    """A setting, config file or argument is wrong; the message says which and how to fix it."""


class AbortedError(ClawpiError):
    """An operation stopped because its abort signal fired."""

    def __init__(self, message: str = "Operation aborted") -> None:
        super().__init__(message)
