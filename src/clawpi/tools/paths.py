"""Workspace path rules: how a model's path becomes a real file, and when it is refused.

Every check runs on the resolved real path (symlinks, `..`, `/proc/self/...` all followed).
Confined files are then opened by walking down from the workspace root with O_NOFOLLOW at every
step and re-checked through /proc/self/fd, so a symlink swapped in between the check and the
open cannot lead outside either.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import stat

from clawpi.tools.errors import PathEscapeError, ToolError, UnsafePathError

PATH_MAX_BYTES = 4096
NAME_MAX_BYTES = 255

_UNICODE_SPACES = dict.fromkeys([0x00A0, *range(0x2000, 0x200B), 0x202F, 0x205F, 0x3000], " ")
_FILE_KINDS = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


def expand_path(raw: str, cwd: str | os.PathLike[str]) -> str:
    """pi's rules: one leading `@` dropped, Unicode spaces made plain, `~` expanded, relative
    paths taken from `cwd`."""
    path = raw[1:] if raw.startswith("@") else raw
    path = path.translate(_UNICODE_SPACES)
    if path == "~" or path.startswith("~/"):
        path = os.path.expanduser(path)
    if not os.path.isabs(path):
        path = os.path.join(os.fspath(cwd), path)
    return path


def check_path_text(raw: str) -> None:
    """Refuse paths no filesystem call should see: NUL bytes, over-long paths or names."""
    if "\x00" in raw:
        raise UnsafePathError(
            f"Path {raw!r} contains a NUL byte; paths cannot contain NUL characters."
        )
    size = len(raw.encode("utf-8", "surrogatepass"))
    if size > PATH_MAX_BYTES:
        raise UnsafePathError(
            f"Path is {size} bytes long; the limit is {PATH_MAX_BYTES} bytes. Use a shorter path."
        )
    for part in raw.split("/"):
        if len(part.encode("utf-8", "surrogatepass")) > NAME_MAX_BYTES:
            raise UnsafePathError(
                f"A path component of {raw[:80]!r}... is longer than {NAME_MAX_BYTES} bytes; "
                "no file can have such a name."
            )


def is_within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


@dataclasses.dataclass(frozen=True, slots=True)
class Workspace:
    """Where the tools work, and whether they are confined to it.

    `confined` is on with `workspace_only` or the sandbox; `read_only` drops write and edit.
    """

    root: str
    cwd: str
    confined: bool = False
    read_only: bool = False
    # Exact files outside the root that confined tools may still read: the full-output logs
    # this tool set's exec wrote.
    readable_files: set[str] = dataclasses.field(default_factory=set, compare=False)

    @classmethod
    def create(
        cls, root: str | os.PathLike[str], *, confined: bool = False, read_only: bool = False
    ) -> Workspace:
        real = os.path.realpath(os.fspath(root))
        if not os.path.isdir(real):
            raise ToolError(f"Workspace directory does not exist: {os.fspath(root)}")
        return cls(root=real, cwd=real, confined=confined, read_only=read_only)

    def resolve(self, raw: str, *, label: str = "path", for_write: bool = False) -> str:
        """The real absolute path for `raw`; refused if confined and it lands outside."""
        if not isinstance(raw, str) or not raw.strip():
            raise ToolError(f"The {label} parameter must be a non-empty string.")
        check_path_text(raw)
        absolute = expand_path(raw, self.cwd)
        try:
            real = os.path.realpath(absolute)
        except (OSError, ValueError) as exc:
            raise UnsafePathError(f"Cannot resolve path {raw!r}: {exc}") from exc
        self.check_inside(real, raw, for_write=for_write)
        return real

    def check_inside(self, real: str, raw: str, *, for_write: bool = False) -> None:
        if not self.confined or is_within(real, self.root):
            return
        if not for_write and real in self.readable_files:
            return
        raise PathEscapeError(
            f"Path {raw!r} resolves to {real}, which is outside the workspace {self.root}. "
            "Tools are confined to the workspace; use a path inside it."
        )

    def relative(self, real: str) -> str:
        return os.path.relpath(real, self.root) if is_within(real, self.root) else real

    def open_file(
        self, real: str, raw: str, flags: int, mode: int = 0o666, *, create_parents: bool = False
    ) -> int:
        """Open a regular file; re-check where it landed.

        Inside a confined workspace the path is walked one directory at a time from the root
        with O_NOFOLLOW (and parents are created the same way), so a symlink swapped in after
        `resolve` makes the open fail instead of creating or touching anything outside.
        """
        open_flags = flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        try:
            if self.confined and is_within(real, self.root) and real != self.root:
                fd = self._open_beneath(real, open_flags, mode, create_parents)
            else:
                if create_parents:
                    os.makedirs(os.path.dirname(real), exist_ok=True)
                fd = os.open(real, open_flags, mode)
        except FileNotFoundError:
            raise ToolError(f"File not found: {raw}") from None
        except IsADirectoryError:
            raise ToolError(f"{raw} is a directory, not a file.") from None
        except PermissionError:
            raise ToolError(f"Permission denied: {raw}") from None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise PathEscapeError(
                    f"Path {raw!r} became a symbolic link while it was being opened; refused."
                ) from None
            if exc.errno == errno.ENXIO:
                raise UnsafePathError(
                    f"{raw} is a socket or pipe without a reader, not a regular file."
                ) from None
            raise ToolError(f"Cannot open {raw}: {exc.strerror}") from None
        try:
            self._check_open_file(fd, raw, bool(flags & (os.O_WRONLY | os.O_RDWR)))
        except BaseException:
            os.close(fd)
            raise
        os.set_blocking(fd, True)
        return fd

    def unlink(self, real_parent: str, name: str, raw: str) -> None:
        """Remove the file (or symlink) `name` in `real_parent`, reached without following
        symlinks when confined; directories are refused."""
        try:
            if self.confined and is_within(real_parent, self.root):
                dir_fd = self._walk_to_dir(os.path.relpath(real_parent, self.root).split("/"))
            else:
                dir_fd = os.open(real_parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise ToolError(f"File not found: {raw}") from None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise PathEscapeError(
                    f"Path {raw!r} changed to a symbolic link; refused."
                ) from None
            raise ToolError(f"Cannot delete {raw}: {exc.strerror}") from None
        try:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                raise ToolError(f"{raw} is a directory; only files can be deleted.")
            os.unlink(name, dir_fd=dir_fd)
        except FileNotFoundError:
            raise ToolError(f"File not found: {raw}") from None
        finally:
            os.close(dir_fd)

    def _walk_to_dir(self, parts: list[str], create: bool = False) -> int:
        """A descriptor for root/parts, every step opened with O_NOFOLLOW."""
        directory_flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        dir_fd = os.open(self.root, directory_flags)
        try:
            for part in parts:
                if part in ("", "."):
                    continue
                try:
                    next_fd = os.open(part, directory_flags, dir_fd=dir_fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    try:
                        os.mkdir(part, dir_fd=dir_fd)
                    except FileExistsError:
                        pass
                    next_fd = os.open(part, directory_flags, dir_fd=dir_fd)
                os.close(dir_fd)
                dir_fd = next_fd
        except BaseException:
            os.close(dir_fd)
            raise
        return dir_fd

    def _open_beneath(self, real: str, flags: int, mode: int, create_parents: bool) -> int:
        parts = os.path.relpath(real, self.root).split("/")
        dir_fd = self._walk_to_dir(parts[:-1], create_parents)
        try:
            return os.open(parts[-1], flags, mode, dir_fd=dir_fd)
        finally:
            os.close(dir_fd)

    def _check_open_file(self, fd: int, raw: str, for_write: bool) -> None:
        info = os.fstat(fd)
        check_regular(info, raw)
        if not self.confined:
            return
        landed = os.readlink(f"/proc/self/fd/{fd}")
        self.check_inside(landed, raw, for_write=for_write)
        if info.st_nlink > 1:
            raise UnsafePathError(
                f"{raw} has {info.st_nlink} hard links. A hard-linked file may be shared with a "
                "path outside the workspace, so confined tools refuse it; copy the file instead."
            )


def check_regular(info: os.stat_result, raw: str) -> None:
    for predicate, kind in _FILE_KINDS:
        if predicate(info.st_mode):
            raise UnsafePathError(f"{raw} is {kind}, not a regular file; refused.")
