"""Run every bench script in turn and print their tables.

python bench/run.py            # all benches
python bench/run.py stream     # only bench_stream.py
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    wanted = set(sys.argv[1:])
    scripts = sorted(HERE.glob("bench_*.py"))
    failures = 0
    for script in scripts:
        name = script.stem.removeprefix("bench_")
        if wanted and name not in wanted:
            continue
        print(f"\n== {name} ({script.name}) ==", flush=True)
        completed = subprocess.run([sys.executable, str(script)], cwd=HERE.parent, check=False)
        if completed.returncode != 0:
            failures += 1
            print(f"!! {script.name} exited with {completed.returncode}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
