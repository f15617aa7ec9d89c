"""A forced compaction of a session file between attempts (overflow and timeout recovery).

It runs inside the run's lanes (never queue it again from there: that would deadlock), opens the
session on its own, summarises with the run's model and the configured safeguard, and reports
whether a compaction entry was written.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from clawpi.ai.abort import AbortSignal
from clawpi.ai.models import Model
from clawpi.runner.config import compaction_settings, get_path
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

COMPACTION_TIMEOUT_MS = 900_000
_MAX_TIMER_MS = 2_147_000_000


def resolve_compaction_timeout_ms(config: Mapping[str, Any]) -> int:
    """`agents.defaults.compaction.timeoutSeconds` (positive) or 900 s: the bound on one
    compaction, and the one-time grace a run deadline gets while compaction is running."""
    value = get_path(config, "agents.defaults.compaction.timeoutSeconds")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return min(int(value * 1000), _MAX_TIMER_MS)
    return COMPACTION_TIMEOUT_MS


async def compact_session_file(
    *,
    session_file: Path,
    workspace: Path,
    agent_dir: Path,
    config: Mapping[str, Any],
    model: Model,
    api_key: str | None,
    custom_instructions: str | None = None,
    abort_signal: AbortSignal | None = None,
) -> bool:
    """True when a compaction was appended; False when there was nothing to do, it failed, it
    ran past the compaction timeout, or `abort_signal` fired (nothing is written then)."""
    if abort_signal is not None and abort_signal.aborted:
        return False
    if not session_file.exists():
        return False
    manager = SessionManager.open(session_file)
    extensions: list[Any] = []
    if is_safeguard_mode(config):
        runtime = resolve_compaction_safeguard_runtime(
            config, api_key=api_key, workspace_dir=str(workspace)
        )
        extensions.append(compaction_safeguard_extension(runtime))
    settings = SettingsManager.in_memory(
        {"compaction": compaction_settings(config), "retry": {"enabled": False}}
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
    timeout_s = resolve_compaction_timeout_ms(config) / 1000
    task = asyncio.ensure_future(session.compact(custom_instructions))

    def cancel() -> None:
        task.cancel()

    remove = abort_signal.add_listener(cancel) if abort_signal is not None else None
    try:
        result = await asyncio.wait_for(task, timeout_s)
    except CompactionError as exc:
        log.warning("compaction of %s failed: %s", session_file, exc)
        return False
    except TimeoutError:
        log.warning("compaction of %s timed out after %gs", session_file, timeout_s)
        return False
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if (
            abort_signal is not None
            and abort_signal.aborted
            and not (current is not None and current.cancelling())
        ):
            log.info("compaction of %s aborted", session_file)
            return False
        raise
    finally:
        if remove is not None:
            remove()
        await session.dispose()
    return result is not None
