"""Getting the user-facing answer (and the reasoning) out of an assistant message.

What a model writes is not always what a user should read: MiniMax leaks its tool-call XML,
some models leak control tokens (`<|im_end|>`), a transcript converted between providers carries
`[Tool Call: ...]` stand-ins, and reasoning may sit in `<think>` tags. These helpers remove all
of that, in that order, and never touch anything else.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from clawpi.ai.types import AssistantMessage
from clawpi.reply.tags import (
    THINKING_TAG_NAMES,
    extract_thinking_from_tagged_text,
    strip_thinking_tags,
)
from clawpi.reply.user_text import sanitize_user_facing_text

_MINIMAX_INVOKE = re.compile(r"<invoke\b[^>]*>.*?</invoke>", re.I | re.S)
_MINIMAX_TAG = re.compile(r"</?minimax:tool_call>", re.I)
_SPECIAL_TOKEN = re.compile(r"<[|｜][^|｜<>]*[|｜]>")
_SPACES = re.compile(r" {2,}")
_DOWNGRADED_MARKER = re.compile(r"\[Tool (?:Call|Result)|\[Historical context", re.I)
_LINE_GAP = re.compile(r"[ \t]*\r?\n?[ \t]*")
_TOOL_CALL_MARKER = re.compile(r"\[Tool Call:[^\]]*\]", re.I)
_TOOL_RESULT_BLOCK = re.compile(
    r"\[Tool Result for ID[^\]]*\]\n?.*?(?=\n*\[Tool |\n*\Z)", re.I | re.S
)
_HISTORICAL_NOTE = re.compile(r"\[Historical context:[^\]]*\]\n?", re.I)
_THINK_OPEN = re.compile(r"<\s*(?:think(?:ing)?|thought|antthinking)\b[^<>]*>", re.I)


def strip_minimax_tool_call_xml(text: str) -> str:
    """Remove MiniMax tool invocations that leaked into the text."""
    if not text or "minimax:tool_call" not in text.lower():
        return text
    return _MINIMAX_TAG.sub("", _MINIMAX_INVOKE.sub("", text))


def strip_model_special_tokens(text: str) -> str:
    """Remove leaked control tokens such as `<|im_end|>`."""
    if not text or not _SPECIAL_TOKEN.search(text):
        return text
    return _SPACES.sub(" ", _SPECIAL_TOKEN.sub(" ", text)).strip()


def _skip_jsonish(text: str, index: int) -> int:
    """End of the JSON value (or rest of line) starting at `index`, after blank space."""
    n = len(text)
    while index < n and text[index] in " \t\r\n":
        index += 1
    if index >= n:
        return index
    opener = text[index]
    if opener in "{[":
        depth = 0
        in_string = escape = False
        for i in range(index, n):
            ch = text[i]
            if in_string:
                if escape:
                    escape = False
                elif ch == "\\":
                    escape = True
                elif ch == '"':
                    in_string = False
            elif ch == '"':
                in_string = True
            elif ch in "{[":
                depth += 1
            elif ch in "}]":
                depth -= 1
                if depth == 0:
                    return i + 1
        return n
    end = text.find("\n", index)
    return n if end < 0 else end


def strip_downgraded_tool_call_text(text: str) -> str:
    """Remove `[Tool Call: ...]` + `Arguments:` stand-ins, tool-result blocks and history notes.

    They appear when a transcript written by one provider is replayed to another.
    """
    if not text or not _DOWNGRADED_MARKER.search(text):
        return text
    out: list[str] = []
    cursor = 0
    for match in _TOOL_CALL_MARKER.finditer(text):
        if match.start() < cursor:
            continue
        out.append(text[cursor : match.start()])
        index = match.end()
        gap = _LINE_GAP.match(text, index)
        index = gap.end() if gap else index
        if text[index : index + 9].lower() == "arguments":
            index += 9
            if text[index : index + 1] == ":":
                index += 1
            index = _skip_jsonish(text, index)
        if text[index : index + 1] == "\n" and (not out or "".join(out).endswith("\n")):
            index += 1
        cursor = index
    out.append(text[cursor:])
    cleaned = "".join(out)
    cleaned = _TOOL_RESULT_BLOCK.sub("", cleaned)
    cleaned = _HISTORICAL_NOTE.sub("", cleaned)
    return cleaned.strip()


def _clean_text_block(text: str) -> str:
    text = strip_minimax_tool_call_xml(text)
    text = strip_model_special_tokens(text)
    text = strip_downgraded_tool_call_text(text)
    return strip_thinking_tags(text).strip()


def extract_assistant_text(message: AssistantMessage | Mapping[str, Any]) -> str:
    """The answer a user should read: text blocks cleaned and joined by newlines."""
    blocks = _block_strings(message.get("content"), "text")
    cleaned = [c for c in (_clean_text_block(b) for b in blocks) if c]
    joined = "\n".join(cleaned).strip()
    error_context = message.get("stopReason") == "error"
    return sanitize_user_facing_text(joined, error_context=error_context).strip()


def extract_assistant_thinking(message: AssistantMessage | Mapping[str, Any]) -> str:
    """The message's native reasoning blocks, joined."""
    content = message.get("content")
    if not isinstance(content, list):
        return ""
    parts = [p.strip() for p in _block_strings(content, "thinking") if p.strip()]
    return "\n".join(parts).strip()


def _block_strings(content: Any, kind: str) -> list[str]:
    """The `kind` field of every `kind` block (a bare string content counts as one text)."""
    if isinstance(content, str):
        return [content] if kind == "text" else []
    if not isinstance(content, list):
        return []
    found: list[str] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == kind:
            value = block.get(kind)
            if isinstance(value, str):
                found.append(value)
    return found


def extract_thinking_from_tagged_stream(text: str) -> str:
    """Reasoning visible so far in a streamed text, including a thinking tag still open."""
    return extract_thinking_from_tagged_text(text, include_unclosed=True)


def format_reasoning_message(text: str) -> str:
    """`Reasoning:` and each line in italics, as chat channels show the model's thinking."""
    return StreamedReasoningFormat()(text)


class StreamedReasoningFormat:
    """`format_reasoning_message` for a reasoning that streams: called with the whole text on
    every delta, it formats only the lines that are new since the last call (the lines before
    the last one are kept formatted while the text keeps starting with them)."""

    __slots__ = ("_formatted", "_source")

    def __init__(self) -> None:
        self._source = ""
        """Whole lines, each ending in a newline, as last formatted into `_formatted`."""
        self._formatted = ""

    def __call__(self, text: str) -> str:
        trimmed = text.strip()
        if not trimmed:
            return ""
        last = trimmed.rfind("\n") + 1
        if not trimmed.startswith(self._source, 0, last):
            self._source = self._formatted = ""
        if last > len(self._source):
            lines = trimmed[len(self._source) : last - 1].split("\n")
            self._formatted += "".join(f"{_italic(line)}\n" for line in lines)
            self._source = trimmed[:last]
        return "Reasoning:\n" + self._formatted + _italic(trimmed[last:])


def _italic(line: str) -> str:
    return f"_{line}_" if line else line


def split_thinking_tagged_text(text: str) -> list[dict[str, Any]] | None:
    """Split `<think>a</think>b` into thinking and text blocks; None unless it starts with one.

    An unclosed tag gives None: the text is left as it is rather than guessed at.
    """
    start = text.lstrip()
    if not start.startswith("<") or not _THINK_OPEN.match(start):
        return None
    scan = re.compile(r"<\s*(/?)\s*(?:" + "|".join(THINKING_TAG_NAMES) + r")\b[^<>]*>", re.I)
    blocks: list[dict[str, Any]] = []
    cursor = 0
    thinking_start = 0
    in_thinking = False
    for match in scan.finditer(text):
        closing = bool(match.group(1))
        if not in_thinking and not closing:
            if text[cursor : match.start()]:
                blocks.append({"type": "text", "text": text[cursor : match.start()]})
            thinking_start = match.end()
            in_thinking = True
        elif in_thinking and closing:
            thought = text[thinking_start : match.start()].strip()
            if thought:
                blocks.append({"type": "thinking", "thinking": thought})
            cursor = match.end()
            in_thinking = False
    if in_thinking:
        return None
    if text[cursor:]:
        blocks.append({"type": "text", "text": text[cursor:]})
    if not any(b["type"] == "thinking" for b in blocks):
        return None
    return blocks


def promote_thinking_tags_to_blocks(message: AssistantMessage) -> None:
    """Turn tagged reasoning in text blocks into real thinking blocks (in place).

    Messages that already have thinking blocks are left unchanged.
    """
    content = message.get("content")
    if not isinstance(content, list) or any(
        isinstance(b, dict) and b.get("type") == "thinking" for b in content
    ):
        return
    new: list[Any] = []
    changed = False
    for block in content:
        if not (isinstance(block, dict) and block.get("type") == "text"):
            new.append(block)
            continue
        split = split_thinking_tagged_text(str(block.get("text", "")))
        if split is None:
            new.append(block)
            continue
        changed = True
        for part in split:
            if part["type"] == "thinking":
                new.append(part)
            elif part["text"].lstrip():
                new.append({"type": "text", "text": part["text"].lstrip()})
    if changed:
        message["content"] = new


# -- tool metadata ---------------------------------------------------------------------------

_META_MAX_CHARS = 120
_META_KEYS: Mapping[str, tuple[str, ...]] = {
    "read": ("path", "file_path", "filePath"),
    "write": ("path", "file_path", "filePath"),
    "edit": ("path", "file_path", "filePath"),
    "ls": ("path",),
    "exec": ("command", "cmd"),
    "bash": ("command", "cmd"),
    "process": ("action", "sessionId"),
    "grep": ("pattern", "path"),
    "find": ("pattern", "path"),
    "web_fetch": ("url",),
    "web_search": ("query",),
    "message": ("to", "target", "channel"),
    "sessions_send": ("sessionKey", "label"),
}
TOOL_DISPLAY: Mapping[str, tuple[str, str]] = {
    "exec": ("🛠️", "Exec"),
    "bash": ("🛠️", "Bash"),
    "process": ("🧰", "Process"),
    "read": ("📖", "Read"),
    "write": ("✍️", "Write"),
    "edit": ("📝", "Edit"),
    "ls": ("📂", "List"),
    "grep": ("🔎", "Grep"),
    "find": ("🔎", "Find"),
    "web_fetch": ("🌐", "Web Fetch"),
    "web_search": ("🔎", "Web Search"),
    "message": ("✉️", "Message"),
    "sessions_send": ("✉️", "Session Send"),
}
_DEFAULT_DISPLAY = ("🧩", "")


def infer_tool_meta_from_args(tool_name: str, args: Any) -> str | None:
    """A short, one-line detail of a call for summaries: the path read, the command run..."""
    if not isinstance(args, Mapping):
        return None
    keys = _META_KEYS.get(tool_name.lower())
    values: list[str] = []
    for key in keys or ("path", "command", "url", "query"):
        value = args.get(key)
        if isinstance(value, str | int | float) and str(value).strip():
            values.append(str(value).strip())
            if keys is None:
                break
    if not values:
        return None
    meta = " ".join(" ".join(v.split()) for v in values[:2])
    return meta if len(meta) <= _META_MAX_CHARS else meta[: _META_MAX_CHARS - 1] + "…"


def tool_display(tool_name: str | None) -> tuple[str, str]:
    """(emoji, label) for a tool; unknown tools get a puzzle piece and a title-cased name."""
    name = (tool_name or "tool").strip() or "tool"
    emoji, label = TOOL_DISPLAY.get(name.lower(), _DEFAULT_DISPLAY)
    return emoji, label or name.replace("_", " ").title()


def format_tool_summary(tool_name: str | None, meta: str | None, markdown: bool = True) -> str:
    """`🛠️ exec: ls -la` (the detail in code style when the channel renders Markdown)."""
    emoji, _ = tool_display(tool_name)
    name = (tool_name or "tool").strip() or "tool"
    if not meta:
        return f"{emoji} {name}"
    detail = f"`{meta}`" if markdown and "`" not in meta else meta
    return f"{emoji} {name}: {detail}"


def format_tool_output_block(output: str, markdown: bool = True) -> str:
    """Tool output for verbose channels: a fenced `txt` block, or plain text."""
    trimmed = output.strip()
    if not trimmed:
        return "(no output)"
    if not markdown:
        return trimmed
    fence = "```"
    while fence in trimmed:
        fence += "`"
    return f"{fence}txt\n{trimmed}\n{fence}"


_PUNCTUATION_TO_SPACE = str.maketrans(
    dict.fromkeys("!\"#$%&'()*+,-./:;<=>?@[\\]^`{|}~…“”‘’«»¿¡·•–—", " ")
)


def normalize_text_for_comparison(text: str) -> str:
    """Lower-case words only, so "Sent!" and "sent" compare equal for duplicate checks.

    A translation table, not a regex: this runs on every block that goes out.
    """
    return " ".join(text.lower().translate(_PUNCTUATION_TO_SPACE).split())


MIN_DUPLICATE_TEXT_LENGTH = 10


def is_messaging_tool_duplicate(normalized: str, sent_normalized: list[str]) -> bool:
    """Whether a reply repeats (or is contained in) a text a messaging tool already sent."""
    if len(normalized) < MIN_DUPLICATE_TEXT_LENGTH or not sent_normalized:
        return False
    return any(
        sent
        and (normalized in sent or (len(sent) >= MIN_DUPLICATE_TEXT_LENGTH and sent in normalized))
        for sent in sent_normalized
    )
