"""`clawpi run`'s text and json modes: run the prompts, stream the answer or the events."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from clawpi.cli.output import error, write_json, write_text
from clawpi.sdk import AgentSession


def _failure(session: AgentSession) -> str | None:
    last = next((m for m in reversed(session.messages) if m.get("role") == "assistant"), None)
    if last is not None and last.get("stopReason") in ("error", "aborted"):
        return str(last.get("errorMessage") or last.get("stopReason"))
    return None


async def run_text_mode(session: AgentSession, prompts: list[str]) -> int:
    """Stream each answer's text to stdout; errors go to stderr with exit code 1."""
    state = {"wrote": False}

    def on_event(event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind == "message_update":
            inner = event.get("assistantMessageEvent") or {}
            if inner.get("type") == "text_delta":
                write_text(inner["delta"])
                state["wrote"] = True
        elif kind == "message_end" and event["message"].get("role") == "assistant":
            if state["wrote"]:
                write_text("\n")
                state["wrote"] = False
        elif kind == "auto_retry_start":
            error(
                f"[retrying in {event['delayMs'] / 1000:.1f}s "
                f"(attempt {event['attempt']}/{event['maxAttempts']}): {event['errorMessage']}]"
            )
        elif kind == "auto_compaction_start":
            error(f"[compacting context ({event['reason']})]")
        elif kind == "extension_error":
            error(
                f"[extension {event['extensionPath']} failed in {event['event']}: {event['error']}]"
            )

    return await _run_prompts(session, prompts, on_event)


async def run_json_mode(session: AgentSession, prompts: list[str]) -> int:
    """The session header, then every event as one JSON line (serialised when it happens)."""
    write_json(session.session_manager.get_header())
    return await _run_prompts(session, prompts, write_json)


async def _run_prompts(
    session: AgentSession, prompts: list[str], listener: Callable[[dict[str, Any]], None]
) -> int:
    unsubscribe = session.subscribe(listener)
    try:
        for prompt in prompts:
            await session.prompt(prompt, source="cli")
            problem = _failure(session)
            if problem is not None:
                error(f"Error: {problem}")
                return 1
    finally:
        unsubscribe()
    return 0
