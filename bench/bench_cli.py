"""Start-up cost of the `clawpi` command: `--help`, and `clawpi run` to the first request byte.

The run targets a local fake OpenAI-compatible server configured through models.json; the time
is measured from spawning the process to the moment the server receives the request, so it is
everything a user waits for before the model can start answering. Target: <= 400 ms. For
scale, the table also times a bare interpreter and one that only imports the `openai` SDK that
the run sends its request with.

    python bench/bench_cli.py [--runs 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fakes.http_server import FakeResponse, FakeServer, sse_frame

CLI = [sys.executable, "-m", "clawpi.cli.main"]


def answer() -> FakeResponse:
    chunk = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "bench-model",
        "choices": [
            {"index": 0, "delta": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
    }
    return FakeResponse.sse([sse_frame(chunk), b"data: [DONE]\n\n"])


def time_help(runs: int, env: dict[str, str]) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.monotonic()
        subprocess.run([*CLI, "--help"], capture_output=True, check=True, env=env)
        times.append(time.monotonic() - start)
    return times


def time_python(runs: int, env: dict[str, str], code: str) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.monotonic()
        subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, env=env)
        times.append(time.monotonic() - start)
    return times


def time_run(runs: int, server: FakeServer, env: dict[str, str], workspace: Path) -> list[float]:
    arrived: list[float] = []
    ready = threading.Event()

    def handler(request: object) -> FakeResponse:
        arrived.append(time.monotonic())
        ready.set()
        return answer()

    server.handler = handler  # type: ignore[assignment]
    times = []
    for _ in range(runs):
        ready.clear()
        start = time.monotonic()
        process = subprocess.run(
            [
                *CLI,
                "run",
                "--cwd",
                str(workspace),
                "--no-session",
                "--provider",
                "bench",
                "--model",
                "bench-model",
                "hi",
            ],
            capture_output=True,
            env=env,
            check=False,
        )
        if process.returncode != 0 or not ready.is_set():
            raise SystemExit(f"clawpi run failed: {process.stderr.decode()}")
        times.append(arrived[-1] - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, FakeServer() as server:
        root = Path(tmp)
        agent = root / "agent"
        agent.mkdir()
        workspace = root / "ws"
        workspace.mkdir()
        (agent / "models.json").write_text(
            json.dumps(
                {
                    "providers": {
                        "bench": {
                            "baseUrl": server.url + "/v1",
                            "api": "openai-completions",
                            "apiKey": "k",
                            "models": [{"id": "bench-model"}],
                        }
                    }
                }
            )
        )
        # measure what users get: bytecode caching on (this machine's shell turns it off)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(
            CLAWPI_AGENT_DIR=str(agent), CLAWPI_STATE_DIR=str(root / "state"), HOME=str(root)
        )
        subprocess.run([*CLI, "--help"], capture_output=True, check=True, env=env)  # warm caches
        time_run(1, server, env, workspace)
        help_times = time_help(args.runs, env)
        run_times = time_run(args.runs, server, env, workspace)
        bare_times = time_python(args.runs, env, "pass")
        sdk_times = time_python(args.runs, env, "import openai")
    print(f"clawpi start-up, median of {args.runs} runs")
    print(f"{'what':<36} {'median ms':>10} {'min ms':>8} {'max ms':>8}")
    print("-" * 65)
    for name, values in (
        ("clawpi --help", help_times),
        ("clawpi run -> first request byte", run_times),
        ("for scale: python -c pass", bare_times),
        ("for scale: python -c 'import openai'", sdk_times),
    ):
        print(
            f"{name:<36} {statistics.median(values) * 1000:>10.0f} "
            f"{min(values) * 1000:>8.0f} {max(values) * 1000:>8.0f}"
        )


if __name__ == "__main__":
    main()
