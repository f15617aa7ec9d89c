"""Keys never reach a chat user.

Some providers, proxies and OpenAI-compatible servers echo the key they were sent in an error
message ("Malformed request sent with sk-..."). The runner shows provider errors to the user
(formatted, but with the provider's message) and raises them to the caller, so the keys a run
sent, and the other keys of that provider's auth profiles, are masked in what it returns and
raises.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final

from clawpi.ai.errors import FailoverError
from clawpi.runner.fallback import AllModelsFailedError
from clawpi.runner.result import EmbeddedRunResult

MIN_SECRET_CHARS: Final = 8
"""Shorter values are not masked: they would match ordinary words."""
MASK: Final = "***"
_SECRET_FIELDS: Final = ("key", "token", "access", "refresh")


class SecretRedactor:
    """The secrets one run used, and the masking of them in its result or its error."""

    __slots__ = ("_secrets",)

    def __init__(self) -> None:
        self._secrets: set[str] = set()

    def add(self, secret: str | None) -> None:
        if secret and len(secret) >= MIN_SECRET_CHARS:
            self._secrets.add(secret)

    def add_credential(self, credential: Mapping[str, Any] | None) -> None:
        """The literal secrets of an auth profile, unresolved: a `!command` or variable name
        is no secret, but resolving one here would run it."""
        if credential is not None:
            for field in _SECRET_FIELDS:
                value = credential.get(field)
                if isinstance(value, str):
                    self.add(value)

    def text(self, value: str) -> str:
        for secret in self._secrets:
            if secret in value:
                value = value.replace(secret, MASK)
        return value

    def result(self, result: EmbeddedRunResult) -> EmbeddedRunResult:
        if not self._secrets:
            return result
        for payload in result.payloads:
            if payload.text:
                payload.text = self.text(payload.text)
        meta = result.meta
        if meta.error is not None:
            meta.error.message = self.text(meta.error.message)
        if meta.agent_meta is not None:
            for attempt in meta.agent_meta.fallback_attempts:
                if isinstance(attempt.get("error"), str):
                    attempt["error"] = self.text(attempt["error"])
        return result

    def error(self, error: FailoverError) -> None:
        if not self._secrets:
            return
        error.message = self.text(error.message)
        error.args = (error.message, *error.args[1:])
        if error.raw_error is not None:
            error.raw_error = self.text(error.raw_error)
        if isinstance(error, AllModelsFailedError):
            error.attempts = [
                dataclasses.replace(attempt, error=self.text(attempt.error))
                for attempt in error.attempts
            ]
