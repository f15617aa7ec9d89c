"""The mapping check for hot paths: messages, events and configs are plain dicts, and
`isinstance(x, Mapping)` pays an ABC lookup for every one of them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from typing_extensions import TypeIs


def is_mapping(value: object) -> TypeIs[Mapping[str, Any]]:
    """`isinstance(value, Mapping)`, answered without the ABC machinery for a dict."""
    return type(value) is dict or isinstance(value, Mapping)
