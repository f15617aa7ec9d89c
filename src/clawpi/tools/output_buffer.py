"""Command output as it arrives: a capped text buffer plus the full log once it grows large."""

from __future__ import annotations

import codecs
import os
import secrets
import tempfile

from clawpi.tools.truncate import DEFAULT_MAX_BYTES

MAX_OUTPUT_CHARS = 200_000


class OutputBuffer:
    """Keeps the last `max_chars` characters in memory; past 50 KB every byte also goes to
    `<dir>/clawpi-exec-<16 hex>.log` so nothing is lost to truncation."""

    def __init__(self, log_dir: str | None = None, max_chars: int = MAX_OUTPUT_CHARS) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._chunks: list[str] = []
        self._text = ""
        self._dropped = 0
        self._max_chars = max_chars
        self._log_dir = log_dir or tempfile.gettempdir()
        self._log: int | None = None
        self._pending_raw: list[bytes] = []
        self.total_bytes = 0
        self.newlines = 0
        self.full_output_path: str | None = None

    @property
    def start(self) -> int:
        """Absolute character offset of the first character still held in memory."""
        return self._dropped

    @property
    def end(self) -> int:
        return self._dropped + len(self.text)

    @property
    def text(self) -> str:
        if self._chunks:
            self._text += "".join(self._chunks)
            self._chunks.clear()
            excess = len(self._text) - self._max_chars
            if excess > 0:
                self._text = self._text[excess:]
                self._dropped += excess
        return self._text

    def since(self, offset: int) -> str:
        text = self.text
        return text[max(0, offset - self._dropped) :]

    def feed(self, data: bytes, final: bool = False) -> None:
        self.total_bytes += len(data)
        self.newlines += data.count(b"\n")
        if self._log is not None:
            os.write(self._log, data)
        else:
            self._pending_raw.append(data)
            if self.total_bytes > DEFAULT_MAX_BYTES:
                self._open_log()
        decoded = self._decoder.decode(data, final)
        if decoded:
            self._chunks.append(decoded)
            if sum(len(c) for c in self._chunks) > self._max_chars:
                _ = self.text

    def persist(self) -> str:
        """Make sure the full output is on disk (also when it stayed under 50 KB)."""
        if self.full_output_path is None:
            self._open_log()
            assert self._log is not None
            os.close(self._log)
            self._log = None
        assert self.full_output_path is not None
        return self.full_output_path

    def _open_log(self) -> None:
        os.makedirs(self._log_dir, exist_ok=True)
        path = os.path.join(self._log_dir, f"clawpi-exec-{secrets.token_hex(8)}.log")
        self._log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        self.full_output_path = path
        for chunk in self._pending_raw:
            os.write(self._log, chunk)
        self._pending_raw.clear()

    def close(self) -> None:
        self.feed(b"", final=True)
        if self._log is not None:
            os.close(self._log)
            self._log = None
