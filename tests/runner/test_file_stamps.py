"""File stamps see every change to the files asked about, with fewer stats per call.

While a directory's mtime is unchanged, only the names that existed are stat'd again; these
tests make the changes that could slip past that: new files, deletions, in-place edits,
replacement by rename, a dangling symlink whose target appears, and a directory changed twice
within one timestamp.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from clawpi.runner.file_stamps import SETTLE_NS, file_stamps

NAMES = ("AGENTS.md", "SOUL.md", "MEMORY.md")


def _age(path: Path, seconds: float = 10.0) -> int:
    """Set the directory's mtime in the past (as for any workspace not touched just now)."""
    mtime = time.time_ns() - int(seconds * 1e9) + 123_456_789
    os.utime(path, ns=(mtime, mtime))
    return mtime


def test_every_change_to_a_settled_directory_is_seen(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "SOUL.md").write_text("calm")
    _age(ws)
    first = file_stamps(str(ws), NAMES)
    assert first[0] is None and first[1] is not None and first[2] is None
    assert file_stamps(str(ws), NAMES) == first

    (ws / "AGENTS.md").write_text("rules")  # created: the directory's mtime moves
    created = file_stamps(str(ws), NAMES)
    assert created[0] is not None and created[1:] == first[1:]

    _age(ws)
    soul = ws / "SOUL.md"
    soul.write_text("loud")  # edited in place: the directory does not change
    stat = soul.stat()
    os.utime(soul, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000))
    assert file_stamps(str(ws), NAMES)[1] != created[1]

    tmp = ws / "tmp-save"
    tmp.write_text("saved by an editor")
    os.replace(tmp, soul)  # replaced by rename
    replaced = file_stamps(str(ws), NAMES)
    assert replaced[1] is not None and replaced[1][2] == soul.stat().st_ino

    _age(ws)
    soul.unlink()
    assert file_stamps(str(ws), NAMES)[1] is None


def test_a_dangling_symlink_that_comes_to_life_is_seen(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    target = tmp_path / "shared-memory.md"
    (ws / "MEMORY.md").symlink_to(target)
    _age(ws)
    assert file_stamps(str(ws), NAMES)[2] is None
    assert file_stamps(str(ws), NAMES)[2] is None
    target.write_text("remember this")  # elsewhere: the workspace directory is unchanged
    assert file_stamps(str(ws), NAMES)[2] is not None


def test_a_directory_changed_just_now_is_not_trusted(tmp_path: Path) -> None:
    """Two changes in one timestamp tick leave the mtime as it was: a listing taken right
    after a change must not vouch for the names that exist."""
    ws = tmp_path / "ws"
    ws.mkdir()
    # "just now" however slow the machine: an mtime not yet SETTLE_NS in the past
    recent = time.time_ns() + 60 * SETTLE_NS
    os.utime(ws, ns=(recent, recent))
    assert file_stamps(str(ws), NAMES) == [None, None, None]
    (ws / "AGENTS.md").write_text("rules")
    os.utime(ws, ns=(recent, recent))  # the second change landed in the same tick
    assert file_stamps(str(ws), NAMES)[0] is not None


def test_a_settled_listing_is_what_saves_the_stats(tmp_path: Path) -> None:
    """The other side of the previous test: with an old mtime the listing is trusted, so a
    name created behind the directory's back (mtime forced back) is not looked for."""
    ws = tmp_path / "ws"
    ws.mkdir()
    mtime = _age(ws)
    assert file_stamps(str(ws), NAMES) == [None, None, None]
    (ws / "AGENTS.md").write_text("rules")
    os.utime(ws, ns=(mtime, mtime))
    assert file_stamps(str(ws), NAMES) == [None, None, None]


def test_a_missing_directory_has_no_files(tmp_path: Path) -> None:
    assert file_stamps(str(tmp_path / "absent"), NAMES) == [None, None, None]
