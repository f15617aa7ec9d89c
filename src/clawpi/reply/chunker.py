"""Cutting a streamed answer into chat-sized blocks at natural breaks.

A channel message should end at a paragraph, else a line, else a sentence; only a block that
reached `max_chars` without any of those is cut at a space, and only a run of text without any
space is cut hard. A fenced code block is never cut while it fits; when it must be cut, the
block is closed with its fence and the next one reopens it with the same opening line (language
tag kept), so every message renders as valid Markdown.

Whitespace rules (what a reader of the blocks can rely on): each block is the buffered text up
to the break with trailing whitespace removed; blank lines at the start of the next block are
dropped, and so are the spaces after a break inside a line. Nothing else is changed.

The chunker keeps fence state line by line as text arrives and remembers how far it has looked
for a break, so feeding a long answer one character at a time costs linear time.
"""

from __future__ import annotations

import bisect
import re
from typing import Literal, TypeAlias

BreakPreference: TypeAlias = Literal["paragraph", "newline", "sentence"]

DEFAULT_MIN_CHARS = 800
DEFAULT_MAX_CHARS = 1200
DEFAULT_TEXT_CHUNK_LIMIT = 4000
"""A channel's `textChunkLimit` when it does not set one: no block is ever longer."""
_COMPACT_AFTER = 4096

_FENCE_LINE = re.compile(r"( {0,3})(`{3,}|~{3,})([^\n]*)")
_FENCE_MARKER = re.compile(r"```|~~~")
_STOP_CHARS = frozenset(".!?")
_SENTENCE_END = re.compile(r"[.!?](?=\s)")
_WHITESPACE = re.compile(r"\s")
_LEADING_BLANK_LINES = re.compile(r"(?:[ \t]*\n)+")
_PARTIAL_FENCE = re.compile(r" {0,3}(?:`{2,}|~{2,})[^\n]*\Z")
_TICK_RUN = re.compile(r"`+")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")

_Break: TypeAlias = tuple[int, bool, bool]
"""(raw index to cut at, cut is inside a line, cut splits an open fence)."""


class _Fence:
    __slots__ = ("end", "indent", "marker", "open_line", "reopened", "start")

    def __init__(self, start: int, indent: str, marker: str, open_line: str) -> None:
        self.start = start
        self.end = -1
        self.reopened = False
        """Its opening line was emitted with an earlier block and lives in the prefix now."""
        self.indent = indent
        self.marker = marker
        self.open_line = open_line


class BlockChunker:
    """Accumulates streamed text and hands out finished blocks.

        chunker = BlockChunker(min_chars=800, max_chars=1200, break_preference="paragraph")
        chunker.append(delta); blocks = chunker.drain()   # at the end: drain(force=True)

    `max_chars` is clamped to `text_limit` (the channel's message size limit) and `min_chars`
    to `max_chars`. With `flush_on_paragraph`, each finished paragraph goes out at once.
    """

    def __init__(
        self,
        min_chars: int = DEFAULT_MIN_CHARS,
        max_chars: int = DEFAULT_MAX_CHARS,
        break_preference: BreakPreference = "paragraph",
        flush_on_paragraph: bool = False,
        text_limit: int = DEFAULT_TEXT_CHUNK_LIMIT,
    ) -> None:
        if break_preference not in ("paragraph", "newline", "sentence"):
            raise ValueError(
                f"break_preference must be 'paragraph', 'newline' or 'sentence', "
                f"not {break_preference!r}"
            )
        limit = max(1, int(text_limit))
        self.max_chars = max(1, min(int(max_chars), limit))
        self.min_chars = max(1, min(int(min_chars), self.max_chars))
        self.break_preference: BreakPreference = break_preference
        self.flush_on_paragraph = flush_on_paragraph
        self.reset()

    # -- public --------------------------------------------------------------------------

    def reset(self) -> None:
        """Drop everything buffered (a new message starts, or a retry replaces this one)."""
        self._buf = ""
        self._pending: list[str] = []
        self._pending_len = 0
        self._hint = False
        self._start = 0
        self._held = 0
        self._prefix = ""
        self._line = 0
        self._fence: _Fence | None = None
        self._span_starts: list[int] = []
        self._spans: list[_Fence] = []
        self._checked = 0
        self._partial_fence = -1

    def append(self, text: str) -> None:
        if not text:
            return
        self._pending.append(text)
        self._pending_len += len(text)
        if not self._hint and ("\n" in text or "." in text or "!" in text or "?" in text):
            self._hint = True  # the text may hold a break: look at it on the next drain

    @property
    def size(self) -> int:
        """Characters buffered (including a reopened fence line)."""
        return self._held + self._pending_len

    def has_buffered(self) -> bool:
        return self._pending_len > 0 or len(self._buf) > self._start

    @property
    def buffered_text(self) -> str:
        if not self.has_buffered():
            return ""
        return self._prefix + self._buf[self._start :] + "".join(self._pending)

    def ends_with_stop(self) -> bool:
        """The buffered text ends with `.`, `!` or `?` (whitespace after it would be a break)."""
        if self._pending:
            return self._pending[-1][-1:] in _STOP_CHARS
        return len(self._buf) > self._start and self._buf[-1] in _STOP_CHARS

    def open_fence_marker(self) -> str:
        """The marker character of an open fenced block that nothing buffered can close ("").

        While it is open and below `max_chars`, no block can end: a stream can skip draining
        until text with that character (a possible closing line) or enough text arrives.
        """
        fence = self._fence
        if fence is None:
            return ""
        char = fence.marker[0]
        if self._buf.find(char, self._line) >= 0 or any(char in part for part in self._pending):
            return ""
        return char

    def _size(self) -> int:
        return self._held + self._pending_len

    def _sync(self) -> None:
        self._held = len(self._prefix) + len(self._buf) - self._start

    def _materialize(self) -> None:
        """Move appended text into the searchable buffer (and drop what was emitted)."""
        if not self._pending:
            return
        added = "".join(self._pending)
        self._pending.clear()
        self._pending_len = 0
        self._compact()
        self._buf += added
        self._sync()
        if "\n" in added:
            self._parse_lines()

    def drain(self, force: bool = False) -> list[str]:
        """The blocks that are ready; with `force`, everything buffered (still split at max)."""
        if not force:
            size = self._held + self._pending_len
            if not self._hint and size < self.max_chars:
                return []  # nothing that could end a block arrived since the last look
            if size < self.min_chars and not self.flush_on_paragraph:
                return []
        blocks: list[str] = []
        self._materialize()
        self._hint = False
        if self.flush_on_paragraph and not force:
            self._drain_paragraphs(blocks)
            self._keep_hint()
            return blocks
        while self.has_buffered():
            size = self._size()
            if not force and size < self.min_chars:
                break
            if force and size <= self.max_chars:
                self._parse_lines(final=True)
                self._emit_rest(blocks)
                break
            cut = self._pick_break(size, force)
            if cut is None:
                break
            self._emit(cut, blocks)
        self._keep_hint()
        return blocks

    def _keep_hint(self) -> None:
        # A sentence end at the very end becomes a break once whitespace follows it.
        if self._buf[-1:] in (".", "!", "?", "\n") and self.has_buffered():
            self._hint = True

    # -- fences ----------------------------------------------------------------------------

    def _parse_lines(self, final: bool = False) -> None:
        buf = self._buf
        line = max(self._line, self._start)
        last_newline = buf.rfind("\n", line)
        if last_newline >= 0:
            # Only lines that start with a fence marker matter: jump between markers and keep
            # those with at most three spaces before them, instead of trying every line.
            end = last_newline + 1
            pos = line
            while (marker := _FENCE_MARKER.search(buf, pos, end)) is not None:
                at = marker.start()
                start = buf.rfind("\n", 0, at) + 1
                newline = buf.find("\n", at)
                if start >= line and at - start <= 3 and buf.count(" ", start, at) == at - start:
                    self._parse_line(start, newline)
                pos = newline + 1
            line = end
        if final and line < len(buf):
            self._parse_line(line, len(buf))
            line = len(buf)
        self._line = line

    def _parse_line(self, start: int, end: int) -> None:
        match = _FENCE_LINE.match(self._buf, start, end)
        if match is None:
            return
        indent, marker, info = match.groups()
        fence = self._fence
        if fence is None:
            if marker[0] == "`" and "`" in info:
                return  # ```x``` is inline code, not a fence
            self._fence = _Fence(start, indent, marker, self._buf[start:end])
        elif marker[0] == fence.marker[0] and len(marker) >= len(fence.marker) and not info.strip():
            fence.end = end
            self._span_starts.append(fence.start)
            self._spans.append(fence)
            self._fence = None

    def _note_partial_fence(self) -> None:
        """A last line still arriving that may open a fence (```` `` ````, `~~~j`...) is one."""
        line = max(self._line, self._start)
        match = _PARTIAL_FENCE.match(self._buf, line) if line < len(self._buf) else None
        self._partial_fence = line if match is not None and self._fence is None else -1

    def _is_safe(self, raw: int) -> bool:
        """Whether cutting before raw index `raw` keeps every fence whole."""
        fence = self._fence
        if fence is not None and raw > fence.start:
            return False
        if 0 <= self._partial_fence < raw:
            return False
        i = bisect.bisect_left(self._span_starts, raw) - 1
        return i < 0 or raw >= self._spans[i].end

    def _safe_below(self, raw: int) -> int:
        """For an unsafe cut at `raw`, the highest index below it worth testing next.

        Inside a fence (open, closed or still being opened) that is the fence's start: every
        cut between is unsafe too. Otherwise the index just before.
        """
        fence = self._fence
        if fence is not None and raw > fence.start:
            return fence.start
        if 0 <= self._partial_fence < raw:
            return self._partial_fence
        i = bisect.bisect_left(self._span_starts, raw) - 1
        if i >= 0 and raw < self._spans[i].end:
            return self._spans[i].start
        return raw - 1

    def _in_code_span(self, raw: int) -> bool:
        """Whether `raw` falls inside an inline code span of its line (`like this`)."""
        buf = self._buf
        line_start = buf.rfind("\n", 0, raw) + 1
        if buf.find("`", line_start, raw) < 0:
            return False
        open_ticks = 0
        for run in _TICK_RUN.finditer(buf, line_start, raw):
            ticks = len(run.group(0))
            if not open_ticks:
                open_ticks = ticks
            elif ticks == open_ticks:
                open_ticks = 0
        return open_ticks > 0

    def _fence_at(self, raw: int) -> _Fence | None:
        fence = self._fence
        if fence is not None and raw > fence.start:
            return fence
        return None

    # -- choosing a break --------------------------------------------------------------------

    def _bounds(self, force: bool) -> tuple[int, int]:
        """Raw index range [lo, hi] a cut may fall in so the block has min..max characters."""
        offset = self._start - len(self._prefix)
        lo = offset + (1 if force else self.min_chars)
        hi = offset + self.max_chars
        return max(lo, self._start + 1), min(hi, len(self._buf))

    def _pick_break(self, size: int, force: bool) -> _Break | None:
        self._note_partial_fence()
        lo, hi = self._bounds(force)
        search_lo = lo if force else max(lo, self._checked - 2)
        soft = self._soft_break(search_lo, hi)
        if soft is not None:
            return soft
        if not force:
            self._checked = len(self._buf)
        if size < self.max_chars and not force:
            return None
        return self._hard_break(lo, hi)

    def _soft_break(self, lo: int, hi: int) -> _Break | None:
        # A cut past an open fence's start (or a fence line still arriving) is never safe:
        # looking beyond it would only test candidates that must be refused.
        fence = self._fence
        if fence is not None and fence.start < hi:
            hi = fence.start
        if 0 <= self._partial_fence < hi:
            hi = self._partial_fence
        if lo > hi:
            return None
        buf = self._buf
        pref = self.break_preference
        if pref == "paragraph":
            i = buf.rfind("\n\n", lo, min(len(buf), hi + 2))
            while i >= lo:
                if self._is_safe(i):
                    return (i, False, False)
                i = buf.rfind("\n\n", lo, self._safe_below(i) + 2)
        if pref in ("paragraph", "newline"):
            i = buf.rfind("\n", lo, hi + 1)
            while i >= lo:
                if self._is_safe(i):
                    return (i, False, False)
                i = buf.rfind("\n", lo, self._safe_below(i) + 1)
        if pref != "newline":
            # The last usable sentence end wins: test them from the end, so usually only one.
            ends = _SENTENCE_END.finditer(buf, max(lo - 1, 0), min(len(buf), hi + 1))
            for cut in reversed([match.start() + 1 for match in ends]):
                if lo <= cut <= hi and self._is_safe(cut) and not self._in_code_span(cut):
                    return (cut, True, False)
        return None

    def _hard_break(self, lo: int, hi: int) -> _Break:
        buf = self._buf
        # Usually the last space in range is the cut: find it without listing every space.
        last = max(buf.rfind(" ", lo, hi + 1), buf.rfind("\n", lo, hi + 1))
        if (
            last >= 0
            and _WHITESPACE.search(buf, last + 1, hi + 1) is None
            and self._is_safe(last)
            and not self._in_code_span(last)
        ):
            return (last, True, False)
        spaces = [match.start() for match in _WHITESPACE.finditer(buf, lo, hi + 1)]
        k = len(spaces) - 1
        while k >= 0:
            at = spaces[k]
            if self._is_safe(at) and not self._in_code_span(at):
                return (at, True, False)
            # Skip the spaces that are unsafe for the same reason (the rest of a fence).
            k = bisect.bisect_right(spaces, self._safe_below(at), 0, k) - 1
        fence = self._fence_at(hi) or self._closed_fence_at(hi)
        if fence is None:
            if self._start < self._partial_fence < hi:
                return (self._partial_fence, False, False)  # keep a fence being opened whole
            return (hi, True, False)
        # Inside a fence: keep room for the closing line, and cut after a code line if we can.
        close_len = len(fence.indent) + len(fence.marker) + 1
        budget = max(self._start + 1, hi - close_len)  # min_chars yields to the fence here
        if fence.reopened:
            code_start = fence.start
        else:
            line_end = buf.find("\n", fence.start)
            code_start = len(buf) if line_end < 0 else line_end + 1
        newline = buf.rfind("\n", code_start, budget)
        if newline >= 0:
            return (newline + 1, False, True)
        if budget <= code_start:
            if fence.start > self._start:
                return (fence.start, False, False)  # the fence starts the next block
            return (min(len(buf), code_start + 1), True, True)  # an opening line over max
        return (max(budget, self._start + 1), True, True)

    def _closed_fence_at(self, raw: int) -> _Fence | None:
        i = bisect.bisect_left(self._span_starts, raw) - 1
        if i < 0 or raw >= self._spans[i].end:
            return None
        return self._spans[i]

    # -- emitting ------------------------------------------------------------------------------

    def _emit(self, cut: _Break, blocks: list[str]) -> None:
        at, mid_line, split_fence = cut
        chunk = self._prefix + self._buf[self._start : at]
        fence = (self._fence_at(at) or self._closed_fence_at(at)) if split_fence else None
        if fence is not None:
            if not chunk.endswith("\n"):
                chunk += "\n"
            chunk += fence.indent + fence.marker
            self._prefix = fence.open_line + "\n"
            if self._fence is not fence:  # a closed fence cut in two: its rest starts here
                self._span_starts[self._spans.index(fence)] = at
            fence.start = at
            fence.reopened = True
        else:
            self._prefix = ""
        block = _trim_block(chunk)
        if block:
            blocks.append(block)
        self._start = at
        if fence is None:
            self._skip_leading_blank(mid_line)
        self._checked = 0
        self._sync()

    def _skip_leading_blank(self, mid_line: bool) -> None:
        buf = self._buf
        match = _LEADING_BLANK_LINES.match(buf, self._start)
        if match is not None:
            self._start = match.end()
        if mid_line:
            while self._start < len(buf) and buf[self._start] in " \t":
                self._start += 1

    def _emit_rest(self, blocks: list[str]) -> None:
        block = _trim_block(self._prefix + self._buf[self._start :])
        if block:
            blocks.append(block)
        self.reset()

    def _drain_paragraphs(self, blocks: list[str]) -> None:
        while self.has_buffered():
            self._note_partial_fence()
            lo = max(self._start + 1, self._checked - 2)
            found = None
            for match in _PARAGRAPH_BREAK.finditer(self._buf, lo):
                if self._is_safe(match.start()):
                    found = match.start()
                    break
            size = len(self._prefix) + len(self._buf) - self._start
            if found is not None and len(self._prefix) + found - self._start <= self.max_chars:
                self._emit((found, False, False), blocks)
                continue
            self._checked = len(self._buf)
            if size < self.max_chars:
                return
            self._emit(self._pick_break(size, True) or (len(self._buf), True, False), blocks)

    def _compact(self) -> None:
        start = self._start
        if start < _COMPACT_AFTER or start * 2 < len(self._buf):
            return
        self._buf = self._buf[start:]
        self._line = max(0, self._line - start)
        self._checked = max(0, self._checked - start)
        if self._fence is not None:
            self._fence.start -= start
        self._spans = [span for span in self._spans if span.end > start]
        for span in self._spans:
            span.start -= start
            span.end -= start
        self._span_starts = [span.start for span in self._spans]
        self._start = 0


def _trim_block(chunk: str) -> str:
    """A block without blank lines before it or whitespace after it."""
    match = _LEADING_BLANK_LINES.match(chunk)
    return (chunk[match.end() :] if match else chunk).rstrip()
