"""write and edit on real files: parents created, exact and normalised matching, line endings,
BOM, multi-edit, uniqueness and the diff in details."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawpi.tools import ToolError, ToolInputError
from tests.tools.conftest import text_of


@pytest.fixture
def tools(make_tools):  # type: ignore[no-untyped-def]
    return make_tools()


async def test_write_creates_parent_directories(tools, workspace: Path) -> None:
    result = await tools["write"].execute("c", {"path": "a/b/c.txt", "content": "héllo"})
    assert (workspace / "a/b/c.txt").read_text() == "héllo"
    assert text_of(result) == "Successfully wrote 5 bytes to a/b/c.txt"


async def test_write_overwrites_and_reports_js_string_length(tools, workspace: Path) -> None:
    (workspace / "f.txt").write_text("old content that is longer")
    result = await tools["write"].execute("c", {"path": "f.txt", "content": "😀"})
    assert (workspace / "f.txt").read_text() == "😀"
    assert text_of(result) == "Successfully wrote 2 bytes to f.txt"  # UTF-16 units, as pi


async def test_write_requires_content(tools) -> None:
    with pytest.raises(ToolInputError, match="missing required parameter 'content'"):
        await tools["write"].execute("c", {"path": "x.txt"})


async def test_edit_replaces_unique_exact_text_with_diff(tools, workspace: Path) -> None:
    lines = [f"line {i}" for i in range(1, 21)]
    (workspace / "f.py").write_text("\n".join(lines) + "\n")
    result = await tools["edit"].execute(
        "c", {"path": "f.py", "oldText": "line 10\n", "newText": "line ten\n"}
    )
    assert text_of(result) == "Successfully replaced text in f.py."
    assert (workspace / "f.py").read_text().split("\n")[9] == "line ten"
    diff = result.details["diff"]
    assert "-10 line 10" in diff and "+10 line ten" in diff
    assert " 6 line 6" in diff and " 14 line 14" in diff  # four lines of context each side
    assert "    ..." in diff  # skipped regions
    assert result.details["firstChangedLine"] == 10


async def test_edit_not_found_error_is_pis(tools, workspace: Path) -> None:
    (workspace / "f.txt").write_text("abc")
    with pytest.raises(
        ToolError,
        match=r"Could not find the exact text in f\.txt\. The old text must match exactly",
    ):
        await tools["edit"].execute("c", {"path": "f.txt", "oldText": "zzz", "newText": "y"})
    assert (workspace / "f.txt").read_text() == "abc"


async def test_edit_refuses_duplicates(tools, workspace: Path) -> None:
    (workspace / "f.txt").write_text("x = 1\nx = 1\n")
    with pytest.raises(ToolError, match=r"Found 2 occurrences of the text in f\.txt"):
        await tools["edit"].execute("c", {"path": "f.txt", "oldText": "x = 1", "newText": "x = 2"})


async def test_edit_duplicates_counted_after_normalisation(tools, workspace: Path) -> None:
    (workspace / "f.txt").write_text('say \u201chi\u201d\nsay "hi"\n')
    with pytest.raises(ToolError, match="Found 2 occurrences"):
        await tools["edit"].execute("c", {"path": "f.txt", "oldText": 'say "hi"', "newText": "x"})


async def test_edit_fuzzy_fallback_matches_smart_quotes_and_trailing_space(
    tools, workspace: Path
) -> None:
    (workspace / "f.txt").write_text("print(\u2018hi\u2019)   \nkeep\u2014this  \n")
    await tools["edit"].execute(
        "c", {"path": "f.txt", "oldText": "print('hi')\n", "newText": "print('bye')\n"}
    )
    # pi's fallback writes the normalised copy of the whole file back.
    assert (workspace / "f.txt").read_text() == "print('bye')\nkeep-this\n"


async def test_edit_preserves_crlf_line_endings(tools, workspace: Path) -> None:
    (workspace / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    await tools["edit"].execute("c", {"path": "w.txt", "oldText": "two\nthree", "newText": "2\n3"})
    assert (workspace / "w.txt").read_bytes() == b"one\r\n2\r\n3\r\n"


async def test_edit_preserves_bom(tools, workspace: Path) -> None:
    (workspace / "b.txt").write_bytes(b"\xef\xbb\xbfhello world\n")
    await tools["edit"].execute("c", {"path": "b.txt", "oldText": "world", "newText": "there"})
    assert (workspace / "b.txt").read_bytes() == b"\xef\xbb\xbfhello there\n"


async def test_edit_multi_edit_form_applies_all(tools, workspace: Path) -> None:
    (workspace / "m.txt").write_text("a = 1\nb = 2\nc = 3\n")
    result = await tools["edit"].execute(
        "c",
        {"path": "m.txt", "edits": [
            {"oldText": "a = 1", "newText": "a = 10"},
            {"oldText": "c = 3", "newText": "c = 30"},
        ]},
    )  # fmt: skip
    assert (workspace / "m.txt").read_text() == "a = 10\nb = 2\nc = 30\n"
    assert text_of(result) == "Successfully applied 2 edits to m.txt."


async def test_edit_multi_edit_is_all_or_nothing(tools, workspace: Path) -> None:
    (workspace / "m.txt").write_text("a = 1\nb = 2\n")
    with pytest.raises(ToolError, match="edit 2"):
        await tools["edit"].execute(
            "c", {"path": "m.txt", "edits": [
                {"oldText": "a = 1", "newText": "a = 10"},
                {"oldText": "zzz", "newText": "q"},
            ]},
        )  # fmt: skip
    assert (workspace / "m.txt").read_text() == "a = 1\nb = 2\n"


async def test_edit_overlapping_edits_are_refused(tools, workspace: Path) -> None:
    (workspace / "m.txt").write_text("abcdef\n")
    with pytest.raises(ToolError, match="overlap"):
        await tools["edit"].execute(
            "c", {"path": "m.txt", "edits": [
                {"oldText": "abcd", "newText": "1"}, {"oldText": "cdef", "newText": "2"},
            ]},
        )  # fmt: skip


async def test_edit_identical_replacement_is_an_error(tools, workspace: Path) -> None:
    (workspace / "f.txt").write_text("same")
    with pytest.raises(ToolError, match=r"No changes made to f\.txt"):
        await tools["edit"].execute("c", {"path": "f.txt", "oldText": "same", "newText": "same"})


async def test_edit_missing_file_is_file_not_found(tools) -> None:
    with pytest.raises(ToolError, match=r"File not found: gone\.txt"):
        await tools["edit"].execute("c", {"path": "gone.txt", "oldText": "a", "newText": "b"})


async def test_edit_accepts_claude_aliases_and_keeps_pi_names(tools, workspace: Path) -> None:
    props = tools["edit"].parameters["properties"]
    assert {"path", "oldText", "newText", "file_path", "old_string", "new_string"} <= set(props)
    (workspace / "f.txt").write_text("before")
    await tools["edit"].execute(
        "c", {"file_path": "f.txt", "old_string": "before", "new_string": "after"}
    )
    assert (workspace / "f.txt").read_text() == "after"


async def test_edit_keeps_undecodable_bytes(tools, workspace: Path) -> None:
    (workspace / "f.txt").write_bytes(b"keep \xff\xfe bytes\nchange me\n")
    await tools["edit"].execute("c", {"path": "f.txt", "oldText": "change me", "newText": "done"})
    assert (workspace / "f.txt").read_bytes() == b"keep \xff\xfe bytes\ndone\n"


async def test_edit_diff_numbers_context_lines_by_the_old_file(tools, workspace: Path) -> None:
    (workspace / "f.txt").write_text("a\nb\nc")
    result = await tools["edit"].execute("c", {"path": "f.txt", "oldText": "b", "newText": "b\nx"})
    assert result.details == {"diff": " 1 a\n 2 b\n+3 x\n 3 c", "firstChangedLine": 3}


async def test_edit_lone_carriage_returns_become_newlines_like_pi(tools, workspace: Path) -> None:
    (workspace / "mac.txt").write_bytes(b"one\rtwo\rthree")
    await tools["edit"].execute("c", {"path": "mac.txt", "oldText": "two", "newText": "2"})
    assert (workspace / "mac.txt").read_bytes() == b"one\n2\nthree"
