"""Reading a session file into entries: the hot path of opening a session.

One `read`, one `split`, one `orjson.loads` per line with the garbage collector paused (the
parsed dicts are all long-lived, so collection passes during the load are pure overhead).
Blank lines are ignored; a malformed line never stops the load: it is reported so the caller
can repair the file before writing to it.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from clawpi.session.codec import loads_line
from clawpi.session.entries import Entry, is_header


@dataclass(slots=True)
class ParsedFile:
    """Every parsed line in file order (header included) and the damage found on the way."""

    lines: list[Entry] = field(default_factory=list)
    malformed: int = 0
    ends_with_newline: bool = True
    size: int = 0
    inode: int = 0

    @property
    def header(self) -> Entry | None:
        return self.lines[0] if self.lines and is_header(self.lines[0]) else None

    @property
    def damaged(self) -> bool:
        return self.malformed > 0 or not self.ends_with_newline


PROMOTE_MIN_ENTRIES = 5_000
"""Below this many entries a session is not worth promoting (see `GcPause`)."""


@dataclass(slots=True)
class GcPause:
    """Set `promote` inside `gc_paused` to move what was built to the oldest generation on the
    way out (`gc.freeze()` + `gc.unfreeze()`, two list splices): a large session's entries
    live as long as the session, and left in the youngest generation they would be traversed
    by the next collections for nothing (about a quarter of the load time of a large session).

    Only for large builds: the splice also moves the process's young garbage along and resets
    the young generation's count, so promoting on every small open (a chat per message) would
    keep the collector from ever running."""

    promote: bool = False


@contextmanager
def gc_paused() -> Iterator[GcPause]:
    """Pause the cyclic collector while building many long-lived objects. Promotion is
    skipped when the application uses `gc.freeze()` itself."""
    pause = GcPause()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield pause
    finally:
        if was_enabled:
            if pause.promote and gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def parse_lines(data: bytes, result: ParsedFile, *, check_objects: bool = True) -> None:
    """Parse JSONL bytes into `result.lines`, counting lines that are not JSON objects.

    With `check_objects=False` a line holding JSON that is not an object (`42`, `[]`) is kept
    in `lines`; the caller must check (the session loader does it in its indexing pass)."""
    loads = orjson.loads
    # At "\n" only, as pi (and repair) split: a raw CR is never a line break, even in the
    # damaged line of a corrupt file, where `bytes.splitlines` would find a line pi never sees.
    lines = data.split(b"\n")
    if not lines[-1]:
        lines.pop()  # after the final newline
    with gc_paused():
        try:
            parsed = [loads(line) for line in lines]
        except orjson.JSONDecodeError:
            parsed = _parse_tolerant(lines, result)
        else:
            if check_objects and set(map(type, parsed)) - {dict}:
                parsed = [value for value in parsed if type(value) is dict]
                result.malformed += len(lines) - len(parsed)
    if result.lines:
        result.lines.extend(parsed)
    else:
        result.lines = parsed


def _parse_tolerant(lines: list[bytes], result: ParsedFile) -> list[Entry]:
    loads = loads_line
    parsed: list[Entry] = []
    for line in lines:
        if not line.strip():
            continue
        try:
            value = loads(line)
        except ValueError:
            result.malformed += 1
            continue
        if type(value) is dict:
            parsed.append(value)
        else:
            result.malformed += 1
    return parsed


def read_session_file(path: str | os.PathLike[str], *, check_objects: bool = True) -> ParsedFile:
    """Parse a whole file; a missing file gives an empty result."""
    result = ParsedFile()
    try:
        with open(path, "rb") as handle:
            stat = os.fstat(handle.fileno())
            data = handle.read()
    except FileNotFoundError:
        return result
    result.size = len(data)
    result.inode = stat.st_ino
    result.ends_with_newline = not data or data.endswith(b"\n")
    parse_lines(data, result, check_objects=check_objects)
    return result


def read_header(path: str | os.PathLike[str]) -> Entry | None:
    """The header of a session file from its first line only; None if it has none."""
    try:
        with open(path, "rb") as handle:
            first = handle.readline(1 << 20)
    except OSError:
        return None
    try:
        value = loads_line(first)
    except ValueError:
        return None
    return value if is_header(value) else None


def is_valid_session_file(path: Path) -> bool:
    return read_header(path) is not None
