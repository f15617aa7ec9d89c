"""Confinement as a property: with `workspace_only`, any path made of dot-dots, symlinks into
and out of the workspace, absolute and home paths, given to any file tool, either stays inside
the workspace or is refused with a tool error; nothing outside is read or changed."""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clawpi.errors import ClawpiError
from clawpi.tools import ProcessRegistry, create_coding_tools
from tests.tools.conftest import snapshot, text_of

SECRETS = ("TOP SECRET", "deep secret")

PARTS = [
    "..",
    ".",
    "",
    "sub",
    "up",
    "link",
    "dirlink",
    "dangling",
    "outside",
    "workspace",
    "secret.txt",
    "deep.txt",
    "in.txt",
    "new.txt",
    "~",
    "*",
]

paths = st.tuples(
    st.sampled_from(["", "/", "~/", "{outside}/", "{root}/", "/proc/self/cwd/", "./"]),
    st.lists(st.sampled_from(PARTS), min_size=1, max_size=6),
).map(lambda parts: parts[0] + "/".join(parts[1]))

operations = st.sampled_from(["read", "write", "edit", "ls", "find", "grep"])


def _plant(root: Path) -> tuple[Path, Path]:
    workspace, outside = root / "workspace", root / "outside"
    workspace.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP SECRET\n")
    (outside / "sub").mkdir()
    (outside / "sub" / "deep.txt").write_text("deep secret\n")
    (workspace / "sub").mkdir()
    (workspace / "sub" / "in.txt").write_text("inside\n")
    (workspace / "link").symlink_to(outside / "secret.txt")
    (workspace / "dirlink").symlink_to(outside)
    (workspace / "sub" / "up").symlink_to("../..")
    (workspace / "dangling").symlink_to(outside / "new.txt")
    return workspace, outside


def _params(operation: str, path: str) -> dict[str, Any]:
    if operation == "write":
        return {"path": path, "content": "PWNED\n"}
    if operation == "edit":
        return {"path": path, "oldText": "SECRET", "newText": "PWNED"}
    if operation == "grep":
        return {"pattern": "secret|SECRET", "path": path}
    if operation == "find":
        return {"pattern": "*", "path": path}
    return {"path": path}


async def _attempt(root: Path, steps: list[tuple[str, str]]) -> None:
    workspace, outside = _plant(root)
    before = snapshot(root, skip=workspace)
    registry = ProcessRegistry()
    try:
        tools = {
            tool.name: tool
            for tool in create_coding_tools(
                workspace, workspace_only=True, process_registry=registry
            )
        }
        for operation, template in steps:
            path = template.format(outside=outside, root=root)
            try:
                result = await tools[operation].execute("c", _params(operation, path))
            except ClawpiError:
                continue  # refused (or simply not there): a clear error, nothing done
            shown = text_of(result)
            for secret in SECRETS:
                assert secret not in shown, (operation, path, shown)
    finally:
        await registry.shutdown()
    assert snapshot(root, skip=workspace) == before
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.tuples(operations, paths), min_size=1, max_size=4))
def test_no_path_reaches_outside_the_workspace(steps: list[tuple[str, str]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cwd = os.getcwd()
        try:
            asyncio.run(_attempt(Path(tmp), steps))
        finally:
            os.chdir(cwd)
