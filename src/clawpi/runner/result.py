"""What `run_embedded_agent` returns: payloads for the channel and metadata about the run."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from clawpi.reply.payloads import ReplyPayload
from clawpi.reply.subscribe import UsageTotals
from clawpi.runner.client_tools import PendingToolCall
from clawpi.tools.loop_guard import RUN_ENDED_NOTICE

RunErrorKind = Literal[
    "context_overflow",
    "compaction_failure",
    "role_ordering",
    "image_size",
    "retry_limit",
    "timeout",
    "incomplete_turn",
    "tool_loop",
]

RETRY_LIMIT_TEXT = (
    "Request failed after repeated internal retries. Please try again, or use /new to start a "
    "fresh session."
)
TIMEOUT_NO_RESPONSE_TEXT = (
    "Request timed out before a response was generated. Please try again, or increase "
    "`agents.defaults.timeoutSeconds` in your config."
)
INCOMPLETE_TURN_TEXT = "⚠️ Agent couldn't generate a response. Please try again."
INCOMPLETE_TURN_MUTATED_TEXT = (
    "⚠️ Agent couldn't generate a response. Note: some tool actions may have already been "
    "executed — please verify before retrying."
)
TOOL_LOOP_ENDED_TEXT = f"⚠️ {RUN_ENDED_NOTICE}"
IMAGE_TOO_LARGE_TEXT = (
    "Image too large for the model (max {mb} MB). Please compress or resize the image and try "
    "again."
)


@dataclasses.dataclass(slots=True)
class RunError:
    kind: RunErrorKind
    message: str


@dataclasses.dataclass(slots=True)
class AgentMeta:
    session_id: str
    provider: str
    model: str
    usage: dict[str, int] | None = None
    last_call_usage: dict[str, Any] | None = None
    prompt_tokens: int | None = None
    compaction_count: int = 0
    auth_profile_id: str | None = None
    fallback_attempts: list[dict[str, Any]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(slots=True)
class RunMeta:
    duration_ms: int
    agent_meta: AgentMeta | None = None
    aborted: bool = False
    error: RunError | None = None
    stop_reason: str | None = None
    pending_tool_calls: list[PendingToolCall] = dataclasses.field(default_factory=list)
    system_prompt_report: dict[str, Any] | None = None


@dataclasses.dataclass(slots=True)
class EmbeddedRunResult:
    payloads: list[ReplyPayload]
    meta: RunMeta
    did_send_via_messaging_tool: bool = False
    messaging_tool_sent_texts: list[str] = dataclasses.field(default_factory=list)
    messaging_tool_sent_media_urls: list[str] = dataclasses.field(default_factory=list)
    messaging_tool_sent_targets: list[dict[str, Any]] = dataclasses.field(default_factory=list)


def usage_dict(usage: UsageTotals | None) -> dict[str, int] | None:
    if usage is None:
        return None
    return {
        "input": usage.input,
        "output": usage.output,
        "cacheRead": usage.cache_read,
        "cacheWrite": usage.cache_write,
        "total": usage.total,
    }


def add_usage(total: dict[str, int] | None, usage: UsageTotals | None) -> dict[str, int] | None:
    addition = usage_dict(usage)
    if addition is None:
        return total
    if total is None:
        return addition
    return {key: total.get(key, 0) + value for key, value in addition.items()}
