"""Resolving secret-bearing config values: `!command`, an environment variable's name, or a literal.

auth.json and models.json share this rule (as pi does), so a key never has to be written to disk
in clear: `"!pass show openai"` or `"OPENAI_WORK_KEY"` work as well as the key itself.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping

from clawpi.errors import ConfigError

_COMMAND_TIMEOUT_S = 30
_command_cache: dict[str, str] = {}


def resolve_config_value(value: str, environ: Mapping[str, str] | None = None) -> str:
    """`!cmd` runs the shell command (stdout trimmed, cached per process); a name of a set
    environment variable gives its value; anything else is the literal."""
    if value.startswith("!"):
        return _run_command(value[1:])
    env = os.environ if environ is None else environ
    from_env = env.get(value)
    if from_env:
        return from_env
    return value


def resolve_headers(
    headers: Mapping[str, str] | None, environ: Mapping[str, str] | None = None
) -> dict[str, str] | None:
    if not headers:
        return None
    return {name: resolve_config_value(value, environ) for name, value in headers.items()}


def _run_command(command: str) -> str:
    cached = _command_cache.get(command)
    if cached is not None:
        return cached
    try:
        completed = subprocess.run(
            command,
            shell=True,
            capture_output=True,
            text=True,
            timeout=_COMMAND_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ConfigError(
            f"Command for a config value timed out after {_COMMAND_TIMEOUT_S}s: {command!r}"
        ) from exc
    if completed.returncode != 0:
        detail = completed.stderr.strip() or f"exit code {completed.returncode}"
        raise ConfigError(f"Command for a config value failed ({detail}): {command!r}")
    value = completed.stdout.strip()
    _command_cache[command] = value
    return value
