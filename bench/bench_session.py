"""Session file speed and memory: open + build_session_context, appends, peak RSS.

    python bench/bench_session.py [--sizes 1000,10000,100000] [--appends 300] [--dir DIR]

Each size runs in fresh subprocesses (so ru_maxrss is the peak of that one load): clawpi's
`SessionManager.open(...).build_session_context()`, and the raw baseline of parsing every line
with orjson and walking the parent chain from the last entry, with the garbage collector paused.
If `CLAWPI_PI_NODE_DIR` points at an installed pi-coding-agent (see
tests/session/interop/README.md), pi's own open + buildSessionContext is measured on the same
file too. The session mix per turn: user text, assistant thinking + tool call, a 1.5 KB tool
result, assistant text.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

PI_REFERENCE_MS = {1_000: 21.0, 10_000: 226.0, 100_000: 2340.0}
"""pi 0.58.3 (node) on such files, as measured for the issue; 556 MB peak RSS at 100k."""
PI_REFERENCE_PEAK_MB = {100_000: 556.0}

_PI_SCRIPT = """
import { join } from "node:path";
import { pathToFileURL } from "node:url";
const core = join(process.env.CLAWPI_PI_NODE_DIR, "node_modules/@mariozechner/pi-coding-agent/dist/core");
const { SessionManager } = await import(pathToFileURL(join(core, "session-manager.js")).href);
const times = [];
let count = 0;
for (let i = 0; i < Number(process.argv[2]); i++) {
  const t = performance.now();
  const sm = SessionManager.open(process.argv[1]);
  count = sm.buildSessionContext().messages.length;
  times.push(performance.now() - t);
}
console.log(JSON.stringify({ ms: Math.min(...times), messages: count,
  peak_mb: process.resourceUsage().maxRSS / 1024 }));
"""


# -- the session file ------------------------------------------------------------------------


def _words(rng: random.Random, chars: int) -> str:
    vocabulary = ["alpha", "beta", "gamma", "delta", "file", "the", "run", "ok", "data", "value"]
    out: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(vocabulary)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)[:chars]


def write_session(path: Path, entries: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    usage = {
        "input": 1200,
        "output": 300,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 1500,
        "cost": {
            "input": 0.0036,
            "output": 0.0045,
            "cacheRead": 0,
            "cacheWrite": 0,
            "total": 0.0081,
        },
    }
    common = {"api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5"}
    lines = [
        {
            "type": "session",
            "version": 3,
            "id": "5e55e55e-0000-4000-8000-000000000000",
            "timestamp": "2026-11-21T00:00:00.000Z",
            "cwd": "/work/project",
        }
    ]
    parent: str | None = None
    ms = 1_795_300_000_000
    for index in range(entries):
        ms += 1000
        step = index % 4
        call_id = f"toolu_{index // 4:06d}"
        if step == 0:
            message: dict[str, Any] = {
                "role": "user",
                "content": _words(rng, 200),
                "timestamp": ms,
            }
        elif step == 1:
            message = {
                "role": "assistant",
                "content": [
                    {
                        "type": "thinking",
                        "thinking": _words(rng, 400),
                        "thinkingSignature": "sig" + "x" * 60,
                    },
                    {
                        "type": "toolCall",
                        "id": call_id,
                        "name": "bash",
                        "arguments": {"command": "grep -rn value src/ | head -50"},
                    },
                ],
                **common,
                "usage": usage,
                "stopReason": "toolUse",
                "timestamp": ms,
            }
        elif step == 2:
            message = {
                "role": "toolResult",
                "toolCallId": call_id,
                "toolName": "bash",
                "content": [{"type": "text", "text": _words(rng, 1500)}],
                "isError": False,
                "timestamp": ms,
            }
        else:
            message = {
                "role": "assistant",
                "content": [{"type": "text", "text": _words(rng, 300)}],
                **common,
                "usage": usage,
                "stopReason": "stop",
                "timestamp": ms,
            }
        entry_id = f"{index:08x}"
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + ".000Z"
        lines.append(
            {
                "type": "message",
                "id": entry_id,
                "parentId": parent,
                "timestamp": stamp,
                "message": message,
            }
        )
        parent = entry_id
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))


# -- children --------------------------------------------------------------------------------


def child_clawpi(path: str, repeats: int) -> dict[str, Any]:
    from clawpi.session import SessionManager

    times = []
    cpu = []
    count = 0
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        sm = SessionManager.open(path)
        count = len(sm.build_session_context().messages)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        del sm
        gc.collect()
    return _result(times, cpu, count)


def _result(times: list[float], cpu: list[float], count: int) -> dict[str, Any]:
    return {
        "ms": min(times) * 1000,
        "cpu_ms": min(cpu) * 1000,
        "messages": count,
        "peak_mb": _peak_mb(),
    }


def child_raw(path: str, repeats: int) -> dict[str, Any]:
    times = []
    cpu = []
    count = 0
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        gc.disable()
        with open(path, "rb") as handle:
            data = handle.read()
        loads = orjson.loads
        parsed = [loads(line) for line in data.splitlines() if line]
        by_id = {entry.get("id"): entry for entry in parsed[1:]}
        path_entries = []
        current = parsed[-1]
        while current is not None:
            path_entries.append(current)
            parent = current.get("parentId")
            current = by_id.get(parent) if parent is not None else None
        path_entries.reverse()
        count = len(path_entries)
        gc.enable()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        del parsed, by_id, path_entries, data
        gc.collect()
    return _result(times, cpu, count)


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _run_child(kind: str, path: Path, repeats: int) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", kind, str(path), "--repeats", str(repeats)],
        capture_output=True,
        check=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _run_pi(path: Path, repeats: int) -> dict[str, Any] | None:
    pi_dir = os.environ.get("CLAWPI_PI_NODE_DIR")
    if not pi_dir or shutil.which("node") is None:
        return None
    if not (Path(pi_dir) / "node_modules/@mariozechner/pi-coding-agent").is_dir():
        return None
    done = subprocess.run(
        ["node", "--input-type=module", "-e", _PI_SCRIPT, "--", str(path), str(repeats)],
        capture_output=True,
        check=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# -- appends ---------------------------------------------------------------------------------


def bench_appends(directory: Path, count: int) -> list[tuple[str, float]]:
    from clawpi.session import SessionManager

    message = {
        "role": "toolResult",
        "toolCallId": "toolu_1",
        "toolName": "bash",
        "content": [{"type": "text", "text": "x" * 1500}],
        "isError": False,
        "timestamp": 1,
    }
    first = {"role": "assistant", "content": [], "stopReason": "stop", "timestamp": 0}
    rows = []
    samples: dict[str, list[float]] = {"clawpi fsync": [], "clawpi no fsync": [], "raw": []}
    line = b""
    managers = {}
    for label, fsync in (("clawpi fsync", True), ("clawpi no fsync", False)):
        sm = SessionManager.create("/bench", directory / label.replace(" ", "_"), fsync=fsync)
        sm.append_message(first)
        managers[label] = sm
    raw_path = directory / "raw.jsonl"
    raw_fd = os.open(raw_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for _ in range(count):  # interleaved, so disk weather hits all three alike
            for label, sm in managers.items():
                start = time.perf_counter()
                sm.append_message(message)
                samples[label].append(time.perf_counter() - start)
            if not line:
                assert sm.session_file is not None
                line = sm.session_file.read_bytes().splitlines()[-1] + b"\n"
            start = time.perf_counter()
            os.write(raw_fd, line)
            os.fsync(raw_fd)
            samples["raw"].append(time.perf_counter() - start)
    finally:
        os.close(raw_fd)
    for label in ("clawpi fsync", "raw", "clawpi no fsync"):
        rows.append((label, statistics.median(samples[label]) * 1e6))
    return rows


# -- main ------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--appends", type=int, default=300)
    parser.add_argument("--dir", default=None, help="where to write the files (default: temp)")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "FILE"))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.child:
        kind, file = args.child
        runner = child_clawpi if kind == "clawpi" else child_raw
        print(json.dumps(runner(file, args.repeats)))
        return

    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="clawpi-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    try:
        _report(args, base)
    finally:  # also when interrupted: the files run to hundreds of MB
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)


def _report(args: argparse.Namespace, base: Path) -> None:
    print(
        f"open + build_session_context (best of {args.repeats}, 20 up to 10k entries; wall ms, "
        "with CPU ms for the "
        "clawpi/raw ratio since CPU time is steadier on a shared machine; peak RSS)"
    )
    header = (
        f"{'entries':>8} {'file MB':>8} {'clawpi ms':>10} {'raw ms':>8} {'vs raw':>7} "
        f"{'cpu vs raw':>10} {'pi ms':>8} {'vs pi':>6} {'clawpi MB':>10} {'raw MB':>7} "
        f"{'pi MB':>7}"
    )
    print(header)
    print("-" * len(header))
    for size in (int(s) for s in args.sizes.split(",")):
        path = base / f"session-{size}.jsonl"
        if not path.exists():
            write_session(path, size)
        repeats = args.repeats if size > 10_000 else max(args.repeats, 20)  # small: cheap
        ours = _run_child("clawpi", path, repeats)
        raw = _run_child("raw", path, repeats)
        pi = _run_pi(path, repeats)
        pi_ms = pi["ms"] if pi else PI_REFERENCE_MS.get(size, float("nan"))
        pi_mb = pi["peak_mb"] if pi else PI_REFERENCE_PEAK_MB.get(size, float("nan"))
        source = "" if pi else "*"
        print(
            f"{size:>8} {path.stat().st_size / 1e6:>8.1f} {ours['ms']:>10.1f} {raw['ms']:>8.1f} "
            f"{ours['ms'] / raw['ms']:>6.2f}x {ours['cpu_ms'] / raw['cpu_ms']:>9.2f}x "
            f"{pi_ms:>7.0f}{source} {ours['ms'] / pi_ms:>5.2f}x "
            f"{ours['peak_mb']:>10.0f} {raw['peak_mb']:>7.0f} {pi_mb:>6.0f}{source}"
        )
    print(
        "(* = the issue's reference figures for pi 0.58.3; run with CLAWPI_PI_NODE_DIR to measure)"
    )
    print()
    print(f"append latency, median of {args.appends} (1.5 KB tool result line)")
    rows = bench_appends(base / "appends", args.appends)
    raw_us = dict(rows)["raw"]
    for label, us in rows:
        print(f"  {label:<34} {us:>9.0f} us  {us / raw_us:>5.2f}x raw write+fsync")


if __name__ == "__main__":
    main()
