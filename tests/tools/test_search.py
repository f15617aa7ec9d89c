"""grep, find and ls on real trees: output format, .gitignore, caps and notices."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawpi.tools import ToolError, ToolInputError
from tests.tools.conftest import text_of


@pytest.fixture
def tools(make_tools):  # type: ignore[no-untyped-def]
    return make_tools()


@pytest.fixture
def tree(workspace: Path) -> Path:
    (workspace / "src").mkdir()
    (workspace / "src/app.py").write_text("import os\n\ndef main():\n    return os.getcwd()\n")
    (workspace / "src/util.py").write_text("def helper():\n    return 42\n")
    (workspace / "README.md").write_text("# Title\nmain entry\n")
    (workspace / ".hidden").write_text("main secret-ish\n")
    (workspace / ".gitignore").write_text("build/\n*.log\n")
    (workspace / "build").mkdir()
    (workspace / "build/out.py").write_text("def main(): pass\n")
    (workspace / "debug.log").write_text("main log\n")
    return workspace


async def test_grep_formats_matches_relative_with_line_numbers(tools, tree: Path) -> None:
    result = await tools["grep"].execute("c", {"pattern": "def main"})
    assert text_of(result) == "src/app.py:3: def main():"


async def test_grep_includes_hidden_files_and_respects_gitignore(tools, tree: Path) -> None:
    text = text_of(await tools["grep"].execute("c", {"pattern": "main"}))
    assert ".hidden:1: main secret-ish" in text
    assert "README.md:2: main entry" in text
    assert "build/" not in text and "debug.log" not in text


async def test_grep_context_lines_use_dashes(tools, tree: Path) -> None:
    text = text_of(await tools["grep"].execute("c", {"pattern": "return 42", "context": 1}))
    assert text == "src/util.py-1- def helper():\nsrc/util.py:2:     return 42"


async def test_grep_single_file_uses_basename(tools, tree: Path) -> None:
    text = text_of(await tools["grep"].execute("c", {"pattern": "helper", "path": "src/util.py"}))
    assert text == "util.py:1: def helper():"


async def test_grep_literal_ignore_case_and_glob(tools, tree: Path) -> None:
    (tree / "src/notes.txt").write_text("A.B c\n")
    text = text_of(
        await tools["grep"].execute("c", {"pattern": "a.b", "literal": True, "ignoreCase": True})
    )
    assert text == "src/notes.txt:1: A.B c"
    text = text_of(await tools["grep"].execute("c", {"pattern": "return", "glob": "*.py"}))
    assert "src/app.py:4:" in text and "src/util.py:2:" in text


async def test_grep_limit_notice(tools, workspace: Path) -> None:
    (workspace / "many.txt").write_text("hit\n" * 10)
    text = text_of(await tools["grep"].execute("c", {"pattern": "hit", "limit": 3}))
    lines = text.split("\n")
    assert lines[:3] == ["many.txt:1: hit", "many.txt:2: hit", "many.txt:3: hit"]
    assert lines[-1] == "[3 matches limit reached. Use limit=6 for more, or refine pattern]"


async def test_grep_truncates_long_lines_with_notice(tools, workspace: Path) -> None:
    (workspace / "long.txt").write_text("needle " + "z" * 900 + "\n")
    text = text_of(await tools["grep"].execute("c", {"pattern": "needle"}))
    first, notice = text.split("\n\n")
    assert first.endswith("... [truncated]") and len(first) < 540
    assert notice == "[Some lines truncated to 500 chars. Use read tool to see full lines]"


async def test_grep_no_matches_and_bad_regex(tools, tree: Path) -> None:
    assert text_of(await tools["grep"].execute("c", {"pattern": "zzzz"})) == "No matches found"
    with pytest.raises(ToolInputError, match="invalid regex"):
        await tools["grep"].execute("c", {"pattern": "(unclosed"})


async def test_grep_caps_output_at_50kb(tools, workspace: Path) -> None:
    (workspace / "wide.txt").write_text(("m" + "q" * 400 + "\n") * 200)
    text = text_of(await tools["grep"].execute("c", {"pattern": "m", "limit": 1000}))
    body, notice = text.rsplit("\n\n", 1)
    assert len(body.encode()) <= 50 * 1024
    assert notice == "[50.0KB limit reached]"


async def test_find_globs_relative_paths_and_respects_gitignore(tools, tree: Path) -> None:
    assert (
        text_of(await tools["find"].execute("c", {"pattern": "*.py"})) == "src/app.py\nsrc/util.py"
    )
    text = text_of(await tools["find"].execute("c", {"pattern": "**/*.md"}))
    assert text == "README.md"


async def test_find_marks_directories_and_limits(tools, tree: Path) -> None:
    assert text_of(await tools["find"].execute("c", {"pattern": "src"})) == "src/"
    text = text_of(await tools["find"].execute("c", {"pattern": "*", "limit": 2}))
    assert text.endswith("[2 results limit reached. Use limit=4 for more, or refine pattern]")


async def test_find_nothing_found_message(tools, tree: Path) -> None:
    text = text_of(await tools["find"].execute("c", {"pattern": "*.rs"}))
    assert text == "No files found matching pattern"


async def test_ls_sorts_case_insensitively_with_dotfiles_and_dirs(tools, workspace: Path) -> None:
    for name in ("b.txt", "A.txt", ".env"):
        (workspace / name).write_text("")
    (workspace / "Cdir").mkdir()
    assert text_of(await tools["ls"].execute("c", {})) == ".env\nA.txt\nb.txt\nCdir/"


async def test_ls_limit_notice_and_errors(tools, workspace: Path) -> None:
    for i in range(5):
        (workspace / f"f{i}").write_text("")
    text = text_of(await tools["ls"].execute("c", {"limit": 2}))
    assert text == "f0\nf1\n\n[2 entries limit reached. Use limit=4 for more]"
    with pytest.raises(ToolError, match="Path not found: nope"):
        await tools["ls"].execute("c", {"path": "nope"})
    with pytest.raises(ToolError, match="Not a directory: f0"):
        await tools["ls"].execute("c", {"path": "f0"})


async def test_ls_empty_directory(tools, workspace: Path) -> None:
    (workspace / "empty").mkdir()
    assert text_of(await tools["ls"].execute("c", {"path": "empty"})) == "(empty directory)"


async def test_grep_each_match_gets_its_own_context_block(tools, workspace: Path) -> None:
    (workspace / "c.txt").write_text("a\nhit1\nb\nhit2\nc\n")
    text = text_of(await tools["grep"].execute("c", {"pattern": "hit", "context": 1}))
    assert text == "\n".join([
        "c.txt-1- a", "c.txt:2: hit1", "c.txt-3- b",
        "c.txt-3- b", "c.txt:4: hit2", "c.txt-5- c",
    ])  # fmt: skip
