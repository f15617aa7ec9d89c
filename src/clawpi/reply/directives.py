"""Reply directives: the bits of a model's answer that are instructions to the channel, not text.

A model attaches media with a `MEDIA: <url or path>` line or `[[media:<url>]]`, asks for a voice
note with `[[audio_as_voice]]` / `[[voice]]`, and threads its answer with `[[reply_to_current]]`,
`[[reply_to:<id>]]` or `[[reply:<id>]]`. They are pulled out of the text here. Anything inside
fenced or inline code is left alone: a model explaining the syntax must not trigger it.

Only `https://` URLs to public hosts and local paths without `..` count as media; anything else
stays in the text as written, so nothing is fetched or read that the model could not be trusted
to name.
"""

from __future__ import annotations

import bisect
import dataclasses
import ipaddress
import re
from collections.abc import Iterator
from urllib.parse import urlsplit

SILENT_REPLY_TOKEN = "NO_REPLY"

_MEDIA_HINT = re.compile(r"media:", re.IGNORECASE)
_MEDIA_LINES = re.compile(r"^[ \t]*MEDIA:[ \t]*(.*)$", re.IGNORECASE | re.MULTILINE)
_FENCE_LINES = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$", re.MULTILINE)
_FENCE_MARKER = re.compile(r"```|~~~")
_INLINE_CODE = re.compile(r"(`(?<!``)`*)(?!`)[^\n]*?(?<!`)\1(?!`)")
"""An inline code span; it starts with a literal backtick (a run not preceded by one) so the
regex engine can jump between backticks instead of trying every position."""
_DIRECTIVE = re.compile(
    r"\[\[\s*(?:"
    r"(?P<voice>audio_as_voice|voice)"
    r"|(?P<current>reply_to_current)"
    r"|(?:reply_to|reply)\s*:\s*(?P<reply>[^\]\s][^\]]*?)"
    r"|media\s*:\s*(?P<media>[^\]\s][^\]]*?)"
    r")\s*\]\]",
    re.IGNORECASE,
)
_QUOTES = "`'\"<>"
_FILE_WITH_EXTENSION = re.compile(r"^[\w][\w.\-]*\.[A-Za-z0-9]{1,8}$")
_DOTTED_DIGITS = re.compile(r"[0-9.]+")
_BLOCKED_HOSTS = frozenset({"localhost", "localhost.localdomain", "metadata.google.internal"})


@dataclasses.dataclass(slots=True)
class ReplyDirectives:
    """A reply with its directives taken out."""

    text: str
    media_urls: list[str] = dataclasses.field(default_factory=list)
    reply_to_id: str | None = None
    reply_to_current: bool = False
    reply_to_tag: bool = False
    """A reply tag was present (even when it named no usable id)."""
    audio_as_voice: bool = False
    is_silent: bool = False

    @property
    def media_url(self) -> str | None:
        return self.media_urls[0] if self.media_urls else None


def is_valid_media_source(token: str) -> bool:
    """An https URL to a public host, or a local path that does not climb out with `..`."""
    if not token or token.split(None, 1) != [token]:
        return False  # empty or holding whitespace
    if "://" in token:
        try:
            parts = urlsplit(token)
        except ValueError:
            return False
        if parts.scheme.lower() != "https" or not parts.hostname:
            return False
        return not _is_private_host(parts.hostname)
    if ".." in re.split(r"[\\/]", token):
        return False
    if token.startswith(("/", "./", "~/")):
        return len(token) > 2
    return bool(_FILE_WITH_EXTENSION.match(token))


def _is_private_host(host: str) -> bool:
    host = host.strip("[]").lower()
    if host in _BLOCKED_HOSTS or host.endswith((".localhost", ".local", ".internal")):
        return True
    if ":" not in host and _DOTTED_DIGITS.fullmatch(host) is None:
        return False  # a name, not an address (IPv4 is digits and dots, IPv6 has colons)
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return not address.is_global


def _clean_token(token: str) -> str:
    return token.strip().strip(_QUOTES).rstrip(",;")


def split_media_from_output(raw: str) -> tuple[str, list[str]]:
    """Remove valid `MEDIA:` lines (outside code fences); returns (text, media)."""
    # "media:" ends in "a:" whatever its case; plain substring tests are far cheaper than a
    # case-insensitive search, and most blocks have neither.
    if ("a:" not in raw and "A:" not in raw) or not _MEDIA_HINT.search(raw):
        return raw, []
    fences = _fence_ranges(raw) if ("```" in raw or "~~~" in raw) else []
    media: list[str] = []
    out: list[str] = []
    pos = 0
    for match in _MEDIA_LINES.finditer(raw):
        if fences and _inside(fences, match.start()):
            continue
        tokens = [t for t in (_clean_token(t) for t in match.group(1).split()) if t]
        valid = [t for t in tokens if is_valid_media_source(t)]
        if not valid:
            continue  # nothing usable: the line stays as the model wrote it
        media.extend(valid)
        out.append(raw[pos : match.start()])
        invalid = [t for t in tokens if t not in valid]
        if invalid:
            out.append("MEDIA: " + " ".join(invalid))
            pos = match.end()
        else:  # drop the line and its line break
            pos = match.end() + 1 if raw.startswith("\n", match.end()) else match.end()
    if not out:
        return raw, media
    out.append(raw[pos:])
    return "".join(out), media


def _fence_lines(text: str) -> Iterator[re.Match[str]]:
    """`_FENCE_LINES.finditer(text)`, found by jumping between fence markers, not line by line."""
    pos = 0
    while True:
        marker = _FENCE_MARKER.search(text, pos)
        if marker is None:
            return
        at = marker.start()
        line_start = text.rfind("\n", 0, at) + 1
        if at - line_start <= 3 and text.count(" ", line_start, at) == at - line_start:
            line = _FENCE_LINES.match(text, line_start)
            if line is not None:
                yield line
                pos = line.end()
                continue
        newline = text.find("\n", at)
        if newline < 0:
            return
        pos = newline + 1


def _fence_ranges(text: str) -> list[tuple[int, int]]:
    """Character ranges of fenced code blocks (an unclosed fence runs to the end)."""
    ranges: list[tuple[int, int]] = []
    fence = ""
    fence_start = 0
    for match in _fence_lines(text):
        after = _fence_step(fence, match)
        if not fence:
            fence_start = match.start()
        elif not after:
            ranges.append((fence_start, match.end()))
        fence = after
    if fence:
        ranges.append((fence_start, len(text)))
    return ranges


def fence_after(text: str, fence: str = "") -> str:
    """The marker of the code fence open at the end of `text`, read from inside `fence` (the
    marker open where it starts; "" for none); "" when no fence is open there."""
    if "```" in text or "~~~" in text:
        for match in _fence_lines(text):
            fence = _fence_step(fence, match)
    return fence


def _fence_step(fence: str, line: re.Match[str]) -> str:
    """The fence open after a fence-marker `line`, given the one open before it."""
    marker = line.group(1)
    if not fence:
        return marker
    if marker[0] == fence[0] and len(marker) >= len(fence) and not line.group(2).strip():
        return ""
    return fence


def _code_ranges(text: str) -> list[tuple[int, int]]:
    """Character ranges of fenced blocks and inline code spans, where directives are text."""
    fences = _fence_ranges(text) if ("```" in text or "~~~" in text) else []
    if "`" not in text:
        return fences
    ranges: list[tuple[int, int]] = []
    prose_start = 0
    for start, end in fences:
        ranges.extend(m.span() for m in _INLINE_CODE.finditer(text, prose_start, start))
        ranges.append((start, end))
        prose_start = end
    ranges.extend(m.span() for m in _INLINE_CODE.finditer(text, prose_start))
    return ranges


def _inside(ranges: list[tuple[int, int]], at: int) -> bool:
    """Whether `at` falls in one of the sorted, disjoint `ranges`."""
    i = bisect.bisect_right(ranges, (at, 1 << 62)) - 1
    return i >= 0 and ranges[i][0] <= at < ranges[i][1]


_SPACES = re.compile(r"(?<=\S)[ \t]{2,}")
_TRAILING = re.compile(r"[ \t]+(?=\n)")
_BLANK_RUN = re.compile(r"\n{3,}")


def normalize_directive_whitespace(text: str) -> str:
    """Tidy what directive removal leaves behind, outside code: doubled spaces, blank runs."""
    return tidy_outside_code(text).strip()


def tidy_outside_code(text: str) -> str:
    """`normalize_directive_whitespace` without the final strip: tidying a text line by line
    and joining the pieces gives the same, but for the blank run where two pieces meet."""
    ranges = _code_ranges(text) if "`" in text or "~~~" in text else []
    if not ranges:
        return _tidy(text)
    parts: list[str] = []
    pos = 0
    for start, end in ranges:
        parts.append(_tidy(text[pos:start]))
        parts.append(text[start:end])
        pos = end
    parts.append(_tidy(text[pos:]))
    return "".join(parts)


def _tidy(text: str) -> str:
    # Each pattern needs a two-character sequence that a substring test finds at C speed.
    if "  " in text or "\t" in text:
        text = _SPACES.sub(" ", text)
    if " \n" in text or "\t\n" in text:
        text = _TRAILING.sub("", text)
    if "\n\n\n" in text:
        text = _BLANK_RUN.sub("\n\n", text)
    return text


def is_silent_reply_text(text: str | None, silent_token: str = SILENT_REPLY_TOKEN) -> bool:
    """The model chose not to answer: the text is the silent token, starts with it as a whole
    word, or ends with it (and then only non-word characters). Only the two ends are read: a
    partial reply asks this of the whole answer so far on every delta."""
    if not text or not silent_token:
        return False
    stripped = text.strip()
    size = len(silent_token)
    if stripped.startswith(silent_token) and not _is_word(stripped[size : size + 1]):
        return True
    end = len(stripped)  # where the token would end, before a run of non-word characters
    while True:
        start = end - size
        if start < 0:
            return False
        if stripped.startswith(silent_token, start, end) and not _is_word(
            stripped[start - 1 : start]
        ):
            return True
        if _is_word(stripped[end - 1]):
            return False
        end -= 1


def _is_word(char: str) -> bool:
    """Whether `char` is one that `\\w` matches (False for "")."""
    return char.isalnum() or char == "_"


def parse_reply_directives(
    text: str,
    current_message_id: str | None = None,
    silent_token: str = SILENT_REPLY_TOKEN,
) -> ReplyDirectives:
    """Take the directives out of a reply; the text that remains is what the user reads."""
    if "[[" not in text and "a:" not in text and "A:" not in text:
        # No tag and no "media:" (whatever its case): the text is the model's, as most are.
        plain = text.strip()
        return ReplyDirectives(text=plain, is_silent=plain == silent_token)
    cleaned, media = split_media_from_output(text)
    result = ReplyDirectives(text="", media_urls=media)
    if "[[" in cleaned:
        cleaned = extract_directive_tags(cleaned, result, current_message_id)
    # Tidy whitespace only where something was taken out; otherwise the text is the model's.
    changed = len(cleaned) != len(text)
    result.text = normalize_directive_whitespace(cleaned) if changed else cleaned.strip()
    result.is_silent = result.text == silent_token
    return result


def extract_directive_tags(
    text: str, result: ReplyDirectives, current_message_id: str | None = None
) -> str:
    """`text` without its `[[...]]` directives (outside code); what they say goes to `result`."""
    ranges = _code_ranges(text) if "`" in text or "~~~" in text else []
    out: list[str] = []
    pos = 0
    for match in _DIRECTIVE.finditer(text):
        start = match.start()
        if ranges and _inside(ranges, start):
            continue
        is_reply = match.group("current") is not None or match.group("reply") is not None
        if is_reply and start > 0 and not text[start - 1].isspace():
            continue  # a reply tag glued to a word is text, not a directive
        if match.group("voice"):
            result.audio_as_voice = True
        elif match.group("current"):
            result.reply_to_tag = True
            result.reply_to_current = True
            result.reply_to_id = current_message_id
        elif match.group("reply") is not None:
            result.reply_to_tag = True
            result.reply_to_current = False
            result.reply_to_id = match.group("reply").strip() or None
        else:
            source = _clean_token(match.group("media"))
            if not is_valid_media_source(source):
                continue
            result.media_urls.append(source)
        out.append(text[pos:start])
        pos = match.end()
    out.append(text[pos:])
    return "".join(out)


class StreamingDirectiveParser:
    """Directives for a reply that arrives in blocks: a tag cut between two blocks is held back.

    `consume(block)` returns the parsed block (None when all of it is held back);
    `consume("", final=True)` returns whatever is still held at the end.
    """

    def __init__(
        self, current_message_id: str | None = None, silent_token: str = SILENT_REPLY_TOKEN
    ) -> None:
        self.current_message_id = current_message_id
        self.silent_token = silent_token
        self._held = ""

    def reset(self) -> None:
        self._held = ""

    def consume(self, chunk: str, final: bool = False) -> ReplyDirectives | None:
        text = self._held + chunk
        self._held = ""
        if not final:
            open_at = text.rfind("[[")
            if open_at >= 0 and "]]" not in text[open_at:] and len(text) - open_at < 200:
                self._held = text[open_at:]
                text = text[:open_at]
            elif text.endswith("[") and not text.endswith("[["):
                self._held = "["
                text = text[:-1]
        if not text.strip():
            return None
        return parse_reply_directives(text, self.current_message_id, self.silent_token)
