"""The process working directory during an attempt (seed 001: chdir in, restore in `finally`).

clawpi's tools take the workspace explicitly, so correctness never depends on the process cwd;
the change only helps code that reads it (extensions, skills). Because the cwd is global to the
process and runs are concurrent, it is reference-counted: the first run enters its workspace,
runs for the same workspace share it, and a run for another workspace leaves the cwd alone
rather than pull it from under the others.

So the cwd during a run is not the caller's: a relative path the caller passes is made absolute
against the directory the process was in before the runs entered their workspaces
(`from_caller_cwd`), never against whichever workspace is entered at that moment.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from clawpi.session.paths import as_path, real_directory

log = logging.getLogger(__name__)

_lock = threading.Lock()
_holders = 0
_current: str | None = None
_original: str | None = None


@contextlib.contextmanager
def workspace_cwd(workspace: str | os.PathLike[str]) -> Iterator[bool]:
    """Yields True when the process cwd is `workspace` for this block."""
    global _holders, _current, _original
    target = real_directory(workspace)
    entered = False
    with _lock:
        if _holders == 0:
            try:
                _original = os.getcwd()
            except FileNotFoundError:
                _original = None
            try:
                os.chdir(target)
            except OSError as exc:
                log.warning("cannot enter workspace %s: %s", target, exc)
            else:
                _current, _holders, entered = target, 1, True
        elif _current == target:
            _holders += 1
            entered = True
    try:
        yield entered
    finally:
        if entered:
            with _lock:
                _holders -= 1
                if _holders == 0:
                    if _original is not None:
                        with contextlib.suppress(OSError):
                            os.chdir(_original)
                    _current = None
                    _original = None


def from_caller_cwd(path: str | os.PathLike[str]) -> Path:
    """`path` made absolute as the caller meant it (OpenClaw's `resolveUserPath`): `~` is the
    home directory, and a relative path is taken against the process cwd the application set,
    which while runs hold the cwd in a workspace is the one they entered from."""
    given = as_path(path)
    if given.is_absolute():
        return given
    given = given.expanduser()
    if given.is_absolute():
        return given
    with _lock:
        base = _original if _holders else None
    return Path(base or os.getcwd(), given)
