"""Small JSON config files: read with a clear error, write atomically under a file lock."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
from filelock import FileLock

from clawpi.errors import ConfigError

LOCK_TIMEOUT_S = 10


def read_json_object(path: Path) -> dict[str, Any]:
    """The file's JSON object, `{}` when the file does not exist."""
    try:
        with open(path, "rb") as handle:  # `Path.read_bytes` adds pathlib's layers per read
            raw = handle.read()
    except FileNotFoundError:
        return {}
    if not raw.strip():
        return {}
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON ({exc}); fix or remove the file") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a JSON object, found {type(data).__name__}")
    return data


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock", timeout=LOCK_TIMEOUT_S):
        yield


def write_json_atomic(path: Path, data: dict[str, Any], *, mode: int | None = None) -> None:
    """Replace `path` in one rename, so readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def update_json_file(
    path: Path, change: Callable[[dict[str, Any]], None], *, mode: int | None = None
) -> dict[str, Any]:
    """Re-read under the lock, apply `change`, write back: edits made meanwhile are kept."""
    with locked(path):
        data = read_json_object(path)
        change(data)
        write_json_atomic(path, data, mode=mode)
        return data
