"""Turning an agent session's event stream into chat replies.

`subscribe_embedded_session(session, run_id, ...)` listens to the agent's events (pi's event
kinds as plain dicts) and calls back with what a chat channel needs: finished reply blocks
(`on_block_reply`), the growing answer for channels that edit one message (`on_partial_reply`),
tool summaries, reasoning, lifecycle events. It also collects what the runner needs at the end
(answer texts, tool metas, messaging-tool sends, the last tool error, usage, compactions).

Text goes through one pass per delta: thinking tags hidden, chunked at natural breaks, directives
parsed per block. Providers repeat `text_end` and `message_end` with full content; only text
that extends what was already seen is used, so nothing is sent twice.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol, TypeAlias, TypeGuard

from clawpi.ai.mapping import is_mapping
from clawpi.ai.text import content_text
from clawpi.errors import AbortedError
from clawpi.reply.chunker import (
    DEFAULT_MAX_CHARS,
    DEFAULT_MIN_CHARS,
    DEFAULT_TEXT_CHUNK_LIMIT,
    BlockChunker,
    BreakPreference,
)
from clawpi.reply.delivery import OrderedDelivery
from clawpi.reply.directives import (
    SILENT_REPLY_TOKEN,
    StreamingDirectiveParser,
    is_silent_reply_text,
    parse_reply_directives,
)
from clawpi.reply.partial_text import PartialReplyText
from clawpi.reply.payloads import (
    ReplyPayload,
    ToolErrorInfo,
    ToolMeta,
    ToolResultFormat,
    VerboseLevel,
    tool_action_fingerprint,
)
from clawpi.reply.pipeline import BlockReplyPipeline
from clawpi.reply.tags import (
    BlockTagState,
    extract_thinking_from_tagged_text,
    finish_block_tags,
    strip_block_tags,
    strip_final_tags,
)
from clawpi.reply.text import (
    StreamedReasoningFormat,
    extract_assistant_text,
    extract_assistant_thinking,
    format_reasoning_message,
    format_tool_output_block,
    format_tool_summary,
    infer_tool_meta_from_args,
    is_messaging_tool_duplicate,
    normalize_text_for_comparison,
    promote_thinking_tags_to_blocks,
    strip_downgraded_tool_call_text,
)
from clawpi.reply.tool_events import (
    MESSAGING_TOOL_NAMES,
    is_mutating_tool_call,
    messaging_tool_send,
    sanitize_tool_result,
    tool_result_status,
)

log = logging.getLogger(__name__)

ReasoningMode: TypeAlias = Literal["off", "on", "stream"]
BlockReplyBreak: TypeAlias = Literal["text_end", "message_end"]
AgentEventDict: TypeAlias = Mapping[str, Any]
Callback: TypeAlias = Callable[[Any], Any]

MAX_MESSAGING_SENT_ENTRIES = 200
_RAW_CHUNK_PARTS = 256


class EventSource(Protocol):
    """Anything that emits agent events to listeners: an agent, an SDK session, a recording."""

    def subscribe(self, listener: Callable[[Any], Any]) -> Callable[[], None]: ...


@dataclasses.dataclass(slots=True)
class BlockReplyChunking:
    """How streamed text is cut into blocks (`blockStreamingChunk` in OpenClaw's config)."""

    min_chars: int = DEFAULT_MIN_CHARS
    max_chars: int = DEFAULT_MAX_CHARS
    break_preference: BreakPreference = "paragraph"
    flush_on_paragraph: bool = False
    text_limit: int = DEFAULT_TEXT_CHUNK_LIMIT

    def make_chunker(self) -> BlockChunker:
        return BlockChunker(
            self.min_chars,
            self.max_chars,
            self.break_preference,
            self.flush_on_paragraph,
            self.text_limit,
        )


@dataclasses.dataclass(slots=True)
class PartialReply:
    """The answer so far (for channels that edit one message as it grows)."""

    text: str
    delta: str
    media_urls: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(slots=True)
class UsageTotals:
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total: int = 0


@dataclasses.dataclass(slots=True)
class _MessageState:
    """What one assistant message has streamed so far."""

    raw_chunks: list[str] = dataclasses.field(default_factory=list)
    """The raw text so far, in joined chunks of up to `_RAW_CHUNK_PARTS` deltas."""
    raw_tail: list[str] = dataclasses.field(default_factory=list)

    def raw_text(self) -> str:
        return "".join(self.raw_chunks) + "".join(self.raw_tail)

    def add_raw(self, chunk: str) -> None:
        tail = self.raw_tail
        tail.append(chunk)
        if len(tail) >= _RAW_CHUNK_PARTS:  # keep one small string per many deltas
            self.raw_chunks.append("".join(tail))
            tail.clear()

    visible: PartialReplyText = dataclasses.field(default_factory=PartialReplyText)
    last_partial: str = ""
    emitted_update: bool = False
    last_block_text: str | None = None
    text_baseline: int = 0
    last_text_trimmed: str | None = None
    last_text_normalized: str | None = None
    suppress_blocks: bool = False
    reasoning_open: bool = False
    ended: Mapping[str, Any] | None = None
    """The message as of its `message_end`: later repeats and late updates are ignored."""
    tagged_thinking: str = ""


class EmbeddedSubscription:
    """Live state of one subscription; see `subscribe_embedded_session`."""

    def __init__(
        self,
        session: EventSource,
        run_id: str,
        *,
        reasoning_mode: ReasoningMode = "off",
        verbose_level: VerboseLevel = "off",
        tool_result_format: ToolResultFormat = "markdown",
        block_reply_break: BlockReplyBreak = "text_end",
        block_reply_chunking: BlockReplyChunking | None = None,
        enforce_final_tag: bool = False,
        on_block_reply: Callback | None = None,
        on_block_reply_flush: Callable[[], Any] | None = None,
        on_partial_reply: Callback | None = None,
        on_tool_result: Callback | None = None,
        on_reasoning_stream: Callback | None = None,
        on_reasoning_end: Callable[[], Any] | None = None,
        on_agent_event: Callback | None = None,
        on_assistant_message_start: Callable[[], Any] | None = None,
        should_emit_tool_result: Callable[[], bool] | None = None,
        should_emit_tool_output: Callable[[], bool] | None = None,
        current_message_id: str | None = None,
        silent_token: str = SILENT_REPLY_TOKEN,
        messaging_tool_names: frozenset[str] = MESSAGING_TOOL_NAMES,
    ) -> None:
        self.run_id = run_id
        self.reasoning_mode = reasoning_mode
        self.verbose_level = verbose_level
        self.markdown = tool_result_format == "markdown"
        self.block_reply_break = block_reply_break
        self.enforce_final_tag = enforce_final_tag
        self.silent_token = silent_token
        self.messaging_tool_names = messaging_tool_names
        self._on_block_reply = on_block_reply
        self._on_block_reply_flush = on_block_reply_flush
        self._on_partial_reply = on_partial_reply
        self._on_tool_result = on_tool_result
        self._on_reasoning_stream = on_reasoning_stream
        self._on_reasoning_end = on_reasoning_end
        self._on_agent_event = on_agent_event
        self._on_message_start = on_assistant_message_start
        self._should_emit_tool_result = should_emit_tool_result
        self._should_emit_tool_output = should_emit_tool_output
        self._stream_reasoning = reasoning_mode == "stream" and on_reasoning_stream is not None
        self._partials_enabled = not (reasoning_mode == "on" and on_block_reply is None)

        self.assistant_texts: list[str] = []
        self.tool_metas: list[ToolMeta] = []
        self.block_reply_keys: set[str] = set()
        """Dedupe keys of every block delivered, so final payloads can skip them."""
        self.last_assistant: Mapping[str, Any] | None = None
        self.last_tool_error: ToolErrorInfo | None = None
        self.compaction_count = 0
        self._usage = UsageTotals()
        self.last_call_usage: Mapping[str, Any] | None = None
        self._sent_texts: list[str] = []
        self._sent_normalized: list[str] = []
        self._sent_targets: list[dict[str, Any]] = []
        self._sent_media: list[str] = []
        self._pending_messaging: dict[str, tuple[str | None, dict[str, Any] | None, list[str]]] = {}
        self._tool_summaries_sent: set[str] = set()
        self._tool_args: dict[str, Any] = {}

        self._chunking = block_reply_chunking
        chunker = block_reply_chunking.make_chunker() if block_reply_chunking else None
        self._blocks = BlockReplyPipeline(
            chunker, enforce_final_tag, stream=block_reply_break == "text_end"
        )
        self._tags = BlockTagState(collect_thinking=self._stream_reasoning)
        """Per-delta view for partial replies and reasoning (blocks use their own pipeline)."""
        self._per_delta = (
            on_partial_reply is not None
            or on_agent_event is not None
            or on_reasoning_end is not None
            or self._stream_reasoning
        )
        self._directives = StreamingDirectiveParser(current_message_id, silent_token)
        self._msg = _MessageState()
        self._last_reasoning_sent: str | None = None
        self._last_streamed_reasoning: str | None = None
        self._reasoning_format = StreamedReasoningFormat()

        self._compaction_in_flight = False
        self._pending_compaction_retry = 0
        self._compaction_waiter: asyncio.Future[None] | None = None
        self._unsubscribed = False
        self._deliveries = OrderedDelivery()
        self._unflushed = 0
        self._session = session
        self._unsubscribe_source = session.subscribe(self.handle_event)

    # -- public state ----------------------------------------------------------------------

    @property
    def messaging_tool_sent_texts(self) -> list[str]:
        return list(self._sent_texts)

    @property
    def messaging_tool_sent_targets(self) -> list[dict[str, Any]]:
        return [dict(t) for t in self._sent_targets]

    @property
    def messaging_tool_sent_media_urls(self) -> list[str]:
        return list(self._sent_media)

    def did_send_via_messaging_tool(self) -> bool:
        return bool(self._sent_texts) or bool(self._sent_media)

    def usage_totals(self) -> UsageTotals | None:
        u = self._usage
        if not (u.input or u.output or u.cache_read or u.cache_write or u.total):
            return None
        return UsageTotals(u.input, u.output, u.cache_read, u.cache_write, u.total)

    def is_compacting(self) -> bool:
        return self._compaction_in_flight or self._pending_compaction_retry > 0

    async def wait_for_compaction_retry(self, timeout_s: float | None = None) -> None:
        """Return once an auto-compaction (and the retry it started) has finished.

        Raises `AbortedError` when the subscription is closed while waiting, and
        `TimeoutError` after `timeout_s` (None: no limit). With no compaction there is nothing
        to wait for and no timer is set.
        """
        if self._unsubscribed:
            raise AbortedError("Unsubscribed during compaction wait")
        await asyncio.sleep(0)  # let events already queued on the loop arrive first
        if not self.is_compacting():
            return
        if self._compaction_waiter is None or self._compaction_waiter.done():
            self._compaction_waiter = asyncio.get_running_loop().create_future()
        waiting = asyncio.shield(self._compaction_waiter)
        await (waiting if timeout_s is None else asyncio.wait_for(waiting, timeout_s))

    async def wait_for_deliveries(self) -> None:
        """Wait until every async callback scheduled so far has run."""
        await self._deliveries.wait()

    def unsubscribe(self) -> None:
        if self._unsubscribed:
            return
        self._unsubscribed = True
        waiter = self._compaction_waiter
        self._compaction_waiter = None
        if waiter is not None and not waiter.done():
            waiter.set_exception(AbortedError("Unsubscribed during compaction"))
        abort = getattr(self._session, "abort_compaction", None)
        if self._compaction_in_flight and callable(abort):
            try:
                abort()  # nobody waits for it any more: do not leave it running
            except Exception:
                log.warning("aborting compaction on unsubscribe failed", exc_info=True)
        self._unsubscribe_source()
        # the stored function holds our bound listener: drop it, so no cycle outlives the run
        self._unsubscribe_source = _nothing

    # -- dispatch --------------------------------------------------------------------------

    def handle_event(self, event: AgentEventDict) -> None:
        """The listener: one agent event in, callbacks out. Unknown events are ignored."""
        if self._unsubscribed or not is_mapping(event):
            return
        kind = event.get("type")
        handler = _HANDLERS.get(kind) if isinstance(kind, str) else None
        if handler is None:
            return
        try:
            handler(self, event)
        except Exception:
            log.exception("reply subscription failed on %s event (run %s)", kind, self.run_id)

    def _agent_event(self, stream: str, data: dict[str, Any]) -> None:
        self._deliveries.call(self._on_agent_event, {"stream": stream, "data": data}, "agent event")

    # -- lifecycle ---------------------------------------------------------------------------

    def _handle_agent_start(self, event: AgentEventDict) -> None:
        self._agent_event("lifecycle", {"phase": "start", "runId": self.run_id})

    def _handle_agent_end(self, event: AgentEventDict) -> None:
        self._flush_block_replies()
        last = self.last_assistant
        phase = "error" if last is not None and last.get("stopReason") == "error" else "end"
        data: dict[str, Any] = {"phase": phase, "runId": self.run_id}
        if phase == "error" and last is not None:
            data["error"] = last.get("errorMessage")
        self._agent_event("lifecycle", data)
        if self._pending_compaction_retry > 0 and not self._compaction_in_flight:
            self._pending_compaction_retry -= 1
        self._maybe_resolve_compaction()

    def _handle_compaction_start(self, event: AgentEventDict) -> None:
        self._compaction_in_flight = True
        self._agent_event("compaction", {"phase": "start", "reason": event.get("reason")})

    def _handle_compaction_end(self, event: AgentEventDict) -> None:
        self._compaction_in_flight = False
        will_retry = bool(event.get("willRetry"))
        if will_retry:
            self._pending_compaction_retry += 1
            self._reset_for_compaction_retry()
        if will_retry or event.get("result"):
            self.compaction_count += 1
        self._agent_event(
            "compaction",
            {"phase": "end", "willRetry": will_retry, "aborted": bool(event.get("aborted"))},
        )
        self._maybe_resolve_compaction()

    def _handle_retry(self, event: AgentEventDict) -> None:
        data = {k: v for k, v in event.items() if k != "type"}
        data["phase"] = "start" if event.get("type") == "auto_retry_start" else "end"
        self._agent_event("retry", data)

    def _maybe_resolve_compaction(self) -> None:
        if self.is_compacting():
            return
        waiter = self._compaction_waiter
        self._compaction_waiter = None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _reset_for_compaction_retry(self) -> None:
        """A compaction retry replays the turn: forget what the failed attempt produced."""
        self.assistant_texts.clear()
        self.tool_metas.clear()
        self.last_tool_error = None
        self._sent_texts.clear()
        self._sent_normalized.clear()
        self._sent_targets.clear()
        self._sent_media.clear()
        self._pending_messaging.clear()
        self._tool_summaries_sent.clear()
        self._tool_args.clear()
        self._reset_message_state(0)

    # -- assistant messages ------------------------------------------------------------------

    def _reset_message_state(self, baseline: int) -> None:
        self._blocks.reset()
        self._tags.reset()
        self._directives.reset()
        self._msg = _MessageState(text_baseline=baseline)

    def _handle_message_start(self, event: AgentEventDict) -> None:
        if not _is_assistant(event.get("message")):
            return
        self._reset_message_state(len(self.assistant_texts))
        self._last_reasoning_sent = None
        self._last_streamed_reasoning = None
        self._deliveries.call_noarg(self._on_message_start, "message start")

    def _handle_message_update(self, event: AgentEventDict) -> None:
        message = event.get("message")
        if not _is_assistant(message):
            return
        if self._msg.ended is not None:
            return  # a late update of a message that already ended
        self.last_assistant = message
        update = event.get("assistantMessageEvent")
        if not is_mapping(update):
            return
        kind = update.get("type")
        if kind in ("thinking_start", "thinking_delta", "thinking_end"):
            self._on_native_thinking(message, kind)
            return
        if kind not in ("text_delta", "text_start", "text_end"):
            return
        chunk = self._new_text(update, kind)
        if chunk:
            self._push_text(chunk)
        if kind == "text_end" and self.block_reply_break == "text_end":
            self._flush_block_replies(notify=False)

    def _new_text(self, update: Mapping[str, Any], kind: Any) -> str:
        """The part of this update not seen before (full-content repeats add only a suffix)."""
        delta = update.get("delta")
        if isinstance(delta, str) and delta:
            return delta
        if kind == "text_delta":
            return ""
        content = update.get("content")
        if not isinstance(content, str) or not content:
            return ""
        msg = self._msg
        seen = msg.raw_text()
        if content.startswith(seen):
            return content[len(seen) :]
        if seen.startswith(content) or content in seen:
            return ""
        return content

    def _push_text(self, chunk: str) -> None:
        msg = self._msg
        msg.add_raw(chunk)
        if self._on_block_reply is not None:
            for block in self._blocks.push(chunk):
                self._emit_block(block)
        if not self._per_delta:
            return
        tags = self._tags
        was_thinking = tags.thinking
        visible = strip_block_tags(chunk, tags, self.enforce_final_tag)
        if self._stream_reasoning and tags.thinking_parts:
            msg.tagged_thinking += tags.take_thinking()
            self._emit_reasoning_stream(msg.tagged_thinking)
        if was_thinking and not tags.thinking:
            self._end_reasoning()
        elif tags.thinking and not was_thinking:
            msg.reasoning_open = True
        if visible:
            self._push_visible(visible)

    def _push_visible(self, visible: str) -> None:
        self._msg.visible.append(visible)
        if self._on_partial_reply is not None or self._on_agent_event is not None:
            self._emit_partial()

    def _emit_partial(self) -> None:
        msg = self._msg
        cleaned, media_urls = msg.visible.current()
        previous = msg.last_partial
        if not cleaned and not media_urls:
            return
        if previous and not cleaned.startswith(previous):
            msg.last_partial = cleaned
            return
        delta = cleaned[len(previous) :]
        msg.last_partial = cleaned
        if not delta:
            return
        msg.emitted_update = True
        self._agent_event("assistant", {"text": cleaned, "delta": delta})
        if self._partials_enabled and not is_silent_reply_text(cleaned, self.silent_token):
            self._deliveries.call(
                self._on_partial_reply,
                PartialReply(cleaned, delta, media_urls),
                "partial reply",
            )

    def _on_native_thinking(self, message: Mapping[str, Any], kind: Any) -> None:
        msg = self._msg
        if kind != "thinking_end":
            msg.reasoning_open = True
        if self._stream_reasoning:
            self._emit_reasoning_stream(extract_assistant_thinking(message))
        if kind == "thinking_end":
            self._end_reasoning()
            if self.reasoning_mode == "on" and self._on_block_reply is not None:
                self._emit_reasoning_block(extract_assistant_thinking(message))

    def _end_reasoning(self) -> None:
        if not self._msg.reasoning_open:
            return
        self._msg.reasoning_open = False
        self._deliveries.call_noarg(self._on_reasoning_end, "reasoning end")

    def _emit_reasoning_stream(self, text: str) -> None:
        formatted = self._reasoning_format(text)
        if not formatted or formatted == self._last_streamed_reasoning:
            return
        prior = self._last_streamed_reasoning or ""
        delta = formatted[len(prior) :] if formatted.startswith(prior) else formatted
        self._last_streamed_reasoning = formatted
        self._agent_event("thinking", {"text": formatted, "delta": delta})
        self._deliveries.call(
            self._on_reasoning_stream, PartialReply(formatted, delta), "reasoning"
        )

    def _emit_reasoning_block(self, thinking: str) -> None:
        formatted = format_reasoning_message(thinking)
        if not formatted or formatted == self._last_reasoning_sent:
            return
        self._last_reasoning_sent = formatted
        payload = ReplyPayload(text=formatted, is_reasoning=True)
        self._deliveries.call(self._on_block_reply, payload, "block reply")

    # -- blocks --------------------------------------------------------------------------------

    def _remember_text(self, text: str) -> None:
        msg = self._msg
        msg.last_text_trimmed = text.rstrip()
        msg.last_text_normalized = normalize_text_for_comparison(text) or None

    def _is_repeat(self, text: str) -> bool:
        msg = self._msg
        trimmed = text.rstrip()
        if trimmed and trimmed == msg.last_text_trimmed:
            return True
        normalized = normalize_text_for_comparison(text)
        return bool(normalized) and normalized == msg.last_text_normalized

    def _push_assistant_text(self, text: str) -> None:
        if text and not self._is_repeat(text):
            self.assistant_texts.append(text)
            self._remember_text(text)

    def _emit_block(self, raw_block: str) -> None:
        msg = self._msg
        if msg.suppress_blocks:
            return
        block = strip_downgraded_tool_call_text(raw_block).rstrip()
        if not block or block == msg.last_block_text:
            return
        if self._sent_normalized and is_messaging_tool_duplicate(
            normalize_text_for_comparison(block), self._sent_normalized
        ):
            return
        if self._is_repeat(block):
            return
        msg.last_block_text = block
        self.assistant_texts.append(block)
        self._remember_text(block)
        if self._on_block_reply is None:
            return
        parsed = self._directives.consume(block)
        if parsed is not None:
            self._deliver_block(parsed)

    def _deliver_block(self, parsed: Any) -> None:
        if parsed.is_silent and not parsed.media_urls:
            return
        if not parsed.text and not parsed.media_urls and not parsed.audio_as_voice:
            return
        payload = ReplyPayload(
            text=parsed.text or None,
            media_urls=list(parsed.media_urls),
            reply_to_id=parsed.reply_to_id,
            reply_to_tag=parsed.reply_to_tag,
            reply_to_current=parsed.reply_to_current,
            audio_as_voice=parsed.audio_as_voice,
        )
        self.block_reply_keys.add(payload.dedupe_key)
        self._unflushed += 1
        self._deliveries.call(self._on_block_reply, payload, "block reply")

    def _release_held_tags(self) -> None:
        if not self._per_delta:
            return
        tail = finish_block_tags(self._tags, self.enforce_final_tag)
        if tail:
            self._push_visible(tail)

    def _flush_block_replies(self, notify: bool | None = None) -> None:
        """Send whatever is buffered now (before a tool runs, at the end of a text block).

        `on_block_reply_flush` follows when `notify` is True, or when it is None and blocks
        went out since the last flush notice.
        """
        if self._on_block_reply is None:
            return
        for block in self._blocks.flush():
            self._emit_block(block)
        tail = self._directives.consume("", final=True)
        if tail is not None:
            self._deliver_block(tail)
        if notify or (notify is None and self._unflushed):
            self._notify_flush()

    def _notify_flush(self) -> None:
        self._unflushed = 0
        self._deliveries.call_noarg(self._on_block_reply_flush, "block flush")

    def _handle_message_end(self, event: AgentEventDict) -> None:
        message = event.get("message")
        if not _is_assistant(message):
            return
        ended = self._msg.ended
        if ended is not None:
            if ended is message or ended == message:
                return  # the same message_end again
            self._reset_message_state(len(self.assistant_texts))  # a new message without a start
        self._msg.ended = dict(message)
        self.last_assistant = message
        self._record_usage(message.get("usage"))
        working: dict[str, Any] = dict(message)
        if isinstance(message.get("content"), list):
            working["content"] = list(message["content"])
            promote_thinking_tags_to_blocks(working)  # type: ignore[arg-type]
        raw_text = content_text(message)
        text = self._final_text(working, raw_text)
        thinking = ""
        if self.reasoning_mode != "off":
            thinking = extract_assistant_thinking(working) or extract_thinking_from_tagged_text(
                raw_text
            )

        if not self._msg.emitted_update and text:
            self._agent_event("assistant", {"text": text, "delta": text})
            self._msg.emitted_update = True

        self._release_held_tags()
        msg = self._msg
        has_tool_call = _has_tool_call(message)
        added = len(self.assistant_texts) > msg.text_baseline
        if has_tool_call and added:
            del self.assistant_texts[msg.text_baseline :]  # narration before a tool call
        pending_blocks = self._blocks.flush() if self._on_block_reply is not None else []
        buffered = bool(pending_blocks)
        if self.reasoning_mode == "on" and text and self._on_block_reply is None:
            del self.assistant_texts[msg.text_baseline :]
            self._push_assistant_text(text)
            msg.suppress_blocks = True
        elif not has_tool_call and not added and not buffered and text:
            self._push_assistant_text(text)
        msg.text_baseline = len(self.assistant_texts)

        reasoning_first = self.block_reply_break == "message_end" and not added
        if self.reasoning_mode == "on" and self._on_block_reply is not None and reasoning_first:
            self._emit_reasoning_block(thinking)
        if pending_blocks:
            for block in pending_blocks:
                self._emit_block(block)
        elif (
            not has_tool_call
            and self._on_block_reply is not None
            and text
            and self.block_reply_break == "message_end"
            and self._is_new_final_block(text)
        ):
            msg.last_block_text = text
            parsed = self._directives.consume(text, final=True)
            if parsed is not None:
                self._deliver_block(parsed)
        if self.reasoning_mode == "on" and self._on_block_reply is not None and not reasoning_first:
            self._emit_reasoning_block(thinking)
        if self._stream_reasoning and thinking:
            self._emit_reasoning_stream(thinking)
        if self._on_block_reply is not None:
            tail = self._directives.consume("", final=True)
            if tail is not None:
                self._deliver_block(tail)
            if self._unflushed:
                self._notify_flush()
        self._end_reasoning()
        self._blocks.reset()
        self._tags.reset()
        msg.raw_chunks.clear()
        msg.raw_tail.clear()
        msg.visible = PartialReplyText()
        msg.last_partial = ""

    def _is_new_final_block(self, text: str) -> bool:
        if text == self._msg.last_block_text:
            return False
        normalized = normalize_text_for_comparison(text)
        return not is_messaging_tool_duplicate(normalized, self._sent_normalized)

    def _final_text(self, message: Mapping[str, Any], raw_text: str) -> str:
        """The answer of a finished message, `<final>` enforced, with the untagged fallback."""
        text = extract_assistant_text(message)
        if not self.enforce_final_tag:
            return text
        state = BlockTagState()
        enforced = strip_block_tags(raw_text, state, True) + finish_block_tags(state, True)
        if state.ever_final:
            return enforced.strip()
        return strip_final_tags(text).strip()  # no <final> at all: the plain text is the answer

    def _record_usage(self, usage: Any) -> None:
        if not is_mapping(usage):
            return
        values = [_int(usage.get(k)) for k in ("input", "output", "cacheRead", "cacheWrite")]
        if not any(values):
            return
        total = _int(usage.get("totalTokens")) or _int(usage.get("total")) or sum(values)
        u = self._usage
        u.input += values[0]
        u.output += values[1]
        u.cache_read += values[2]
        u.cache_write += values[3]
        u.total += total
        self.last_call_usage = dict(usage)

    # -- tools -------------------------------------------------------------------------------

    def _emit_tool_results(self) -> bool:
        if self._should_emit_tool_result is not None:
            return bool(self._should_emit_tool_result())
        return self.verbose_level in ("on", "full")

    def _emit_tool_outputs(self) -> bool:
        if self._should_emit_tool_output is not None:
            return bool(self._should_emit_tool_output())
        return self.verbose_level == "full"

    def _tool_result(self, tool_name: str, text: str) -> None:
        if self._on_tool_result is None:
            return
        parsed = parse_reply_directives(text, silent_token=self.silent_token)
        if not parsed.text and not parsed.media_urls:
            return
        payload = ReplyPayload(
            text=parsed.text or None,
            media_urls=parsed.media_urls,
            audio_as_voice=parsed.audio_as_voice,
        )
        self._deliveries.call(self._on_tool_result, payload, "tool result")

    def _handle_tool_start(self, event: AgentEventDict) -> None:
        self._flush_block_replies()
        name = str(event.get("toolName") or "tool")
        call_id = str(event.get("toolCallId") or "")
        args = event.get("args")
        self._tool_args[call_id] = args
        meta = infer_tool_meta_from_args(name, args)
        self.tool_metas.append(ToolMeta(name, meta))
        self._agent_event(
            "tool", {"phase": "start", "name": name, "toolCallId": call_id, "args": args}
        )
        if self._emit_tool_results() and call_id not in self._tool_summaries_sent:
            self._tool_summaries_sent.add(call_id)
            self._tool_result(name, format_tool_summary(name, meta, self.markdown))
        if name in self.messaging_tool_names and isinstance(args, Mapping):
            pending = messaging_tool_send(name, args)
            if pending is not None:
                self._pending_messaging[call_id] = pending

    def _handle_tool_update(self, event: AgentEventDict) -> None:
        partial = sanitize_tool_result(event.get("partialResult"))
        self._agent_event(
            "tool",
            {
                "phase": "update",
                "name": event.get("toolName"),
                "toolCallId": event.get("toolCallId"),
                "partialResult": partial,
            },
        )

    def _handle_tool_end(self, event: AgentEventDict) -> None:
        name = str(event.get("toolName") or "tool")
        call_id = str(event.get("toolCallId") or "")
        result = event.get("result")
        args = self._tool_args.pop(call_id, event.get("args"))
        is_error = bool(event.get("isError")) or tool_result_status(result) == "error"
        text = content_text(result)
        meta = infer_tool_meta_from_args(name, args)
        fingerprint = tool_action_fingerprint(name, args)
        self._agent_event(
            "tool",
            {
                "phase": "result",
                "name": name,
                "toolCallId": call_id,
                "isError": is_error,
                "result": sanitize_tool_result(result),
            },
        )
        if is_error:
            self.last_tool_error = ToolErrorInfo(
                tool_name=name,
                error=text or None,
                meta=meta,
                mutating_action=is_mutating_tool_call(name, args),
                action_fingerprint=fingerprint,
                messaging=name in self.messaging_tool_names,
            )
        elif (
            self.last_tool_error is not None
            and self.last_tool_error.action_fingerprint == fingerprint
        ):
            self.last_tool_error = None
        pending = self._pending_messaging.pop(call_id, None)
        if pending is not None and not is_error:
            self._commit_messaging(*pending)
        if self._emit_tool_outputs() and text:
            summary = format_tool_summary(name, meta, self.markdown)
            self._tool_result(name, f"{summary}\n{format_tool_output_block(text, self.markdown)}")

    def _commit_messaging(
        self, text: str | None, target: dict[str, Any] | None, media: list[str]
    ) -> None:
        if text:
            self._sent_texts.append(text)
            self._sent_normalized.append(normalize_text_for_comparison(text))
        if target:
            self._sent_targets.append(target)
        self._sent_media.extend(media)
        for entries in (
            self._sent_texts,
            self._sent_normalized,
            self._sent_targets,
            self._sent_media,
        ):
            excess = len(entries) - MAX_MESSAGING_SENT_ENTRIES
            if excess > 0:
                del entries[:excess]


def subscribe_embedded_session(
    session: EventSource,
    run_id: str,
    **options: Any,
) -> EmbeddedSubscription:
    """Subscribe to an agent session's events and turn them into chat replies.

    Options (all keyword): `reasoning_mode` off|on|stream, `verbose_level` off|on|full,
    `tool_result_format` markdown|plain, `block_reply_break` text_end|message_end,
    `block_reply_chunking` (a `BlockReplyChunking`; without it each text block goes out whole),
    `enforce_final_tag`, the callbacks `on_block_reply`, `on_block_reply_flush`,
    `on_partial_reply`, `on_tool_result`, `on_reasoning_stream`, `on_reasoning_end`,
    `on_agent_event`, `on_assistant_message_start` (each may be sync or async; async ones run
    in event order), `should_emit_tool_result`, `should_emit_tool_output`,
    `current_message_id` (target of `[[reply_to_current]]`) and `silent_token`.
    """
    return EmbeddedSubscription(session, run_id, **options)


_HANDLERS: dict[str, Callable[[EmbeddedSubscription, AgentEventDict], None]] = {
    "agent_start": EmbeddedSubscription._handle_agent_start,
    "agent_end": EmbeddedSubscription._handle_agent_end,
    "message_start": EmbeddedSubscription._handle_message_start,
    "message_update": EmbeddedSubscription._handle_message_update,
    "message_end": EmbeddedSubscription._handle_message_end,
    "tool_execution_start": EmbeddedSubscription._handle_tool_start,
    "tool_execution_update": EmbeddedSubscription._handle_tool_update,
    "tool_execution_end": EmbeddedSubscription._handle_tool_end,
    "auto_compaction_start": EmbeddedSubscription._handle_compaction_start,
    "auto_compaction_end": EmbeddedSubscription._handle_compaction_end,
    "auto_retry_start": EmbeddedSubscription._handle_retry,
    "auto_retry_end": EmbeddedSubscription._handle_retry,
}


# -- helpers ---------------------------------------------------------------------------------


def _nothing() -> None:
    pass


def _is_assistant(message: Any) -> TypeGuard[Mapping[str, Any]]:
    return is_mapping(message) and message.get("role") == "assistant"


def _has_tool_call(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(
        is_mapping(b) and b.get("type") == "toolCall" for b in content
    )


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0
