"""Workspace path rules below the tools: a directory swapped for a symlink between the check
and the open is caught before anything outside is created or read."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from clawpi.tools import PathEscapeError, Workspace
from clawpi.tools.paths import expand_path


def test_swapped_directory_cannot_redirect_a_write(
    workspace: Path, outside: Path, guard: Callable[[], None]
) -> None:
    ws = Workspace.create(workspace, confined=True)
    (workspace / "sub").mkdir()
    real = ws.resolve("sub/new.txt", for_write=True)
    shutil.rmtree(workspace / "sub")
    (workspace / "sub").symlink_to(outside)  # the race: swapped after the check
    with pytest.raises(PathEscapeError, match="symbolic link"):
        ws.open_file(real, "sub/new.txt", os.O_WRONLY | os.O_CREAT, create_parents=True)
    assert not (outside / "new.txt").exists()
    guard()


def test_swapped_directory_cannot_redirect_parent_creation(
    workspace: Path, outside: Path, guard: Callable[[], None]
) -> None:
    ws = Workspace.create(workspace, confined=True)
    (workspace / "a").mkdir()
    real = ws.resolve("a/b/c/new.txt", for_write=True)
    (workspace / "a").rmdir()
    (workspace / "a").symlink_to(outside)
    with pytest.raises(PathEscapeError):
        ws.open_file(real, "a/b/c/new.txt", os.O_WRONLY | os.O_CREAT, create_parents=True)
    assert not (outside / "b").exists()
    guard()


def test_swapped_file_cannot_redirect_a_read(workspace: Path, outside: Path) -> None:
    ws = Workspace.create(workspace, confined=True)
    (workspace / "f.txt").write_text("mine")
    real = ws.resolve("f.txt")
    (workspace / "f.txt").unlink()
    (workspace / "f.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(PathEscapeError):
        ws.open_file(real, "f.txt", os.O_RDONLY)


def test_expand_path_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/someone")
    assert expand_path("~", tmp_path) == "/home/someone"
    assert expand_path("~/x", tmp_path) == "/home/someone/x"
    assert expand_path("@rel/x", tmp_path) == f"{tmp_path}/rel/x"
    assert expand_path("/abs\u2009path", tmp_path) == "/abs path"
    assert expand_path("~other/x", tmp_path) == f"{tmp_path}/~other/x"
