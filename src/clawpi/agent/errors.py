"""Errors the agent raises at its callers (failures inside a run become messages instead)."""

from __future__ import annotations

from clawpi.errors import ClawpiError


class AgentError(ClawpiError):
    """The agent was asked to do something its current state does not allow."""


class AgentBusyError(AgentError):
    """A run is already in progress; steer, queue a follow-up, or wait for it."""

    def __init__(self) -> None:
        super().__init__(
            "Agent is already processing a prompt. Use steer() or follow_up() to queue "
            "messages, or wait_for_idle() before prompting again."
        )
