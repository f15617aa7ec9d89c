"""Exec security modes: `deny` runs nothing, `allowlist` runs only listed binaries and safe
stdin filters, `full` runs anything (inside the sandbox when it is on)."""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import re
import shlex
from collections.abc import Mapping
from typing import Literal

from clawpi.tools.errors import ExecDeniedError, ToolInputError

ExecSecurity = Literal["deny", "allowlist", "full"]

DEFAULT_SAFE_BINS = frozenset({"cut", "uniq", "head", "tail", "tr", "wc"})

# Variables that change what a binary loads or runs before the command does.
DANGEROUS_ENV_KEYS = frozenset(
    {
        "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "NODE_OPTIONS", "PYTHONSTARTUP",
        "PYTHONPATH", "PERL5OPT", "RUBYOPT", "BASH_ENV", "ENV", "PROMPT_COMMAND", "IFS",
        "SHELLOPTS", "BASHOPTS", "GCONV_PATH",
    }
)  # fmt: skip

_SEPARATORS = re.compile(r"\|\||&&|[|;&\n]")
_SUBSTITUTION = ("$(", "`", "<(", ">(")
_REDIRECT = re.compile(r"(^|\s)\d*[<>]")


@dataclasses.dataclass(frozen=True, slots=True)
class ExecPolicy:
    """`allowlist` entries are binary names (`git`) or path globs (`/usr/bin/*`)."""

    security: ExecSecurity = "full"
    allowlist: tuple[str, ...] = ()
    safe_bins: frozenset[str] = DEFAULT_SAFE_BINS


def check_env(env: Mapping[str, str] | None) -> dict[str, str]:
    if not env:
        return {}
    result: dict[str, str] = {}
    for key, value in env.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ToolInputError("exec: env must map variable names to string values.")
        if key.upper() in DANGEROUS_ENV_KEYS or key.upper().startswith("DYLD_"):
            raise ExecDeniedError(
                f"exec: setting {key} is not allowed; it changes how programs load code."
            )
        result[key] = value
    return result


def _segments(command: str) -> list[tuple[list[str], str]]:
    if any(marker in command for marker in _SUBSTITUTION):
        raise ExecDeniedError(
            "exec: command substitution ($(...), backticks, <(...)) is not allowed in allowlist "
            "mode; run the inner command separately."
        )
    segments = []
    for part in _SEPARATORS.split(command):
        part = part.strip()
        if not part:
            continue
        try:
            words = shlex.split(part)
        except ValueError as exc:
            raise ExecDeniedError(f"exec: cannot parse command segment {part!r}: {exc}") from None
        while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
            words.pop(0)  # leading VAR=value assignments
        if words:
            segments.append((words, part))
    return segments


def _allowed_by_list(binary: str, allowlist: tuple[str, ...]) -> bool:
    name = os.path.basename(binary)
    for entry in allowlist:
        if "/" in entry:
            if fnmatch.fnmatchcase(binary, entry):
                return True
        elif fnmatch.fnmatchcase(name, entry):
            return True
    return False


def _is_safe_bin_use(words: list[str], part: str, safe_bins: frozenset[str]) -> bool:
    """A safe bin only filters stdin: options allowed, file arguments and redirections not."""
    if os.path.basename(words[0]) not in safe_bins or _REDIRECT.search(part):
        return False
    return all(word.startswith("-") or word.lstrip("-").isdigit() for word in words[1:])


def check_command(command: str, policy: ExecPolicy) -> None:
    """Raise `ExecDeniedError` unless `policy` lets `command` run."""
    if policy.security == "full":
        return
    if policy.security == "deny":
        raise ExecDeniedError(
            "exec is disabled (security mode 'deny'); ask the operator to allow commands."
        )
    for words, part in _segments(command):
        if _allowed_by_list(words[0], policy.allowlist) and not _REDIRECT.search(part):
            continue
        if _is_safe_bin_use(words, part, policy.safe_bins):
            continue
        raise ExecDeniedError(
            f"exec: `{words[0]}` is not in the exec allowlist (security mode 'allowlist'). "
            f"Allowed: {', '.join(sorted(policy.allowlist)) or '(none)'}; safe stdin filters: "
            f"{', '.join(sorted(policy.safe_bins))} (without file arguments)."
        )
