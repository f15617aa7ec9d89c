"""A forced compaction of a session file between attempts (overflow and timeout recovery).

It runs inside the run's lanes (never queue it again from there: that would deadlock), opens the
session on its own, summarises with the run's model and the configured safeguard, and reports
whether a compaction entry was written.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from clawpi.ai.models import Model
from clawpi.runner.extensions.compaction_safeguard import (
    compaction_safeguard_extension,
    is_safeguard_mode,
    resolve_compaction_safeguard_runtime,
)
from clawpi.sdk import AuthStorage, ModelRegistry, ResourceLoader, SettingsManager
from clawpi.sdk.compaction import CompactionError
from clawpi.sdk.factory import create_agent_session
from clawpi.session import SessionManager

log = logging.getLogger(__name__)


async def compact_session_file(
    *,
    session_file: Path,
    workspace: Path,
    agent_dir: Path,
    config: Mapping[str, Any],
    model: Model,
    api_key: str | None,
    custom_instructions: str | None = None,
) -> bool:
    """True when a compaction was appended; False when there was nothing to do or it failed."""
    if not session_file.exists():
        return False
    manager = SessionManager.open(session_file)
    extensions: list[Any] = []
    if is_safeguard_mode(config):
        runtime = resolve_compaction_safeguard_runtime(
            config, api_key=api_key, workspace_dir=str(workspace)
        )
        extensions.append(compaction_safeguard_extension(runtime))
    compaction = (config.get("agents") or {}).get("defaults", {}).get("compaction") or {}
    floor = compaction.get("reserveTokensFloor", 20_000)
    settings = SettingsManager.in_memory(
        {
            "compaction": {
                "reserveTokens": max(16_384, int(floor) if isinstance(floor, (int, float)) else 0),
                "keepRecentTokens": int(compaction.get("keepRecentTokens", 20_000)),
            },
            "retry": {"enabled": False},
        }
    )
    auth = AuthStorage.in_memory({model.provider: api_key} if api_key else {})
    session = await create_agent_session(
        cwd=workspace,
        agent_dir=agent_dir,
        auth_storage=auth,
        model_registry=ModelRegistry(auth),
        model=model,
        tools=[],
        session_manager=manager,
        settings_manager=settings,
        resource_loader=ResourceLoader(workspace, agent_dir, load_context_files=False),
        extensions=extensions,
        discover_extensions=False,
    )
    try:
        result = await session.compact(custom_instructions)
    except CompactionError as exc:
        log.warning("compaction of %s failed: %s", session_file, exc)
        return False
    finally:
        await session.dispose()
    return result is not None
