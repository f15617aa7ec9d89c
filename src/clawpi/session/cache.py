"""Keeping recently used sessions warm between turns of a busy chat.

`prewarm_session_file` reads the first 4 KB of a file so the OS page cache holds it before the
real open; `SessionManagerCache` hands back the already-open manager of a file used within the
TTL, as long as nobody else changed the file meanwhile. TTL: 45 s, or
`$CLAWPI_SESSION_CACHE_TTL_MS` (0 disables both).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from clawpi.ai.bounded import remember
from clawpi.session.store import SessionManager

DEFAULT_CACHE_TTL_MS: Final = 45_000
CACHE_TTL_ENV: Final = "CLAWPI_SESSION_CACHE_TTL_MS"
PREWARM_BYTES: Final = 4096

_touched: dict[str, float] = {}
_touched_lock = threading.Lock()


def cache_ttl_ms() -> int:
    """The TTL from the environment; a value that is not a number falls back to the default."""
    raw = os.environ.get(CACHE_TTL_ENV, "").strip()
    if not raw:
        return DEFAULT_CACHE_TTL_MS
    try:
        return max(0, int(float(raw)))
    except ValueError:
        return DEFAULT_CACHE_TTL_MS


def _key(path: str | os.PathLike[str]) -> str:
    return os.path.abspath(path)


def prewarm_session_file(path: str | os.PathLike[str], ttl_ms: int | None = None) -> bool:
    """Read the head of `path` unless it was touched within the TTL; True if it read it."""
    ttl = cache_ttl_ms() if ttl_ms is None else ttl_ms
    key = _key(path)
    now = time.monotonic()
    with _touched_lock:
        last = _touched.get(key)
        if ttl > 0 and last is not None and (now - last) * 1000 < ttl:
            return False
    try:
        with open(key, "rb") as handle:
            handle.read(PREWARM_BYTES)
    except OSError:
        return False
    if ttl > 0:
        with _touched_lock:
            _touched[key] = now
    return True


DEFAULT_MAX_MANAGERS: Final = 64
"""Each open manager holds its file (and its lock file) open: the least recently used beyond
this many are let go."""


class SessionManagerCache:
    """Open managers by file, reused within the TTL while the file is unchanged on disk."""

    def __init__(
        self,
        ttl_ms: int | None = None,
        opener: Callable[[Path], SessionManager] = SessionManager.open,
        max_entries: int = DEFAULT_MAX_MANAGERS,
    ) -> None:
        self._ttl_ms = ttl_ms
        self._opener = opener
        self._max_entries = max_entries
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[SessionManager, float]] = {}

    @property
    def ttl_ms(self) -> int:
        return cache_ttl_ms() if self._ttl_ms is None else self._ttl_ms

    def get(self, path: str | os.PathLike[str]) -> SessionManager:
        """The cached manager of `path`, or a freshly opened (and cached) one."""
        key = _key(path)
        ttl = self.ttl_ms
        now = time.monotonic()
        with self._lock:
            cached = self._entries.get(key)
            self._entries.pop(key, None)
            if cached is not None and (now - cached[1]) * 1000 < ttl and cached[0].matches_disk():
                self._entries[key] = (cached[0], now)  # now the most recently used
                return cached[0]
        prewarm_session_file(key, ttl)
        manager = self._opener(Path(key))
        self._remember(key, manager, now, ttl)
        return manager

    def put(self, path: str | os.PathLike[str], manager: SessionManager) -> None:
        """Remember a manager opened elsewhere (e.g. one that just created its file), so the
        next `get` reuses it while the file stays as it leaves it."""
        self._remember(_key(path), manager, time.monotonic(), self.ttl_ms)

    def _remember(self, key: str, manager: SessionManager, now: float, ttl: int) -> None:
        if ttl <= 0:
            return
        with self._lock:
            self._entries.pop(key, None)  # re-inserted last: the most recently used
            remember(self._entries, key, (manager, now), self._max_entries)

    def invalidate(self, path: str | os.PathLike[str]) -> None:
        with self._lock:
            self._entries.pop(_key(path), None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def prune(self) -> int:
        """Drop expired managers; how many were dropped."""
        ttl = self.ttl_ms
        now = time.monotonic()
        with self._lock:
            expired = [k for k, (_, t) in self._entries.items() if (now - t) * 1000 >= ttl]
            for key in expired:
                del self._entries[key]
        return len(expired)
