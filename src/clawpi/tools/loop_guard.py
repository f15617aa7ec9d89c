"""Loop detection applied to a run: each tool checks the run's history before it runs and
records its outcome after, and a run whose calls keep being refused is ended.

Refusing a call does not bound a run by itself: a model that ignores the refusal and calls
again costs a full model turn each time, until the run's timeout. So after
`BLOCKED_STREAK_TO_END_RUN` refusals in a row the guard asks its owner to end the run.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from clawpi.agent.tool import AgentTool, ToolResult, ToolUpdateCallback
from clawpi.agent.tool_execution import ABORTED_MESSAGE, SKIPPED_MESSAGE
from clawpi.ai.abort import AbortSignal
from clawpi.ai.text import content_text
from clawpi.tools.errors import ToolError
from clawpi.tools.loop_detection import LoopDetectionConfig, LoopVerdict, ToolCallHistory

log = logging.getLogger(__name__)

BLOCKED_STREAK_TO_END_RUN = 3
"""The first refusal is the first time the model is told to stop; it gets two more turns to
answer without the call before the run is cut."""
RUN_ENDED_NOTICE = (
    "Ending this run: the model kept repeating a blocked tool call and made no progress."
)

_NOT_ATTEMPTED = frozenset({SKIPPED_MESSAGE, ABORTED_MESSAGE})
"""Calls the agent did not make because the user spoke or the run stopped: not the model's."""


class ToolLoopBlockedError(ToolError):
    """A call was refused because it continues a loop; the message tells the model to stop."""


class ToolLoopGuard:
    """One attempt's tools watched against the run's history. `on_end_run` is called once,
    when the run should stop; the refused call's result then carries `RUN_ENDED_NOTICE`."""

    def __init__(
        self,
        history: ToolCallHistory,
        config: LoopDetectionConfig,
        *,
        on_end_run: Callable[[], None] | None = None,
        label: str = "",
    ) -> None:
        self.history = history
        self.config = config
        self.on_end_run = on_end_run
        self.label = label
        self.blocked_streak = 0
        self.ended = False
        self._executed: set[str] = set()
        """Calls that reached a wrapped tool: their outcome is recorded there, not from events."""
        self._args: dict[str, Any] = {}

    def wrap_tools(self, tools: Iterable[AgentTool]) -> list[AgentTool]:
        return [self._wrap(tool) for tool in tools]

    def _wrap(self, tool: AgentTool) -> AgentTool:
        name = tool.name
        inner = tool.execute
        history = self.history
        config = self.config

        async def execute(
            tool_call_id: str,
            params: Any,
            signal: AbortSignal | None = None,
            on_update: ToolUpdateCallback | None = None,
        ) -> ToolResult:
            self._executed.add(tool_call_id)
            verdict = history.detect(name, params, config)
            if verdict is not None:
                if verdict.level == "critical":
                    raise ToolLoopBlockedError(self._refuse(name, verdict))
                self._warn(name, verdict)
            self.blocked_streak = 0
            history.record_call(name, params, tool_call_id, config)
            try:
                result = await inner(tool_call_id, params, signal, on_update)
            except Exception as exc:
                history.record_outcome(name, params, tool_call_id, config, error=exc)
                raise
            history.record_outcome(name, params, tool_call_id, config, result=result)
            return result

        return dataclasses.replace(tool, execute=execute)

    def observe(self, event: Mapping[str, Any]) -> None:
        """Agent events: a call the agent failed before it reached a tool (a tool the run does
        not have, arguments that do not validate, a hook's veto) is recorded from here, and
        repeating one past a threshold counts as a refusal. The model has already read the
        agent's error for it; what the guard can still do is end the run."""
        kind = event.get("type")
        if kind != "tool_execution_start" and kind != "tool_execution_end":
            return
        call_id = event.get("toolCallId")
        name = event.get("toolName")
        if not isinstance(call_id, str) or not isinstance(name, str):
            return
        if kind == "tool_execution_start":
            self._args[call_id] = event.get("args")
            return
        params = self._args.pop(call_id, None)
        if call_id in self._executed:
            self._executed.discard(call_id)
            return
        error = content_text(event.get("result"))
        if not event.get("isError") or error in _NOT_ATTEMPTED:
            return
        verdict = self.history.detect(name, params, self.config)
        if verdict is not None and verdict.level == "critical":
            self._refuse(name, verdict)
            return
        if verdict is not None:
            self._warn(name, verdict)
        self.blocked_streak = 0
        self.history.record_call(name, params, call_id, self.config)
        self.history.record_outcome(name, params, call_id, self.config, error=error)

    def _refuse(self, name: str, verdict: LoopVerdict) -> str:
        self.blocked_streak += 1
        log.error(
            "%sblocking %s (%s, %d): %s",
            self.label,
            name,
            verdict.detector,
            verdict.count,
            verdict.message,
        )
        if self.blocked_streak < BLOCKED_STREAK_TO_END_RUN:
            return verdict.message
        if not self.ended:
            self.ended = True
            log.error("%sending the run: %s", self.label, RUN_ENDED_NOTICE)
            if self.on_end_run is not None:
                self.on_end_run()
        return f"{verdict.message} {RUN_ENDED_NOTICE}"

    def _warn(self, name: str, verdict: LoopVerdict) -> None:
        if self.history.should_log(verdict):
            log.warning(
                "%sloop warning for %s (%s, %d): %s",
                self.label,
                name,
                verdict.detector,
                verdict.count,
                verdict.message,
            )
