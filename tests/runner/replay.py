"""What a session's history must be for a provider to accept it on the next turn."""

from __future__ import annotations

from typing import Any

from clawpi.ai.models import Model
from clawpi.ai.transform import transform_messages

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
