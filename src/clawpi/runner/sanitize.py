"""Session history made valid for the target provider before each prompt (seed 004's pipeline).

`sanitize_session_history` runs the eight steps of OpenClaw's `sanitizeSessionHistory`, in the
seed's order, each a small function of its own:

1. `annotate_inter_session_user_messages`: prefix messages relayed from another session
   (and, for Anthropic, drop transcript-only delivery-mirror records);
2. `sanitize_session_messages_images`: tool-call ids rewritten for strict providers, old
   already-answered images replaced by a note, images brought within the size limits,
   foreign thought signatures stripped, blank text and empty assistant turns dropped
   (plus `drop_thinking_blocks` where the policy asks for it);
3. `sanitize_antigravity_thinking_blocks`: Claude-via-Google thinking keeps only valid
   base64 signatures under `thinkingSignature`;
4. `sanitize_tool_call_inputs`: malformed, duplicate or unknown tool calls dropped;
5. `repair_tool_use_result_pairing`: every call answered right after its turn, orphans and
   duplicates dropped;
6. `strip_tool_result_details`: UI-only `details` never reach the model (and stale usage before
   the latest compaction is zeroed);
7. `downgrade_openai_reasoning_blocks`: after a model switch, Responses reasoning items that
   cannot be replayed are dropped;
8. `apply_google_turn_ordering_fix`: a Gemini history never opens with a model turn.

This is the OpenClaw layer; `clawpi.ai.transform_messages` still runs per request (thinking of
other models, cross-provider id normalisation, dropping errored turns). Every step is a pure
function of the messages (the input is never mutated), deterministic (no clocks, no random
ids) and idempotent. Steps 7 and 8 may append a custom entry to the session as a marker.

A step that has nothing to do on a history is skipped (one scan, kept per session, finds which
apply). Steps 2 and 4-6, which most histories need once they hold a tool call or a compaction, run
per session only from where their output can still change: every message for a per-message
step, the last turn for the pairing. A long session would otherwise have its whole history
rewritten on every turn.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from clawpi.ai.prefix_memo import Pass, PrefixMemo, ResumableMemo
from clawpi.ai.types import empty_usage
from clawpi.runner.images import ImageLimits, image_block_within_limits, sanitize_image_block
from clawpi.runner.transcript_policy import (
    ThoughtSignaturePolicy,
    ToolCallIdMode,
    TranscriptPolicy,
    is_google_model_api,
    is_openai_responses_api,
)
from clawpi.session.context import COMPACTION_SUMMARY_PREFIX
from clawpi.session.guard import MISSING_TOOL_RESULT_TEXT
from clawpi.session.store import SessionManager

Msg = dict[str, Any]

INTER_SESSION_PREFIX: Final = "[Inter-session message]"
PRUNED_HISTORY_IMAGE_TEXT: Final = "[image data removed - already processed by model]"
KEEP_IMAGE_TURNS: Final = 3
"""The most recent completed turns whose images stay byte-identical (prompt caches)."""
GOOGLE_BOOTSTRAP_TEXT: Final = "(session bootstrap)"
GOOGLE_TURN_ORDERING_CUSTOM_TYPE: Final = "google-turn-ordering-bootstrap"
MODEL_SNAPSHOT_CUSTOM_TYPE: Final = "model-snapshot"
REDACTED_ATTACHMENT: Final = "__OPENCLAW_REDACTED__"
TOOL_CALL_TYPES: Final = frozenset(
    {"toolCall", "toolUse", "functionCall", "tool_use", "tool_call", "function_call"}
)
TOOL_NAME_MAX_CHARS: Final = 64
STRICT_ID_MAX_CHARS: Final = 40
STRICT9_LEN: Final = 9

_TOOL_NAME_RE: Final = re.compile(r"^[A-Za-z0-9_-]+$")
_NON_ALNUM_RE: Final = re.compile(r"[^A-Za-z0-9]")
_KIMI_ID_RE: Final = re.compile(r"^functions\.[A-Za-z0-9_-]+:\d+$")
_ANTHROPIC_ID_RE: Final = re.compile(r"^toolu_[A-Za-z0-9_]+$")
_BASE64_SIGNATURE_RE: Final = re.compile(r"^[A-Za-z0-9+/]+={0,2}$")


# -- shared helpers ---------------------------------------------------------------------------


def _blocks(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    return content if isinstance(content, list) else []


def _is_tool_call(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") in TOOL_CALL_TYPES


_THINKING_TYPES: Final = frozenset({"thinking", "redacted_thinking"})
_THINKING_ONLY: Final = frozenset({"thinking"})
_IMAGE_TYPES: Final = frozenset({"image"})


def _has_block(message: Mapping[str, Any], types: frozenset[str]) -> bool:
    """Whether the message's content has a block of one of `types` (a plain loop: this runs
    for every message of the history in several steps, on every turn)."""
    content = message.get("content")
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") in types:
                return True
    return False


def tool_calls_of(message: Mapping[str, Any]) -> list[tuple[str, str]]:
    """`(id, name)` of each tool call with a non-blank id, in order."""
    calls = []
    for block in _blocks(message):
        if _is_tool_call(block) and isinstance(block.get("id"), str) and block["id"]:
            name = block.get("name")
            calls.append((block["id"], name if isinstance(name, str) else ""))
    return calls


def tool_result_id(message: Mapping[str, Any]) -> str | None:
    for key in ("toolCallId", "toolUseId"):
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def is_compaction_summary(message: Mapping[str, Any]) -> bool:
    """pi's compaction summary, as an agent message or converted to a user message."""
    if message.get("role") == "compactionSummary":
        return True
    if message.get("role") != "user":
        return False
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    if isinstance(content, list) and content and isinstance(content[0], dict):
        text = str(content[0].get("text") or "")
    return text.startswith(COMPACTION_SUMMARY_PREFIX)


# -- 1. inter-session provenance ----------------------------------------------------------------


def _inter_session_prefix(provenance: Mapping[str, Any]) -> str:
    details = [
        f"{label}={provenance[key]}"
        for key, label in (
            ("sourceSessionKey", "sourceSession"),
            ("sourceChannel", "sourceChannel"),
            ("sourceTool", "sourceTool"),
        )
        if isinstance(provenance.get(key), str) and provenance[key]
    ]
    return " ".join([INTER_SESSION_PREFIX, *details])


def annotate_inter_session_user_messages(messages: list[Msg]) -> list[Msg]:
    """Prefix user messages whose provenance says they came from another session (once)."""
    out: list[Msg] = []
    changed = False
    for message in messages:
        provenance = message.get("provenance")
        if (
            message.get("role") != "user"
            or not isinstance(provenance, dict)
            or provenance.get("kind") != "inter_session"
        ):
            out.append(message)
            continue
        prefix = _inter_session_prefix(provenance)
        content = message.get("content")
        if isinstance(content, str):
            if content.startswith(prefix):
                out.append(message)
                continue
            out.append({**message, "content": f"{prefix}\n{content}"})
        elif isinstance(content, list):
            index = next(
                (
                    i
                    for i, b in enumerate(content)
                    if isinstance(b, dict) and b.get("type") == "text"
                ),
                None,
            )
            if index is None:
                new_content = [{"type": "text", "text": prefix}, *content]
            elif str(content[index].get("text", "")).startswith(prefix):
                out.append(message)
                continue
            else:
                new_content = list(content)
                block = content[index]
                new_content[index] = {**block, "text": f"{prefix}\n{block.get('text', '')}"}
            out.append({**message, "content": new_content})
        else:
            out.append(message)
            continue
        changed = True
    return out if changed else messages


def drop_delivery_mirror_messages(messages: list[Msg]) -> list[Msg]:
    """Drop the assistant records of channel deliveries (transcript-only, never model output)."""
    kept = [
        m
        for m in messages
        if not (
            m.get("role") == "assistant"
            and m.get("provider") == "openclaw"
            and m.get("model") == "delivery-mirror"
        )
    ]
    return kept if len(kept) != len(messages) else messages


# -- 2. ids, images, signatures, blanks -------------------------------------------------------


def _short_hash(text: str, length: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def sanitize_tool_call_id(tool_call_id: str, mode: ToolCallIdMode = "strict") -> str:
    """`strict`: alphanumerics only (at most 40); `strict9`: exactly 9 alphanumerics."""
    alnum = _NON_ALNUM_RE.sub("", tool_call_id or "")
    if mode == "strict9":
        if len(alnum) >= STRICT9_LEN:
            return alnum[:STRICT9_LEN]
        return _short_hash(alnum or "sanitized", STRICT9_LEN)
    if not tool_call_id:
        return "defaulttoolid"
    return (alnum or "sanitizedtoolid")[:STRICT_ID_MAX_CHARS]


def _is_valid_id(value: str, mode: ToolCallIdMode, keep_native: re.Pattern[str] | None) -> bool:
    if mode == "strict9":
        return len(value) == STRICT9_LEN and value.isascii() and value.isalnum()
    if keep_native is not None and keep_native.match(value):
        return True
    return 0 < len(value) <= STRICT_ID_MAX_CHARS and value.isascii() and value.isalnum()


class _IdAllocator:
    """Rewrites ids consistently: each call occurrence gets a unique id, its result follows it."""

    def __init__(self, mode: ToolCallIdMode, keep_native: re.Pattern[str] | None) -> None:
        self.mode = mode
        self.keep_native = keep_native
        self.used: set[str] = set()
        self.occurrences: dict[str, int] = {}
        self.pending: dict[str, list[str]] = {}

    def _unique(self, raw: str, seed: str) -> str:
        if self.keep_native is not None and self.keep_native.match(raw) and raw not in self.used:
            return raw
        candidate = sanitize_tool_call_id(seed, self.mode)
        counter = 0
        while candidate in self.used:
            counter += 1
            if self.mode == "strict9":
                candidate = _short_hash(f"{seed}:{counter}", STRICT9_LEN)
            else:
                suffix = _short_hash(f"{seed}:{counter}", 8)
                candidate = candidate[: STRICT_ID_MAX_CHARS - len(suffix)] + suffix
        return candidate

    def for_call(self, raw: str) -> str:
        occurrence = self.occurrences.get(raw, 0) + 1
        self.occurrences[raw] = occurrence
        if (
            occurrence == 1
            and raw not in self.used
            and _is_valid_id(raw, self.mode, self.keep_native)
        ):
            new = raw
        else:
            new = self._unique(raw, raw if occurrence == 1 else f"{raw}:{occurrence}")
        self.used.add(new)
        self.pending.setdefault(raw, []).append(new)
        return new

    def for_result(self, raw: str) -> str:
        queue = self.pending.get(raw)
        if queue:
            return queue.pop(0)
        if _is_valid_id(raw, self.mode, self.keep_native):
            return raw
        return sanitize_tool_call_id(raw, self.mode)


def sanitize_tool_call_ids(
    messages: list[Msg],
    mode: ToolCallIdMode = "strict",
    *,
    keep_kimi_ids: bool = False,
    keep_anthropic_ids: bool = False,
) -> list[Msg]:
    """Rewrite tool-call ids for strict providers, the same way on the call and its result.

    Ids that are already valid and unique are kept, so a clean history comes back as the same
    list; with `keep_kimi_ids` / `keep_anthropic_ids`, native `functions.<name>:<n>` /
    `toolu_...` ids count as valid (their own provider accepts them). Collisions (two ids that
    sanitise alike, or one id reused by two calls) get a hash-derived suffix; results are
    matched to calls in order of occurrence.
    """
    step = _tool_call_ids_pass(messages, 0, None, (mode, keep_kimi_ids, keep_anthropic_ids))
    return step.outputs_for(messages)


_IdMode = tuple[ToolCallIdMode, bool, bool]
"""`sanitize_tool_call_ids`' parameters: the mode, and whether Kimi / Anthropic ids are kept."""


def _tool_call_ids_pass(
    messages: list[Msg], _start: int, ids: _IdAllocator | None, key: _IdMode
) -> Pass[_IdAllocator]:
    """Ids are handed out in order, so the allocator is the state a later pass goes on from."""
    if ids is None:
        mode, keep_kimi_ids, keep_anthropic_ids = key
        native = _KIMI_ID_RE if keep_kimi_ids else _ANTHROPIC_ID_RE if keep_anthropic_ids else None
        ids = _IdAllocator(mode, native if mode == "strict" else None)
    out: list[Msg] = []
    for message in messages:
        role = message.get("role")
        if role == "assistant" and _has_block(message, TOOL_CALL_TYPES):
            new_blocks = []
            touched = False
            for block in _blocks(message):
                if _is_tool_call(block) and isinstance(block.get("id"), str) and block["id"]:
                    new_id = ids.for_call(block["id"])
                    if new_id != block["id"]:
                        block = {**block, "id": new_id}
                        touched = True
                new_blocks.append(block)
            if touched:
                message = {**message, "content": new_blocks}
        elif role == "toolResult":
            updates = {}
            shared = message.get("toolCallId") == message.get("toolUseId")
            resolved: str | None = None
            for field_name in ("toolCallId", "toolUseId"):
                raw = message.get(field_name)
                if isinstance(raw, str) and raw:
                    new_id = resolved if shared and resolved else ids.for_result(raw)
                    resolved = new_id
                    if new_id != raw:
                        updates[field_name] = new_id
            if updates:
                message = {**message, **updates}
        out.append(message)
    return Pass(out, len(messages), len(out), ids)


def prune_processed_history_images(
    messages: list[Msg], keep_recent_turns: int = KEEP_IMAGE_TURNS
) -> list[Msg]:
    """Replace images the model already answered with a note, except in the recent turns.

    A user turn is completed once an assistant message follows it. Images in user and tool
    result messages of completed turns older than the `keep_recent_turns` most recent ones
    become `[image data removed - already processed by model]`.
    """
    user_indexes = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    last_assistant = max(
        (i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1
    )
    completed = [i for i in user_indexes if i < last_assistant]
    if len(completed) <= keep_recent_turns:
        return messages
    cutoff = completed[len(completed) - keep_recent_turns] if keep_recent_turns > 0 else None
    end = cutoff if cutoff is not None else last_assistant
    out = list(messages)
    changed = False
    for index in range(end):
        message = messages[index]
        if message.get("role") not in ("user", "toolResult"):
            continue
        if not _has_block(message, _IMAGE_TYPES):
            continue
        blocks = _blocks(message)
        new_blocks = [
            {"type": "text", "text": PRUNED_HISTORY_IMAGE_TEXT}
            if isinstance(b, dict) and b.get("type") == "image"
            else b
            for b in blocks
        ]
        out[index] = {**message, "content": new_blocks}
        changed = True
    return out if changed else messages


def _sanitize_images_in(blocks: list[Any], limits: ImageLimits) -> list[Any] | None:
    """Blocks with every image within the limits, or None if nothing had to change."""
    new_blocks: list[Any] | None = None
    for index, block in enumerate(blocks):
        if not (isinstance(block, dict) and block.get("type") == "image"):
            continue
        if image_block_within_limits(block, limits):
            continue
        if new_blocks is None:
            new_blocks = list(blocks)
        new_blocks[index] = sanitize_image_block(block, limits)
    return new_blocks


def _is_base64_signature(value: str) -> bool:
    compact = re.sub(r"\s+", "", value)
    if not compact:
        return False
    urlsafe = "-" in compact or "_" in compact
    try:
        decoded = (
            base64.urlsafe_b64decode(compact + "=" * (-len(compact) % 4))
            if urlsafe
            else base64.b64decode(compact + "=" * (-len(compact) % 4), validate=True)
        )
    except (binascii.Error, ValueError):
        return False
    if not decoded:
        return False
    encoded = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(decoded).decode()
    return encoded.rstrip("=") == compact.rstrip("=")


def strip_thought_signatures(
    blocks: list[Any], policy: ThoughtSignaturePolicy | None
) -> list[Any] | None:
    """Blocks without thought signatures another provider wrote, or None if none were found.

    Thinking blocks are never touched (Anthropic needs them byte-identical).
    """
    base64_only = policy.allow_base64_only if policy else False
    keys = (
        ("thought_signature", "thoughtSignature")
        if policy and policy.include_camel_case
        else ("thought_signature",)
    )

    def foreign(value: Any) -> bool:
        if isinstance(value, str) and value.startswith("msg_"):
            return True  # a Claude message id, never a Gemini signature
        return base64_only and (not isinstance(value, str) or not _is_base64_signature(value))

    new_blocks: list[Any] | None = None
    for index, block in enumerate(blocks):
        if not isinstance(block, dict) or block.get("type") in ("thinking", "redacted_thinking"):
            continue
        drop = [k for k in keys if k in block and foreign(block[k])]
        if not drop:
            continue
        if new_blocks is None:
            new_blocks = list(blocks)
        new_blocks[index] = {k: v for k, v in block.items() if k not in drop}
    return new_blocks


def _is_blank_text(block: Any) -> bool:
    return (
        isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
        and not block["text"].strip()
    )


def sanitize_session_messages_images(
    messages: list[Msg],
    policy: TranscriptPolicy,
    *,
    limits: ImageLimits | None = None,
    keep_image_turns: int | None = KEEP_IMAGE_TURNS,
) -> list[Msg]:
    """Step 2: ids, history images, thought signatures and (full mode) blank content."""
    limits = limits or ImageLimits()
    if policy.sanitize_tool_call_ids:
        mode, kimi, anthropic = _id_mode(policy)
        messages = sanitize_tool_call_ids(
            messages, mode, keep_kimi_ids=kimi, keep_anthropic_ids=anthropic
        )
    if keep_image_turns is not None:
        messages = prune_processed_history_images(messages, keep_image_turns)
    return _content_pass(messages, 0, None, (policy, limits)).outputs_for(messages)


def _id_mode(policy: TranscriptPolicy) -> _IdMode:
    return (
        policy.tool_call_id_mode or "strict",
        policy.preserve_kimi_tool_call_ids,
        policy.preserve_native_anthropic_tool_use_ids,
    )


def _content_pass(
    messages: list[Msg], _start: int, _state: None, key: tuple[TranscriptPolicy, ImageLimits]
) -> Pass[None]:
    """Step 2's per-message part: images within limits, foreign signatures, blank content."""
    policy, limits = key
    full = policy.sanitize_mode == "full"
    out: list[Msg] = []
    for message in messages:
        role = message.get("role")
        blocks = _blocks(message)
        if role in ("user", "toolResult") or (
            role == "assistant" and message.get("stopReason") == "error"
        ):
            if _has_block(message, _IMAGE_TYPES):
                new_blocks = _sanitize_images_in(blocks, limits)
                if new_blocks is not None:
                    message = {**message, "content": new_blocks}
            out.append(message)
            continue
        if role != "assistant" or not isinstance(message.get("content"), list):
            out.append(message)
            continue
        current = blocks
        if not policy.preserve_signatures:
            current = (
                strip_thought_signatures(current, policy.sanitize_thought_signatures) or current
            )
        signed_thinking_kept = policy.preserve_signatures and any(
            isinstance(b, dict) and b.get("type") in _THINKING_TYPES for b in current
        )
        if full and not signed_thinking_kept and any(_is_blank_text(b) for b in current):
            current = [b for b in current if not _is_blank_text(b)]
        if _has_block(message, _IMAGE_TYPES):
            current = _sanitize_images_in(current, limits) or current
        if full and not current:
            continue
        if current is not blocks:
            message = {**message, "content": current}
        out.append(message)
    return Pass(out, len(messages), len(out), None)


def drop_thinking_blocks(messages: list[Msg]) -> list[Msg]:
    """Remove thinking blocks (endpoints that reject replayed signatures); never empties a turn."""
    out: list[Msg] = []
    changed = False
    for message in messages:
        if message.get("role") != "assistant" or not _has_block(message, _THINKING_TYPES):
            out.append(message)
            continue
        kept = [
            b
            for b in _blocks(message)
            if not (isinstance(b, dict) and b.get("type") in _THINKING_TYPES)
        ]
        out.append({**message, "content": kept or [{"type": "text", "text": ""}]})
        changed = True
    return out if changed else messages


# -- 3. Claude-via-Google thinking ------------------------------------------------------------


def _valid_antigravity_signature(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    trimmed = value.strip()
    return bool(trimmed) and len(trimmed) % 4 == 0 and bool(_BASE64_SIGNATURE_RE.match(trimmed))


def sanitize_antigravity_thinking_blocks(messages: list[Msg]) -> list[Msg]:
    """Keep only thinking blocks with a valid base64 signature, moved to `thinkingSignature`."""
    out: list[Msg] = []
    changed = False
    for message in messages:
        if message.get("role") != "assistant" or not _has_block(message, _THINKING_ONLY):
            out.append(message)
            continue
        new_blocks = []
        touched = False
        for block in _blocks(message):
            if not (isinstance(block, dict) and block.get("type") == "thinking"):
                new_blocks.append(block)
                continue
            signature = next(
                (
                    block[k]
                    for k in (
                        "thinkingSignature",
                        "signature",
                        "thought_signature",
                        "thoughtSignature",
                    )
                    if block.get(k) is not None
                ),
                None,
            )
            if not _valid_antigravity_signature(signature):
                touched = True
                continue
            if block.get("thinkingSignature") != signature:
                block = {**block, "thinkingSignature": signature}
                touched = True
            new_blocks.append(block)
        if not touched:
            out.append(message)
            continue
        changed = True
        if new_blocks:
            out.append({**message, "content": new_blocks})
    return out if changed else messages


# -- 4. tool-call inputs ------------------------------------------------------------------------


def _redact_attachments(value: Any) -> Any:
    if not isinstance(value, dict) or not isinstance(value.get("attachments"), list):
        return value
    items = [
        {**item, "content": REDACTED_ATTACHMENT}
        if isinstance(item, dict) and "content" in item and item["content"] != REDACTED_ATTACHMENT
        else item
        for item in value["attachments"]
    ]
    if all(a is b for a, b in zip(items, value["attachments"], strict=True)):
        return value
    return {**value, "attachments": items}


def _valid_tool_call(block: Mapping[str, Any], allowed: frozenset[str] | None) -> bool:
    has_input = block.get("input") is not None or block.get("arguments") is not None
    call_id = block.get("id")
    name = block.get("name")
    if not has_input or not isinstance(call_id, str) or not call_id.strip():
        return False
    if not isinstance(name, str):
        return False
    name = name.strip()
    if not name or len(name) > TOOL_NAME_MAX_CHARS or not _TOOL_NAME_RE.match(name):
        return False
    return allowed is None or name.lower() in allowed


def _allowed_names(allowed_tool_names: Iterable[str] | None) -> frozenset[str] | None:
    if allowed_tool_names is None:
        return None
    allowed = frozenset(
        n.strip().lower() for n in allowed_tool_names if isinstance(n, str) and n.strip()
    )
    return allowed or None


def sanitize_tool_call_inputs(
    messages: list[Msg], *, allowed_tool_names: Iterable[str] | None = None
) -> list[Msg]:
    """Drop tool calls a provider would reject or the agent cannot run.

    A call without `arguments`/`input`, with a blank id or the id of an earlier call in the same
    turn, with a name that is not `[A-Za-z0-9_-]{1,64}`, or (given an allowlist, compared
    case-insensitively) with a name the agent does not have, is removed; names are trimmed; `sessions_spawn` attachment contents
    are redacted. An assistant message left with nothing is dropped.
    """
    step = _tool_call_inputs_pass(messages, 0, None, _allowed_names(allowed_tool_names))
    return step.outputs_for(messages)


def _tool_call_inputs_pass(
    messages: list[Msg], _start: int, _state: None, allowed: frozenset[str] | None
) -> Pass[None]:
    out: list[Msg] = []
    for message in messages:
        if message.get("role") != "assistant" or not _has_block(message, TOOL_CALL_TYPES):
            out.append(message)
            continue
        new_blocks = []
        touched = False
        call_ids: set[str] = set()
        for block in _blocks(message):
            if not _is_tool_call(block):
                new_blocks.append(block)
                continue
            if not _valid_tool_call(block, allowed) or block["id"] in call_ids:
                touched = True
                continue
            call_ids.add(block["id"])
            name = block["name"].strip()
            new_block = block if name == block["name"] else {**block, "name": name}
            if name.lower() == "sessions_spawn":
                for key in ("arguments", "input"):
                    if key in new_block:
                        redacted = _redact_attachments(new_block[key])
                        if redacted is not new_block[key]:
                            new_block = {**new_block, key: redacted}
            touched = touched or new_block is not block
            new_blocks.append(new_block)
        if not touched:
            out.append(message)
        elif new_blocks:
            out.append({**message, "content": new_blocks})
    return Pass(out, len(messages), len(out), None)


# -- 5. tool use / result pairing ----------------------------------------------------------------


@dataclass(slots=True)
class ToolUseRepairReport:
    messages: list[Msg]
    added: list[Msg] = field(default_factory=list)
    dropped_duplicate_count: int = 0
    dropped_orphan_count: int = 0
    moved: bool = False
    settled: int = 0
    """Where the last turn starts: the messages before it are repaired as they will stay,
    whatever comes after them (into `messages[:settled_outputs]`)."""
    settled_outputs: int = 0


def make_missing_tool_result(call_id: str, tool_name: str, timestamp: Any = 0) -> Msg:
    """The synthetic error result for a call with no answer (fixed text, the call's time)."""
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": tool_name or "unknown",
        "content": [{"type": "text", "text": MISSING_TOOL_RESULT_TEXT}],
        "isError": True,
        "timestamp": timestamp,
    }


def repair_tool_use_result_pairing(messages: list[Msg]) -> ToolUseRepairReport:
    """Put each call's result directly after its assistant turn, in call order.

    Results found later in the same span (before the next assistant turn) are moved up; a call
    without one gets a synthetic error result; duplicate results and results that match no call
    of their span are dropped. Matching is per span, so a provider that reuses ids across turns
    (Kimi's `functions.<name>:<n>`) keeps each turn's own result. Errored or aborted assistant
    turns get no synthetic results: their partial calls never ran (a synthetic answer to them
    caused permanent 400s upstream), and the results that follow them are dropped with them.
    """
    report = ToolUseRepairReport(messages=[])
    out = report.messages
    changed = False
    index = 0
    turn_seen = False
    while index < len(messages):
        message = messages[index]
        role = message.get("role")
        if role == "assistant":  # a turn's span ends at the next assistant message
            report.settled, report.settled_outputs, turn_seen = index, len(out), True
        if role == "toolResult":
            report.dropped_orphan_count += 1
            changed = True
            index += 1
            continue
        calls = list(dict(tool_calls_of(message)).items()) if role == "assistant" else []
        if not calls or message.get("stopReason") in ("error", "aborted"):
            out.append(message)
            index += 1
            continue
        wanted = dict(calls)
        found: dict[str, Msg] = {}
        remainder: list[Msg] = []
        end = index + 1
        while end < len(messages) and messages[end].get("role") != "assistant":
            follower = messages[end]
            end += 1
            if follower.get("role") != "toolResult":
                remainder.append(follower)
                continue
            result_id = tool_result_id(follower)
            if result_id is None or result_id not in wanted:
                report.dropped_orphan_count += 1
            elif result_id in found:
                report.dropped_duplicate_count += 1
            else:
                if remainder:
                    report.moved = True
                name = follower.get("toolName")
                if not (isinstance(name, str) and name.strip()):
                    follower = {**follower, "toolName": wanted[result_id] or "unknown"}
                found[result_id] = follower
        segment: list[Msg] = [message]
        for call_id, name in calls:
            result = found.get(call_id)
            if result is None:
                result = make_missing_tool_result(call_id, name, message.get("timestamp", 0))
                report.added.append(result)
            segment.append(result)
        segment.extend(remainder)
        original = messages[index:end]
        if len(segment) != len(original) or any(
            a is not b for a, b in zip(segment, original, strict=True)
        ):
            changed = True
        out.extend(segment)
        index = end
    if not turn_seen:  # results before any turn answer nothing: dropped whatever follows
        report.settled, report.settled_outputs = len(messages), len(out)
    if not changed:
        report.messages = messages
    return report


def sanitize_tool_use_result_pairing(messages: list[Msg]) -> list[Msg]:
    return repair_tool_use_result_pairing(messages).messages


def _pairing_pass(messages: list[Msg], _start: int, _state: None, _key: None) -> Pass[None]:
    report = repair_tool_use_result_pairing(messages)
    # the turns before the last are settled by the last one's first message
    closed_by = 1 if report.settled < len(messages) else 0
    return Pass(report.messages, report.settled, report.settled_outputs, None, closed_by)


# -- 6. details and stale usage ------------------------------------------------------------------


def strip_tool_result_details(messages: list[Msg]) -> list[Msg]:
    """Tool-result `details` are for UIs; they never go back to the model."""
    if not any(m.get("role") == "toolResult" and "details" in m for m in messages):
        return messages
    return _details_pass(messages, 0, None, None).outputs


def _details_pass(messages: list[Msg], _start: int, _state: None, _key: None) -> Pass[None]:
    out = [
        {k: v for k, v in m.items() if k != "details"}
        if m.get("role") == "toolResult" and "details" in m
        else m
        for m in messages
    ]
    return Pass(out, len(messages), len(out), None)


_USAGE_KEYS = ("input", "output", "cacheRead", "cacheWrite", "totalTokens")
_NUMBER = (int, float)
_EMPTY_USAGE: Final = empty_usage()  # compared against, never handed out


def _is_full_usage(usage: Any) -> bool:
    if not isinstance(usage, dict):
        return False
    for key in _USAGE_KEYS:
        value = usage.get(key)
        if not isinstance(value, _NUMBER) or isinstance(value, bool):
            return False
    return True


def normalize_assistant_usage(messages: list[Msg]) -> list[Msg]:
    """Zero the usage recorded before the latest compaction and fill in missing usage.

    Token counts from before a compaction describe a context that no longer exists; feeding
    them to the overflow estimate would trigger compaction again at once.
    """
    step = _usage_pass(messages, 0, None, None)
    assert step is not None  # a pass from the start always runs
    return step.outputs_for(messages)


_Compaction = tuple[int, Any]
"""The latest compaction summary's index in the history (-1: none) and its timestamp."""


def _usage_pass(
    messages: list[Msg], start: int, state: _Compaction | None, _key: None
) -> Pass[_Compaction] | None:
    latest = -1
    for index in range(len(messages) - 1, -1, -1):
        if is_compaction_summary(messages[index]):
            latest = index
            break
    if latest >= 0:
        if start:
            return None  # a new summary makes what came before it stale: start afresh
        summary_at, compacted_at = latest, messages[latest].get("timestamp")
    else:
        summary_at, compacted_at = state if state is not None else (-1, None)
    cutoff: float | None = compacted_at if isinstance(compacted_at, _NUMBER) else None
    out: list[Msg] = []
    for offset, message in enumerate(messages, start):
        if message.get("role") == "assistant":
            usage = message.get("usage")
            written_at = message.get("timestamp")
            stale = offset < summary_at or (
                cutoff is not None and isinstance(written_at, _NUMBER) and written_at <= cutoff
            )
            if (stale and usage != _EMPTY_USAGE) or not _is_full_usage(usage):
                message = {**message, "usage": empty_usage()}
        out.append(message)
    return Pass(out, len(messages), len(out), (summary_at, compacted_at))


# -- 7. OpenAI Responses reasoning after a model switch -------------------------------------------


def _reasoning_item(signature: Any) -> bool:
    if not isinstance(signature, str) or not signature.startswith("{"):
        return False
    try:
        item = orjson.loads(signature)
    except orjson.JSONDecodeError:
        return False
    if not isinstance(item, dict):
        return False
    kind = str(item.get("type") or "")
    return str(item.get("id") or "").startswith("rs_") and (
        kind == "reasoning" or kind.startswith("reasoning.")
    )


def downgrade_openai_reasoning_blocks(messages: list[Msg]) -> list[Msg]:
    """Drop Responses reasoning items that no output item follows (the API rejects them)."""
    out: list[Msg] = []
    changed = False
    for message in messages:
        blocks = _blocks(message)
        if message.get("role") != "assistant":
            out.append(message)
            continue
        kept = [
            b
            for i, b in enumerate(blocks)
            if not (
                isinstance(b, dict)
                and b.get("type") == "thinking"
                and _reasoning_item(b.get("thinkingSignature"))
                and not any(
                    not (isinstance(n, dict) and n.get("type") == "thinking")
                    for n in blocks[i + 1 :]
                )
            )
        ]
        if len(kept) == len(blocks):
            out.append(message)
            continue
        changed = True
        if kept:
            out.append({**message, "content": kept})
    return out if changed else messages


def _last_custom_data(session: SessionManager, custom_type: str) -> Any:
    entry = session.last_custom_entry(custom_type)
    return entry.get("data") if entry is not None else None


def record_model_snapshot(
    session: SessionManager | None,
    provider: str | None,
    model_api: str | None,
    model_id: str | None,
) -> bool:
    """Whether the model differs from the session's last snapshot (recording the new one)."""
    if session is None or not (provider or model_api or model_id):
        return False
    current = {"provider": provider or "", "modelApi": model_api or "", "modelId": model_id or ""}
    previous = _last_custom_data(session, MODEL_SNAPSHOT_CUSTOM_TYPE)
    if isinstance(previous, dict):
        before = {k: previous.get(k) or "" for k in current}
        if before == current:
            return False
        session.append_custom_entry(MODEL_SNAPSHOT_CUSTOM_TYPE, current)
        return True
    session.append_custom_entry(MODEL_SNAPSHOT_CUSTOM_TYPE, current)
    return False


# -- 8. Gemini turn ordering ----------------------------------------------------------------------


def apply_google_turn_ordering_fix(
    messages: list[Msg], session: SessionManager | None = None
) -> list[Msg]:
    """Gemini rejects a history that opens with a model turn: put a tiny user turn first.

    The synthetic turn carries the first message's timestamp (stable across runs). With a
    session, a `google-turn-ordering-bootstrap` marker is recorded once.
    """
    if not messages or messages[0].get("role") != "assistant":
        return messages
    bootstrap: Msg = {
        "role": "user",
        "content": GOOGLE_BOOTSTRAP_TEXT,
        "timestamp": messages[0].get("timestamp", 0),
    }
    if session is not None and session.last_custom_entry(GOOGLE_TURN_ORDERING_CUSTOM_TYPE) is None:
        session.append_custom_entry(
            GOOGLE_TURN_ORDERING_CUSTOM_TYPE, {"sessionId": session.get_session_id()}
        )
    return [bootstrap, *messages]


# -- the pipeline -------------------------------------------------------------------------------


@dataclass(slots=True)
class HistoryNeeds:
    """What the steps of the pipeline could find to change in a history. A flag is set when
    some message has what its step works on; no step adds anything a later step works on, so
    flags taken from the input stay true for the whole pipeline. A clean chat history then
    costs one pass instead of one per step."""

    inter_session: bool = False
    delivery_mirror: bool = False
    tool_parts: bool = False
    images: bool = False
    signatures: bool = False
    thinking: bool = False
    blank_or_empty: bool = False
    details: bool = False
    usage: bool = False

    def merged(self, other: HistoryNeeds) -> HistoryNeeds:
        """A new set of needs: these and `other`'s."""
        both = dataclasses.replace(self)
        for name in HistoryNeeds.__slots__:
            if getattr(other, name):
                setattr(both, name, True)
        return both


def scan_session_history(
    messages: Sequence[Msg], session_manager: SessionManager | None
) -> HistoryNeeds:
    """`scan_history`, scanning only what the session's history gained since its last turn
    (see `PrefixMemo`: history messages are never changed in place, every step copies)."""
    return _session_scans(session_manager, messages)


def scan_history(messages: Sequence[Msg]) -> HistoryNeeds:
    needs = HistoryNeeds()
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        if role == "assistant":
            if message.get("provider") == "openclaw" and message.get("model") == "delivery-mirror":
                needs.delivery_mirror = True
            if not needs.usage and not _is_full_usage(message.get("usage")):
                needs.usage = True
            if isinstance(content, list) and not content:
                needs.blank_or_empty = True
        elif role == "user":
            provenance = message.get("provenance")
            if isinstance(provenance, dict) and provenance.get("kind") == "inter_session":
                needs.inter_session = True
            if is_compaction_summary(message):
                needs.usage = True
        elif role == "toolResult":
            needs.tool_parts = True
            if "details" in message:
                needs.details = True
        elif role == "compactionSummary":
            needs.usage = True
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "image":
                needs.images = True
            elif kind in TOOL_CALL_TYPES:
                needs.tool_parts = True
            elif kind in _THINKING_TYPES:
                needs.thinking = True
            elif role == "assistant" and _is_blank_text(block):
                needs.blank_or_empty = True
            if "thought_signature" in block or "thoughtSignature" in block:
                needs.signatures = True
    return needs


_session_scans = PrefixMemo(scan_history, HistoryNeeds.merged)

# Steps 2 and 4-6 per session, run on each turn only from where their output can still change (see
# `ResumableMemo`): a long session's history would otherwise be rewritten in full every turn.
_tool_call_ids: Final = ResumableMemo(_tool_call_ids_pass)
_content: Final = ResumableMemo(_content_pass)
_tool_call_inputs: Final = ResumableMemo(_tool_call_inputs_pass)
_pairing: Final = ResumableMemo(_pairing_pass)
_details: Final = ResumableMemo(_details_pass)
_usage: Final = ResumableMemo(_usage_pass)


def sanitize_session_history(
    messages: Sequence[Msg],
    policy: TranscriptPolicy,
    *,
    model_api: str | None = None,
    provider: str | None = None,
    model_id: str | None = None,
    allowed_tool_names: Iterable[str] | None = None,
    session_manager: SessionManager | None = None,
    image_limits: ImageLimits | None = None,
    keep_image_turns: int | None = KEEP_IMAGE_TURNS,
) -> list[Msg]:
    """Run the eight steps (see the module docstring) and return the history to send.

    `messages` is not modified. With `session_manager`, the model snapshot and the Gemini
    bootstrap marker are recorded as custom entries (no other writes).
    """
    history = list(messages)
    needs = scan_session_history(history, session_manager)
    # 1. provenance of relayed messages; delivery mirrors are not model output
    if needs.inter_session:
        history = annotate_inter_session_user_messages(history)
    if needs.delivery_mirror and (provider == "anthropic" or model_api == "anthropic-messages"):
        history = drop_delivery_mirror_messages(history)
    # 2. ids, images, signatures, blank content
    if (
        needs.images
        or needs.signatures
        or (needs.tool_parts and policy.sanitize_tool_call_ids)
        or (needs.blank_or_empty and policy.sanitize_mode == "full")
    ):
        # `sanitize_session_messages_images`, its parts skipped where they have nothing to do
        if policy.sanitize_tool_call_ids and needs.tool_parts:
            history = _tool_call_ids(session_manager, history, _id_mode(policy))
        if keep_image_turns is not None and needs.images:
            history = prune_processed_history_images(history, keep_image_turns)
        history = _content(session_manager, history, (policy, image_limits or ImageLimits()))
    if policy.drop_thinking_blocks and needs.thinking:
        history = drop_thinking_blocks(history)
    # 3. Claude-via-Google thinking signatures
    if policy.normalize_antigravity_thinking_blocks and needs.thinking:
        history = sanitize_antigravity_thinking_blocks(history)
    # 4. malformed or unknown tool calls
    if needs.tool_parts:
        history = _tool_call_inputs(session_manager, history, _allowed_names(allowed_tool_names))
    # 5. calls and results paired
    if policy.repair_tool_use_result_pairing and needs.tool_parts:
        history = _pairing(session_manager, history)
    # 6. UI-only details and stale usage
    if needs.details:
        history = _details(session_manager, history)
    if needs.usage:
        history = _usage(session_manager, history)
    # 7. Responses reasoning that cannot be replayed after a model switch
    model_changed = record_model_snapshot(session_manager, provider, model_api, model_id)
    if is_openai_responses_api(model_api) and model_changed:
        history = downgrade_openai_reasoning_blocks(history)
    # 8. Gemini never starts with a model turn
    if policy.apply_google_turn_ordering:
        marker_session = session_manager if is_google_model_api(model_api) else None
        history = apply_google_turn_ordering_fix(history, marker_session)
    return history
