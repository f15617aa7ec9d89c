"""Runner overhead per turn and throughput of many concurrent sessions.

1. Overhead: `run_embedded_agent` turns, one after another, on the scripted faux provider
   (zero delay, a short text answer), with tools on (the coding tools are built per attempt as
   in production). For every turn the bench times the whole call, the time spent inside the
   faux provider's own stream steps (the "model"), and the time spent in `os.fsync` (the session
   file is fsynced on each append). Overhead = total - model - fsync. Reported for a fresh
   session (turn 1) and for turns 2..N of a session whose history grows.
   Target: overhead under 2 ms per turn, plus the session fsyncs.
   Each scenario runs twice, each time in a process of its own: with the session files in
   memory (tmpfs, where there is one), which leaves the runner's own cost, and on the disk of
   the system temp directory, which adds what that file system costs beyond the time inside
   fsync: creating files, its write path, and the cold caches a process wakes up to after
   sleeping in fsync (on the ext4 these figures were taken on, 0.3-1 ms a turn, and more at
   p99). The time spent creating files (a new session's file and its lock file) is shown
   beside it and stays in the overhead. Each row also carries the machine's own jitter while
   its turns ran: the median and p99 of a fixed loop of about 1 ms, timed between the turns.

2. Throughput: 100 and 1,000 sessions submitted at once, one turn each, with the global lane
   capped (`agents.defaults.maxConcurrent`), each measured in a fresh subprocess so its peak
   RSS (`resource.getrusage`) belongs to that scenario alone. Once with a zero-delay model
   (the runner's own CPU cost bounds throughput) and once with a model answering in ~50 ms;
   in both places, memory and disk, and on the disk once more with the session files fsynced
   by a worker thread (`session_fsync="background"`), so the fsyncs no longer hold the event
   loop. Also 100 running sessions given 10 more turns each at once: appends to existing
   files, the common case of a chat gateway.

3. Growth: one session given 2 x `--turns` turns that each read a file (the model calls
   `read`, then answers), the overhead per turn by 50-turn window as its history grows: what
   a long chat with tool calls pays for its history on every turn.

    python bench/bench_runner.py [--turns 500] [--runs 3] [--cap 16]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clawpi.ai.stream import ApiProvider, get_api_provider, register_api_provider
from clawpi.runner import run_embedded_agent
from clawpi.runner.lanes import CommandQueue
from clawpi.session import FsyncMode, background_fsync
from clawpi.testing import FunctionProvider
from clawpi.testing.faux import FauxResponse, faux_text, faux_tool_call

ANSWER = "Sure - here is a short answer to your question."


class Clock:
    model_s = 0.0
    fsync_s = 0.0
    fsyncs = 0
    create_s = 0.0

    @classmethod
    def reset(cls) -> None:
        cls.model_s = cls.fsync_s = cls.create_s = 0.0
        cls.fsyncs = 0


def instrument() -> None:
    """Time the scripted provider's own stream steps and every fsync."""
    inner = get_api_provider("function")
    assert inner is not None

    async def timed(model: Any, context: Any, options: Any) -> AsyncIterator[Any]:
        started = time.perf_counter()
        events = inner.stream(model, context, options)
        Clock.model_s += time.perf_counter() - started
        while True:
            started = time.perf_counter()
            try:
                event = await anext(events)
            except StopAsyncIteration:
                Clock.model_s += time.perf_counter() - started
                return
            Clock.model_s += time.perf_counter() - started
            yield event

    register_api_provider(ApiProvider(api="function", stream=timed))
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        started = time.perf_counter()
        real_fsync(fd)
        Clock.fsync_s += time.perf_counter() - started
        Clock.fsyncs += 1

    os.fsync = fsync
    real_open = os.open

    def open_(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        if not flags & os.O_CREAT:
            return real_open(path, flags, mode, dir_fd=dir_fd)
        started = time.perf_counter()
        try:
            return real_open(path, flags, mode, dir_fd=dir_fd)
        finally:
            Clock.create_s += time.perf_counter() - started

    os.open = open_


def make_env(root: Path, delay_s: float, cap: int) -> tuple[FunctionProvider, dict[str, Any]]:
    async def answer(_context: Any, _options: Any) -> FauxResponse:
        # The scripted provider logs every request and its options for tests to inspect; the
        # options hold the agent session, so a bench of thousands of turns would measure that
        # log's memory rather than the runner's.
        provider.requests.clear()
        provider.options.clear()
        if delay_s:
            await asyncio.sleep(delay_s)  # the model "thinking" before the first token
        return FauxResponse(content=[faux_text(ANSWER)])

    provider = FunctionProvider(answer, provider="faux", model_id="faux-1")
    config = provider.openclaw_config(maxConcurrent=cap)
    (root / "workspace").mkdir(parents=True, exist_ok=True)
    return provider, config


def turn_args(
    root: Path,
    config: dict[str, Any],
    name: str,
    prompt: str,
    queue: CommandQueue,
    fsync: FsyncMode = True,
) -> dict[str, Any]:
    """The arguments of one turn (built before the clock starts: they are the caller's)."""
    return {
        "session_fsync": fsync,
        "session_id": name,
        "session_key": f"agent:main:bench:{name}",
        "session_file": root / "sessions" / f"{name}.jsonl",
        "workspace_dir": root / "workspace",
        "config": config,
        "prompt": prompt,
        "timeout_ms": 600_000,
        "run_id": f"{name}-{prompt}",
        "agent_dir": root / "agent",
        "run_queue": queue,
    }


async def run_turn(args: dict[str, Any]) -> str:
    result = await run_embedded_agent(**args)
    return result.payloads[0].text or ""


async def one_turn(*args: Any) -> str:
    """`run_turn` with `turn_args(*args)`."""
    return await run_turn(turn_args(*args))


PHASES = (
    ("clawpi.runner.run", "agent_model_registry", "model registry (cached)"),
    ("clawpi.runner.attempt", "ResourceLoader", "resource loader (skills)"),
    ("clawpi.runner.attempt", "_open_session", "open/create session file"),
    ("clawpi.runner.attempt", "build_run_tools", "runner tools (tool pipeline)"),
    ("clawpi.runner.attempt", "attempt_system_prompt", "system prompt"),
    ("clawpi.sdk.factory", "_build_tools", "sdk built-in tool set"),
    ("clawpi.runner.attempt", "create_agent_session", "agent session (incl. above)"),
    ("clawpi.runner.attempt", "_prompt", "prompt + stream (incl. model)"),
    ("clawpi.runner.run", "build_embedded_run_payloads", "payloads"),
)


def instrument_phases(spent: dict[str, float]) -> None:
    """Wrap the runner's set-up phases with timers (bench only: measurement, not behaviour)."""
    import functools
    import importlib
    import inspect

    for module_name, attr, label in PHASES:
        module = importlib.import_module(module_name)
        original = getattr(module, attr)
        spent[label] = 0.0

        if inspect.iscoroutinefunction(original):

            @functools.wraps(original)
            async def timed_async(*a: Any, _f: Any = original, _l: str = label, **k: Any) -> Any:
                started = time.perf_counter()
                try:
                    return await _f(*a, **k)
                finally:
                    spent[_l] += time.perf_counter() - started

            setattr(module, attr, timed_async)
        else:

            @functools.wraps(original)
            def timed(*a: Any, _f: Any = original, _l: str = label, **k: Any) -> Any:
                started = time.perf_counter()
                try:
                    return _f(*a, **k)
                finally:
                    spent[_l] += time.perf_counter() - started

            setattr(module, attr, timed)


async def breakdown(turns: int, base: str | None) -> tuple[float, float, dict[str, float]]:
    """Wall time per fresh-session turn by phase (model and fsync time reported separately)."""
    instrument()
    spent: dict[str, float] = {}
    instrument_phases(spent)
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        root = Path(tmp)
        _provider, config = make_env(root, 0.0, 4)
        queue = CommandQueue()
        for i in range(5):
            await one_turn(root, config, f"warm{i}", "hello", queue)
        for key in spent:
            spent[key] = 0.0
        Clock.reset()
        started = time.perf_counter()
        for i in range(turns):
            await one_turn(root, config, f"b{i}", "hello", queue)
        total = (time.perf_counter() - started) / turns
    phases = {label: value / turns for label, value in spent.items()}
    phases["  of which model"] = Clock.model_s / turns
    phases["  of which fsync"] = Clock.fsync_s / turns
    phases["  of which file creation"] = Clock.create_s / turns
    return total, Clock.model_s / turns, phases


async def long_session(turns: int, base: str | None) -> list[tuple[int, float, float]]:
    """One session whose every turn reads a file: the model calls `read`, then answers (two
    model calls and a tool call per turn). Overhead per turn (total - model - fsync), median
    and p90 over windows of 50 turns as the history grows to `turns` turns. The scripted
    model counts a request's tokens from its JSON, several times what the session estimates,
    so it is given a window no history here reaches: this measures growth, not compaction."""
    instrument()
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        root = Path(tmp)
        calls = 0

        async def answer(context: Any, _options: Any) -> FauxResponse:
            nonlocal calls
            provider.requests.clear()
            provider.options.clear()
            if context["messages"][-1].get("role") == "toolResult":
                return FauxResponse(content=[faux_text(ANSWER)])
            calls += 1
            return FauxResponse(
                content=[faux_tool_call("read", {"path": "notes.txt"}, call_id=f"c{calls}")]
            )

        provider = FunctionProvider(
            answer, provider="faux", model_id="faux-1", context_window=100_000_000
        )
        config = provider.openclaw_config(maxConcurrent=4)
        (root / "workspace").mkdir(parents=True)
        (root / "workspace" / "notes.txt").write_text("a line of notes\n" * 20)
        queue = CommandQueue()
        for i in range(5):  # warm up: imports, the tools, caches
            await run_turn(turn_args(root, config, f"warm{i}", "hello", queue))
        windows: list[tuple[int, float, float]] = []
        window: list[float] = []
        for i in range(turns):
            Clock.reset()
            args = turn_args(root, config, "reader", f"question {i}", queue)
            started = time.perf_counter()
            text = await run_turn(args)
            total = time.perf_counter() - started
            assert text == ANSWER, text
            window.append((total - Clock.model_s - Clock.fsync_s) * 1000)
            if len(window) == 50:
                windows.append((i + 1, statistics.median(window), pct(window, 0.9)))
                window = []
    return windows


def _spin(steps: int) -> float:
    started = time.perf_counter()
    total = 0
    for step in range(steps):
        total += step
    return time.perf_counter() - started


def fixed_work_steps(ms: float) -> int:
    """Steps of a plain Python loop taking about `ms` on this machine now.

    The VM this runs on changes speed by 2x and more within minutes, and stalls now and then.
    The same fixed work timed between the turns says how far the machine alone spread each
    scenario's figures while they were taken: the closest any p99 can come to its median here.
    """
    fastest = min(_spin(200_000) for _ in range(5))
    return int(200_000 * ms / 1000 / fastest)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def interpreter() -> str:
    """Which Python runs the bench, and whether its core is a shared libpython. The build
    matters: on the machine these figures were taken on, pyenv's CPython (a shared libpython,
    configured without `--enable-optimizations`) ran this bench about a quarter slower than
    Debian's /usr/bin/python3 (a static core, built with PGO and LTO)."""
    shared = False
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            shared = any("libpython" in line for line in maps)
    except OSError:
        pass
    core = "shared libpython" if shared else "static core"
    return f"Python {sys.version.split()[0]} ({sys.executable}, {core})"


def memory_dir() -> str | None:
    """A RAM-backed directory (tmpfs) for session files, or None where there is none."""
    for mount in _mounts():
        if mount[1] == "/dev/shm" and mount[2] == "tmpfs" and os.access("/dev/shm", os.W_OK):
            return "/dev/shm"
    return None


def fs_type(path: str) -> str:
    """The file system type holding `path` (as /proc/mounts names it), or "disk"."""
    best = ("", "disk")
    real = os.path.realpath(path)
    for _device, point, kind in _mounts():
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best[0]):
            best = (point, kind)
    return best[1]


def _mounts() -> list[tuple[str, str, str]]:
    try:
        with open("/proc/mounts", encoding="utf-8") as handle:
            return [tuple(line.split()[:3]) for line in handle]  # type: ignore[misc]
    except OSError:
        return []


async def overhead(turns: int, base: str | None) -> list[tuple[str, dict[str, float]]]:
    """Fresh-session and same-session turns, interleaved, with the session files under `base`."""
    instrument()
    rows: list[tuple[str, dict[str, float]]] = []
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        root = Path(tmp)
        _provider, config = make_env(root, 0.0, 4)
        queue = CommandQueue()
        for i in range(5):  # warm up: imports, first client, caches
            await one_turn(root, config, f"warm{i}", "hello", queue)
        samples: dict[str, list[tuple[float, float, float, int, float, float]]] = {
            "fresh": [],
            "grown": [],
        }
        steps = fixed_work_steps(1.0)
        fixed: list[float] = []
        for i in range(turns):
            fixed.append(_spin(steps) * 1000)
            for kind, name in (("fresh", f"fresh{i}"), ("grown", "long")):
                Clock.reset()
                args = turn_args(root, config, name, f"question {i}", queue)
                started = time.perf_counter()
                cpu = time.process_time()
                text = await run_turn(args)
                total = time.perf_counter() - started
                cpu = time.process_time() - cpu
                assert text == ANSWER, text
                samples[kind].append(
                    (total, Clock.model_s, Clock.fsync_s, Clock.fsyncs, cpu, Clock.create_s)
                )
    fixed_med, fixed_p99 = statistics.median(fixed), pct(fixed, 0.99)
    labels = (("fresh", "new session, turn 1"), ("grown", f"one session, turns 1..{turns}"))
    for kind, label in labels:
        data = samples[kind]
        over_ms = [(d[0] - d[1] - d[2]) * 1000 for d in data]
        cpu_over_ms = [(d[4] - d[1]) * 1000 for d in data]
        rows.append(
            (
                label,
                {
                    "total_med": statistics.median([d[0] * 1000 for d in data]),
                    "model_med": statistics.median([d[1] * 1000 for d in data]),
                    "fsync_med": statistics.median([d[2] * 1000 for d in data]),
                    "fsyncs": statistics.median([d[3] for d in data]),
                    "create_med": statistics.median([d[5] * 1000 for d in data]),
                    "cpu_med": statistics.median(cpu_over_ms),
                    "cpu_p99": pct(cpu_over_ms, 0.99),
                    "over_med": statistics.median(over_ms),
                    "over_p99": pct(over_ms, 0.99),
                    "fixed_med": fixed_med,
                    "fixed_p99": fixed_p99,
                },
            )
        )
    return rows


async def throughput_child(
    sessions: int, cap: int, delay_s: float, base: str | None, fsync: FsyncMode, turns: int
) -> dict[str, float]:
    """`sessions` new sessions, one turn each, all submitted at once; or, with `turns` > 1,
    sessions already running (one untimed turn each first) that then get `turns` turns each,
    all submitted at once (each session's turns queue in its lane, in order)."""
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        root = Path(tmp)
        _provider, config = make_env(root, delay_s, cap)
        queue = CommandQueue()
        await one_turn(root, config, "warm", "hello", queue, fsync)
        if turns > 1:
            await asyncio.gather(
                *(one_turn(root, config, f"s{i}", "hello", queue, fsync) for i in range(sessions))
            )
        background_fsync.wait()
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started = time.perf_counter()
        texts = await asyncio.gather(
            *(
                one_turn(root, config, f"s{i}", f"question {i}.{turn}", queue, fsync)
                for turn in range(turns)
                for i in range(sessions)
            )
        )
        background_fsync.wait()  # counted: the turns are done when they are on disk
        elapsed = time.perf_counter() - started
        assert all(text == ANSWER for text in texts)
        peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "turns_per_s": len(texts) / elapsed,
        "elapsed_s": elapsed,
        "peak_rss_mb": peak_kb / 1024,
        "rss_growth_mb": (peak_kb - rss_before) / 1024,
    }


def _child(*args: str, fresh_rss: bool = False) -> Any:
    """Run this script with `args` in a process of its own (no caches or heap from another)
    and return the JSON it printed last. Linux carries a process's peak RSS across exec, so
    a child exec'd straight from this (large) process would report our peak: with
    `fresh_rss`, a small shell forks it, and it starts afresh."""
    command = [sys.executable, __file__, *args]
    if fresh_rss:
        command = ["sh", "-c", '"$@" & wait $!', "sh", *command]
    completed = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(completed.stdout.strip().splitlines()[-1])


def child(kind: str, turns: int, base: str | None) -> Any:
    return _child("--child", kind, "--turns", str(turns), *(["--dir", base] if base else []))


def throughput(
    sessions: int, cap: int, delay_s: float, base: str | None, fsync: FsyncMode, turns: int
) -> dict[str, float]:
    spec = {  # throughput_child's own parameters
        "sessions": sessions,
        "cap": cap,
        "delay_s": delay_s,
        "base": base,
        "fsync": fsync,
        "turns": turns,
    }
    result: dict[str, float] = _child("--child", json.dumps(spec), fresh_rss=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--cap", type=int, default=16)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child")
    parser.add_argument("--dir")
    args = parser.parse_args()
    if args.child == "breakdown":
        total, _model, phases = asyncio.run(breakdown(args.turns, args.dir))
        print(json.dumps({"total": total, "phases": phases}))
        return
    if args.child == "long":
        print(json.dumps(asyncio.run(long_session(args.turns, args.dir))))
        return
    if args.child == "overhead":
        print(json.dumps(asyncio.run(overhead(args.turns, args.dir))))
        return
    if args.child:
        print(json.dumps(asyncio.run(throughput_child(**json.loads(args.child)))))
        return

    disk = tempfile.gettempdir()
    places: list[tuple[str, str | None]] = [(f"disk: {fs_type(disk)}", disk)]
    memory = memory_dir()
    if memory is not None:
        places.insert(0, ("memory: tmpfs", memory))
    runs: dict[tuple[str, str], list[dict[str, float]]] = {}
    for _ in range(args.runs):  # the places take turns, so each sees several of the VM's phases
        for place, base in places:
            for label, r in child("overhead", args.turns, base):
                runs.setdefault((label, place), []).append(r)
    print(
        f"runner overhead per turn ({args.turns} turns each; ms; the median of {args.runs} runs,"
        f" over p99 also min-max) on {interpreter()}"
    )
    header = (
        f"{'scenario (session files in)':<46}{'total':>7}{'model':>7}{'fsync':>7}{'#fsync':>7}"
        f"{'create':>8}{'over med':>10}{'over p99':>18}{'cpu med':>9}{'cpu p99':>9}"
        f"{'jitter':>13}"
    )
    print(header)
    print("-" * len(header))
    for (label, place), results in runs.items():

        def mid(key: str, results: list[dict[str, float]] = results) -> float:
            return statistics.median(r[key] for r in results)

        p99s = sorted(r["over_p99"] for r in results)
        spread = f"{mid('over_p99'):.2f} ({p99s[0]:.2f}-{p99s[-1]:.2f})"
        jitter = f"{mid('fixed_med'):.2f}/{mid('fixed_p99'):.2f}"
        print(
            f"{label + ' (' + place + ')':<46}{mid('total_med'):>7.2f}{mid('model_med'):>7.2f}"
            f"{mid('fsync_med'):>7.2f}{mid('fsyncs'):>7.0f}{mid('create_med'):>8.2f}"
            f"{mid('over_med'):>10.2f}{spread:>18}{mid('cpu_med'):>9.2f}"
            f"{mid('cpu_p99'):>9.2f}{jitter:>13}"
        )
    print(
        "over = wall total - model - fsync; create = time in file-creating opens (a new\n"
        "session's file and lock file), which stays in over. cpu = process CPU time - model\n"
        "(I/O waits excluded). Target: over < 2 ms. Each run of a place is a process of its own.\n"
        "memory: the session files on tmpfs, so over is the runner's own cost; disk: the same\n"
        "turns with what this disk adds beyond the time inside fsync (creating files, its\n"
        "write path, the cold caches a process wakes to after sleeping in fsync).\n"
        "jitter: this machine's own while that place's turns ran: median/p99 ms of a fixed loop\n"
        "of about 1 ms, timed between the turns (how far the machine alone spreads fixed work)."
    )
    print()
    reports = [(place, child("breakdown", args.turns, base)) for place, base in places]
    print("where a fresh-session turn goes (wall ms per turn)")
    print(f"  {'':<34}" + "".join(f"{place.split(':')[0]:>10}" for place, _ in reports))
    print(f"  {'total':<34}" + "".join(f"{r['total'] * 1000:>10.2f}" for _, r in reports))
    for label in reports[0][1]["phases"]:
        values = "".join(f"{r['phases'][label] * 1000:>10.2f}" for _, r in reports)
        print(f"  {label:<34}{values}")
    print()
    long_turns = 2 * args.turns
    growth = [(place, child("long", long_turns, base)) for place, base in places]
    print(
        "one session whose every turn reads a file (2 model calls + 1 tool call a turn), as its"
        " history grows: over med / p90 ms per turn, by 50-turn window"
    )
    print(f"  {'turns':<12}" + "".join(f"{place.split(':')[0]:>18}" for place, _ in growth))
    for row, (upto, *_rest) in enumerate(growth[0][1]):
        if row not in (0, 1) and upto not in (long_turns // 2, long_turns):
            continue
        cells = "".join(f"{r[row][1]:>10.2f} /{r[row][2]:>6.2f}" for _, r in growth)
        print(f"  {f'{upto - 49}-{upto}':<12}{cells}")
    print()
    print(f"throughput, all turns submitted at once, global cap {args.cap}")
    header = (
        f"{'session files in':<34}{'sessions':>9}{'turns each':>14}{'model delay':>13}"
        f"{'turns/s':>10}{'wall s':>9}{'peak RSS MB':>13}{'growth MB':>11}"
    )
    print(header)
    print("-" * len(header))
    variants: list[tuple[str, str | None, FsyncMode]] = [(p, b, True) for p, b in places]
    variants.append((places[-1][0] + ", fsync in background", places[-1][1], "background"))
    scenarios = [(100, 1, 0.0), (100, 1, 0.05), (1000, 1, 0.0), (1000, 1, 0.05), (100, 10, 0.0)]
    for place, base, fsync in variants:
        for sessions, turns, delay in scenarios:
            r = throughput(sessions, args.cap, delay, base, fsync, turns)
            each = "1 (new)" if turns == 1 else f"{turns} (running)"
            print(
                f"{place:<34}{sessions:>9}{each:>14}{delay * 1000:>11.0f}ms"
                f"{r['turns_per_s']:>10.1f}{r['elapsed_s']:>9.2f}{r['peak_rss_mb']:>13.1f}"
                f"{r['rss_growth_mb']:>11.1f}"
            )
    print(
        "new: sessions that start with this turn (a session file and a lock file created);\n"
        "running: sessions that have had a turn, each given more, all submitted at once.\n"
        "fsync in background: run_embedded_agent(session_fsync='background'); the time until\n"
        "the last of those fsyncs is done is counted."
    )


if __name__ == "__main__":
    main()
