"""The final reply payloads of a run: what the channel delivers once the agent is done.

Order: the error (if the model failed), the reasoning (when the user asked to see it), then the
answer texts with their directives applied, then a tool-failure warning where one is owed.
Silent replies, texts a messaging tool already sent, and blocks already streamed are dropped,
so the user never reads the same thing twice.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, Literal, TypeAlias

from clawpi.ai.errors import (
    format_raw_assistant_error_for_ui,
    is_context_overflow_error,
    is_raw_error_dump,
)
from clawpi.reply.directives import SILENT_REPLY_TOKEN, is_silent_reply_text, parse_reply_directives
from clawpi.reply.tags import extract_thinking_from_tagged_text
from clawpi.reply.text import (
    extract_assistant_text,
    extract_assistant_thinking,
    format_reasoning_message,
    format_tool_summary,
    is_messaging_tool_duplicate,
    normalize_text_for_comparison,
    tool_display,
)
from clawpi.reply.user_text import format_assistant_error_text

VerboseLevel: TypeAlias = Literal["off", "on", "full"]
ReasoningLevel: TypeAlias = Literal["off", "on", "stream"]
ToolResultFormat: TypeAlias = Literal["markdown", "plain"]

RECOVERABLE_TOOL_ERROR_WORDS = (
    "required",
    "missing",
    "invalid",
    "must be",
    "must have",
    "needs",
    "requires",
)
"""A tool error with these words is the model's to fix (bad arguments): no warning."""
_TOOL_ERROR_DETAIL_CHARS = 400


@dataclasses.dataclass(slots=True)
class ReplyPayload:
    """One message for the channel."""

    text: str | None = None
    media_urls: list[str] = dataclasses.field(default_factory=list)
    reply_to_id: str | None = None
    reply_to_tag: bool = False
    reply_to_current: bool = False
    audio_as_voice: bool = False
    is_error: bool = False
    is_reasoning: bool = False

    @property
    def media_url(self) -> str | None:
        return self.media_urls[0] if self.media_urls else None

    @property
    def dedupe_key(self) -> str:
        return reply_dedupe_key(self.text, self.media_urls)


def reply_dedupe_key(text: str | None, media_urls: Sequence[str] = ()) -> str:
    """The identity of a reply for duplicate suppression: its words and media, nothing else.

    Reply targets are deliberately left out: the same text threaded differently is the same
    reply (a block sent with `[[reply_to_current]]` must not come again without it).
    """
    normalized = " ".join((text or "").split())
    return normalized + "\x00" + "\x00".join(media_urls)


@dataclasses.dataclass(slots=True)
class ToolMeta:
    tool_name: str
    meta: str | None = None


@dataclasses.dataclass(slots=True)
class ToolErrorInfo:
    """The last failed tool call of a run (cleared when the same action later succeeds)."""

    tool_name: str
    error: str | None = None
    meta: str | None = None
    mutating_action: bool = False
    action_fingerprint: str | None = None
    messaging: bool = False


def is_recoverable_tool_error(error: str | None) -> bool:
    lower = (error or "").lower()
    return any(word in lower for word in RECOVERABLE_TOOL_ERROR_WORDS)


def build_embedded_run_payloads(
    *,
    assistant_texts: Sequence[str],
    tool_metas: Sequence[ToolMeta] = (),
    last_assistant: Mapping[str, Any] | None = None,
    last_tool_error: ToolErrorInfo | None = None,
    provider: str | None = None,
    verbose_level: VerboseLevel = "off",
    reasoning_level: ReasoningLevel = "off",
    tool_result_format: ToolResultFormat = "markdown",
    inline_tool_results_allowed: bool = False,
    did_send_via_messaging_tool: bool = False,
    messaging_tool_sent_texts: Iterable[str] = (),
    suppress_tool_errors: bool = False,
    current_message_id: str | None = None,
    silent_token: str = SILENT_REPLY_TOKEN,
    streamed_keys: Collection[str] = (),
) -> list[ReplyPayload]:
    """The payloads to deliver at the end of a run (possibly none)."""
    payloads: list[ReplyPayload] = []
    texts = [t for t in assistant_texts if t and t.strip()]
    failed = bool(last_assistant) and last_assistant.get("stopReason") == "error"  # type: ignore[union-attr]

    # 1. the error, in words a user understands
    if failed and last_assistant is not None:
        raw = str(last_assistant.get("errorMessage") or "").strip()
        error_text = format_assistant_error_text(last_assistant, provider=provider)
        if error_text:
            texts = [t for t in texts if t.strip() not in (raw, error_text)]
            # A bare HTTP/JSON dump adds nothing next to an answer; a known category does.
            unexplained = error_text == format_raw_assistant_error_for_ui(raw)
            suppress = bool(texts) and is_raw_error_dump(raw) and unexplained
            if is_context_overflow_error(raw) or not suppress:
                payloads.append(ReplyPayload(text=error_text, is_error=True))

    # 2. tool summaries inline (only where the caller allows it; the runner streams them)
    if inline_tool_results_allowed and verbose_level != "off":
        markdown = tool_result_format == "markdown"
        payloads.extend(
            ReplyPayload(text=format_tool_summary(m.tool_name, m.meta, markdown))
            for m in tool_metas
        )

    # 3. the reasoning, first
    if reasoning_level == "on" and last_assistant is not None:
        thinking = extract_assistant_thinking(last_assistant) or _tagged_thinking(last_assistant)
        formatted = format_reasoning_message(thinking)
        if formatted:
            payloads.append(ReplyPayload(text=formatted, is_reasoning=True))

    # 4. the answer
    if not texts and last_assistant is not None and not failed:
        fallback = extract_assistant_text(last_assistant)
        if fallback:
            texts = [fallback]
    answers: list[ReplyPayload] = []
    for text in texts:
        parsed = parse_reply_directives(text, current_message_id, silent_token)
        answers.append(
            ReplyPayload(
                text=parsed.text or None,
                media_urls=parsed.media_urls,
                reply_to_id=parsed.reply_to_id,
                reply_to_tag=parsed.reply_to_tag,
                reply_to_current=parsed.reply_to_current,
                audio_as_voice=parsed.audio_as_voice,
            )
        )
    payloads.extend(answers)

    # 5. a failed tool the user would otherwise not hear about
    sent_normalized = [normalize_text_for_comparison(t) for t in messaging_tool_sent_texts]
    has_reply = did_send_via_messaging_tool or any(
        (p.text and not is_silent_reply_text(p.text, silent_token)) or p.media_urls for p in answers
    )
    if last_tool_error is not None:
        warning = _tool_error_warning(
            last_tool_error,
            has_reply=has_reply,
            delivered_by_messaging=did_send_via_messaging_tool and last_tool_error.messaging,
            suppress=suppress_tool_errors,
            verbose=verbose_level != "off",
        )
        if warning is not None:
            payloads.append(ReplyPayload(text=warning, is_error=True))

    # 6. voice applies to every media payload of the run
    if any(p.audio_as_voice for p in payloads):
        for p in payloads:
            if p.media_urls:
                p.audio_as_voice = True

    # 7. drop the empty, the silent and the already delivered
    result: list[ReplyPayload] = []
    seen: set[str] = set(streamed_keys)
    for p in payloads:
        if not (p.text and p.text.strip()) and not p.media_urls:
            continue
        if p.text and not p.media_urls and is_silent_reply_text(p.text, silent_token):
            continue
        if (
            p.text
            and not p.is_error
            and not p.is_reasoning
            and is_messaging_tool_duplicate(normalize_text_for_comparison(p.text), sent_normalized)
        ):
            continue
        key = p.dedupe_key
        if key in seen:
            continue
        seen.add(key)
        result.append(p)
    return result


def _tagged_thinking(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if not isinstance(content, list):
        return ""
    raw = "\n".join(
        b["text"]
        for b in content
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    )
    return extract_thinking_from_tagged_text(raw)


def _tool_error_warning(
    error: ToolErrorInfo,
    *,
    has_reply: bool,
    delivered_by_messaging: bool,
    suppress: bool,
    verbose: bool,
) -> str | None:
    if delivered_by_messaging:
        return None
    quiet = suppress or has_reply or is_recoverable_tool_error(error.error)
    if quiet and not error.mutating_action:
        return None
    _, label = tool_display(error.tool_name)
    if error.meta:
        label = f"{label} ({error.meta})"
    text = f"⚠️ {label} failed"
    detail = " ".join((error.error or "").split())
    if detail and (verbose or not has_reply):
        if len(detail) > _TOOL_ERROR_DETAIL_CHARS:
            detail = detail[: _TOOL_ERROR_DETAIL_CHARS - 1] + "…"
        text += f": {detail}"
    return text


_FINGERPRINT_SPACE = re.compile(r"\s+")


def tool_action_fingerprint(tool_name: str, args: Any) -> str:
    """Identifies "the same action" so a later success clears an earlier failure."""
    if isinstance(args, Mapping):
        parts = [
            f"{k}={_FINGERPRINT_SPACE.sub(' ', str(args[k]))[:200]}"
            for k in sorted(args)
            if k != "timeout"
        ]
    else:
        parts = [str(args)[:200]]
    return tool_name.lower() + "|" + "|".join(parts)
