"""Property tests: lossless round trip of arbitrary entries; corruption never loses a valid line."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clawpi.session import SessionManager
from clawpi.session.codec import dumps_entry, loads_line

HEADER: dict[str, Any] = {
    "type": "session",
    "version": 3,
    "id": "0b7c8b2e-1111-4222-8333-944455556666",
    "timestamp": "2026-01-01T00:00:00.000Z",
    "cwd": "/p",
}

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
entry_types = st.sampled_from(
    ["message", "custom", "label", "compaction", "branch_summary", "custom_message"]
) | st.text(min_size=1, max_size=12).filter(lambda kind: kind != "session")
"""Any type but `session`: a `session` line after the first is a header written again (pi's
duplicate-lines quirk), never an entry (see test_repair's duplicate header test)."""
extra_fields = st.dictionaries(
    st.text(max_size=10).filter(lambda k: k not in {"type", "id", "parentId"}),
    json_values,
    max_size=4,
)


@st.composite
def sessions(draw: st.DrawFn) -> list[dict[str, Any]]:
    count = draw(st.integers(min_value=1, max_value=12))
    entries: list[dict[str, Any]] = []
    for index in range(count):
        parent = draw(st.sampled_from([None, *[e["id"] for e in entries]])) if entries else None
        entry: dict[str, Any] = {
            "type": draw(entry_types),
            "id": f"{index:08x}",
            "parentId": parent,
            "timestamp": "2026-01-01T00:00:01.000Z",
        }
        entry.update(draw(extra_fields))
        entries.append(entry)
    return entries


def _write(path: Path, entries: list[dict[str, Any]]) -> bytes:
    data = b"".join(dumps_entry(e) + b"\n" for e in [HEADER, *entries])
    path.write_bytes(data)
    return data


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries=sessions())
def test_round_trip_keeps_every_field_and_unknown_type(entries: list[dict[str, Any]]) -> None:
    for entry in entries:
        line = dumps_entry(entry)
        assert dumps_entry(loads_line(line)) == line
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.jsonl"
        before = _write(path, entries)
        sm = SessionManager.open(path, fsync=False)
        assert sm.get_entries() == entries
        assert sm.get_leaf_id() == entries[-1]["id"]
        sm.append_message({"role": "assistant", "content": [], "timestamp": 1})
        assert path.read_bytes().startswith(before)  # appending never rewrites
        assert SessionManager.open(path, fsync=False).get_entries()[:-1] == entries


corruptions = st.lists(
    st.tuples(
        st.sampled_from(["truncate", "insert", "flip", "garbage_line", "drop_newline"]),
        st.floats(min_value=0, max_value=1, exclude_max=True),
        st.binary(min_size=1, max_size=6),
    ),
    min_size=1,
    max_size=4,
)


def _corrupt(data: bytes, ops: list[tuple[str, float, bytes]]) -> bytes:
    for op, where, noise in ops:
        if not data:
            break
        at = int(where * len(data))
        if op == "truncate":
            data = data[:at]
        elif op == "insert":
            data = data[:at] + noise + data[at:]
        elif op == "flip":
            data = data[:at] + bytes([data[at] ^ noise[0] or 1]) + data[at + 1 :]
        elif op == "garbage_line":
            start = data.rfind(b"\n", 0, at) + 1
            data = data[:start] + noise.replace(b"\n", b"") + b"\n" + data[start:]
        else:
            newline = data.find(b"\n", at)
            if newline >= 0:
                data = data[:newline] + data[newline + 1 :]
    return data


@settings(max_examples=70, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries=sessions(), ops=corruptions)
def test_corruption_never_crashes_open_or_loses_a_valid_line(
    entries: list[dict[str, Any]], ops: list[tuple[str, float, bytes]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.jsonl"
        original = _write(path, entries)
        damaged = _corrupt(original, ops)
        path.write_bytes(damaged)
        sm = SessionManager.open(path, fsync=False)  # never raises
        surviving = set(damaged.split(b"\n"))
        intact = [e for e in entries if dumps_entry(e) in surviving]
        kept = sm.get_entries()
        for line in path.read_bytes().split(b"\n"):  # lines as pi (JSON.parse per "\n") sees them
            if line.strip():
                loads_line(line)  # what is left on disk parses (as JSON.parse would)
        if not all(entry in kept for entry in intact):
            # only when no usable header is left: the damaged bytes are set aside untouched
            assert kept == []
            backups = list(Path(tmp).glob("s.jsonl.bak-*"))
            assert [b.read_bytes() for b in backups] == [damaged]
