"""Session files written by pi itself open in clawpi with pi's entries, tree, leaf and context."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from clawpi.session import SessionManager
from tests.session.pi_compat import DATA_DIR, describe, normalize_ids

PI_WRITTEN = sorted(
    p.name.removesuffix(".jsonl")
    for p in DATA_DIR.glob("*.jsonl")
    if not p.name.endswith(".input.jsonl") and p.name not in {"v1.jsonl", "v2.jsonl"}
)


def _expected(name: str) -> dict[str, object]:
    data: dict[str, object] = orjson.loads((DATA_DIR / f"{name}.pi.json").read_bytes())
    return data


def test_every_scenario_has_pi_data() -> None:
    assert {"basic", "features", "compactions", "roots", "branched", "forked", "unknown"} <= set(
        PI_WRITTEN
    )


@pytest.mark.parametrize("name", PI_WRITTEN)
def test_pi_written_file_opens_with_pis_entries_tree_leaf_and_context(
    name: str, tmp_path: Path
) -> None:
    file = tmp_path / f"{name}.jsonl"
    shutil.copyfile(DATA_DIR / f"{name}.jsonl", file)
    before = file.read_bytes()
    sm = SessionManager.open(file)
    assert describe(sm) == _expected(name)
    assert file.read_bytes() == before  # opening a v3 file never rewrites it


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_legacy_file_migrates_like_pi_with_a_backup(version: str, tmp_path: Path) -> None:
    file = tmp_path / f"{version}.jsonl"
    shutil.copyfile(DATA_DIR / f"{version}.input.jsonl", file)
    sm = SessionManager.open(file)
    assert normalize_ids(describe(sm)) == normalize_ids(_expected(version))
    # the file on disk is migrated too, like pi's, and the original is kept
    ours = [orjson.loads(line) for line in file.read_bytes().splitlines()]
    pis = [orjson.loads(line) for line in (DATA_DIR / f"{version}.jsonl").read_bytes().splitlines()]
    ours_desc = {"entries": ours[1:]}
    pis_desc = {"entries": pis[1:]}
    assert ours[0] == pis[0]
    assert normalize_ids(ours_desc) == normalize_ids(pis_desc)
    backups = list(tmp_path.glob(f"{version}.jsonl.bak-*"))
    assert len(backups) == 1
    assert backups[0].read_bytes() == (DATA_DIR / f"{version}.input.jsonl").read_bytes()
    # a second open finds a v3 file and changes nothing
    again = SessionManager.open(file)
    assert [e["id"] for e in again.get_entries()] == [e["id"] for e in sm.get_entries()]
    assert len(list(tmp_path.glob(f"{version}.jsonl.bak-*"))) == 1


def test_appending_to_a_pi_file_keeps_every_pi_line_byte_for_byte(tmp_path: Path) -> None:
    file = tmp_path / "features.jsonl"
    shutil.copyfile(DATA_DIR / "features.jsonl", file)
    before = file.read_bytes()
    sm = SessionManager.open(file)
    new_id = sm.append_message({"role": "user", "content": "more", "timestamp": 9})
    after = file.read_bytes()
    assert after.startswith(before)
    last = orjson.loads(after.splitlines()[-1])
    assert last["id"] == new_id and last["parentId"] == _expected("features")["leafId"]
