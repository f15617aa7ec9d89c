"""Prewarm and the open-manager cache."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from clawpi.session import SessionManager, SessionManagerCache, prewarm_session_file
from clawpi.session.cache import cache_ttl_ms


def _session(tmp_path: Path) -> Path:
    sm = SessionManager.create("/p", tmp_path)
    sm.append_message({"role": "assistant", "content": [], "stopReason": "stop", "timestamp": 1})
    assert sm.session_file is not None
    return sm.session_file


def test_ttl_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLAWPI_SESSION_CACHE_TTL_MS", raising=False)
    assert cache_ttl_ms() == 45_000
    monkeypatch.setenv("CLAWPI_SESSION_CACHE_TTL_MS", "1500")
    assert cache_ttl_ms() == 1500
    monkeypatch.setenv("CLAWPI_SESSION_CACHE_TTL_MS", "soon")
    assert cache_ttl_ms() == 45_000


def test_prewarm_reads_once_per_ttl(tmp_path: Path) -> None:
    file = _session(tmp_path)
    assert prewarm_session_file(file, ttl_ms=60_000)
    assert not prewarm_session_file(file, ttl_ms=60_000)
    assert prewarm_session_file(file, ttl_ms=0)
    assert not prewarm_session_file(tmp_path / "missing.jsonl", ttl_ms=0)


def test_cache_reuses_the_open_manager_until_the_file_changes_elsewhere(tmp_path: Path) -> None:
    file = _session(tmp_path)
    cache = SessionManagerCache(ttl_ms=60_000)
    first = cache.get(file)
    first.append_message({"role": "user", "content": "own append", "timestamp": 2})
    assert cache.get(file) is first  # its own writes keep it valid
    other = SessionManager.open(file)
    other.append_message({"role": "user", "content": "someone else", "timestamp": 3})
    fresh = cache.get(file)
    assert fresh is not first
    assert fresh.get_entries()[-1]["message"]["content"] == "someone else"


def test_an_edit_in_place_that_keeps_the_size_is_seen(tmp_path: Path) -> None:
    """Same inode, same size, new bytes (an editor writing in place): the modification time
    past the manager's last look tells."""
    file = _session(tmp_path)
    cache = SessionManagerCache(ttl_ms=60_000)
    first = cache.get(file)
    first.append_message({"role": "user", "content": "helo", "timestamp": 2})
    assert cache.get(file) is first
    inode = file.stat().st_ino
    with open(file, "r+b") as handle:  # fix the typo without changing the length
        data = handle.read()
        handle.seek(0)
        handle.write(data.replace(b'"helo"', b'"hell"'))
    later = time.time_ns() + 2_000_000_000  # (not within the clock tick of the last write)
    os.utime(file, ns=(later, later))
    assert file.stat().st_ino == inode and len(file.read_bytes()) == len(data)
    fresh = cache.get(file)
    assert fresh is not first
    assert fresh.get_entries()[-1]["message"]["content"] == "hell"


def test_a_manager_that_created_its_file_is_reused_until_the_file_changes(
    tmp_path: Path,
) -> None:
    file = tmp_path / "new.jsonl"
    created = SessionManager.create("/p", tmp_path, session_file=file)
    cache = SessionManagerCache(ttl_ms=60_000)
    cache.put(file, created)
    created.append_message({"role": "user", "content": "hi", "timestamp": 1})
    created.append_message(
        {"role": "assistant", "content": [], "stopReason": "stop", "timestamp": 2}
    )
    assert cache.get(file) is created
    SessionManager.open(file).append_message({"role": "user", "content": "other", "timestamp": 3})
    fresh = cache.get(file)
    assert fresh is not created
    assert fresh.get_entries()[-1]["message"]["content"] == "other"


def test_zero_ttl_disables_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file = _session(tmp_path)
    monkeypatch.setenv("CLAWPI_SESSION_CACHE_TTL_MS", "0")
    cache = SessionManagerCache()
    assert cache.get(file) is not cache.get(file)
    assert cache.prune() == 0


def test_the_least_recently_used_managers_are_let_go_beyond_the_limit(tmp_path: Path) -> None:
    files = [_session(tmp_path / f"s{i}") for i in range(3)]
    cache = SessionManagerCache(ttl_ms=60_000, max_entries=2)
    first, second = cache.get(files[0]), cache.get(files[1])
    assert cache.get(files[0]) is first  # used again: now the most recent
    cache.get(files[2])  # over the limit: the least recently used (files[1]) goes
    assert cache.get(files[0]) is first
    assert cache.get(files[1]) is not second
