"""A scriptable HTTP/1.1 server on 127.0.0.1 for testing the real provider SDKs end to end.

It runs its own event loop in a thread, so sync tests, async tests and subprocesses can all talk
to it. Each request is answered by the next queued `FakeResponse` (or by `handler`), and every
request is recorded with its headers and body. Responses can stream chunks slowly, stall, or drop
the connection half-way, which is how the wire failures of real providers are reproduced.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any


@dataclasses.dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def query(self) -> str:
        return self.path.partition("?")[2]


@dataclasses.dataclass
class FakeResponse:
    status: int = 200
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    body: bytes | None = None
    """A complete body (sent with Content-Length)."""
    chunks: list[bytes] | None = None
    """A streamed body (chunked transfer encoding), one write per chunk."""
    chunk_delay: float = 0.0
    drop_after: int | None = None
    """Close the connection abruptly after this many chunks (a cut stream)."""
    stall_after: int | None = None
    """Stop sending (but keep the connection open) after this many chunks."""
    stall_seconds: float = 30.0

    @classmethod
    def json_body(
        cls, status: int, data: Any, headers: dict[str, str] | None = None
    ) -> FakeResponse:
        return cls(
            status=status,
            headers={"content-type": "application/json", **(headers or {})},
            body=json.dumps(data).encode(),
        )

    @classmethod
    def sse(cls, frames: Iterable[bytes], **kwargs: Any) -> FakeResponse:
        headers = {"content-type": "text/event-stream", "cache-control": "no-cache"}
        headers.update(kwargs.pop("headers", {}))
        return cls(status=200, headers=headers, chunks=list(frames), **kwargs)


def sse_frame(data: Any, event: str | None = None) -> bytes:
    """One server-sent event; `data` that is not a str is JSON-encoded."""
    text = data if isinstance(data, str) else json.dumps(data)
    lines = [f"event: {event}"] if event else []
    lines.extend(f"data: {line}" for line in text.split("\n"))
    return ("\n".join(lines) + "\n\n").encode()


_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    402: "Payment Required",
    403: "Forbidden",
    404: "Not Found",
    413: "Payload Too Large",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
    529: "Overloaded",
}


class FakeServer:
    """Use as a context manager; `url` is the base address, `requests` what arrived."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.responses: list[FakeResponse] = []
        self.handler: Callable[[RecordedRequest], FakeResponse] | None = None
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._lock = threading.Lock()
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    # -- lifecycle ------------------------------------------------------------------------

    def __enter__(self) -> FakeServer:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._start(), self._loop)
        future.result(timeout=10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def enqueue(self, *responses: FakeResponse) -> None:
        with self._lock:
            self.responses.extend(responses)

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        for task in list(self._tasks):  # e.g. a response stalled on purpose
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=2)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 2)

    # -- protocol -------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            while True:
                request = await self._read_request(reader)
                if request is None:
                    return
                with self._lock:
                    self.requests.append(request)
                    if self.handler is not None:
                        response = self.handler(request)
                    elif self.responses:
                        response = self.responses.pop(0)
                    else:
                        response = FakeResponse.json_body(
                            500, {"error": {"message": "FakeServer: no response queued"}}
                        )
                keep_open = await self._write_response(writer, response)
                if not keep_open:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            return
        finally:
            if task is not None:
                self._tasks.discard(task)
            self._writers.discard(writer)
            with contextlib.suppress(Exception):
                writer.close()

    async def _read_request(self, reader: asyncio.StreamReader) -> RecordedRequest | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            return None
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        body = b""
        if headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size_line = await reader.readuntil(b"\r\n")
                size = int(size_line.split(b";")[0], 16)
                data = await reader.readexactly(size + 2)
                if size == 0:
                    break
                body += data[:-2]
        elif "content-length" in headers:
            body = await reader.readexactly(int(headers["content-length"]))
        return RecordedRequest(method, path, headers, body)

    async def _write_response(self, writer: asyncio.StreamWriter, response: FakeResponse) -> bool:
        reason = _REASONS.get(response.status, "Status")
        head = [f"HTTP/1.1 {response.status} {reason}"]
        headers = {k.lower(): v for k, v in response.headers.items()}
        streamed = response.chunks is not None
        if streamed:
            headers["transfer-encoding"] = "chunked"
        else:
            headers["content-length"] = str(len(response.body or b""))
        headers.setdefault("connection", "keep-alive")
        head.extend(f"{k}: {v}" for k, v in headers.items())
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
        if not streamed:
            writer.write(response.body or b"")
            await writer.drain()
            return True
        for index, chunk in enumerate(response.chunks or []):
            if response.drop_after is not None and index >= response.drop_after:
                writer.transport.abort()
                return False
            if response.stall_after is not None and index >= response.stall_after:
                await asyncio.sleep(response.stall_seconds)
                writer.transport.abort()
                return False
            if response.chunk_delay:
                await asyncio.sleep(response.chunk_delay)
            writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            await writer.drain()
        if response.drop_after is not None and response.drop_after >= len(response.chunks or []):
            writer.transport.abort()
            return False
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


@contextlib.contextmanager
def fake_server() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server
