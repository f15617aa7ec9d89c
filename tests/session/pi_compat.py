"""Describing a session the way interop/pi_describe.mjs does, to compare clawpi with pi."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import orjson

from clawpi.session import SessionManager, TreeNode

INTEROP_DIR = Path(__file__).parent / "interop"
DATA_DIR = Path(__file__).parent / "data"


def _tree(nodes: list[TreeNode]) -> list[dict[str, Any]]:
    return [
        {"id": n.entry.get("id"), "label": n.label, "children": _tree(n.children)} for n in nodes
    ]


def describe(sm: SessionManager) -> dict[str, Any]:
    ctx = sm.build_session_context()
    entries = sm.get_entries()
    labels = {e["id"]: label for e in entries if (label := sm.get_label(e["id"])) is not None}
    description = {
        "header": sm.get_header(),
        "entries": entries,
        "leafId": sm.get_leaf_id(),
        "sessionName": sm.get_session_name(),
        "tree": _tree(sm.get_tree()),
        "branch": [e["id"] for e in sm.get_branch()],
        "labels": labels,
        "context": {
            "messages": ctx.agent_messages,
            "thinkingLevel": ctx.thinking_level,
            "model": ctx.model,
        },
        "llmMessages": ctx.messages,
    }
    result: dict[str, Any] = orjson.loads(orjson.dumps(description))
    return result


def normalize_ids(description: dict[str, Any]) -> Any:
    """Replace entry ids by their position, for files whose ids were drawn at random
    (migrations): the structure must match, the random draws cannot."""
    mapping = {e["id"]: f"#{i}" for i, e in enumerate(description["entries"])}

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return mapping.get(value, value)
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return {mapping.get(k, k): walk(v) for k, v in value.items()}
        return value

    return walk(description)


def pi_node_dir() -> Path | None:
    """The pi install to run, from $CLAWPI_PI_NODE_DIR, when it and node are present."""
    value = os.environ.get("CLAWPI_PI_NODE_DIR")
    if not value or shutil.which("node") is None:
        return None
    package = Path(value) / "node_modules" / "@mariozechner" / "pi-coding-agent" / "package.json"
    return Path(value) if package.is_file() else None


def read_with_pi(file: Path, pi_dir: Path) -> dict[str, Any]:
    return read_many_with_pi([file], pi_dir)[0]


def read_many_with_pi(files: list[Path], pi_dir: Path) -> list[dict[str, Any]]:
    """What pi computes for each file, from one node process."""
    done = subprocess.run(
        ["node", str(INTEROP_DIR / "read_with_pi.mjs"), *map(str, files)],
        env={**os.environ, "CLAWPI_PI_NODE_DIR": str(pi_dir)},
        capture_output=True,
        check=True,
        timeout=60,
    )
    result: list[dict[str, Any]] = orjson.loads(done.stdout)
    return result
