"""What a cache keyed on files compares: one stat per file, no reading."""

from __future__ import annotations

import os
from collections.abc import Iterable

Stamp = tuple[int, int, int] | None
"""(mtime in ns, size, inode) of a file, or None where there is none."""


def file_stamps(directory: str, names: Iterable[str]) -> list[Stamp]:
    """The stamps of `names` in `directory`, in order."""
    stamps: list[Stamp] = []
    for name in names:
        try:
            stat = os.stat(os.path.join(directory, name))
        except OSError:
            stamps.append(None)
        else:
            stamps.append((stat.st_mtime_ns, stat.st_size, stat.st_ino))
    return stamps
