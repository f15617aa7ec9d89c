"""`--mode rpc`: pi's JSONL command protocol over stdin/stdout.

Every command `{"type", "id"?, ...}` gets one response `{"id"?, "type": "response", "command",
"success", "data"?|"error"}`; session events stream as plain JSON lines in between. Lines are
split on "\\n" only (a trailing "\\r" is dropped).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from clawpi.ai.types import THINKING_LEVELS
from clawpi.cli.output import write_json
from clawpi.sdk import AgentSession
from clawpi.sdk.compaction import CompactionError

Handler = Callable[[dict[str, Any]], Awaitable[Any]]


class RpcServer:
    def __init__(self, session: AgentSession) -> None:
        self.session = session
        self._tasks: set[asyncio.Task[None]] = set()
        self._handlers: dict[str, Handler] = {
            "prompt": self._prompt,
            "steer": self._steer,
            "follow_up": self._follow_up,
            "abort": self._abort,
            "get_state": self._get_state,
            "get_messages": self._get_messages,
            "set_model": self._set_model,
            "get_available_models": self._get_available_models,
            "set_thinking_level": self._set_thinking_level,
            "cycle_thinking_level": self._cycle_thinking_level,
            "set_steering_mode": self._set_steering_mode,
            "set_follow_up_mode": self._set_follow_up_mode,
            "compact": self._compact,
            "set_auto_compaction": self._set_auto_compaction,
            "set_auto_retry": self._set_auto_retry,
            "abort_retry": self._abort_retry,
            "get_session_stats": self._get_session_stats,
            "get_last_assistant_text": self._get_last_assistant_text,
            "set_session_name": self._set_session_name,
            "get_commands": self._get_commands,
        }

    # -- protocol --------------------------------------------------------------------------

    async def serve(self) -> int:
        unsubscribe = self.session.subscribe(write_json)
        loop = asyncio.get_running_loop()
        stdin = sys.stdin.buffer
        try:
            while True:
                # a thread reads, so any stdin works (pipe, file, tty) and the loop stays free
                raw = await loop.run_in_executor(None, stdin.readline)
                if not raw:
                    break
                line = raw.rstrip(b"\n").removesuffix(b"\r")
                if line.strip():
                    await self.handle_line(line)
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)
        finally:
            unsubscribe()
        return 0

    async def handle_line(self, line: bytes) -> None:
        try:
            command = orjson.loads(line)
            if not isinstance(command, dict) or not isinstance(command.get("type"), str):
                raise ValueError("a command is a JSON object with a string 'type'")
        except (orjson.JSONDecodeError, ValueError) as exc:
            write_json(
                {
                    "type": "response",
                    "command": "parse",
                    "success": False,
                    "error": f"Failed to parse command: {exc}",
                }
            )
            return
        kind = command["type"]
        handler = self._handlers.get(kind)
        if handler is None:
            write_json(
                {
                    "type": "response",
                    "command": kind,
                    "success": False,
                    "error": f"Unknown command: {kind}",
                }
            )
            return
        try:
            data = await handler(command)
        except Exception as exc:
            self._respond(command, success=False, error=str(exc) or type(exc).__name__)
            return
        self._respond(command, success=True, data=data)

    def _respond(
        self, command: dict[str, Any], *, success: bool, data: Any = None, error: str | None = None
    ) -> None:
        response: dict[str, Any] = {}
        if "id" in command:
            response["id"] = command["id"]
        response.update({"type": "response", "command": command["type"], "success": success})
        if success and data is not None:
            response["data"] = data
        if not success:
            response["error"] = error
        write_json(response)

    # -- commands --------------------------------------------------------------------------

    async def _prompt(self, command: dict[str, Any]) -> None:
        """Answers at once; a later failure sends a second, failed `prompt` response."""
        message = command.get("message")
        if not isinstance(message, str):
            raise ValueError("prompt needs a string 'message'")
        behavior = command.get("streamingBehavior")
        if self.session.is_streaming and behavior is None:
            raise ValueError(
                "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp')."
            )

        async def run() -> None:
            try:
                await self.session.prompt(
                    message, images=command.get("images"), streaming_behavior=behavior, source="rpc"
                )
            except Exception as exc:
                self._respond(command, success=False, error=str(exc))

        task = asyncio.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _steer(self, command: dict[str, Any]) -> None:
        await self.session.steer(str(command.get("message", "")), command.get("images"))

    async def _follow_up(self, command: dict[str, Any]) -> None:
        await self.session.follow_up(str(command.get("message", "")), command.get("images"))

    async def _abort(self, command: dict[str, Any]) -> None:
        await self.session.abort()

    async def _get_state(self, command: dict[str, Any]) -> dict[str, Any]:
        session = self.session
        agent = session.agent
        return {
            "model": session.model.to_dict(),
            "thinkingLevel": session.thinking_level,
            "isStreaming": session.is_streaming,
            "isCompacting": session.is_compacting,
            "steeringMode": agent.steering_mode,
            "followUpMode": agent.follow_up_mode,
            "sessionFile": str(session.session_file) if session.session_file else None,
            "sessionId": session.session_id,
            "sessionName": session.session_manager.get_session_name(),
            "autoCompactionEnabled": session.auto_compaction_enabled,
            "messageCount": len(session.messages),
            "pendingMessageCount": len(agent.steering_queue) + len(agent.follow_up_queue),
        }

    async def _get_messages(self, command: dict[str, Any]) -> dict[str, Any]:
        return {"messages": self.session.messages}

    async def _set_model(self, command: dict[str, Any]) -> dict[str, Any]:
        provider, model_id = command.get("provider"), command.get("modelId")
        model = self.session.model_registry.find(str(provider), str(model_id))
        if model is None:
            raise ValueError(f"Model not found: {provider}/{model_id}")
        await self.session.set_model(model)
        return model.to_dict()

    async def _get_available_models(self, command: dict[str, Any]) -> dict[str, Any]:
        return {"models": [m.to_dict() for m in self.session.model_registry.get_available()]}

    async def _set_thinking_level(self, command: dict[str, Any]) -> None:
        level = command.get("level")
        if level not in THINKING_LEVELS:
            raise ValueError(f"Unknown thinking level: {level}")
        self.session.set_thinking_level(level)

    async def _cycle_thinking_level(self, command: dict[str, Any]) -> dict[str, Any] | None:
        levels = self.session.available_thinking_levels()
        if len(levels) <= 1:
            return None
        current = self.session.thinking_level
        following = (
            levels[(levels.index(current) + 1) % len(levels)] if current in levels else levels[0]
        )
        return {"level": self.session.set_thinking_level(following)}

    async def _set_steering_mode(self, command: dict[str, Any]) -> None:
        self.session.agent.steering_mode = command.get("mode")  # type: ignore[assignment]

    async def _set_follow_up_mode(self, command: dict[str, Any]) -> None:
        self.session.agent.follow_up_mode = command.get("mode")  # type: ignore[assignment]

    async def _compact(self, command: dict[str, Any]) -> dict[str, Any] | None:
        try:
            result = await self.session.compact(command.get("customInstructions"))
        except CompactionError as exc:
            raise ValueError(str(exc)) from exc
        if result is None:
            return None
        return {
            "summary": result.summary,
            "firstKeptEntryId": result.first_kept_entry_id,
            "tokensBefore": result.tokens_before,
            "details": result.details,
        }

    async def _set_auto_compaction(self, command: dict[str, Any]) -> None:
        self.session.set_auto_compaction_enabled(bool(command.get("enabled")))

    async def _set_auto_retry(self, command: dict[str, Any]) -> None:
        self.session.set_auto_retry_enabled(bool(command.get("enabled")))

    async def _abort_retry(self, command: dict[str, Any]) -> None:
        self.session.abort_retry()

    async def _get_session_stats(self, command: dict[str, Any]) -> dict[str, Any]:
        return self.session.get_session_stats()

    async def _get_last_assistant_text(self, command: dict[str, Any]) -> dict[str, Any]:
        return {"text": self.session.get_last_assistant_text()}

    async def _set_session_name(self, command: dict[str, Any]) -> None:
        name = command.get("name")
        if not isinstance(name, str):
            raise ValueError("set_session_name needs a string 'name'")
        self.session.session_manager.append_session_info(name)

    async def _get_commands(self, command: dict[str, Any]) -> dict[str, Any]:
        commands = [
            {"name": c.name, "description": c.description, "source": "extension"}
            for c in self.session.extensions.commands.values()
        ]
        commands += [
            {"name": t.name, "description": t.description, "source": "template"}
            for t in self.session.resource_loader.prompt_templates
        ]
        return {"commands": commands}
