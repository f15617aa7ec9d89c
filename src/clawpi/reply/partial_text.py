"""The text a partial reply shows while the answer still streams, kept current delta by delta.

Each partial reply carries the whole answer so far with its directives taken out and a directive
still being typed held back. Parsing the whole answer again on every delta costs time in
proportion to its length each time: quadratic over a long answer (a 100 KB answer in 16-character
deltas took 1.6 s of the event loop). Here the answer is cut at a settled line start: the lines
before it are parsed once, and each delta parses only the lines after it. The result is exactly
what `parse_reply_directives` gives for the whole text (a property test holds it to that).

A line start is settled when nothing later can change how the text before it parses:
- every `[[` before it is closed by `]]` before it, so no directive, and no held-back one, spans
  it (checked again once the `MEDIA:` lines are out);
- a blank run across it is cut to one blank line when the two sides are put together (`_meet`);
- the code fence open there, if any, is the same before and after the directives come out; the
  lines after it are then parsed from inside that fence (its marker put in front of them).
"""

from __future__ import annotations

from typing import NamedTuple

from clawpi.reply.directives import (
    ReplyDirectives,
    extract_directive_tags,
    fence_after,
    split_media_from_output,
    tidy_outside_code,
)


class _Part(NamedTuple):
    """A stretch of the answer with its directives out, not tidied, not stripped."""

    text: str
    line_media: list[str]
    tag_media: list[str]
    growth: int
    """How much longer the stretch got (negative: shorter): the whole parse tidies the text
    only when its length changed."""
    closed: bool = True
    """Whether its last `[[` is still closed by a `]]` once the `MEDIA:` lines are out (a
    media token can take the `]]` with it)."""


class PartialReplyText:
    """The cleaned text of one streamed answer: `append` each visible delta, read `current()`."""

    __slots__ = (
        "_brackets",
        "_clean",
        "_fence",
        "_growth",
        "_hint",
        "_line_media",
        "_open",
        "_tag_media",
        "_tidy",
        "_tidy_newlines",
    )

    def __init__(self) -> None:
        self._open = ""
        """The text after the settled line start: parsed again on each delta."""
        self._hint = False
        """Whether `_open` may hold a directive (a `[[` or a `media:`)."""
        self._fence = ""
        """The code fence open at the settled line start ("" for none)."""
        self._brackets = False
        """Whether the settled text holds a `[[` (all of them closed)."""
        self._clean = ""
        self._tidy: str | None = None
        """`_clean` tidied: made when a change of length first asks for it, then kept up."""
        self._tidy_newlines = 0
        self._growth = 0
        self._line_media: list[str] = []
        self._tag_media: list[str] = []

    def append(self, delta: str) -> None:
        if not delta:
            return
        start = len(self._open)
        self._open += delta
        if not self._hint:
            self._hint = _has_hint(self._open, max(0, start - len("media:") + 1))
        if "\n" in delta:
            self._settle()

    @property
    def unsettled(self) -> int:
        """How many characters each delta parses again: those after the settled line start."""
        return len(self._open)

    def current(self) -> tuple[str, list[str]]:
        """The text and media URLs `parse_reply_directives` finds in the answer so far, with
        a trailing `[[...` (a directive still being typed) left out."""
        part = self._parse(self._held_back(self._open), self._fence)
        if self._growth + part.growth:
            tail = self._meet(self._tidied_part(part.text))
            text = (self._tidied() + tail).strip()
        else:
            text = (self._clean + part.text).strip()
        media = [*self._line_media, *part.line_media, *self._tag_media, *part.tag_media]
        return text, media

    # -- settling ----------------------------------------------------------------------------

    def _settle(self) -> None:
        text = self._open
        at = text.rfind("\n") + 1
        while at:  # back to before the line of a `[[` still open
            opened = text.rfind("[[", 0, at)
            if opened < 0 or text.find("]]", opened, at) >= 0:
                break
            at = text.rfind("\n", 0, opened) + 1
        if not at:
            return
        settled = text[:at]
        part = self._parse(settled, self._fence)
        if not part.closed:
            return
        fence = fence_after(settled, self._fence)
        if part.text != settled and fence_after(part.text, self._fence) != fence:
            return  # a directive glued to a fence line: it opens or closes only once taken out
        self._clean += part.text
        if self._tidy is not None:
            piece = self._meet(self._tidied_part(part.text))
            self._tidy += piece
            kept = len(piece.rstrip("\n"))
            self._tidy_newlines = len(piece) - kept if kept else self._tidy_newlines + len(piece)
        self._growth += part.growth
        self._line_media += part.line_media
        self._tag_media += part.tag_media
        self._brackets = self._brackets or "[[" in settled
        self._fence = fence
        self._open = text[at:]
        self._hint = _has_hint(self._open, 0)

    # -- parsing -----------------------------------------------------------------------------

    def _parse(self, text: str, fence: str) -> _Part:
        if not self._hint or not _has_hint(text, 0):
            return _Part(text, [], [], 0)
        opener = fence + "\n" if fence else ""  # parse the lines from inside the open fence
        source = opener + text
        cleaned, line_media = split_media_from_output(source)
        found = ReplyDirectives("")
        opened = cleaned.rfind("[[")
        closed = opened < 0 or "]]" in cleaned[opened:]
        if opened >= 0:
            cleaned = extract_directive_tags(cleaned, found)
        growth = len(cleaned) - len(source)
        return _Part(cleaned[len(opener) :], line_media, found.media_urls, growth, closed)

    def _held_back(self, text: str) -> str:
        """`text` without a `[[` not yet closed, or a lone `[` that may become one: the last
        `[[` of the whole answer decides, and those before the open lines are closed."""
        opened = text.rfind("[[") if self._hint else -1
        if opened >= 0:
            return text if "]]" in text[opened:] else text[:opened]
        if text.endswith("[") and not self._brackets:
            return text[:-1]
        return text

    def _tidied(self) -> str:
        if self._tidy is None:
            self._tidy = tidy_outside_code(self._clean)
            self._tidy_newlines = _trailing_newlines(self._tidy)
        return self._tidy

    def _tidied_part(self, text: str) -> str:
        opener = self._fence + "\n" if self._fence else ""
        return tidy_outside_code(opener + text)[len(opener) :]

    def _meet(self, tail: str) -> str:
        """`tail` tidied on its own, fitted to the tidied text before it: a run of blank
        lines across the seam is cut to one, as a whole-text tidy would. Inside a code fence
        nothing is cut."""
        if self._fence or not tail.startswith("\n"):
            return tail
        self._tidied()
        lead = len(tail) - len(tail.lstrip("\n"))
        if self._tidy_newlines + lead < 3:
            return tail
        return tail[lead - max(0, 2 - self._tidy_newlines) :]


def _has_hint(text: str, start: int) -> bool:
    """Whether `text[start:]` may hold a directive: a `[[`, or `media:` in any case."""
    if text.find("[[", start) >= 0:
        return True
    if text.find("a:", start) < 0 and text.find("A:", start) < 0:
        return False
    return "media:" in text[start:].lower()


def _trailing_newlines(text: str) -> int:
    return len(text) - len(text.rstrip("\n"))
