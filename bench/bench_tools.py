"""Cost of the exec sandbox and of reading a large file.

- exec start-up: `true` through the exec tool, plain vs inside bubblewrap (median of N runs,
  and the ratio); the raw `bwrap ... true` subprocess cost is shown for reference.
- read: the read tool on a 50 MB text file with limit=2000 (offset at the start and in the
  middle), against a bare Python loop that reads the file and slices the same lines.
- loop detection: what `tools.loopDetection` adds to one call of a small read, with a full
  history of 30 calls, against the same read unguarded.

    python bench/bench_tools.py [--runs 60] [--reads 15]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clawpi.tools import (
    LoopDetectionConfig,
    ProcessRegistry,
    Sandbox,
    ToolCallHistory,
    ToolLoopGuard,
    create_coding_tools,
)

FILE_MB = 50


async def _median(fn: Callable[[], Awaitable[object]], runs: int) -> float:
    await fn()  # warm-up
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        await fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _sync_median(fn: Callable[[], object], runs: int) -> float:
    fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _make_big_file(path: Path) -> int:
    line = "The quick brown fox jumps over the lazy dog; 0123456789 abcdefghij.\n"
    count = FILE_MB * 1024 * 1024 // len(line)
    with path.open("w") as handle:
        handle.write(line * count)
    return count


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--reads", type=int, default=15)
    args = parser.parse_args()
    rows: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp)
        registry = ProcessRegistry()
        plain = {t.name: t for t in create_coding_tools(workspace, process_registry=registry)}
        plain_ms = await _median(lambda: plain["exec"].execute("b", {"command": "true"}), args.runs)
        rows.append(("exec `true`, plain", plain_ms))
        sandbox_ms = None
        if shutil.which("bwrap"):
            boxed = {
                t.name: t
                for t in create_coding_tools(workspace, sandbox=True, process_registry=registry)
            }
            sandbox_ms = await _median(
                lambda: boxed["exec"].execute("b", {"command": "true"}), args.runs
            )
            rows.append(("exec `true`, bwrap sandbox", sandbox_ms))
            argv = Sandbox(str(workspace.resolve())).wrap(["/bin/true"], str(workspace.resolve()))
            raw = _sync_median(lambda: subprocess.run(argv, check=True), args.runs)
            rows.append(("  (raw subprocess: bwrap ... /bin/true)", raw))
        raw_true = _sync_median(lambda: subprocess.run(["/bin/true"], check=True), args.runs)
        rows.append(("  (raw subprocess: /bin/true)", raw_true))
        await registry.shutdown()

        big = workspace / "big.txt"
        lines = _make_big_file(big)
        middle = lines // 2
        read = plain["read"]
        head_ms = await _median(
            lambda: read.execute("b", {"path": "big.txt", "limit": 2000}), args.reads
        )
        mid_ms = await _median(
            lambda: read.execute("b", {"path": "big.txt", "offset": middle, "limit": 2000}),
            args.reads,
        )

        def naive() -> str:
            text = big.read_text()
            return "\n".join(text.split("\n")[middle - 1 : middle + 1999])

        naive_ms = _sync_median(naive, args.reads)
        rows.append((f"read {FILE_MB} MB, limit=2000 from line 1", head_ms))
        rows.append((f"read {FILE_MB} MB, limit=2000 from line {middle}", mid_ms))
        rows.append(("  (naive: read_text + split + slice)", naive_ms))

        (workspace / "small.txt").write_text("hello\n" * 50)
        guard = ToolLoopGuard(ToolCallHistory(), LoopDetectionConfig(enabled=True))
        guarded = {t.name: t for t in guard.wrap_tools(create_coding_tools(workspace))}
        for i in range(30):  # a full history of distinct calls: each check scans all of it
            await guarded["read"].execute(f"h{i}", {"path": "small.txt", "offset": i + 1})
        calls = iter(range(10**9))
        unguarded_ms = await _median(
            lambda: read.execute("b", {"path": "small.txt", "offset": 40}), args.runs * 10
        )
        guarded_ms = await _median(
            lambda: guarded["read"].execute(
                f"g{next(calls)}", {"path": "small.txt", "offset": 31 + next(calls) % 15}
            ),
            args.runs * 10,
        )
        rows.append(("read small file, unguarded", unguarded_ms))
        rows.append(("read small file, loop detection on (30 calls kept)", guarded_ms))

    width = max(len(name) for name, _ in rows)
    print(f"{'case'.ljust(width)}  median ms")
    for name, seconds in rows:
        print(f"{name.ljust(width)}  {seconds * 1000:9.2f}")
    if sandbox_ms is not None:
        print(f"\nsandbox / plain exec start-up ratio: {sandbox_ms / plain_ms:.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
