"""Damaged files are repaired before use: nothing valid is lost, the original is kept."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from clawpi.session import SessionManager, repair_session_file
from clawpi.session.repair import STREAM_ERROR_FALLBACK_TEXT

HEADER = (
    b'{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}'
)
USER = b'{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}'
ASSISTANT = b'{"type":"message","id":"a2","parentId":"a1","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"yo"}],"provider":"p","model":"m","stopReason":"stop","timestamp":2}}'


def test_garbage_line_is_dropped_with_a_backup_and_report(tmp_path: Path) -> None:
    file = tmp_path / "s.jsonl"
    original = HEADER + b"\n" + USER + b"\n{not json\n" + ASSISTANT + b"\n"
    file.write_bytes(original)
    report = repair_session_file(file)
    assert report.repaired and report.dropped_lines == 1
    assert report.dropped[0].line_number == 3 and report.dropped[0].preview == "{not json"
    assert file.read_bytes() == HEADER + b"\n" + USER + b"\n" + ASSISTANT + b"\n"
    assert report.backup_path is not None and report.backup_path.read_bytes() == original
    assert report.backup_path.name.startswith("s.jsonl.bak-")
    assert "dropped 1 malformed line(s)" in report.summary()


def test_torn_last_line_is_removed_on_open(tmp_path: Path) -> None:
    file = tmp_path / "s.jsonl"
    file.write_bytes(HEADER + b"\n" + USER + b"\n" + ASSISTANT + b"\n" + ASSISTANT[:40])
    sm = SessionManager.open(file)
    assert sm.repair_report is not None and sm.repair_report.dropped_lines == 1
    assert [e["id"] for e in sm.get_entries()] == ["a1", "a2"]
    new_id = sm.append_message({"role": "user", "content": "next", "timestamp": 3})
    lines = file.read_bytes().splitlines()
    assert [orjson.loads(line)["id"] for line in lines[1:]] == ["a1", "a2", new_id]


def test_errored_empty_assistant_gets_placeholder_content(tmp_path: Path) -> None:
    file = tmp_path / "s.jsonl"
    broken = ASSISTANT.replace(b'[{"type":"text","text":"yo"}]', b"[]").replace(
        b'"stop"', b'"error"'
    )
    file.write_bytes(HEADER + b"\n" + USER + b"\n" + broken + b"\n")
    report = repair_session_file(file)
    assert report.repaired and report.rewritten_assistant_messages == 1
    entry = orjson.loads(file.read_bytes().splitlines()[2])
    assert entry["message"]["content"] == [{"type": "text", "text": STREAM_ERROR_FALLBACK_TEXT}]


def test_clean_file_is_left_untouched(tmp_path: Path) -> None:
    file = tmp_path / "s.jsonl"
    file.write_bytes(HEADER + b"\n" + USER + b"\n")
    report = repair_session_file(file)
    assert not report.repaired and report.backup_path is None
    assert list(tmp_path.glob("*.bak-*")) == []


def test_missing_file_and_invalid_header_are_not_repaired(tmp_path: Path) -> None:
    assert repair_session_file(tmp_path / "nope.jsonl").reason == "missing session file"
    file = tmp_path / "s.jsonl"
    file.write_bytes(USER + b"\n{bad\n")
    report = repair_session_file(file)
    assert not report.repaired and report.reason == "invalid session header"
    assert file.read_bytes() == USER + b"\n{bad\n"


def test_line_with_lone_surrogate_escape_is_kept(tmp_path: Path) -> None:
    odd = USER.replace(b'"hi"', b'"\\ud800 half"')
    file = tmp_path / "s.jsonl"
    file.write_bytes(HEADER + b"\n" + odd + b"\n{bad\n")
    report = repair_session_file(file)
    assert report.dropped_lines == 1
    assert file.read_bytes() == HEADER + b"\n" + odd + b"\n"
    sm = SessionManager.open(file)
    assert sm.get_entries()[0]["message"]["content"] == "\ud800 half"


@pytest.mark.parametrize(
    "damaged", [b'"versiom":3', b'"version":1', b'"version":"3"'], ids=["key", "one", "string"]
)
def test_a_header_damaged_in_its_version_keeps_every_id_and_branch(
    damaged: bytes, tmp_path: Path
) -> None:
    """v1 files carry no entry ids: entries that do are never renumbered by the v1 migration,
    even when one flipped bit in the header makes it look like v1 (a hypothesis case)."""
    other = ASSISTANT.replace(b'"id":"a2"', b'"id":"a3"').replace(b'"yo"', b'"other"')
    file = tmp_path / "s.jsonl"
    file.write_bytes(b"\n".join([HEADER.replace(b'"version":3', damaged), USER, ASSISTANT, other]))
    sm = SessionManager.open(file)
    entries = sm.get_entries()
    assert [(e["id"], e["parentId"]) for e in entries] == [
        ("a1", None),
        ("a2", "a1"),
        ("a3", "a1"),
    ]
    assert sm.get_leaf_id() == "a3"
    reopened = SessionManager.open(file)
    assert reopened.get_entries() == entries


def test_a_header_written_again_mid_file_is_not_an_entry(tmp_path: Path) -> None:
    """pi appends its whole in-memory list, header included, when a file it opened had no
    assistant message yet: the second header is set aside, the file is left as it is."""
    file = tmp_path / "s.jsonl"
    original = b"\n".join([HEADER, USER, HEADER, USER, ASSISTANT]) + b"\n"
    file.write_bytes(original)
    sm = SessionManager.open(file)
    assert all(entry["type"] != "session" for entry in sm.get_entries())
    assert sm.get_header()["id"] == "s1"
    assert sm.get_leaf_id() == "a2"
    assert file.read_bytes() == original


def test_numbers_beyond_a_double_are_kept_and_bare_nan_is_dropped(tmp_path: Path) -> None:
    """As `JSON.parse` reads them: `1e999` is a number (Infinity), `NaN` is no JSON at all."""
    huge = USER.replace(b'"timestamp":1}', b'"timestamp":1e999}')
    nan = USER.replace(b'"id":"a1"', b'"id":"a9"').replace(b'"timestamp":1}', b'"timestamp":NaN}')
    file = tmp_path / "s.jsonl"
    file.write_bytes(b"\n".join([HEADER, huge, nan]) + b"\n")
    sm = SessionManager.open(file)
    assert sm.repair_report is not None and sm.repair_report.dropped_lines == 1
    assert [e["id"] for e in sm.get_entries()] == ["a1"]
    assert sm.get_entries()[0]["message"]["timestamp"] == float("inf")
    assert file.read_bytes() == HEADER + b"\n" + huge + b"\n"


def test_a_raw_carriage_return_never_splits_a_line(tmp_path: Path) -> None:
    """Lines end at "\\n" only, as pi splits them: a damaged line holding a raw CR before a
    valid entry is one bad line (dropped by repair, as the loader sees it too), and a file
    written with CRLF endings still loads whole."""
    file = tmp_path / "s.jsonl"
    damaged = b"\x80\r" + ASSISTANT  # the entry after the CR is not a line of its own
    file.write_bytes(b"\n".join([HEADER, USER, damaged]) + b"\n")
    sm = SessionManager.open(file)
    assert sm.repair_report is not None and sm.repair_report.dropped_lines == 1
    assert [e["id"] for e in sm.get_entries()] == ["a1"]
    assert file.read_bytes() == HEADER + b"\n" + USER + b"\n"

    crlf = tmp_path / "crlf.jsonl"
    crlf.write_bytes(b"\r\n".join([HEADER, USER, ASSISTANT]) + b"\r\n")
    sm = SessionManager.open(crlf)
    assert sm.repair_report is None
    assert [e["id"] for e in sm.get_entries()] == ["a1", "a2"]


def test_a_header_line_damaged_before_a_raw_carriage_return_sets_the_file_aside(
    tmp_path: Path,
) -> None:
    """The case a 4,000-example run of the corruption property found: garbage and a CR put
    before the header. The header line no longer parses, so there is no usable header: the
    bytes go to a backup untouched and a fresh session starts (before, the loader split at the
    CR, kept a header that repair did not see, and left the damaged line on disk)."""
    file = tmp_path / "s.jsonl"
    damaged = b"\x80\r" + HEADER + b"\n" + USER + b"\n"
    file.write_bytes(damaged)
    sm = SessionManager.open(file)
    assert sm.get_entries() == []
    assert [b.read_bytes() for b in tmp_path.glob("s.jsonl.bak-*")] == [damaged]
    for line in file.read_bytes().split(b"\n"):
        if line.strip():
            assert orjson.loads(line)["type"] == "session"
