"""Fixtures for the tools tests: a workspace next to an 'outside' tree whose every byte,
mode and link is snapshotted, so a test can prove nothing outside the workspace changed."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from clawpi.agent.tool import AgentTool
from clawpi.tools import ProcessRegistry, create_coding_tools

requires_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (apt-get install bubblewrap)"
)


def snapshot(root: Path, skip: Path | None = None) -> dict[str, Any]:
    """Everything observable about the files under `root` (except `skip`)."""
    state: dict[str, Any] = {}
    for directory, dirs, files in os.walk(root, followlinks=False):
        if skip is not None and Path(directory) == skip:
            dirs.clear()
            continue
        for name in dirs + files:
            path = os.path.join(directory, name)
            if skip is not None and Path(path) == skip:
                continue
            info = os.lstat(path)
            entry: tuple[Any, ...] = (info.st_mode, info.st_size, info.st_mtime_ns, info.st_nlink)
            if os.path.islink(path):
                entry += (os.readlink(path),)
            elif os.path.isfile(path):
                entry += (hashlib.sha256(Path(path).read_bytes()).hexdigest(),)
            state[os.path.relpath(path, root)] = entry
    return state


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory beside the workspace with a secret file the tools must never reach."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text("TOP SECRET\n")
    (path / "sub").mkdir()
    (path / "sub" / "deep.txt").write_text("deep secret\n")
    return path


@pytest.fixture
def guard(tmp_path: Path, workspace: Path, outside: Path) -> Callable[[], None]:
    """Call it at the end of a test: fails if anything outside the workspace changed."""
    before = snapshot(tmp_path, skip=workspace)

    def check() -> None:
        assert snapshot(tmp_path, skip=workspace) == before

    return check


def tool_by_name(tools: list[AgentTool], name: str) -> AgentTool:
    return next(tool for tool in tools if tool.name == name)


@pytest.fixture
async def registry() -> AsyncIterator[ProcessRegistry]:
    reg = ProcessRegistry()
    yield reg
    await reg.shutdown()


@pytest.fixture
def make_tools(workspace: Path, registry: ProcessRegistry) -> Callable[..., dict[str, AgentTool]]:
    def make(**kwargs: Any) -> dict[str, AgentTool]:
        kwargs.setdefault("process_registry", registry)
        tools = create_coding_tools(workspace, **kwargs)
        return {tool.name: tool for tool in tools}

    return make


def text_of(result: Any) -> str:
    return "".join(block["text"] for block in result.content if block["type"] == "text")
