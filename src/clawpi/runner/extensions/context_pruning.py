"""Context pruning in cache-TTL mode: shrink old tool results in what is sent to the model.

Only the request changes (the `context` event); the session file keeps every result whole.
Pruning waits until the provider's prompt cache has expired (the TTL since the last cache
touch): rewriting history while the cache is warm would pay for a cache miss and gain nothing.
Then, when the context is large enough, old tool results are first soft-trimmed to a head and a
tail, and if that is not enough, replaced by a placeholder, oldest first. Results before the
first user message (bootstrap reads) and in the last few assistant turns are never touched.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from clawpi.runner.cache_ttl import (
    CacheTtlSessionLog,
    is_cache_ttl_eligible_provider,
    read_last_cache_ttl_timestamp,
)
from clawpi.runner.config import agent_defaults
from clawpi.sdk.extensions import ExtensionAPI, ExtensionContext

CHARS_PER_TOKEN = 4
IMAGE_CHARS = 8_000
"""An image block counts as this many characters when sizing the context."""
_OTHER_MESSAGE_CHARS = 256
_UNSERIALISABLE_ARGS_CHARS = 128

DEFAULT_TTL_MS = 5 * 60 * 1000
DEFAULT_KEEP_LAST_ASSISTANTS = 3
DEFAULT_SOFT_TRIM_RATIO = 0.3
DEFAULT_HARD_CLEAR_RATIO = 0.5
DEFAULT_MIN_PRUNABLE_TOOL_CHARS = 50_000
DEFAULT_SOFT_TRIM_MAX_CHARS = 4_000
DEFAULT_SOFT_TRIM_HEAD_CHARS = 1_500
DEFAULT_SOFT_TRIM_TAIL_CHARS = 1_500
DEFAULT_HARD_CLEAR_PLACEHOLDER = "[Old tool result content cleared]"

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$", re.IGNORECASE)
_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(text: str, default_unit: str = "m") -> int:
    """`"5m"`, `"30s"`, `"1h"`, `"250ms"`, `"2d"`; a bare number uses `default_unit`."""
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"invalid duration {text!r}: expected a number with ms, s, m, h or d")
    unit = (match.group(2) or default_unit).lower()
    return int(float(match.group(1)) * _UNIT_MS[unit])


@dataclasses.dataclass(frozen=True, slots=True)
class ContextPruningSettings:
    """`agents.defaults.contextPruning` with the reference defaults filled in."""

    mode: str = "cache-ttl"
    ttl_ms: int = DEFAULT_TTL_MS
    keep_last_assistants: int = DEFAULT_KEEP_LAST_ASSISTANTS
    soft_trim_ratio: float = DEFAULT_SOFT_TRIM_RATIO
    hard_clear_ratio: float = DEFAULT_HARD_CLEAR_RATIO
    min_prunable_tool_chars: int = DEFAULT_MIN_PRUNABLE_TOOL_CHARS
    soft_trim_max_chars: int = DEFAULT_SOFT_TRIM_MAX_CHARS
    soft_trim_head_chars: int = DEFAULT_SOFT_TRIM_HEAD_CHARS
    soft_trim_tail_chars: int = DEFAULT_SOFT_TRIM_TAIL_CHARS
    hard_clear_enabled: bool = True
    hard_clear_placeholder: str = DEFAULT_HARD_CLEAR_PLACEHOLDER
    tools_allow: tuple[str, ...] = ()
    tools_deny: tuple[str, ...] = ()


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value == value and abs(value) != float("inf") else None


def _count(value: Any, fallback: int) -> int:
    number = _number(value)
    return fallback if number is None else max(0, int(number))


def _ratio(value: Any, fallback: float) -> float:
    number = _number(value)
    return fallback if number is None else min(1.0, max(0.0, number))


def _names(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, Sequence):
        return ()
    return tuple(v.strip() for v in value if isinstance(v, str) and v.strip())


def _block(raw: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = raw.get(key)
    return value if isinstance(value, Mapping) else {}


def compute_effective_settings(raw: Any) -> ContextPruningSettings | None:
    """Settings from a `contextPruning` config block; None unless `mode` is `"cache-ttl"`.
    Ratios are clamped to [0, 1]; an unparseable TTL keeps the default."""
    if not isinstance(raw, Mapping) or raw.get("mode") != "cache-ttl":
        return None
    ttl_ms = DEFAULT_TTL_MS
    ttl = raw.get("ttl")
    if isinstance(ttl, str):
        try:
            ttl_ms = parse_duration_ms(ttl)
        except ValueError:
            pass
    soft = _block(raw, "softTrim")
    hard = _block(raw, "hardClear")
    tools = _block(raw, "tools")
    placeholder = hard.get("placeholder")
    enabled = hard.get("enabled")
    return ContextPruningSettings(
        ttl_ms=ttl_ms,
        keep_last_assistants=_count(raw.get("keepLastAssistants"), DEFAULT_KEEP_LAST_ASSISTANTS),
        soft_trim_ratio=_ratio(raw.get("softTrimRatio"), DEFAULT_SOFT_TRIM_RATIO),
        hard_clear_ratio=_ratio(raw.get("hardClearRatio"), DEFAULT_HARD_CLEAR_RATIO),
        min_prunable_tool_chars=_count(
            raw.get("minPrunableToolChars"), DEFAULT_MIN_PRUNABLE_TOOL_CHARS
        ),
        soft_trim_max_chars=_count(soft.get("maxChars"), DEFAULT_SOFT_TRIM_MAX_CHARS),
        soft_trim_head_chars=_count(soft.get("headChars"), DEFAULT_SOFT_TRIM_HEAD_CHARS),
        soft_trim_tail_chars=_count(soft.get("tailChars"), DEFAULT_SOFT_TRIM_TAIL_CHARS),
        hard_clear_enabled=enabled if isinstance(enabled, bool) else True,
        hard_clear_placeholder=(
            placeholder.strip()
            if isinstance(placeholder, str) and placeholder.strip()
            else DEFAULT_HARD_CLEAR_PLACEHOLDER
        ),
        tools_allow=_names(tools.get("allow")),
        tools_deny=_names(tools.get("deny")),
    )


def resolve_context_pruning_settings(
    config: Mapping[str, Any] | None,
) -> ContextPruningSettings | None:
    """From a whole OpenClaw config (`agents.defaults.contextPruning`)."""
    return compute_effective_settings(agent_defaults(config).get("contextPruning"))


def _glob(pattern: str) -> re.Pattern[str]:
    parts = (re.escape(part) for part in pattern.lower().split("*"))
    return re.compile("^" + ".*".join(parts) + "$")


def make_tool_prunable_predicate(
    allow: Sequence[str] = (), deny: Sequence[str] = ()
) -> Callable[[str], bool]:
    """Case-insensitive `*` globs; deny wins; an empty allow list allows every tool."""
    allows = [_glob(p) for p in allow]
    denies = [_glob(p) for p in deny]

    def prunable(tool_name: str) -> bool:
        name = (tool_name or "").strip().lower()
        if any(d.match(name) for d in denies):
            return False
        return not allows or any(a.match(name) for a in allows)

    return prunable


# -- sizing -----------------------------------------------------------------------------------


def _text_and_image_chars(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    chars = 0
    for block in content or ():
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text":
            chars += len(block.get("text") or "")
        elif block.get("type") == "image":
            chars += IMAGE_CHARS
    return chars


def estimate_message_chars(message: Mapping[str, Any]) -> int:
    role = message.get("role")
    if role in ("user", "toolResult"):
        return _text_and_image_chars(message.get("content"))
    if role == "assistant":
        chars = 0
        for block in message.get("content") or ():
            kind = block.get("type") if isinstance(block, Mapping) else None
            if kind == "text":
                chars += len(block.get("text") or "")
            elif kind == "thinking":
                chars += len(block.get("thinking") or "")
            elif kind == "toolCall":
                try:
                    chars += len(orjson.dumps(block.get("arguments") or {}))
                except TypeError:
                    chars += _UNSERIALISABLE_ARGS_CHARS
        return chars
    return _OTHER_MESSAGE_CHARS


def _has_image(content: Any) -> bool:
    return not isinstance(content, str) and any(
        isinstance(b, Mapping) and b.get("type") == "image" for b in content or ()
    )


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [
        str(b.get("text") or "")
        for b in content or ()
        if isinstance(b, Mapping) and b.get("type") == "text"
    ]


def _soft_trimmed(
    message: Mapping[str, Any], settings: ContextPruningSettings
) -> dict[str, Any] | None:
    """The head/tail version of a long text-only result, or None when it is short enough."""
    content = message.get("content")
    if _has_image(content):
        return None
    joined = "\n".join(_texts(content))
    if len(joined) <= settings.soft_trim_max_chars:
        return None
    head_chars, tail_chars = settings.soft_trim_head_chars, settings.soft_trim_tail_chars
    if head_chars + tail_chars >= len(joined):
        return None
    head = joined[:head_chars]
    tail = joined[len(joined) - tail_chars :] if tail_chars else ""
    note = (
        f"\n\n[Tool result trimmed: kept first {head_chars} chars and last {tail_chars} chars "
        f"of {len(joined)} chars.]"
    )
    return {**message, "content": [{"type": "text", "text": f"{head}\n...\n{tail}{note}"}]}


def _protected_tail_start(messages: Sequence[Mapping[str, Any]], keep_last: int) -> int | None:
    """Index of the oldest of the last `keep_last` assistants; None if there are fewer."""
    if keep_last <= 0:
        return len(messages)
    remaining = keep_last
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "assistant":
            remaining -= 1
            if remaining == 0:
                return index
    return None


def prune_context_messages(
    messages: list[Any],
    settings: ContextPruningSettings,
    context_window_tokens: int,
    is_tool_prunable: Callable[[str], bool] | None = None,
) -> list[Any]:
    """The pruned message list, or `messages` itself (the same object) when nothing changed."""
    char_window = context_window_tokens * CHARS_PER_TOKEN
    if char_window <= 0:
        return messages
    cutoff = _protected_tail_start(messages, settings.keep_last_assistants)
    if cutoff is None:
        return messages
    first_user = next((i for i, m in enumerate(messages) if m.get("role") == "user"), None)
    start = len(messages) if first_user is None else first_user
    prunable_tool = is_tool_prunable or make_tool_prunable_predicate(
        settings.tools_allow, settings.tools_deny
    )
    total = sum(estimate_message_chars(m) for m in messages)
    if total / char_window < settings.soft_trim_ratio:
        return messages

    result: list[Any] | None = None
    candidates: list[int] = []
    for index in range(start, cutoff):
        message = messages[index]
        if message.get("role") != "toolResult":
            continue
        if not prunable_tool(str(message.get("toolName") or "")):
            continue
        if _has_image(message.get("content")):
            continue
        candidates.append(index)
        trimmed = _soft_trimmed(message, settings)
        if trimmed is None:
            continue
        total += estimate_message_chars(trimmed) - estimate_message_chars(message)
        if result is None:
            result = list(messages)
        result[index] = trimmed

    current = result if result is not None else messages
    if total / char_window < settings.hard_clear_ratio or not settings.hard_clear_enabled:
        return current
    if (
        sum(estimate_message_chars(current[i]) for i in candidates)
        < settings.min_prunable_tool_chars
    ):
        return current
    for index in candidates:
        if total / char_window < settings.hard_clear_ratio:
            break
        before = current[index]
        cleared = {
            **before,
            "content": [{"type": "text", "text": settings.hard_clear_placeholder}],
        }
        if result is None:
            result = list(messages)
            current = result
        result[index] = cleared
        total += estimate_message_chars(cleared) - estimate_message_chars(before)
    return current


# -- the extension ----------------------------------------------------------------------------


@dataclasses.dataclass
class ContextPruningRuntime:
    """Per-session state the extension works with (OpenClaw's per-session-manager runtime)."""

    settings: ContextPruningSettings
    context_window_tokens: int | None = None
    """None: use the session model's context window."""
    last_cache_touch_at: int | None = None
    """Milliseconds since the epoch of the last prompt-cache touch; None when unknown."""
    is_tool_prunable: Callable[[str], bool] | None = None
    now_ms: Callable[[], int] = dataclasses.field(default=lambda: int(time.time() * 1000))
    pruned_calls: int = 0


def context_pruning_extension(runtime: ContextPruningRuntime) -> Callable[[ExtensionAPI], None]:
    """A clawpi.sdk extension factory pruning on every `context` event of the session."""

    def handle(event: dict[str, Any], ctx: ExtensionContext) -> dict[str, Any] | None:
        settings = runtime.settings
        if settings.mode != "cache-ttl":
            return None
        last_touch = runtime.last_cache_touch_at
        if last_touch is None or settings.ttl_ms <= 0:
            # no touch recorded yet: the cache state is unknown, and the runner records one
            # after every attempt, so pruning starts from the next expired window
            return None
        now = runtime.now_ms()
        if now - last_touch < settings.ttl_ms:
            return None  # the prompt cache is still warm: keep the prefix byte-identical
        window = runtime.context_window_tokens
        if window is None:
            window = getattr(ctx.model, "context_window", None) if ctx is not None else None
        if not window or window <= 0:
            return None
        messages = event.get("messages")
        if not isinstance(messages, list):
            return None
        pruned = prune_context_messages(messages, settings, int(window), runtime.is_tool_prunable)
        if pruned is messages:
            return None
        runtime.last_cache_touch_at = now
        runtime.pruned_calls += 1
        return {"messages": pruned}

    def factory(api: ExtensionAPI) -> None:
        api.on("context", handle)

    return factory


def build_context_pruning_extension(
    config: Mapping[str, Any] | None,
    *,
    provider: str,
    model_id: str,
    session: CacheTtlSessionLog | None = None,
    context_window_tokens: int | None = None,
) -> tuple[Callable[[ExtensionAPI], None], ContextPruningRuntime] | None:
    """The extension for a run when the config enables cache-TTL pruning and the provider has
    a TTL prompt cache; None otherwise. The last cache touch is read from `session`."""
    settings = resolve_context_pruning_settings(config)
    if settings is None or not is_cache_ttl_eligible_provider(provider, model_id):
        return None
    runtime = ContextPruningRuntime(
        settings=settings,
        context_window_tokens=context_window_tokens,
        last_cache_touch_at=read_last_cache_ttl_timestamp(session) if session else None,
        is_tool_prunable=make_tool_prunable_predicate(settings.tools_allow, settings.tools_deny),
    )
    return context_pruning_extension(runtime), runtime
