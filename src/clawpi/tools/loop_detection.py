"""Tool-call loop detection (OpenClaw's `tools.loopDetection`).

A model can get stuck calling the same tool with the same arguments and getting the same
answer, or bouncing between two calls, or retrying a tool that does not exist. Each run
keeps its recent calls and their outcomes (hashed, in memory); a call that repeats a pattern
past the warning threshold is logged, and one past the critical threshold is refused with a
message the model reads. Outcomes matter: a poll whose output changes is progress, so only
identical outcomes count towards blocking.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypeAlias

import orjson

from clawpi.agent.tool import ToolResult
from clawpi.agent.tool_execution import describe_exception
from clawpi.ai.text import content_text

HISTORY_SIZE = 30
WARNING_THRESHOLD = 10
CRITICAL_THRESHOLD = 20
UNKNOWN_TOOL_THRESHOLD = 10
GLOBAL_CIRCUIT_BREAKER_THRESHOLD = 30
WARNING_BUCKET_SIZE = 10
"""A warning for one pattern is logged again only when its count reaches the next multiple."""
MAX_WARNING_KEYS = 256

LoopLevel: TypeAlias = Literal["warning", "critical"]
LoopDetector: TypeAlias = Literal[
    "generic_repeat",
    "unknown_tool_repeat",
    "known_poll_no_progress",
    "global_circuit_breaker",
    "ping_pong",
]

_UNKNOWN_TOOL_PATTERNS = (
    re.compile(r"unknown tool[:\s]+[\"']?([a-z0-9_.-]+)[\"']?", re.IGNORECASE),
    re.compile(
        r"tool\s+[\"']?([a-z0-9_.-]+)[\"']?\s+(?:not found|is not available)", re.IGNORECASE
    ),
)


def _positive_int(value: Any, default: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return default
    return value


def _flag(value: Any, default: bool) -> bool:
    return value if isinstance(value, bool) else default


@dataclasses.dataclass(frozen=True, slots=True)
class LoopDetectionConfig:
    """`tools.loopDetection`; off unless `enabled` is true, as in OpenClaw."""

    enabled: bool = False
    history_size: int = HISTORY_SIZE
    warning_threshold: int = WARNING_THRESHOLD
    critical_threshold: int = CRITICAL_THRESHOLD
    unknown_tool_threshold: int = UNKNOWN_TOOL_THRESHOLD
    global_circuit_breaker_threshold: int = GLOBAL_CIRCUIT_BREAKER_THRESHOLD
    generic_repeat: bool = True
    known_poll_no_progress: bool = True
    ping_pong: bool = True

    @classmethod
    def from_config(cls, section: Any) -> LoopDetectionConfig:
        """Read the JSON shape (`warningThreshold`, `detectors.pingPong`, ...). A value that is
        not a positive integer keeps its default, and the thresholds are forced into the order
        warning < critical < circuit breaker, so a bad edit cannot block before it warns."""
        if not isinstance(section, Mapping):
            return DISABLED
        detectors = section.get("detectors")
        if not isinstance(detectors, Mapping):
            detectors = {}
        warning = _positive_int(section.get("warningThreshold"), WARNING_THRESHOLD)
        critical = max(
            _positive_int(section.get("criticalThreshold"), CRITICAL_THRESHOLD), warning + 1
        )
        breaker = max(
            _positive_int(
                section.get("globalCircuitBreakerThreshold"), GLOBAL_CIRCUIT_BREAKER_THRESHOLD
            ),
            critical + 1,
        )
        return cls(
            enabled=section.get("enabled") is True,
            history_size=_positive_int(section.get("historySize"), HISTORY_SIZE),
            warning_threshold=warning,
            critical_threshold=critical,
            unknown_tool_threshold=_positive_int(
                section.get("unknownToolThreshold"), UNKNOWN_TOOL_THRESHOLD
            ),
            global_circuit_breaker_threshold=breaker,
            generic_repeat=_flag(detectors.get("genericRepeat"), True),
            known_poll_no_progress=_flag(detectors.get("knownPollNoProgress"), True),
            ping_pong=_flag(detectors.get("pingPong"), True),
        )


DISABLED = LoopDetectionConfig()


@dataclasses.dataclass(frozen=True, slots=True)
class LoopVerdict:
    """A call that repeats a pattern: `message` is what the log says, or, when `level` is
    critical, what the model reads instead of the tool's result."""

    level: LoopLevel
    detector: LoopDetector
    count: int
    message: str
    warning_key: str
    paired_tool: str | None = None


@dataclasses.dataclass(slots=True)
class CallRecord:
    tool_name: str
    args_hash: str
    call_id: str | None
    result_hash: str | None = None
    unknown_tool: str | None = None


def _leading_run(values: Iterable[str | None]) -> tuple[int, str | None]:
    """How many values at the start equal the first, and that value."""
    iterator = iter(values)
    first = next(iterator, None)
    if first is None:
        return 0, None
    return 1 + sum(1 for _ in itertools.takewhile(lambda v: v == first, iterator)), first


def stable_digest(value: Any) -> str:
    """The same digest for equal JSON values whatever their key order."""
    try:
        data = orjson.dumps(
            value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=repr
        )
    except (TypeError, orjson.JSONEncodeError):  # e.g. an integer past 64 bits
        try:
            text = json.dumps(value, sort_keys=True, default=repr)
        except (TypeError, ValueError):  # keys that do not sort together, a cycle
            text = repr(value)
        data = text.encode("utf-8", "replace")
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def hash_tool_call(tool_name: str, params: Any) -> str:
    return f"{tool_name}:{stable_digest(params)}"


def is_known_poll_call(tool_name: str, params: Any) -> bool:
    """Calls whose point is to be repeated until something changes."""
    if tool_name == "command_status":
        return True
    return (
        tool_name == "process"
        and isinstance(params, Mapping)
        and params.get("action") in ("poll", "log")
    )


def unknown_tool_name(error_text: str) -> str | None:
    for pattern in _UNKNOWN_TOOL_PATTERNS:
        match = pattern.search(error_text)
        if match:
            return match.group(1).strip().lower() or None
    return None


def _exec_outcome(details: Mapping[str, Any], text: str) -> str | None:
    """exec's details carry run times and process ids; only what the model learns counts."""
    status = details.get("status")
    if status == "running":
        tail = details.get("tail")
        return stable_digest({"status": status, "tail": tail if isinstance(tail, str) else ""})
    if status in ("completed", "failed"):
        exit_code = details.get("exitCode")
        aggregated = details.get("aggregated")
        return stable_digest(
            {
                "status": status,
                "exitCode": exit_code if isinstance(exit_code, int) else None,
                "timedOut": details.get("timedOut") is True,
                "output": aggregated if isinstance(aggregated, str) and aggregated else text,
            }
        )
    return None


_POLL_FIELDS = {
    "poll": ("status", "exitCode", "exitSignal", "aggregated"),
    "log": ("status", "totalLines", "totalChars", "truncated", "exitCode", "exitSignal"),
}


def hash_outcome(
    tool_name: str, params: Any, result: ToolResult | None, error: BaseException | str | None
) -> tuple[str | None, str | None]:
    """(result hash, unknown tool name) of a finished call."""
    if error is not None:
        # the text the model read for it, as the agent words a tool's exception
        text = error if isinstance(error, str) else describe_exception(error)
        return f"error:{stable_digest(text)}", unknown_tool_name(text)
    if result is None:
        return None, None
    details = result.details if isinstance(result.details, Mapping) else {}
    text = content_text(result.content).strip()
    if tool_name == "exec":
        outcome = _exec_outcome(details, text)
        if outcome is not None:
            return outcome, None
    if tool_name == "process" and isinstance(params, Mapping):
        action = params.get("action")
        fields = _POLL_FIELDS.get(action) if isinstance(action, str) else None
        if fields is not None:
            picked = {name: details.get(name) for name in fields}
            return stable_digest({"action": action, **picked, "text": text}), None
    return stable_digest({"details": details, "text": text}), None


class ToolCallHistory:
    """One run's recent tool calls and outcomes, in memory. A run, not a session: a model
    asked each turn to check on the same thing is not looping."""

    __slots__ = ("_warned", "records")

    def __init__(self) -> None:
        self.records: list[CallRecord] = []
        self._warned: dict[str, int] = {}

    def _trim(self, size: int) -> None:
        if len(self.records) > size:
            del self.records[: len(self.records) - size]

    def record_call(
        self, tool_name: str, params: Any, call_id: str | None, config: LoopDetectionConfig
    ) -> None:
        self.records.append(CallRecord(tool_name, hash_tool_call(tool_name, params), call_id))
        self._trim(config.history_size)

    def record_outcome(
        self,
        tool_name: str,
        params: Any,
        call_id: str | None,
        config: LoopDetectionConfig,
        *,
        result: ToolResult | None = None,
        error: BaseException | str | None = None,
    ) -> None:
        """Attach the outcome to the call's record (or add one when it fell out of the window)."""
        result_hash, unknown = hash_outcome(tool_name, params, result, error)
        if result_hash is None:
            return
        args_hash = hash_tool_call(tool_name, params)
        for record in reversed(self.records):
            if (
                record.result_hash is None
                and record.tool_name == tool_name
                and record.args_hash == args_hash
                and (call_id is None or record.call_id == call_id)
            ):
                record.result_hash = result_hash
                record.unknown_tool = unknown
                return
        self.records.append(CallRecord(tool_name, args_hash, call_id, result_hash, unknown))
        self._trim(config.history_size)

    def should_log(self, verdict: LoopVerdict) -> bool:
        """Once per `WARNING_BUCKET_SIZE` repeats of one pattern, so a loop does not flood."""
        bucket = verdict.count // WARNING_BUCKET_SIZE
        if bucket <= self._warned.get(verdict.warning_key, 0):
            return False
        self._warned[verdict.warning_key] = bucket
        if len(self._warned) > MAX_WARNING_KEYS:
            del self._warned[next(iter(self._warned))]
        return True

    # -- detection -----------------------------------------------------------------------------

    def detect(
        self, tool_name: str, params: Any, config: LoopDetectionConfig
    ) -> LoopVerdict | None:
        """The first pattern this call would continue, most severe first; None when it is fine."""
        if not config.enabled:
            return None
        records = self.records
        current = hash_tool_call(tool_name, params)
        unknown_count, unknown = self._unknown_streak(tool_name)
        if unknown_count >= config.unknown_tool_threshold:
            name = unknown or tool_name
            return LoopVerdict(
                "critical",
                "unknown_tool_repeat",
                unknown_count,
                f"CRITICAL: attempted unavailable tool {name} {unknown_count} times. Stop "
                "retrying that missing tool and answer without it.",
                f"unknown-tool:{tool_name}:{unknown or 'unknown'}",
            )
        streak, latest = self._no_progress_streak(tool_name, current)
        outcome_key = f"{tool_name}:{current}:{latest or 'none'}"
        if streak >= config.global_circuit_breaker_threshold:
            return LoopVerdict(
                "critical",
                "global_circuit_breaker",
                streak,
                f"CRITICAL: {tool_name} has repeated identical no-progress outcomes {streak} "
                "times. Session execution blocked by global circuit breaker to prevent runaway "
                "loops.",
                f"global:{outcome_key}",
            )
        poll = is_known_poll_call(tool_name, params)
        if poll and config.known_poll_no_progress:
            if streak >= config.critical_threshold:
                return LoopVerdict(
                    "critical",
                    "known_poll_no_progress",
                    streak,
                    f"CRITICAL: Called {tool_name} with identical arguments and no progress "
                    f"{streak} times. This appears to be a stuck polling loop. Session execution "
                    "blocked to prevent resource waste.",
                    f"poll:{outcome_key}",
                )
            if streak >= config.warning_threshold:
                return LoopVerdict(
                    "warning",
                    "known_poll_no_progress",
                    streak,
                    f"WARNING: You have called {tool_name} {streak} times with identical "
                    "arguments and no progress. Stop polling and either (1) increase wait time "
                    "between checks, or (2) report the task as failed if the process is stuck.",
                    f"poll:{outcome_key}",
                )
        if config.ping_pong:
            verdict = self._ping_pong(tool_name, current, config)
            if verdict is not None:
                return verdict
        if poll or not config.generic_repeat:
            return None
        if streak >= config.critical_threshold:
            return LoopVerdict(
                "critical",
                "generic_repeat",
                streak,
                f"CRITICAL: Called {tool_name} with identical arguments and identical outcomes "
                f"{streak} times. Session execution blocked to prevent runaway loops.",
                f"generic:{outcome_key}",
            )
        repeats = sum(1 for r in records if r.tool_name == tool_name and r.args_hash == current)
        if repeats >= config.warning_threshold:
            return LoopVerdict(
                "warning",
                "generic_repeat",
                repeats,
                f"WARNING: You have called {tool_name} {repeats} times with identical arguments. "
                "If this is not making progress, stop retrying and report the task as failed.",
                f"generic:{tool_name}:{current}",
            )
        return None

    def _unknown_streak(self, tool_name: str) -> tuple[int, str | None]:
        """Trailing calls of this name that all failed for the same missing tool."""
        trailing = itertools.takewhile(
            lambda r: r.tool_name == tool_name and bool(r.unknown_tool), reversed(self.records)
        )
        return _leading_run(r.unknown_tool for r in trailing)

    def _no_progress_streak(self, tool_name: str, args_hash: str) -> tuple[int, str | None]:
        """How many of this exact call's latest finished runs gave the same outcome in a row."""
        return _leading_run(
            r.result_hash
            for r in reversed(self.records)
            if r.tool_name == tool_name and r.args_hash == args_hash and r.result_hash
        )

    def _ping_pong(
        self, tool_name: str, current: str, config: LoopDetectionConfig
    ) -> LoopVerdict | None:
        """Calls alternating A, B, A, B, ... where this call would be the next in turn."""
        records = self.records
        if not records:
            return None
        last = records[-1]
        other: CallRecord | None = None
        for record in reversed(records[:-1]):
            if record.args_hash != last.args_hash:
                other = record
                break
        if other is None or current != other.args_hash:
            return None
        tail = 0
        for record in reversed(records):
            expected = last.args_hash if tail % 2 == 0 else other.args_hash
            if record.args_hash != expected:
                break
            tail += 1
        if tail < 2:
            return None
        count = tail + 1
        outcomes: dict[str, str] = {}
        stalled = True
        for record in records[len(records) - tail :]:
            if not record.result_hash:
                stalled = False
                break
            seen = outcomes.setdefault(record.args_hash, record.result_hash)
            if seen != record.result_hash:
                stalled = False
                break
        stalled = stalled and len(outcomes) == 2
        pair = "|".join(sorted((current, last.args_hash)))
        if stalled and count >= config.critical_threshold:
            return LoopVerdict(
                "critical",
                "ping_pong",
                count,
                "CRITICAL: You are alternating between repeated tool-call patterns "
                f"({count} consecutive calls) with no progress. This appears to be a stuck "
                "ping-pong loop. Session execution blocked to prevent resource waste.",
                f"pingpong:{pair}",
                last.tool_name,
            )
        if count >= config.warning_threshold:
            return LoopVerdict(
                "warning",
                "ping_pong",
                count,
                "WARNING: You are alternating between repeated tool-call patterns "
                f"({count} consecutive calls). This looks like a ping-pong loop; stop retrying "
                "and report the task as failed.",
                f"pingpong:{pair}",
                last.tool_name,
            )
        return None
