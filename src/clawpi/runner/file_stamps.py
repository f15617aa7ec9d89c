"""What a cache keyed on files compares: one stat per file, no reading.

Most of the files asked about usually do not exist (a workspace has two or three of the eight
bootstrap files). Which names exist can only change with the directory's mtime, so while that
stays put only the files that existed are stat'd again: one stat for the directory instead of
one per missing name. A directory modified moments before it was looked at is not trusted, since
a second change within the same clock tick would leave its mtime as it was (git's "racy" case).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable

from clawpi.ai.bounded import remember

Stamp = tuple[int, int, int] | None
"""(mtime in ns, size, inode) of a file, or None where there is none."""

SETTLE_NS = 100_000_000
"""How old a directory's mtime must be, when its listing is taken, to vouch for that listing
later; timestamps of whole seconds (coarse filesystems) need `SETTLE_COARSE_NS`."""
SETTLE_COARSE_NS = 2_000_000_000
CACHE_SIZE = 256

_present: dict[tuple[str, tuple[str, ...]], tuple[tuple[int, int, int], tuple[int, ...]]] = {}
"""(directory, names) -> (the directory's stamp, indexes of the names that existed)."""


def _stamp(path: str) -> Stamp:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size, stat.st_ino)


def file_stamps(directory: str, names: Iterable[str]) -> list[Stamp]:
    """The stamps of `names` in `directory`, in order."""
    names = tuple(names)
    join = os.path.join
    try:
        listing = os.stat(directory)
    except OSError:
        listing = None
    if listing is None:
        return [_stamp(join(directory, name)) for name in names]
    dir_stamp = (listing.st_mtime_ns, listing.st_ino, listing.st_dev)
    key = (directory, names)
    known = _present.get(key)
    stamps: list[Stamp]
    if known is not None and known[0] == dir_stamp:
        stamps = [None] * len(names)
        for index in known[1]:
            stamps[index] = _stamp(join(directory, names[index]))
        return stamps
    paths = [join(directory, name) for name in names]
    stamps = [_stamp(path) for path in paths]
    mtime = listing.st_mtime_ns
    settle = SETTLE_COARSE_NS if mtime % 1_000_000_000 == 0 else SETTLE_NS
    if time.time_ns() - mtime > settle:
        # a dangling symlink can come to life without the directory changing: stat it again
        present = tuple(
            i for i, s in enumerate(stamps) if s is not None or os.path.lexists(paths[i])
        )
        remember(_present, key, (dir_stamp, present), CACHE_SIZE)
    else:
        _present.pop(key, None)
    return stamps
