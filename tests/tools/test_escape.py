"""The escape catalogue: with the sandbox on, every attempt to reach outside the workspace gets
a clear error and changes nothing outside it. Real files, real symlinks, real bwrap."""

from __future__ import annotations

import asyncio
import os
import re
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from clawpi.ai.abort import AbortController
from clawpi.errors import AbortedError
from clawpi.tools import (
    CommandFailedError,
    PathEscapeError,
    SandboxUnavailableError,
    ToolError,
    UnsafePathError,
    create_coding_tools,
)
from tests.tools.conftest import requires_bwrap, text_of
from tests.tools.proc_util import marker_seconds, wait_for_sleepers, wait_until_gone

pytestmark = requires_bwrap

ESCAPE = r"outside the workspace"


@pytest.fixture
def traps(workspace: Path, outside: Path) -> Path:
    """Symlinks, hard links and special files planted inside the workspace."""
    (workspace / "sub").mkdir()
    (workspace / "link").symlink_to(outside / "secret.txt")
    (workspace / "dirlink").symlink_to(outside)
    (workspace / "sub" / "up").symlink_to("../..")
    (workspace / "dangling").symlink_to(outside / "created-through-link.txt")
    (workspace / "devzero").symlink_to("/dev/zero")
    os.link(outside / "secret.txt", workspace / "hard")
    os.mkfifo(workspace / "pipe")
    return workspace


@pytest.fixture
def tools(make_tools, traps: Path):  # type: ignore[no-untyped-def]
    return make_tools(sandbox=True, provider="openai", model_id="gpt-5", apply_patch=True)


def _file_attempts(outside: Path) -> list[tuple[str, str, dict[str, Any], type[Exception], str]]:
    secret = str(outside / "secret.txt")
    return [
        ("relative dot-dot", "read", {"path": "../outside/secret.txt"}, PathEscapeError, ESCAPE),
        ("absolute path", "read", {"path": secret}, PathEscapeError, ESCAPE),
        ("system file", "read", {"path": "/etc/passwd"}, PathEscapeError, ESCAPE),
        ("symlinked file", "read", {"path": "link"}, PathEscapeError, ESCAPE),
        ("symlinked directory", "read", {"path": "dirlink/sub/deep.txt"}, PathEscapeError, ESCAPE),
        ("dot-dot inside a symlink", "read", {"path": "sub/up/outside/secret.txt"}, PathEscapeError, ESCAPE),
        ("/proc/self/root", "read", {"path": f"/proc/self/root{secret}"}, PathEscapeError, ESCAPE),
        ("/proc/self/environ", "read", {"path": "/proc/self/environ"}, PathEscapeError, ESCAPE),
        ("/proc/self/cwd", "read", {"path": "/proc/self/cwd/pyproject.toml"}, PathEscapeError, ESCAPE),
        ("device via symlink", "read", {"path": "devzero"}, PathEscapeError, ESCAPE),
        ("named pipe", "read", {"path": "pipe"}, UnsafePathError, "named pipe, not a regular file"),
        ("hard link read", "read", {"path": "hard"}, UnsafePathError, "hard links"),
        ("hard link write", "write", {"path": "hard", "content": "x"}, UnsafePathError, "hard links"),
        ("hard link edit", "edit", {"path": "hard", "oldText": "TOP", "newText": "x"}, UnsafePathError, "hard links"),
        ("NUL byte", "read", {"path": "a\x00b"}, UnsafePathError, "NUL"),
        ("very long path", "read", {"path": "a/" * 3000 + "f"}, UnsafePathError, "limit is 4096"),
        ("over-long name", "write", {"path": "n" * 300, "content": "x"}, UnsafePathError, "longer than 255"),
        ("home directory", "read", {"path": "~/.bashrc"}, PathEscapeError, ESCAPE),
        ("write through symlinked file", "write", {"path": "link", "content": "pwned"}, PathEscapeError, ESCAPE),
        ("write through dangling symlink", "write", {"path": "dangling", "content": "x"}, PathEscapeError, ESCAPE),
        ("write into symlinked dir", "write", {"path": "dirlink/new.txt", "content": "x"}, PathEscapeError, ESCAPE),
        ("write absolute", "write", {"path": str(outside / "new.txt"), "content": "x"}, PathEscapeError, ESCAPE),
        ("mkdir parents outside", "write", {"path": "../outside/a/b/c.txt", "content": "x"}, PathEscapeError, ESCAPE),
        ("edit through symlink", "edit", {"path": "link", "oldText": "TOP", "newText": "x"}, PathEscapeError, ESCAPE),
        ("ls outside", "ls", {"path": "../outside"}, PathEscapeError, ESCAPE),
        ("grep outside", "grep", {"pattern": "SECRET", "path": secret}, PathEscapeError, ESCAPE),
        ("find from root", "find", {"pattern": "*", "path": "/"}, PathEscapeError, ESCAPE),
        ("exec workdir outside", "exec", {"command": "ls", "workdir": str(outside)}, PathEscapeError, ESCAPE),
        ("exec workdir via symlink", "exec", {"command": "ls", "workdir": "dirlink"}, PathEscapeError, ESCAPE),
        (
            "apply_patch add outside", "apply_patch",
            {"input": "*** Begin Patch\n*** Add File: ../outside/p.txt\n+x\n*** End Patch"},
            PathEscapeError, ESCAPE,
        ),
        (
            "apply_patch delete outside", "apply_patch",
            {"input": f"*** Begin Patch\n*** Delete File: {secret}\n*** End Patch"},
            PathEscapeError, ESCAPE,
        ),
        (
            "apply_patch move outside", "apply_patch",
            {"input": "*** Begin Patch\n*** Update File: sub/in.txt\n*** Move to: ../outside/moved.txt\n@@\n-in\n+out\n*** End Patch"},
            PathEscapeError, ESCAPE,
        ),
    ]  # fmt: skip


FILE_ATTEMPT_IDS = [a[0] for a in _file_attempts(Path("/x"))]


@pytest.mark.parametrize("attempt", FILE_ATTEMPT_IDS)
async def test_file_tool_escape_is_refused(
    attempt: str, tools, outside: Path, traps: Path, guard: Callable[[], None]
) -> None:
    (traps / "sub" / "in.txt").write_text("in\n")
    _, name, params, error, message = next(a for a in _file_attempts(outside) if a[0] == attempt)
    with pytest.raises(error, match=message):
        await tools[name].execute("c", params)
    assert (traps / "sub" / "in.txt").read_text() == "in\n"
    guard()


EXEC_ATTEMPTS = [
    ("read outside by absolute path", "cat {outside}/secret.txt", "No such file or directory"),
    (
        "write outside by absolute path",
        "echo pwned > {outside}/secret.txt",
        "No such file or directory",
    ),
    # the sandbox makes the workspace's parents read-only directories; which error the shell
    # reports depends on where the workspace lives (a temp dir under /tmp or elsewhere)
    (
        "write beside the workspace",
        "echo pwned > ../pwned",
        "Permission denied|Read-only file system",
    ),
    ("write into /usr", "touch /usr/clawpi-pwned", "Read-only file system"),
    ("write into /etc", "touch /etc/clawpi-pwned", "Read-only file system"),
    ("write at the sandbox root", "touch /clawpi-pwned", "Read-only file system"),
    ("hard link to an outside file", "ln {outside}/secret.txt stolen", "No such file or directory"),
    (
        "/proc/1/root of the host",
        "cat /proc/1/root{outside}/secret.txt",
        "No such file or directory",
    ),
    ("signal a host process", "kill -0 {host_pid}", "No such process"),
    ("create a device node", "mknod disk b 8 0", "Operation not permitted"),
    (
        "mount a filesystem",
        "mkdir -p m && mount -t tmpfs none m",
        "ermission denied|not permitted|must be superuser",
    ),
]


@pytest.mark.parametrize(
    ("attempt", "command", "message"), EXEC_ATTEMPTS, ids=[a[0] for a in EXEC_ATTEMPTS]
)
async def test_exec_escape_fails_inside_the_sandbox(
    attempt: str, command: str, message: str, tools, outside: Path, traps: Path,
    guard: Callable[[], None],
) -> None:  # fmt: skip
    command = command.format(outside=outside, host_pid=os.getpid())
    with pytest.raises(CommandFailedError, match=message):
        await tools["exec"].execute("c", {"command": command})
    for path in ("/usr/clawpi-pwned", "/etc/clawpi-pwned", "/clawpi-pwned"):
        assert not os.path.exists(path)
    assert not (traps.parent / "pwned").exists()
    guard()


async def test_symlink_made_by_exec_cannot_be_read(
    tools, outside: Path, guard: Callable[[], None]
) -> None:
    await tools["exec"].execute(
        "c", {"command": f"ln -s {outside}/secret.txt made && ln -s /etc made-etc"}
    )
    with pytest.raises(PathEscapeError, match=ESCAPE):
        await tools["read"].execute("c", {"path": "made"})
    with pytest.raises(PathEscapeError, match=ESCAPE):
        await tools["read"].execute("c", {"path": "made-etc/hostname"})
    guard()


async def test_exec_cannot_open_a_network_socket(tools, guard: Callable[[], None]) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        port = listener.getsockname()[1]
        with pytest.raises(CommandFailedError, match=r"Network is unreachable|Connection refused"):
            await tools["exec"].execute(
                "c", {"command": f"bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}' && echo connected"}
            )
        with pytest.raises(BlockingIOError):
            listener.accept()
    guard()


async def test_exec_leaves_no_background_child_after_abort(
    make_tools, traps: Path, guard: Callable[[], None]
) -> None:
    controller = AbortController()
    tools = make_tools(sandbox=True, signal=controller.signal)
    marker = marker_seconds()
    command = f"(setsid sleep {marker} &) ; nohup sleep {marker} >/dev/null 2>&1 & sleep {marker}"
    task = asyncio.create_task(tools["exec"].execute("c", {"command": command}))
    await wait_for_sleepers(marker, 3)
    controller.abort()
    with pytest.raises(AbortedError, match="Command aborted"):
        await task
    assert wait_until_gone(marker) == []
    guard()


async def test_grep_and_find_do_not_follow_symlinks_out(tools, guard: Callable[[], None]) -> None:
    assert text_of(await tools["grep"].execute("c", {"pattern": "SECRET"})) == "No matches found"
    found = text_of(await tools["find"].execute("c", {"pattern": "*.txt"}))
    assert "secret" not in found and "deep" not in found
    guard()


async def test_read_only_workspace_drops_write_tools_and_mounts_read_only(
    workspace: Path, registry, guard: Callable[[], None]
) -> None:  # fmt: skip
    tools = {
        t.name: t
        for t in create_coding_tools(
            workspace, sandbox=True, read_only=True, process_registry=registry
        )
    }
    assert "write" not in tools and "edit" not in tools and "apply_patch" not in tools
    with pytest.raises(CommandFailedError, match="Read-only file system"):
        await tools["exec"].execute("c", {"command": "touch inside"})
    assert not (workspace / "inside").exists()
    guard()


def test_sandbox_without_bwrap_refuses_to_start(workspace: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(workspace))
    with pytest.raises(SandboxUnavailableError, match=re.escape("apt-get install bubblewrap")):
        create_coding_tools(workspace, sandbox=True)


async def test_workspace_only_without_sandbox_confines_file_tools(
    make_tools, traps: Path, outside: Path, guard: Callable[[], None]
) -> None:
    tools = make_tools(workspace_only=True)
    for path in ("link", "../outside/secret.txt", "dirlink/sub/deep.txt"):
        with pytest.raises(PathEscapeError):
            await tools["read"].execute("c", {"path": path})
    with pytest.raises(ToolError):
        await tools["write"].execute("c", {"path": "link", "content": "x"})
    guard()


async def test_unconfined_tools_follow_paths_anywhere(make_tools, outside: Path) -> None:
    tools = make_tools()
    result = await tools["read"].execute("c", {"path": str(outside / "secret.txt")})
    assert text_of(result) == "TOP SECRET\n"
