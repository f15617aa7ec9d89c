"""Where clawpi keeps its state: `$CLAWPI_STATE_DIR` (default ~/.clawpi) and per-agent dirs."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_AGENT_ID = "main"
PROJECT_DIR_NAMES = (".clawpi", ".pi")
"""Per-project config directories, clawpi's own first; pi's is read for interop."""


def state_dir() -> Path:
    override = os.environ.get("CLAWPI_STATE_DIR")
    if override:
        return Path(override).expanduser()
    return Path.home() / ".clawpi"


def agent_dir(agent_id: str = DEFAULT_AGENT_ID) -> Path:
    """`$CLAWPI_AGENT_DIR`, else `<state>/agents/<agent_id>/agent`."""
    override = os.environ.get("CLAWPI_AGENT_DIR")
    if override:
        return Path(override).expanduser()
    return state_dir() / "agents" / agent_id / "agent"


def sessions_dir(agent_id: str = DEFAULT_AGENT_ID) -> Path:
    return state_dir() / "agents" / agent_id / "sessions"


def project_config_dir(cwd: Path) -> Path | None:
    """The first existing project config dir in `cwd` (`.clawpi`, then pi's `.pi`)."""
    for name in PROJECT_DIR_NAMES:
        candidate = cwd / name
        if candidate.is_dir():
            return candidate
    return None
