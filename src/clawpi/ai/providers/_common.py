"""Pieces every SDK-backed provider shares: error text and one client per loop and config."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from clawpi.ai.bounded import remember

T = TypeVar("T")

_MAX_CLIENTS_PER_LOOP = 32
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Hashable, Any]] = (
    weakref.WeakKeyDictionary()
)
_BODY_LIMIT = 4000


def shared_client(key: Hashable, factory: Callable[[], T]) -> T:
    """One SDK client per (event loop, configuration): connections are reused across requests.

    Connection pools belong to the loop that opened them, so a client is never shared between
    loops (each `asyncio.run` or test gets its own).
    """
    loop = asyncio.get_running_loop()
    per_loop = _clients.get(loop)
    if per_loop is None:
        per_loop = {}
        _clients[loop] = per_loop
    client: T | None = per_loop.get(key)
    if client is None:
        client = remember(per_loop, key, factory(), _MAX_CLIENTS_PER_LOOP)
    return client


def describe_sdk_error(exc: BaseException) -> str:
    """`<status> <provider's body>` for HTTP errors, else the error and its cause.

    The provider's own wording is kept verbatim: error classification and overflow detection
    match on it.
    """
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int):
        code = getattr(exc, "code", None)
        status = code if isinstance(code, int) else None
    if status is not None:
        body = _response_text(exc)
        if body:
            return f"{status} {body}"
        message = getattr(exc, "message", None) or str(exc)
        return f"{status} {message}".strip()
    text = str(exc).strip() or type(exc).__name__
    cause = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    if cause is not None:
        cause_text = str(cause).strip() or type(cause).__name__
        if cause_text not in text:
            text = f"{text} ({cause_text})"
    return text


def _response_text(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    text = ""
    if response is not None:
        try:
            text = response.text
        except Exception:  # a streamed response whose body was never read
            text = ""
    if not text:
        body = getattr(exc, "body", None)
        if isinstance(body, (dict, list)):
            import orjson

            text = orjson.dumps(body).decode()
        elif isinstance(body, str):
            text = body
    text = text.strip()
    if len(text) > _BODY_LIMIT:
        text = text[:_BODY_LIMIT] + "…"
    return text


def typed(value: Any, kind: type, default: Any = None) -> Any:
    """`value` when it is a `kind` (a bool is no int), else `default`: a field a server sent
    with another type than its API's counts as missing."""
    return value if isinstance(value, kind) and not isinstance(value, bool) else default
