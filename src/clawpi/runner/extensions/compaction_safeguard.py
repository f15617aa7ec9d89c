"""Compaction safeguard: a summariser for `session_before_compact` that degrades instead of
failing, and cancels instead of wiping history.

pi's own compaction sends the whole stretch to summarise in one request, which itself
overflows on exactly the sessions that need compaction most. Here the history is cut into
chunks sized from the context window (smaller chunks when messages are large), summarised
chunk by chunk, in parts that are merged, and with oversized messages left out (noted) when
the full attempt fails. If no summary can be produced, compaction is cancelled: the session
keeps its history and the runner's overflow handling takes over. The summary gains sections
no model call can lose: recent turns verbatim, tool failures, the files read and modified, and
the workspace's critical rules.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import random
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from clawpi.ai.abort import AbortSignal
from clawpi.ai.models import Model
from clawpi.ai.stream import resolve_api_key
from clawpi.runner.config import compaction_config
from clawpi.sdk.compaction import estimate_tokens, format_file_tags, generate_summary
from clawpi.sdk.compaction.prompts import NO_PRIOR_HISTORY, SPLIT_TURN_SEPARATOR, TURN_PREFIX_PROMPT
from clawpi.sdk.extensions import ExtensionAPI, ExtensionContext

log = logging.getLogger(__name__)

BASE_CHUNK_RATIO = 0.4
MIN_CHUNK_RATIO = 0.15
SAFETY_MARGIN = 1.2
"""The chars/4 estimate under-counts real tokens; budgets are divided by this."""
SUMMARIZATION_OVERHEAD_TOKENS = 4096
DEFAULT_PARTS = 2
MIN_MESSAGES_FOR_SPLIT = 4
OVERSIZED_SHARE = 0.5
SUMMARY_OUTPUT_SHARE = 0.8
"""Share of `reserve_tokens` one summary call may write (pi's rule)."""

MAX_TOOL_FAILURES = 8
MAX_TOOL_FAILURE_CHARS = 240
DEFAULT_RECENT_TURNS_PRESERVE = 3
MAX_RECENT_TURNS_PRESERVE = 12
MAX_RECENT_TURN_TEXT_CHARS = 600
DEFAULT_QUALITY_GUARD_MAX_RETRIES = 1
MAX_QUALITY_GUARD_MAX_RETRIES = 3
MAX_EXTRACTED_IDENTIFIERS = 12
MAX_COMPACTION_SUMMARY_CHARS = 16_000
MAX_FILE_OPS_SECTION_CHARS = 2_000
MAX_WORKSPACE_CONTEXT_CHARS = 2_000
SUMMARY_TRUNCATED_MARKER = "\n\n[Compaction summary truncated to fit budget]"
DEFAULT_MAX_HISTORY_SHARE = 0.5
RETRY_ATTEMPTS = 3
RETRY_BASE_DELAY_S = 0.5
RETRY_MAX_DELAY_S = 5.0
RETRY_JITTER = 0.2
CRITICAL_AGENTS_SECTIONS = ("Session Startup", "Red Lines")

REQUIRED_SUMMARY_SECTIONS = (
    "## Decisions",
    "## Open TODOs",
    "## Constraints/Rules",
    "## Pending user asks",
    "## Exact identifiers",
)
SAFEGUARD_SUMMARY_PROMPT = (
    "Summarise the conversation above so that another model can continue the work from this "
    "summary alone. If a <previous-summary> is given, fold it in: keep what still matters and "
    "drop what is obsolete.\n\nUse these sections, each under its exact heading, and write "
    '"(none)" under a heading with nothing to report:\n\n'
    + "\n".join(REQUIRED_SUMMARY_SECTIONS)
    + "\n\nWrite in the main language of the conversation. Be brief and factual: what was "
    "discussed, decided and done, and where things stand now."
)
MERGE_INSTRUCTIONS = (
    "The messages above are partial summaries of consecutive parts of one conversation. Merge "
    "them into one summary. Keep active tasks and their status, decisions and their reasons, "
    "open TODOs, exact identifiers, and the latest user request."
)
STRICT_IDENTIFIER_INSTRUCTIONS = (
    "Under ## Exact identifiers, copy literal values exactly as they appear (ids, URLs, file "
    "paths, ports, hashes, dates, times); never shorten or paraphrase them."
)
TURN_PREFIX_INSTRUCTIONS = (
    "This part is the beginning of a turn whose end is kept verbatim. Focus on the original "
    "request, the early progress, and whatever is needed to understand the kept part."
)

IdentifierPolicy = Literal["strict", "off", "custom"]

_IDENTIFIER_PATTERNS = (
    re.compile(r"https?://[^\s<>\"'`)\]]+"),
    re.compile(r"(?<![\w/])(?:~|\.{1,2})?/(?:[\w.@+-]+/)*[\w.@+-]+"),
    re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"),
    re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,64}\b"),
)


class SummaryUnavailable(Exception):
    """Not even a partial summary could be produced."""


# -- token maths ------------------------------------------------------------------------------


def estimate_messages_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    return sum(estimate_tokens(m) for m in messages)


def split_messages_by_token_share(
    messages: Sequence[Mapping[str, Any]], parts: int = DEFAULT_PARTS
) -> list[list[Mapping[str, Any]]]:
    """At most `parts` contiguous chunks of roughly equal tokens, order kept."""
    if not messages:
        return []
    parts = max(1, min(parts, len(messages)))
    target = estimate_messages_tokens(messages) / parts
    chunks: list[list[Mapping[str, Any]]] = []
    current: list[Mapping[str, Any]] = []
    current_tokens = 0
    for message in messages:
        tokens = estimate_tokens(message)
        if len(chunks) < parts - 1 and current and current_tokens + tokens > target:
            chunks.append(current)
            current, current_tokens = [], 0
        current.append(message)
        current_tokens += tokens
    if current:
        chunks.append(current)
    return chunks


def chunk_messages_by_max_tokens(
    messages: Sequence[Mapping[str, Any]], max_tokens: int
) -> list[list[Mapping[str, Any]]]:
    """Greedy chunks under `max_tokens / SAFETY_MARGIN`; an oversized message is alone."""
    limit = max(1.0, max_tokens / SAFETY_MARGIN)
    chunks: list[list[Mapping[str, Any]]] = []
    current: list[Mapping[str, Any]] = []
    current_tokens = 0
    for message in messages:
        tokens = estimate_tokens(message)
        if current and current_tokens + tokens > limit:
            chunks.append(current)
            current, current_tokens = [], 0
        current.append(message)
        current_tokens += tokens
        if tokens > limit:
            chunks.append(current)
            current, current_tokens = [], 0
    if current:
        chunks.append(current)
    return chunks


def compute_adaptive_chunk_ratio(
    messages: Sequence[Mapping[str, Any]], context_window: int
) -> float:
    """BASE_CHUNK_RATIO, lowered (never below MIN_CHUNK_RATIO) when messages are large."""
    if not messages or context_window <= 0:
        return BASE_CHUNK_RATIO
    average = estimate_messages_tokens(messages) / len(messages)
    average_ratio = average * SAFETY_MARGIN / context_window
    if average_ratio <= 0.1:
        return BASE_CHUNK_RATIO
    reduction = min(2 * average_ratio, BASE_CHUNK_RATIO - MIN_CHUNK_RATIO)
    return max(MIN_CHUNK_RATIO, BASE_CHUNK_RATIO - reduction)


def is_oversized_for_summary(message: Mapping[str, Any], context_window: int) -> bool:
    return estimate_tokens(message) * SAFETY_MARGIN > context_window * OVERSIZED_SHARE


def _tool_call_ids(message: Mapping[str, Any]) -> list[str]:
    if message.get("role") != "assistant":
        return []
    return [
        str(block.get("id"))
        for block in message.get("content") or ()
        if isinstance(block, Mapping) and block.get("type") == "toolCall" and block.get("id")
    ]


def drop_orphan_tool_results(
    messages: Sequence[Mapping[str, Any]],
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """(messages without tool results whose call is not among them, the dropped results)."""
    calls = {call_id for m in messages for call_id in _tool_call_ids(m)}
    kept: list[Mapping[str, Any]] = []
    dropped: list[Mapping[str, Any]] = []
    for message in messages:
        orphan = message.get("role") == "toolResult" and message.get("toolCallId") not in calls
        (dropped if orphan else kept).append(message)
    return kept, dropped


@dataclasses.dataclass(slots=True)
class HistoryPruneResult:
    messages: list[Mapping[str, Any]]
    dropped_messages_list: list[Mapping[str, Any]]
    dropped_chunks: int
    dropped_messages: int
    dropped_tokens: int
    kept_tokens: int
    budget_tokens: int


def prune_history_for_context_share(
    messages: Sequence[Mapping[str, Any]],
    max_context_tokens: int,
    max_history_share: float = DEFAULT_MAX_HISTORY_SHARE,
    parts: int = DEFAULT_PARTS,
) -> HistoryPruneResult:
    """Drop the oldest chunk while the history is over its share of the context; tool results
    whose call was dropped go with it."""
    budget = max(1, int(max_context_tokens * max_history_share))
    kept = list(messages)
    dropped_list: list[Mapping[str, Any]] = []
    dropped_chunks = dropped_tokens = 0
    while kept and estimate_messages_tokens(kept) > budget:
        chunks = split_messages_by_token_share(kept, parts)
        if len(chunks) <= 1:
            break
        oldest = chunks[0]
        rest, orphans = drop_orphan_tool_results([m for chunk in chunks[1:] for m in chunk])
        dropped_chunks += 1
        dropped_list.extend(oldest)
        dropped_list.extend(orphans)
        dropped_tokens += estimate_messages_tokens(oldest) + estimate_messages_tokens(orphans)
        kept = rest
    return HistoryPruneResult(
        messages=kept,
        dropped_messages_list=dropped_list,
        dropped_chunks=dropped_chunks,
        dropped_messages=len(dropped_list),
        dropped_tokens=dropped_tokens,
        kept_tokens=estimate_messages_tokens(kept),
        budget_tokens=budget,
    )


# -- the summariser ---------------------------------------------------------------------------


@dataclasses.dataclass
class Summarizer:
    """Model calls with retries, chunking and the fallbacks; one per compaction."""

    model: Model
    api_key: str | None
    reserve_tokens: int
    context_window: int
    signal: AbortSignal | None = None
    headers: Mapping[str, str] | None = None
    instructions: str | None = None
    """Identifier policy and user instructions, sent with every call."""
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    rng: random.Random = dataclasses.field(default_factory=random.Random)
    retry_base_delay_s: float = RETRY_BASE_DELAY_S
    calls: int = 0

    def _aborted(self) -> bool:
        return self.signal is not None and self.signal.aborted

    async def _call(
        self,
        messages: Sequence[Mapping[str, Any]],
        prompt: str,
        previous_summary: str | None,
        extra: str | None,
    ) -> str:
        instructions = "\n\n".join(p for p in (self.instructions, extra) if p) or None
        last: Exception | None = None
        for attempt in range(RETRY_ATTEMPTS):
            if self._aborted():
                break
            self.calls += 1
            try:
                text = await generate_summary(
                    messages,
                    self.model,
                    prompt=prompt,
                    max_tokens=max(1, math.floor(SUMMARY_OUTPUT_SHARE * self.reserve_tokens)),
                    api_key=self.api_key,
                    signal=self.signal,
                    previous_summary=previous_summary,
                    custom_instructions=instructions,
                    headers=self.headers,
                )
            except Exception as exc:
                last = exc
                if self._aborted() or "aborted" in str(exc).lower():
                    break
                if attempt + 1 < RETRY_ATTEMPTS:
                    delay = min(RETRY_MAX_DELAY_S, self.retry_base_delay_s * 2**attempt)
                    jitter = 1 + RETRY_JITTER * (2 * self.rng.random() - 1)
                    await self.sleep(max(0.0, delay * jitter))
                continue
            if text.strip():
                return text
            last = ValueError("the summariser returned an empty summary")
        raise last or RuntimeError("summarisation aborted")

    async def summarize_chunks(
        self,
        messages: Sequence[Mapping[str, Any]],
        max_chunk_tokens: int,
        previous_summary: str | None = None,
        *,
        prompt: str = SAFEGUARD_SUMMARY_PROMPT,
        extra: str | None = None,
    ) -> str:
        """Chunk by chunk, each call seeing the summary so far."""
        if not messages:
            return previous_summary or NO_PRIOR_HISTORY
        summary = previous_summary
        for chunk in chunk_messages_by_max_tokens(messages, max_chunk_tokens):
            summary = await self._call(chunk, prompt, summary, extra)
        return summary or NO_PRIOR_HISTORY

    async def summarize_with_fallback(
        self,
        messages: Sequence[Mapping[str, Any]],
        max_chunk_tokens: int,
        previous_summary: str | None = None,
        *,
        prompt: str = SAFEGUARD_SUMMARY_PROMPT,
        extra: str | None = None,
    ) -> str:
        """The full summary; failing that, one without the oversized messages (each noted).
        Raises SummaryUnavailable when neither works."""
        if not messages:
            return previous_summary or NO_PRIOR_HISTORY
        try:
            return await self.summarize_chunks(
                messages, max_chunk_tokens, previous_summary, prompt=prompt, extra=extra
            )
        except Exception as exc:
            if self._aborted():
                raise SummaryUnavailable("summarisation aborted") from exc
            log.warning("full summary failed (%s); retrying without oversized messages", exc)
            full_error = exc
        small: list[Mapping[str, Any]] = []
        notes: list[str] = []
        for message in messages:
            if is_oversized_for_summary(message, self.context_window):
                thousands = round(estimate_tokens(message) / 1000)
                notes.append(
                    f"[Large {message.get('role', 'message')} (~{thousands}K tokens) "
                    "omitted from summary]"
                )
            else:
                small.append(message)
        if small and notes:
            try:
                partial = await self.summarize_chunks(
                    small, max_chunk_tokens, previous_summary, prompt=prompt, extra=extra
                )
            except Exception as exc:
                raise SummaryUnavailable(f"partial summary failed too: {exc}") from exc
            return partial + "\n\n" + "\n".join(notes)
        raise SummaryUnavailable(
            f"no summary for {len(messages)} messages ({len(notes)} oversized): {full_error}"
        )

    async def summarize_in_stages(
        self,
        messages: Sequence[Mapping[str, Any]],
        max_chunk_tokens: int,
        previous_summary: str | None = None,
        *,
        parts: int = DEFAULT_PARTS,
        min_messages_for_split: int = MIN_MESSAGES_FOR_SPLIT,
        prompt: str = SAFEGUARD_SUMMARY_PROMPT,
        extra: str | None = None,
    ) -> str:
        """Large histories: summarise `parts` token-balanced parts separately, then merge."""
        if not messages:
            return previous_summary or NO_PRIOR_HISTORY
        parts = max(1, min(parts, len(messages)))
        total = estimate_messages_tokens(messages)
        if (
            parts <= 1
            or len(messages) < max(2, min_messages_for_split)
            or total <= max_chunk_tokens
        ):
            return await self.summarize_with_fallback(
                messages, max_chunk_tokens, previous_summary, prompt=prompt, extra=extra
            )
        splits = [s for s in split_messages_by_token_share(messages, parts) if s]
        if len(splits) <= 1:
            return await self.summarize_with_fallback(
                messages, max_chunk_tokens, previous_summary, prompt=prompt, extra=extra
            )
        partials = [
            await self.summarize_with_fallback(split, max_chunk_tokens, prompt=prompt, extra=extra)
            for split in splits
        ]
        as_messages = [
            {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 0}
            for text in partials
        ]
        merge = MERGE_INSTRUCTIONS if not extra else f"{MERGE_INSTRUCTIONS}\n\n{extra}"
        return await self.summarize_with_fallback(
            as_messages, max_chunk_tokens, previous_summary, prompt=prompt, extra=merge
        )


# -- extra sections ---------------------------------------------------------------------------


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(
        str(b.get("text") or "")
        for b in content or ()
        if isinstance(b, Mapping) and b.get("type") == "text"
    )


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 3)] + "..."


def collect_tool_failures(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Failed tool results, one per call id, with the output squeezed to one short line."""
    failures: list[dict[str, str]] = []
    seen: set[str] = set()
    for message in messages:
        if message.get("role") != "toolResult" or message.get("isError") is not True:
            continue
        call_id = message.get("toolCallId")
        if not isinstance(call_id, str) or not call_id or call_id in seen:
            continue
        seen.add(call_id)
        name = message.get("toolName")
        meta_parts = []
        details = message.get("details")
        if isinstance(details, Mapping):
            if isinstance(details.get("status"), str):
                meta_parts.append(f"status={details['status']}")
            code = details.get("exitCode")
            if isinstance(code, int) and not isinstance(code, bool):
                meta_parts.append(f"exitCode={code}")
        meta = " ".join(meta_parts)
        text = " ".join(_text_of(message.get("content")).split())
        summary = _clip(
            text or ("failed" if meta else "failed (no output)"), MAX_TOOL_FAILURE_CHARS
        )
        failures.append(
            {
                "toolCallId": call_id,
                "toolName": name if isinstance(name, str) and name.strip() else "tool",
                "summary": summary,
                "meta": meta,
            }
        )
    return failures


def format_tool_failures_section(failures: Sequence[Mapping[str, str]]) -> str:
    if not failures:
        return ""
    lines = []
    for failure in failures[:MAX_TOOL_FAILURES]:
        meta = f" ({failure['meta']})" if failure.get("meta") else ""
        lines.append(f"- {failure['toolName']}{meta}: {failure['summary']}")
    if len(failures) > MAX_TOOL_FAILURES:
        lines.append(f"- ...and {len(failures) - MAX_TOOL_FAILURES} more")
    return "\n\n## Tool Failures\n" + "\n".join(lines)


def format_file_operations(read_files: list[str], modified_files: list[str]) -> str:
    """`<read-files>` / `<modified-files>`, shortened to the section budget when needed."""
    read, modified = list(read_files), list(modified_files)
    omitted = 0
    text = format_file_tags(read, modified)
    while len(text) > MAX_FILE_OPS_SECTION_CHARS and (read or modified):
        (read if len(read) >= len(modified) else modified).pop()
        omitted += 1
        text = format_file_tags(read, modified)
    if omitted:
        text += f"\n({omitted} more files not listed)"
    return text


def format_recent_turns(messages: Sequence[Mapping[str, Any]], turns: int) -> str:
    """The last `turns` user turns (user text and the assistant's text replies) verbatim,
    each message clipped to MAX_RECENT_TURN_TEXT_CHARS."""
    if turns <= 0:
        return ""
    starts = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    if not starts:
        return ""
    lines: list[str] = []
    for message in messages[starts[-turns:][0] :]:
        role = message.get("role")
        if role not in ("user", "assistant"):
            continue
        text = _text_of(message.get("content")).strip()
        if text:
            label = "User" if role == "user" else "Assistant"
            lines.append(f"{label}: {_clip(text, MAX_RECENT_TURN_TEXT_CHARS)}")
    return "\n\n## Recent turns (verbatim)\n" + "\n".join(lines) if lines else ""


def extract_identifiers(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """Opaque identifiers (URLs, paths, UUIDs, hashes), newest first, at most
    MAX_EXTRACTED_IDENTIFIERS."""
    found: list[str] = []
    for message in reversed(messages):
        if message.get("role") not in ("user", "assistant", "toolResult"):
            continue
        text = _text_of(message.get("content"))
        for pattern in _IDENTIFIER_PATTERNS:
            for match in pattern.findall(text):
                value = match.rstrip(".,;:")
                if len(value) >= 4 and value not in found:
                    found.append(value)
                    if len(found) >= MAX_EXTRACTED_IDENTIFIERS:
                        return found
    return found


def audit_summary(summary: str, identifiers: Sequence[str]) -> list[str]:
    """What the quality guard found missing (sections, then identifiers); empty when fine."""
    lowered = summary.lower()
    problems = [
        f"missing section {s}" for s in REQUIRED_SUMMARY_SECTIONS if s.lower() not in lowered
    ]
    problems += [f"missing identifier {value}" for value in identifiers if value not in summary]
    return problems


def extract_markdown_sections(text: str, titles: Sequence[str]) -> list[str]:
    """The `##`/`###` sections whose title matches one of `titles` (case-insensitive)."""
    wanted = {t.strip().lower() for t in titles}
    out: list[str] = []
    current: list[str] | None = None
    level = 0
    for line in text.splitlines():
        heading = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if heading:
            depth = len(heading.group(1))
            if current is not None and depth <= level:
                out.append("\n".join(current).strip())
                current = None
            if current is None and heading.group(2).strip().lower() in wanted:
                current, level = [line], depth
                continue
        if current is not None:
            current.append(line)
    if current is not None:
        out.append("\n".join(current).strip())
    return out


def read_workspace_critical_rules(workspace_dir: Path | None) -> str:
    """`Session Startup` and `Red Lines` from the workspace's AGENTS.md, capped."""
    if workspace_dir is None:
        return ""
    try:
        text = (workspace_dir / "AGENTS.md").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    sections = extract_markdown_sections(text, CRITICAL_AGENTS_SECTIONS)
    if not sections:
        return ""
    combined = "\n\n".join(sections)
    if len(combined) > MAX_WORKSPACE_CONTEXT_CHARS:
        combined = combined[:MAX_WORKSPACE_CONTEXT_CHARS] + "\n...[truncated]..."
    return f"\n\n<workspace-critical-rules>\n{combined}\n</workspace-critical-rules>"


# -- runtime settings and the extension -------------------------------------------------------


@dataclasses.dataclass
class CompactionSafeguardRuntime:
    """Settings for one session (OpenClaw's per-session-manager safeguard runtime)."""

    model: Model | None = None
    """None: the session's model."""
    api_key: str | None = None
    get_api_key: Callable[[Model], str | None] | None = None
    context_window_tokens: int | None = None
    max_history_share: float = DEFAULT_MAX_HISTORY_SHARE
    identifier_policy: IdentifierPolicy = "strict"
    identifier_instructions: str | None = None
    recent_turns_preserve: int = DEFAULT_RECENT_TURNS_PRESERVE
    quality_guard_enabled: bool = True
    quality_guard_max_retries: int = DEFAULT_QUALITY_GUARD_MAX_RETRIES
    workspace_dir: Path | None = None
    """Where AGENTS.md is read from; None: the session's cwd."""
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    rng: random.Random = dataclasses.field(default_factory=random.Random)
    retry_base_delay_s: float = RETRY_BASE_DELAY_S
    last_cancel_reason: str | None = None


def _clamped_int(value: Any, default: int, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return default
    if value in (float("inf"), float("-inf")):  # (int() of which raises)
        return maximum if value > 0 else 0
    return min(maximum, max(0, int(value)))


def is_safeguard_mode(config: Mapping[str, Any] | None) -> bool:
    """`agents.defaults.compaction.mode == "safeguard"` (the default mode is pi's summariser)."""
    return compaction_config(config).get("mode") == "safeguard"


def resolve_compaction_safeguard_runtime(
    config: Mapping[str, Any] | None, **fields: Any
) -> CompactionSafeguardRuntime:
    """Runtime settings from `agents.defaults.compaction`, plus `fields` (model, api_key, ...)."""
    block = compaction_config(config)
    share = block.get("maxHistoryShare")
    policy = block.get("identifierPolicy")
    instructions = block.get("identifierInstructions")
    guard_block = block.get("qualityGuard")
    guard: Mapping[str, Any] = guard_block if isinstance(guard_block, Mapping) else {}
    runtime = CompactionSafeguardRuntime(
        max_history_share=(
            min(0.9, max(0.1, float(share)))
            if isinstance(share, int | float) and not isinstance(share, bool) and share == share
            else DEFAULT_MAX_HISTORY_SHARE
        ),
        identifier_policy=policy if policy in ("strict", "off", "custom") else "strict",
        identifier_instructions=instructions if isinstance(instructions, str) else None,
        recent_turns_preserve=_clamped_int(
            block.get("recentTurnsPreserve"),
            DEFAULT_RECENT_TURNS_PRESERVE,
            MAX_RECENT_TURNS_PRESERVE,
        ),
        quality_guard_enabled=guard.get("enabled") is not False,
        quality_guard_max_retries=_clamped_int(
            guard.get("maxRetries"),
            DEFAULT_QUALITY_GUARD_MAX_RETRIES,
            MAX_QUALITY_GUARD_MAX_RETRIES,
        ),
    )
    return dataclasses.replace(runtime, **fields)


def _identifier_text(runtime: CompactionSafeguardRuntime) -> str | None:
    if runtime.identifier_policy == "off":
        return None
    if runtime.identifier_policy == "custom":
        text = (runtime.identifier_instructions or "").strip()
        return text or STRICT_IDENTIFIER_INSTRUCTIONS
    return STRICT_IDENTIFIER_INSTRUCTIONS


def _is_conversation(message: Mapping[str, Any]) -> bool:
    return message.get("role") in ("user", "assistant", "toolResult")


def _resolve_api_key(
    runtime: CompactionSafeguardRuntime, model: Model, ctx: ExtensionContext | None
) -> str | None:
    if runtime.api_key:
        return runtime.api_key
    if runtime.get_api_key is not None:
        key = runtime.get_api_key(model)
        if key:
            return key
    registry = getattr(ctx, "model_registry", None)
    getter = getattr(registry, "get_api_key", None)
    if callable(getter):
        key = getter(model)
        if isinstance(key, str) and key:
            return key
    return resolve_api_key(model, None)


def _fit_summary(body: str, extras: str) -> str:
    budget = MAX_COMPACTION_SUMMARY_CHARS - len(extras)
    if len(body) > budget:
        body = body[: max(0, budget - len(SUMMARY_TRUNCATED_MARKER))].rstrip()
        body += SUMMARY_TRUNCATED_MARKER
    return body + extras


async def run_compaction_safeguard(
    event: Mapping[str, Any],
    ctx: ExtensionContext | None,
    runtime: CompactionSafeguardRuntime,
) -> dict[str, Any]:
    """The `session_before_compact` decision: `{"compaction": {...}}` or `{"cancel": True}`."""

    def cancel(reason: str) -> dict[str, Any]:
        runtime.last_cancel_reason = reason
        log.warning("compaction safeguard: %s; compaction cancelled, history kept", reason)
        return {"cancel": True}

    preparation = event.get("preparation")
    if preparation is None:
        return cancel("no compaction preparation in the event")
    to_summarize: list[Mapping[str, Any]] = list(preparation.messages_to_summarize)
    prefix: list[Mapping[str, Any]] = list(preparation.turn_prefix_messages)
    if not any(_is_conversation(m) for m in [*to_summarize, *prefix]):
        return cancel("nothing but metadata to summarise")
    model = runtime.model or (getattr(ctx, "model", None) if ctx is not None else None)
    if model is None:
        return cancel("no model to summarise with")
    api_key = _resolve_api_key(runtime, model, ctx)
    if not api_key:
        return cancel(f"no API key for provider {model.provider}")
    registry = getattr(ctx, "model_registry", None)
    header_fn = getattr(registry, "request_headers", None)
    headers = header_fn(model, api_key) if callable(header_fn) else None
    window = runtime.context_window_tokens or model.context_window or 128_000
    reserve = max(1, int(preparation.reserve_tokens))
    custom = event.get("customInstructions")
    instructions = "\n\n".join(
        p for p in (_identifier_text(runtime), custom if isinstance(custom, str) else None) if p
    )
    signal = event.get("signal")
    summarizer = Summarizer(
        model=model,
        api_key=api_key,
        reserve_tokens=reserve,
        context_window=window,
        signal=signal if isinstance(signal, AbortSignal) else None,
        headers=headers,
        instructions=instructions or None,
        sleep=runtime.sleep,
        rng=runtime.rng,
        retry_base_delay_s=runtime.retry_base_delay_s,
    )
    read_files, modified_files = preparation.file_ops.file_lists()
    failures = collect_tool_failures([*to_summarize, *prefix])
    try:
        previous = preparation.previous_summary
        tokens_before = int(preparation.tokens_before or 0)
        kept_tokens = tokens_before - estimate_messages_tokens([*to_summarize, *prefix])
        if kept_tokens > int(window * runtime.max_history_share * SAFETY_MARGIN):
            pruned = prune_history_for_context_share(
                to_summarize, window, runtime.max_history_share
            )
            if pruned.dropped_chunks:
                log.warning(
                    "compaction safeguard: dropped %d older chunk(s) (%d messages) to fit the "
                    "history budget",
                    pruned.dropped_chunks,
                    pruned.dropped_messages,
                )
                to_summarize = pruned.messages
                dropped = pruned.dropped_messages_list
                ratio = compute_adaptive_chunk_ratio(dropped, window)
                chunk_tokens = max(1, int(window * ratio) - SUMMARIZATION_OVERHEAD_TOKENS)
                try:
                    previous = await summarizer.summarize_in_stages(dropped, chunk_tokens, previous)
                except Exception as exc:
                    log.warning("compaction safeguard: dropped history not summarised: %s", exc)
        ratio = compute_adaptive_chunk_ratio([*to_summarize, *prefix], window)
        chunk_tokens = max(1, int(window * ratio) - SUMMARIZATION_OVERHEAD_TOKENS)
        identifiers = (
            extract_identifiers(to_summarize) if runtime.identifier_policy == "strict" else []
        )
        retries = runtime.quality_guard_max_retries if runtime.quality_guard_enabled else 0
        history = await summarizer.summarize_in_stages(to_summarize, chunk_tokens, previous)
        for _retry in range(retries if to_summarize else 0):
            problems = audit_summary(history, identifiers)
            if not problems:
                break
            feedback = (
                "Your previous summary was rejected: "
                + "; ".join(problems)
                + ". Include every required section heading and copy the identifiers exactly."
            )
            try:
                history = await summarizer.summarize_in_stages(
                    to_summarize, chunk_tokens, previous, extra=feedback
                )
            except Exception as exc:
                log.warning(
                    "compaction safeguard: quality retry failed (%s); keeping the last", exc
                )
                break
        summary = history
        if preparation.is_split_turn and prefix:
            prefix_text = await summarizer.summarize_in_stages(
                prefix, chunk_tokens, prompt=TURN_PREFIX_PROMPT, extra=TURN_PREFIX_INSTRUCTIONS
            )
            summary = history + SPLIT_TURN_SEPARATOR + prefix_text
    except Exception as exc:
        return cancel(f"summarisation failed: {exc}")
    if not summary.strip():
        return cancel("the summariser produced an empty summary")
    workspace = runtime.workspace_dir or (getattr(ctx, "cwd", None) if ctx is not None else None)
    extras = (
        format_recent_turns(to_summarize, runtime.recent_turns_preserve)
        + format_tool_failures_section(failures)
        + format_file_operations(read_files, modified_files)
        + read_workspace_critical_rules(Path(workspace) if workspace else None)
    )
    return {
        "compaction": {
            "summary": _fit_summary(summary, extras),
            "firstKeptEntryId": preparation.first_kept_entry_id,
            "tokensBefore": preparation.tokens_before,
            "details": {"readFiles": read_files, "modifiedFiles": modified_files},
        }
    }


def compaction_safeguard_extension(
    runtime: CompactionSafeguardRuntime | None = None,
) -> Callable[[ExtensionAPI], None]:
    """A clawpi.sdk extension factory that takes over the session's compaction summary."""
    settings = runtime or CompactionSafeguardRuntime()

    async def handle(event: dict[str, Any], ctx: ExtensionContext) -> dict[str, Any]:
        try:
            return await run_compaction_safeguard(event, ctx, settings)
        except Exception as exc:  # never let a bug here turn into a lost history
            settings.last_cancel_reason = f"safeguard error: {exc}"
            log.exception("compaction safeguard failed; compaction cancelled")
            return {"cancel": True}

    def factory(api: ExtensionAPI) -> None:
        api.on("session_before_compact", handle)

    return factory
