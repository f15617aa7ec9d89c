"""Which files a stretch of conversation read and changed, carried from summary to summary."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any


@dataclasses.dataclass(slots=True)
class FileOperations:
    read: set[str] = dataclasses.field(default_factory=set)
    written: set[str] = dataclasses.field(default_factory=set)
    edited: set[str] = dataclasses.field(default_factory=set)

    def add_from_messages(self, messages: Iterable[Mapping[str, Any]]) -> None:
        """Tool calls named exactly read / write / edit with a string `path`."""
        for message in messages:
            if message.get("role") != "assistant":
                continue
            for block in message.get("content") or ():
                if block.get("type") != "toolCall":
                    continue
                path = (block.get("arguments") or {}).get("path")
                if not isinstance(path, str):
                    continue
                name = block.get("name")
                if name == "read":
                    self.read.add(path)
                elif name == "write":
                    self.written.add(path)
                elif name == "edit":
                    self.edited.add(path)

    def add_from_details(self, details: Any) -> None:
        """Lists recorded by an earlier compaction or branch summary."""
        if not isinstance(details, Mapping):
            return
        read = details.get("readFiles")
        modified = details.get("modifiedFiles")
        if isinstance(read, list):
            self.read.update(p for p in read if isinstance(p, str))
        if isinstance(modified, list):
            self.edited.update(p for p in modified if isinstance(p, str))

    def file_lists(self) -> tuple[list[str], list[str]]:
        """(read-only files, modified files), both sorted."""
        modified = self.written | self.edited
        return sorted(self.read - modified), sorted(modified)


def format_file_tags(read_files: list[str], modified_files: list[str]) -> str:
    out = ""
    if read_files:
        out += "\n\n<read-files>\n" + "\n".join(read_files) + "\n</read-files>"
    if modified_files:
        out += "\n\n<modified-files>\n" + "\n".join(modified_files) + "\n</modified-files>"
    return out
