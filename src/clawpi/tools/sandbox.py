"""The exec sandbox: bubblewrap with the workspace read-write and everything else read-only.

Inside: the host's system directories read-only, the workspace bound at its own path, a
private /tmp, fresh /proc and /dev, new namespaces for everything (network too unless
allowed), no capabilities, a read-only root, a minimal environment (no API keys leak in), and
the sandbox dies with its parent.
If bwrap cannot run, sandbox mode refuses to start: commands never run unsandboxed by surprise.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from collections.abc import Mapping

from clawpi.tools.errors import SandboxUnavailableError

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
INSTALL_HINT = (
    "Install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`; Fedora: "
    "`dnf install bubblewrap`; Arch: `pacman -S bubblewrap`), or turn the sandbox off "
    "explicitly with sandbox=False."
)

_probe_cache: dict[str, str | None] = {}


@dataclasses.dataclass(frozen=True, slots=True)
class SandboxConfig:
    """How commands are sandboxed. `network` allows outbound network; `extra_ro_binds` adds
    host directories (read-only) such as a toolchain outside /usr."""

    network: bool = False
    extra_ro_binds: tuple[str, ...] = ()
    bwrap_path: str | None = None
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)


def find_bwrap(path: str | None = None) -> str:
    found = shutil.which(path or "bwrap")
    if found is None:
        raise SandboxUnavailableError(
            f"Sandbox mode needs bubblewrap, but `{path or 'bwrap'}` was not found on PATH. "
            + INSTALL_HINT
        )
    return found


def _system_mounts() -> list[str]:
    args: list[str] = []
    for directory in SYSTEM_DIRS:
        if os.path.islink(directory):
            args += ["--symlink", os.readlink(directory), directory]
        elif os.path.isdir(directory):
            args += ["--ro-bind", directory, directory]
    return args


def _ancestors_under_tmp(path: str) -> list[str]:
    found = []
    parent = os.path.dirname(path)
    while parent not in ("/", "/tmp", ""):
        if parent.startswith("/tmp/"):
            found.append(parent)
        parent = os.path.dirname(parent)
    return found


class Sandbox:
    """Builds the bwrap command line for one workspace; `check()` proves bwrap works here."""

    def __init__(
        self, workspace_root: str, config: SandboxConfig | None = None, *, read_only: bool = False
    ) -> None:
        self.workspace_root = workspace_root
        self.config = config or SandboxConfig()
        self.read_only = read_only
        self.bwrap = find_bwrap(self.config.bwrap_path)

    def check(self) -> None:
        """Run `true` inside the sandbox once per bwrap binary; raise with bwrap's own words."""
        if self.bwrap not in _probe_cache:
            _probe_cache[self.bwrap] = self._probe()
        failure = _probe_cache[self.bwrap]
        if failure is not None:
            raise SandboxUnavailableError(
                f"Sandbox mode is on but bubblewrap cannot create a sandbox here: {failure}. "
                "Enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, "
                "or the AppArmor bwrap profile), run with the needed privileges, or turn the "
                "sandbox off explicitly with sandbox=False."
            )

    def _probe(self) -> str | None:
        argv = self.wrap(["/bin/sh", "-c", "true"], self.workspace_root)
        try:
            done = subprocess.run(argv, capture_output=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return str(exc)
        if done.returncode != 0:
            return done.stderr.decode("utf-8", "replace").strip() or f"exit code {done.returncode}"
        return None

    def environment(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = {
            "PATH": SANDBOX_PATH,
            "HOME": self.workspace_root,
            "TMPDIR": "/tmp",
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            "TERM": "dumb",
            "CLAWPI_SANDBOX": "1",
            **self.config.env,
        }
        if extra:
            env.update(extra)
        return env

    def wrap(
        self, argv: list[str], workdir: str, env: Mapping[str, str] | None = None
    ) -> list[str]:
        args = [self.bwrap, "--unshare-all", "--unshare-user", "--cap-drop", "ALL"]
        args += ["--die-with-parent", "--new-session"]
        if self.config.network:
            args.append("--share-net")
        args += _system_mounts()
        for directory in self.config.extra_ro_binds:
            args += ["--ro-bind", directory, directory]
        args += ["--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev"]
        args += [
            "--ro-bind" if self.read_only else "--bind",
            self.workspace_root,
            self.workspace_root,
        ]
        # The directories bwrap creates above the workspace stay unwritable: the private /tmp
        # ones by mode, the rest because the sandbox's own root is remounted read-only.
        for ancestor in _ancestors_under_tmp(self.workspace_root):
            args += ["--chmod", "0555", ancestor]
        args += ["--remount-ro", "/"]
        args += ["--clearenv"]
        for key, value in self.environment(env).items():
            args += ["--setenv", key, value]
        args += ["--chdir", workdir, "--", *argv]
        return args
