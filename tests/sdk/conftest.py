from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from clawpi.ai.models import Model
from clawpi.sdk import AgentSession, SettingsManager, create_agent_session
from clawpi.session import SessionManager

SessionFactory = Callable[..., Awaitable[AgentSession]]


@pytest.fixture
def make_session(tmp_path: Path, workspace: Path) -> SessionFactory:
    """Build an AgentSession on a scripted model with real files in temp dirs."""

    async def factory(
        model: Model,
        *,
        settings: dict[str, Any] | None = None,
        extensions: Sequence[Any] = (),
        session_manager: SessionManager | None = None,
        tools: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> AgentSession:
        manager = session_manager or SessionManager.create(workspace, tmp_path / "sessions")
        return await create_agent_session(
            cwd=workspace,
            agent_dir=tmp_path / "agent",
            model=model,
            session_manager=manager,
            settings_manager=SettingsManager.in_memory(settings or {}),
            extensions=extensions,
            tools=tools,
            **kwargs,
        )

    return factory


def record(session: AgentSession) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    session.subscribe(events.append)
    return events
