"""What a session's history must be for a provider to accept it on the next turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clawpi.ai.models import Model
from clawpi.ai.transform import transform_messages
from clawpi.errors import ClawpiError
from clawpi.runner import run_embedded_agent
from clawpi.runner.lanes import CommandQueue

TARGET_APIS = (
    ("openai-completions", "openai"),
    ("openai-responses", "openai"),
    ("anthropic-messages", "anthropic"),
    ("google-generative-ai", "google"),
)


def assert_valid_replay(messages: list[Any], api: str = "") -> None:
    """Only model roles; every tool call answered by exactly one result before anything else."""
    pending: dict[str, str] = {}
    for message in messages:
        role = message.get("role")
        assert role in ("user", "assistant", "toolResult"), f"{api}: bad role {role!r}"
        if role == "toolResult":
            assert message["toolCallId"] in pending, f"{api}: result without a call: {message}"
            pending.pop(message["toolCallId"])
            continue
        assert not pending, f"{api}: tool calls without results: {sorted(pending)}"
        if role == "assistant":
            for block in message.get("content") or []:
                if block.get("type") == "toolCall":
                    pending[block["id"]] = block["name"]
    assert not pending, f"{api}: tool calls without results at the end: {sorted(pending)}"


def assert_replays_for_every_api(messages: list[Any]) -> None:
    """`messages` as each provider API would be sent them (after the cross-provider
    transform) is a valid history for it."""
    for api, provider in TARGET_APIS:
        target = Model(id="target", api=api, provider=provider)
        assert_valid_replay(transform_messages(messages, target), api)


def user_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if b.get("type") == "text")


async def numbered_turns(root: Path, count: int, **kwargs: Any) -> list[Any]:
    """Prompts "turn 0", "turn 1", ... to one session (`root`/s.jsonl, workspace `root`/ws,
    agent dir `root`/agent): each one's result, or the clawpi error it raised."""
    outcomes: list[Any] = []
    for index in range(count):
        try:
            outcomes.append(
                await run_embedded_agent(
                    session_id="s",
                    session_file=root / "s.jsonl",
                    workspace_dir=root / "ws",
                    prompt=f"turn {index}",
                    run_id=f"r{index}",
                    agent_dir=root / "agent",
                    run_queue=CommandQueue(),
                    **kwargs,
                )
            )
        except ClawpiError as exc:
            outcomes.append(exc)
    return outcomes
