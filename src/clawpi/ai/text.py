"""Text hygiene for outgoing requests."""

from __future__ import annotations

import re

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def sanitize_surrogates(text: str) -> str:
    """Drop unpaired UTF-16 surrogates, which no provider accepts in JSON.

    A Python `str` holds real code points, so a valid pair (an emoji) is never a surrogate here;
    any surrogate code point left in a `str` is by definition unpaired.
    """
    if not text.isascii() and _LONE_SURROGATE.search(text):
        return _LONE_SURROGATE.sub("", text)
    return text
