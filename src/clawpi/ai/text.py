"""Text hygiene for outgoing requests, and the text of a message's content blocks."""

from __future__ import annotations

import re
from typing import Any

from clawpi.ai.mapping import is_mapping

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def sanitize_surrogates(text: str) -> str:
    """Drop unpaired UTF-16 surrogates, which no provider accepts in JSON.

    A Python `str` holds real code points, so a valid pair (an emoji) is never a surrogate here;
    any surrogate code point left in a `str` is by definition unpaired.
    """
    if not text.isascii() and _LONE_SURROGATE.search(text):
        return _LONE_SURROGATE.sub("", text)
    return text


def content_text(result: Any) -> str:
    """The text blocks of a message or tool result (or of a content list), one per line; a
    string stays as it is."""
    if isinstance(result, str):
        return result
    if isinstance(result, list):
        content: Any = result
    elif is_mapping(result):
        content = result.get("content")
    else:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(
        b["text"]
        for b in content
        if is_mapping(b) and b.get("type") == "text" and isinstance(b.get("text"), str)
    )
