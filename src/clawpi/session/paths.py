"""Where session files live.

clawpi's own layout is `<state>/agents/<agentId>/sessions/` with state = `$CLAWPI_STATE_DIR` or
`~/.clawpi`. Pointed at a pi agent directory (`~/.pi/agent` or `$PI_CODING_AGENT_DIR`), sessions
go where pi puts them, `<agentDir>/sessions/--<encoded cwd>--/`, so pi lists and resumes them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Final

from clawpi.ai.bounded import remember

DEFAULT_AGENT_ID: Final = "main"
STATE_DIR_ENV: Final = "CLAWPI_STATE_DIR"

_SEPARATORS = re.compile(r"[/\\:]")
_CACHE_SIZE: Final = 256
_real_directories: dict[str, str] = {}


def as_path(value: str | os.PathLike[str]) -> Path:
    """`Path(value)` without building a new one from a `Path` (a per-message cost)."""
    return value if isinstance(value, Path) else Path(value)


def real_directory(directory: str | os.PathLike[str]) -> str:
    """The directory's real path, resolved once per existing directory: resolving stats every
    component of the path, and a directory in use does not turn into a symlink meanwhile."""
    absolute = os.path.abspath(directory)
    real = _real_directories.get(absolute)
    if real is None:
        real = os.path.realpath(absolute)
        if os.path.isdir(real):
            remember(_real_directories, absolute, real, _CACHE_SIZE)
    return real


_paths: dict[str, Path] = {}


def _interned(text: str) -> Path:
    """`Path(text)`, the same object each time (paths are immutable): a path built per message
    is then parsed and printed once, not on every message."""
    path = _paths.get(text)
    if path is None:
        path = remember(_paths, text, Path(text), _CACHE_SIZE)
    return path


def real_directory_path(directory: str | os.PathLike[str]) -> Path:
    """`real_directory` as a `Path`, the same object each time."""
    return _interned(real_directory(directory))


def joined_path(directory: str | os.PathLike[str], name: str) -> Path:
    """`Path(directory) / name`, the same object each time (e.g. a store file in the agent dir)."""
    return _interned(os.path.join(directory, name))


def parent_path(path: str | os.PathLike[str]) -> Path:
    """`Path(path).parent`, the same object each time."""
    return _interned(os.path.dirname(os.fspath(path)) or ".")


def state_dir() -> Path:
    value = os.environ.get(STATE_DIR_ENV)
    return Path(value).expanduser() if value else Path.home() / ".clawpi"


def agent_sessions_dir(agent_id: str = DEFAULT_AGENT_ID) -> Path:
    """`<state>/agents/<agentId>/sessions/` (not created here)."""
    if not agent_id or "/" in agent_id or "\\" in agent_id or agent_id in {".", ".."}:
        raise ValueError(f"invalid agent id {agent_id!r}: use a plain name such as 'main'")
    return state_dir() / "agents" / agent_id / "sessions"


def encode_cwd(cwd: str) -> str:
    """pi's directory name for a working directory: `/tmp/x` -> `--tmp-x--`."""
    trimmed = cwd[1:] if cwd[:1] in ("/", "\\") else cwd
    return f"--{_SEPARATORS.sub('-', trimmed)}--"


def pi_agent_dir() -> Path:
    """pi's agent directory: `$PI_CODING_AGENT_DIR` (with `~` expanded) or `~/.pi/agent`."""
    value = os.environ.get("PI_CODING_AGENT_DIR")
    return Path(value).expanduser() if value else Path.home() / ".pi" / "agent"


def pi_sessions_dir(cwd: str, agent_dir: str | os.PathLike[str] | None = None) -> Path:
    """`<agentDir>/sessions/<encoded cwd>/`, the directory pi itself uses for `cwd`."""
    base = Path(agent_dir) if agent_dir is not None else pi_agent_dir()
    return base / "sessions" / encode_cwd(cwd)


def default_session_dir(
    cwd: str,
    *,
    agent_id: str = DEFAULT_AGENT_ID,
    pi_agent: str | os.PathLike[str] | None = None,
) -> Path:
    """pi's encoded-cwd layout when given a pi agent dir, else clawpi's per-agent layout."""
    if pi_agent is not None:
        return pi_sessions_dir(cwd, pi_agent)
    return agent_sessions_dir(agent_id)


def session_file_name(timestamp_iso: str, session_id: str) -> str:
    """`<ISO time with : and . as ->_<id>.jsonl`, pi's file naming."""
    return f"{timestamp_iso.replace(':', '-').replace('.', '-')}_{session_id}.jsonl"
