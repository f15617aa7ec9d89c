"""SessionManager behaviour on real files: flush rule, tree operations, layout, listing."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from clawpi.session import SessionError, SessionManager
from clawpi.session.paths import encode_cwd


def _assistant(text: str = "ok", stop: str = "stop", model: str = "m") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "api": "x",
        "provider": "p",
        "model": model,
        "stopReason": stop,
        "timestamp": 2,
    }


def _user(text: str = "hi") -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": 1}


def _lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_file_appears_only_with_the_first_assistant_message(tmp_path: Path) -> None:
    sm = SessionManager.create("/proj", tmp_path)
    sm.append_model_change("p", "m")
    sm.append_thinking_level_change("low")
    sm.append_message(_user())
    assert sm.session_file is not None and not sm.session_file.exists()
    sm.append_message(_assistant())
    lines = _lines(sm.session_file)
    assert [line["type"] for line in lines] == [
        "session",
        "model_change",
        "thinking_level_change",
        "message",
        "message",
    ]


def test_reopened_file_without_assistant_never_duplicates_header_or_lines(tmp_path: Path) -> None:
    sm = SessionManager.create("/proj", tmp_path)
    sm.append_message(_user("first"))
    sm.flush()  # e.g. a crashed run that got its prompt on disk
    assert sm.session_file is not None
    reopened = SessionManager.open(sm.session_file)
    reopened.append_message(_user("second"))
    reopened.append_message(_assistant())
    lines = _lines(sm.session_file)
    assert [line["type"] for line in lines].count("session") == 1
    ids = [line["id"] for line in lines]
    assert len(ids) == len(set(ids)) == 4


def test_append_key_order_matches_pi(tmp_path: Path) -> None:
    sm = SessionManager.create("/proj", tmp_path)
    sm.append_message(_assistant())
    sm.append_custom_entry("ext", {"a": 1})
    sm.append_custom_message_entry("ext", "text", True)
    sm.append_compaction("s", "x", 3)
    assert sm.session_file is not None
    lines = _lines(sm.session_file)
    assert list(lines[1]) == ["type", "id", "parentId", "timestamp", "message"]
    assert list(lines[2]) == ["type", "customType", "data", "id", "parentId", "timestamp"]
    assert list(lines[3]) == [
        "type",
        "customType",
        "content",
        "display",
        "id",
        "parentId",
        "timestamp",
    ]
    assert list(lines[4]) == [
        "type",
        "id",
        "parentId",
        "timestamp",
        "summary",
        "firstKeptEntryId",
        "tokensBefore",
    ]
    assert all(len(line["id"]) == 8 and int(line["id"], 16) >= 0 for line in lines[1:])


def test_leaf_after_open_is_the_last_line_not_the_deepest_entry(tmp_path: Path) -> None:
    sm = SessionManager.create("/proj", tmp_path)
    u = sm.append_message(_user())
    sm.append_message(_assistant("deep"))
    sm.append_message(_user("deeper"))
    sm.branch(u)
    last = sm.append_message(_assistant("short branch"))
    assert sm.session_file is not None
    assert SessionManager.open(sm.session_file).get_leaf_id() == last


def test_branch_and_label_errors_name_the_missing_entry() -> None:
    sm = SessionManager.in_memory()
    with pytest.raises(SessionError, match="Entry nope not found"):
        sm.branch("nope")
    with pytest.raises(SessionError, match="Entry nope not found"):
        sm.append_label_change("nope", "x")
    with pytest.raises(SessionError, match="Entry nope not found"):
        sm.branch_with_summary("nope", "s")


def test_tree_children_branch_and_reset_leaf() -> None:
    sm = SessionManager.in_memory("/proj")
    u = sm.append_message(_user())
    a = sm.append_message(_assistant())
    left = sm.append_message(_user("left"))
    sm.branch(a)
    right = sm.append_message(_user("right"))
    assert [e["id"] for e in sm.get_children(a)] == [left, right]
    assert [e["id"] for e in sm.get_branch()] == [u, a, right]
    assert [e["id"] for e in sm.get_branch(left)] == [u, a, left]
    sm.reset_leaf()
    root2 = sm.append_message(_user("new root"))
    tree = sm.get_tree()
    assert [node.entry["id"] for node in tree] == [u, root2]
    assert [c.entry["id"] for c in tree[0].children[0].children] == [left, right]
    sm.reset_leaf()
    assert sm.build_session_context().messages == [] or sm.get_leaf_id() is None


def test_labels_set_clear_and_session_name() -> None:
    sm = SessionManager.in_memory()
    u = sm.append_message(_user())
    sm.append_label_change(u, "start")
    assert sm.get_label(u) == "start"
    sm.append_label_change(u, None)
    assert sm.get_label(u) is None
    sm.append_session_info("  my chat  ")
    sm.append_session_info("")
    assert sm.get_session_name() == "my chat"


def test_in_memory_session_never_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    sm = SessionManager.in_memory()
    sm.append_message(_user())
    sm.append_message(_assistant())
    assert sm.session_file is None and not sm.is_persisted()
    assert list(tmp_path.iterdir()) == []


def test_default_layout_is_state_dir_agents_sessions(tmp_path: Path) -> None:
    sm = SessionManager.create("/proj", agent_id="helper")
    sm.append_message(_assistant())
    state = Path(os.environ["CLAWPI_STATE_DIR"])
    assert sm.session_file is not None
    assert sm.session_file.parent == state / "agents" / "helper" / "sessions"
    name = sm.session_file.name
    assert name.endswith(f"_{sm.get_session_id()}.jsonl") and ":" not in name


def test_pi_agent_dir_layout_uses_the_encoded_cwd(tmp_path: Path) -> None:
    sm = SessionManager.create("/tmp/pi-peer/project", pi_agent_dir=tmp_path / "agent")
    sm.append_message(_assistant())
    assert sm.session_file is not None
    assert sm.session_file.parent == tmp_path / "agent" / "sessions" / "--tmp-pi-peer-project--"
    assert encode_cwd("C:\\work\\x") == "--C--work-x--"


def test_continue_recent_picks_newest_valid_session(tmp_path: Path) -> None:
    old = SessionManager.create("/proj", tmp_path)
    old.append_message(_assistant("old"))
    new = SessionManager.create("/proj", tmp_path)
    new.append_message(_assistant("new"))
    assert old.session_file and new.session_file
    os.utime(old.session_file, (1, 1))
    (tmp_path / "zz-garbage.jsonl").write_text("not a session\n")
    resumed = SessionManager.continue_recent("/proj", tmp_path)
    assert resumed.session_file == new.session_file
    empty = SessionManager.continue_recent("/proj", tmp_path / "none")
    assert empty.get_entries() == [] and empty.session_file is not None


def test_list_sessions_reports_pi_fields_newest_first(tmp_path: Path) -> None:
    a = SessionManager.create("/proj", tmp_path)
    a.append_message({"role": "user", "content": "first question", "timestamp": 1000})
    a.append_message({**_assistant("answer"), "timestamp": 2000})
    a.append_session_info("Named")
    b = SessionManager.create("/proj", tmp_path)
    b.append_message({**_assistant("later"), "timestamp": 5000})
    infos = SessionManager.list_sessions("/proj", tmp_path)
    assert [i.id for i in infos] == [b.get_session_id(), a.get_session_id()]
    first = infos[1]
    assert first.name == "Named" and first.message_count == 2
    assert first.first_message == "first question"
    assert first.all_messages_text == "first question answer"
    assert first.modified.timestamp() == 2.0
    assert infos[0].first_message == "(no messages)"


def test_fork_from_copies_every_entry_into_a_new_session(tmp_path: Path) -> None:
    src = SessionManager.create("/a", tmp_path / "a")
    src.append_message(_user())
    src.append_message(_assistant())
    assert src.session_file is not None
    fork = SessionManager.fork_from(src.session_file, "/b", tmp_path / "b")
    assert fork.get_entries() == src.get_entries()
    header = fork.get_header()
    assert header is not None
    assert header["parentSession"] == str(src.session_file) and header["cwd"] == "/b"
    assert fork.get_session_id() != src.get_session_id()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("")
    with pytest.raises(SessionError, match="empty or invalid"):
        SessionManager.fork_from(bad, "/b", tmp_path / "b")


def test_create_branched_session_keeps_only_the_path_and_its_labels(tmp_path: Path) -> None:
    sm = SessionManager.create("/proj", tmp_path)
    u = sm.append_message(_user())
    a = sm.append_message(_assistant())
    sm.append_label_change(u, "start")
    sm.append_message(_user("elsewhere"))
    old = sm.session_file
    new = sm.create_branched_session(a)
    assert new is not None and new != old and new.exists()
    types = [e["type"] for e in sm.get_entries()]
    assert types == ["message", "message", "label"]
    assert sm.get_label(u) == "start"
    header = sm.get_header()
    assert header is not None and header["parentSession"] == str(old)
    assert SessionManager.open(new).get_entries() == sm.get_entries()


def test_open_of_file_without_header_keeps_its_bytes_in_a_backup(tmp_path: Path) -> None:
    file = tmp_path / "s.jsonl"
    file.write_bytes(b'{"type":"message","id":"x"}\n')
    sm = SessionManager.open(file)
    header = sm.get_header()
    assert header is not None and _lines(file) == [header]
    backups = list(tmp_path.glob("s.jsonl.bak-*"))
    assert [b.read_bytes() for b in backups] == [b'{"type":"message","id":"x"}\n']


def test_context_follows_model_thinking_and_latest_compaction() -> None:
    sm = SessionManager.in_memory()
    sm.append_thinking_level_change("high")
    u1 = sm.append_message(_user("one"))
    sm.append_message(_assistant("1", model="first"))
    sm.append_compaction("old", u1, 1)
    u2 = sm.append_message(_user("two"))
    sm.append_message(_assistant("2", model="second"))
    sm.append_compaction("new", u2, 2)
    sm.append_custom_message_entry("ext", "extra", False)
    ctx = sm.build_session_context()
    assert ctx.thinking_level == "high"
    assert ctx.model == {"provider": "p", "modelId": "second"}
    texts = [
        m["content"] if isinstance(m["content"], str) else m["content"][0].get("text")
        for m in ctx.messages
    ]
    assert texts[0].endswith("<summary>\nnew\n</summary>")
    assert texts[1:] == ["two", "2", "extra"]
    assert [m["role"] for m in ctx.agent_messages] == [
        "compactionSummary",
        "user",
        "assistant",
        "custom",
    ]


def test_create_with_a_named_file_starts_it_there_or_opens_it(tmp_path: Path) -> None:
    path = tmp_path / "sessions" / "chat-1.jsonl"
    sm = SessionManager.create("/work/project", path.parent, session_file=path)
    assert sm.session_file == path and not path.exists()  # written with the first assistant turn
    sm.append_message({"role": "user", "content": "hi", "timestamp": 1})
    sm.append_message({"role": "assistant", "content": [], "stopReason": "stop", "timestamp": 2})
    assert sorted(p.name for p in path.parent.iterdir()) == ["chat-1.jsonl", "chat-1.jsonl.lock"]
    header = SessionManager.open(path).get_header()
    assert header is not None and header["cwd"] == "/work/project"
    again = SessionManager.create("/elsewhere", path.parent, session_file=path)
    assert [e["id"] for e in again.get_entries()] == [e["id"] for e in sm.get_entries()]


def test_get_branch_follows_appends_branches_and_reloads(tmp_path: Path) -> None:
    """get_branch remembers the last path it walked; every answer equals a fresh walk."""
    from clawpi.session.context import get_path

    sm = SessionManager.create("/p", tmp_path)

    def fresh_walk() -> list[str]:
        leaf = sm.get_leaf_entry()
        return [e["id"] for e in get_path(sm._by_id, leaf)] if leaf else []

    ids = []
    for i in range(5):
        ids.append(sm.append_message({"role": "user", "content": f"m{i}", "timestamp": i}))
        branch = sm.get_branch()
        assert [e["id"] for e in branch] == fresh_walk() == ids
        branch.clear()  # the caller's copy: the remembered path is untouched
    sm.branch(ids[1])
    assert [e["id"] for e in sm.get_branch()] == ids[:2]
    other = sm.append_message({"role": "user", "content": "side", "timestamp": 9})
    assert [e["id"] for e in sm.get_branch()] == [*ids[:2], other] == fresh_walk()
    assert [e["id"] for e in sm.get_branch(ids[4])] == ids
    sm.append_message({"role": "assistant", "content": [], "stopReason": "stop", "timestamp": 10})
    assert sm.session_file is not None
    reopened = SessionManager.open(sm.session_file)
    assert [e["id"] for e in reopened.get_branch()] == [e["id"] for e in sm.get_branch()]


def test_ids_do_not_follow_an_application_seeding_random(tmp_path: Path) -> None:
    """Two processes that both call `random.seed(0)` must still name their sessions apart."""
    import random

    random.seed(0)
    first = SessionManager.create("/proj", tmp_path)
    first.append_message(_user())
    random.seed(0)
    second = SessionManager.create("/proj", tmp_path)
    second.append_message(_user())
    assert first.get_session_id() != second.get_session_id()
    assert first.get_leaf_id() != second.get_leaf_id()
    version = first.get_session_id().split("-")[2][0]
    assert version == "4"


def test_a_forked_child_draws_other_ids_than_its_parent(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its first session id and exit
        try:
            os.close(read_end)
            os.write(write_end, SessionManager.create("/proj", tmp_path).get_session_id().encode())
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        parent_id = SessionManager.create("/proj", tmp_path).get_session_id()
        with os.fdopen(read_end, "rb") as pipe:
            child_id = pipe.read().decode()
    finally:
        os.waitpid(pid, 0)
    assert child_id and child_id != parent_id
