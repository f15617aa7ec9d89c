"""Hiding the model's `<think>` reasoning (and enforcing `<final>`) in a stream cut anywhere.

Models that reason in plain text wrap it in `<think>`, `<thinking>`, `<thought>` or
`<antthinking>` tags; some are asked to put the answer inside `<final>`. A chat user must never
see the reasoning, even when a tag arrives split over two deltas (`<thi` + `nk>`), and must see a
tag that is only quoted in code (`` `<think>` ``, or inside a fenced block) exactly as written.

`strip_block_tags(delta, state)` returns the visible part of one delta. The state carries what
is open across calls, and holds back the few characters that might still become a tag or a fence
(`<thi`, a trailing run of backticks); `finish_block_tags(state)` releases them at the end.
Every character goes through the scanner once, so a long answer costs linear time.
"""

from __future__ import annotations

import dataclasses
import re

THINKING_TAG_NAMES = ("think", "thinking", "thought", "antthinking")
FINAL_TAG_NAME = "final"
_TAG_NAMES = (*THINKING_TAG_NAMES, FINAL_TAG_NAME)
MAX_PENDING_TAG_CHARS = 256
"""A `<think ...` still missing its `>` after this many characters is ordinary text."""

_TAG = re.compile(r"<\s*(/?)\s*(think(?:ing)?|thought|antthinking|final)(?=[\s/>])[^<>]*>", re.I)
_TAG_HEAD = re.compile(r"<\s*/?\s*([A-Za-z]*)", re.S)
_BLOCK_END = "\x1e"
_SPECIAL = re.compile(r"[<`~]")
_PLAIN = re.compile(r"(?:[^<`~]++|`[^`<~\n]++`(?=[^`]))*+")
"""Text that needs no scanning: no tag or fence character except in `single` code spans
(closed on their line, holding no special, not at the end where more backticks may follow)."""
_LEADING_BLANK = re.compile(r"[ \t]*\n")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_FENCE_CLOSE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*(\n|\Z)", re.M)
_TICKS = re.compile(r"`+")
_TILDES = re.compile(r"~+")
_MAYBE_FENCE_LINE = re.compile(r" {0,3}[`~]*[ \t]*\Z")


@dataclasses.dataclass(slots=True)
class BlockTagState:
    """What is open at the end of the text seen so far (one per stream)."""

    thinking: bool = False
    """Inside a thinking tag: text is hidden until it closes."""
    final: bool = False
    """Inside `<final>`."""
    ever_final: bool = False
    """A `<final>` tag was seen (strict final mode shows nothing before that)."""
    inline_ticks: int = 0
    """Length of the backtick run that opened the current inline code span (0: none)."""
    fence: str = ""
    """The marker of the open fenced code block (```` ``` ````, `~~~~`...), "" outside one."""
    fence_opening_line: bool = False
    """Still on the fence's opening line (its info string)."""
    indent: int = 0
    """Spaces at the start of the current line so far; -1 once the line has other text."""
    pending: str = ""
    """Held-back text that may still turn into a tag or a fence."""
    collect_thinking: bool = False
    """Keep hidden reasoning in `thinking_parts` (for a reasoning stream)."""
    thinking_parts: list[str] = dataclasses.field(default_factory=list)

    def reset(self) -> None:
        """Forget everything but `collect_thinking`: a new message starts."""
        for name, value in _RESET_VALUES:
            setattr(self, name, value)
        self.thinking_parts.clear()

    def take_thinking(self) -> str:
        """The reasoning text hidden since the last call (blocks separated by blank lines)."""
        text = "".join(self.thinking_parts).replace(_BLOCK_END, "\n\n")
        self.thinking_parts.clear()
        return text


_RESET_VALUES = tuple(
    (field.name, field.default)
    for field in dataclasses.fields(BlockTagState)
    if field.name not in ("thinking_parts", "collect_thinking")
)
"""Each field's default, looked up once (`dataclasses.fields` per reset cost more than the
rest of a message's tag handling)."""


def strip_block_tags(text: str, state: BlockTagState, enforce_final_tag: bool = False) -> str:
    """The visible part of `text`, a piece of a stream: thinking removed, tags stripped.

    With `enforce_final_tag`, only text inside `<final>...</final>` is visible. Without it,
    `<final>` tags are removed and their content kept.
    """
    if (
        not (state.pending or state.thinking or state.fence or state.inline_ticks)
        and "<" not in text
        and "`" not in text
        and "~" not in text
    ):
        # Fast path: prose with nothing that can open or close anything.
        _advance_indent(state, text)
        if enforce_final_tag and not state.final:
            return ""
        return text
    return _scan(state.pending + text if state.pending else text, state, enforce_final_tag, False)


def finish_block_tags(state: BlockTagState, enforce_final_tag: bool = False) -> str:
    """Release what was held back at the end of the stream (a partial tag is plain text then)."""
    if not state.pending:
        return ""
    return _scan(state.pending, state, enforce_final_tag, True)


def _advance_indent(state: BlockTagState, segment: str) -> None:
    _advance_indent_span(state, segment, 0, len(segment))


def _advance_indent_span(state: BlockTagState, text: str, start: int, end: int) -> None:
    """Track the current line's leading spaces over `text[start:end]` (without copying it)."""
    if start >= end:
        return
    newline = text.rfind("\n", start, end)
    if newline >= 0:
        tail = end - newline - 1
        state.indent = tail if text.count(" ", newline + 1, end) == tail else -1
        state.fence_opening_line = False
    elif state.indent >= 0:
        state.indent = (
            state.indent + end - start if text.count(" ", start, end) == end - start else -1
        )


def _could_be_tag(tail: str) -> bool:
    if len(tail) > MAX_PENDING_TAG_CHARS or ">" in tail:
        return False
    head = _TAG_HEAD.match(tail)
    if head is None:
        return False
    name = head.group(1).lower()
    rest = tail[head.end() :]
    if not rest:
        return any(candidate.startswith(name) for candidate in _TAG_NAMES)
    return name in _TAG_NAMES and rest[0] in " \t\r\n/" and "<" not in rest


def _scan(text: str, state: BlockTagState, enforce: bool, final: bool) -> str:
    out: list[str] = []
    state.pending = ""
    i = 0
    n = len(text)
    while i < n:
        if state.thinking:
            i = _scan_thinking(text, i, state, final)
            if i < 0:
                break
            continue
        visible = state.final or not enforce
        if state.fence:
            i = _scan_fence(text, i, state, final, out if visible else None)
            if i < 0:
                break
            continue
        if state.inline_ticks:
            found = _SPECIAL.search(text, i)
            j = n if found is None else found.start()
        else:
            # Prose and one-backtick code spans on one line change nothing but the indent, so
            # one regex call passes them all; the loop takes over at the next special.
            j = _PLAIN.match(text, i).end()  # type: ignore[union-attr]
        if j > i:
            newline = text.rfind("\n", i, j)
            if state.inline_ticks and newline >= 0 and _has_blank_line(state, text[i:j]):
                state.inline_ticks = 0  # a blank line ends an unclosed inline code span
            if visible:
                out.append(text[i:j])
            # The line's indent (inlined: this runs for every piece of plain text).
            if newline >= 0:
                tail = j - newline - 1
                state.indent = tail if text.count(" ", newline + 1, j) == tail else -1
                state.fence_opening_line = False
            elif state.indent >= 0:
                state.indent = state.indent + j - i if text.count(" ", i, j) == j - i else -1
            i = j
            if j == n:
                break
        char = text[j]
        if char == "`":
            run = _TICKS.match(text, j)
            assert run is not None
            end = run.end()
            if end == n and not final:
                state.pending = text[j:]
                break
            ticks = end - j
            if not state.inline_ticks and 0 <= state.indent <= 3 and ticks >= 3:
                state.fence = run.group(0)
                state.fence_opening_line = True
            elif not state.inline_ticks:
                state.inline_ticks = ticks
            elif state.inline_ticks == ticks:
                state.inline_ticks = 0
            if visible:
                out.append(run.group(0))
            state.indent = -1
            i = end
            continue
        if char == "~":
            run = _TILDES.match(text, j)
            assert run is not None
            end = run.end()
            at_line_start = 0 <= state.indent <= 3 and not state.inline_ticks
            if at_line_start and end == n and not final:
                state.pending = text[j:]
                break
            if at_line_start and end - j >= 3:
                state.fence = run.group(0)
                state.fence_opening_line = True
            if visible:
                out.append(run.group(0))
            state.indent = -1
            i = end
            continue
        # char == "<"
        match = None if state.inline_ticks else _TAG.match(text, j)
        if match is not None:
            closing = bool(match.group(1))
            name = match.group(2).lower()
            if name == FINAL_TAG_NAME:
                state.final = not closing
                if not closing:
                    state.ever_final = True
            elif not closing:
                state.thinking = True
            state.indent = -1
            i = match.end()
            continue
        if not state.inline_ticks and not final and _could_be_tag(text[j:]):
            state.pending = text[j:]
            break
        if visible:
            out.append("<")
        state.indent = -1
        i = j + 1
    return "".join(out)


def _has_blank_line(state: BlockTagState, segment: str) -> bool:
    if state.indent >= 0 and _LEADING_BLANK.match(segment):
        return True
    return _BLANK_LINE.search(segment) is not None


def _scan_thinking(text: str, i: int, state: BlockTagState, final: bool) -> int:
    """Skip hidden reasoning from `i`; the index to go on from, or -1 when the text is used up."""
    j = text.find("<", i)
    if j < 0:
        if state.collect_thinking:
            state.thinking_parts.append(text[i:])
        _advance_indent_span(state, text, i, len(text))
        return -1
    if state.collect_thinking and j > i:
        state.thinking_parts.append(text[i:j])
    _advance_indent_span(state, text, i, j)
    match = _TAG.match(text, j)
    if match is not None:
        if match.group(1) and match.group(2).lower() != FINAL_TAG_NAME:
            state.thinking = False
            if state.collect_thinking:
                state.thinking_parts.append(_BLOCK_END)
        state.indent = -1
        return match.end()
    if not final and _could_be_tag(text[j:]):
        state.pending = text[j:]
        return -1
    if state.collect_thinking:
        state.thinking_parts.append("<")
    state.indent = -1
    return j + 1


def _scan_fence(text: str, i: int, state: BlockTagState, final: bool, out: list[str] | None) -> int:
    """Pass fenced code through up to and including its closing line; -1 when used up."""
    n = len(text)
    if state.fence_opening_line or state.indent != 0:
        newline = text.find("\n", i)
        if newline < 0:
            if out is not None:
                out.append(text[i:])
            _advance_indent_span(state, text, i, n)
            return -1
        if out is not None:
            out.append(text[i : newline + 1])
        state.fence_opening_line = False
        state.indent = 0
        i = newline + 1
        if i == n:
            return -1
    # At a line start: look for the closing fence line directly (it holds the opening marker,
    # so text without that marker has none and needs no line-by-line search).
    closes = _FENCE_CLOSE_LINE.finditer(text, i) if text.find(state.fence, i) >= 0 else ()
    for close in closes:
        marker = close.group(1)
        if marker[0] != state.fence[0] or len(marker) < len(state.fence):
            continue
        if not close.group(2) and not final:
            break  # a possible closing line that has not ended yet: hold it back
        if out is not None:
            out.append(text[i : close.end()])
        state.fence = ""
        state.indent = 0 if close.group(2) else -1
        return close.end()
    last_newline = text.rfind("\n", i)
    line_start = i if last_newline < 0 else last_newline + 1
    if not final and line_start < n and _MAYBE_FENCE_LINE.match(text, line_start):
        if out is not None:
            out.append(text[i:line_start])
        state.indent = 0
        state.pending = text[line_start:]
        return -1
    if out is not None:
        out.append(text[i:])
    _advance_indent_span(state, text, i, n)
    return -1


def strip_thinking_tags(text: str) -> str:
    """A whole text without its reasoning; an unclosed thinking tag hides everything after it."""
    if "<" not in text:
        return text  # no tag to strip (code spans and fences only matter around tags)
    state = BlockTagState()
    return strip_block_tags(text, state) + finish_block_tags(state)


def strip_final_tags(text: str) -> str:
    """Remove `<final>` tags, keeping their content."""
    return _FINAL_TAG.sub("", text) if "<" in text else text


def extract_thinking_from_tagged_text(text: str, include_unclosed: bool = False) -> str:
    """The reasoning inside thinking tags of a whole text, blocks joined by blank lines.

    With `include_unclosed`, a thinking tag still open at the end counts too (for streaming).
    """
    if "<" not in text:
        return ""
    state = BlockTagState(collect_thinking=True)
    strip_block_tags(text, state)
    finish_block_tags(state)
    blocks = "".join(state.thinking_parts).split(_BLOCK_END)
    if state.thinking and not include_unclosed:
        blocks = blocks[:-1]
    return "\n\n".join(b.strip() for b in blocks if b.strip())


_FINAL_TAG = re.compile(r"<\s*/?\s*final(?=[\s/>])[^<>]*>", re.I)
