"""apply_patch in OpenAI's format on real files: add, update with context, delete, move, and
all-or-nothing failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawpi.tools import PatchError
from tests.tools.conftest import text_of


@pytest.fixture
def patch(make_tools):  # type: ignore[no-untyped-def]
    return make_tools(provider="openai", model_id="gpt-5", apply_patch=True)["apply_patch"]


async def test_add_update_delete_and_move_in_one_patch(patch, workspace: Path) -> None:
    (workspace / "app.py").write_text(
        "def main():\n    print('hi')\n    return 0\n\n\ndef other():\n    return 1\n"
    )
    (workspace / "old.txt").write_text("bye\n")
    (workspace / "mv.txt").write_text("alpha\nbeta\n")
    text = (
        "*** Begin Patch\n"
        "*** Add File: docs/new.md\n+# New\n+body\n"
        "*** Update File: app.py\n@@ def main():\n     print('hi')\n-    return 0\n+    return 42\n"
        "@@ def other():\n-    return 1\n+    return 2\n"
        "*** Delete File: old.txt\n"
        "*** Update File: mv.txt\n*** Move to: moved/mv.txt\n@@\n alpha\n-beta\n+gamma\n"
        "*** End Patch"
    )
    result = await patch.execute("c", {"input": text})
    assert text_of(result) == (
        "Success. Updated the following files:\nA docs/new.md\nM app.py\nD old.txt\nM moved/mv.txt"
    )
    assert (workspace / "docs/new.md").read_text() == "# New\nbody\n"
    assert "return 2" in (workspace / "app.py").read_text()
    assert "return 42" in (workspace / "app.py").read_text()
    assert not (workspace / "old.txt").exists()
    assert not (workspace / "mv.txt").exists()
    assert (workspace / "moved/mv.txt").read_text() == "alpha\ngamma\n"


async def test_hunk_tolerates_trailing_whitespace_differences(patch, workspace: Path) -> None:
    (workspace / "f.txt").write_text("a   \nb\nc\n")
    await patch.execute(
        "c", {"input": "*** Begin Patch\n*** Update File: f.txt\n a\n-b\n+B\n*** End Patch"}
    )
    assert (workspace / "f.txt").read_text() == "a   \nB\nc\n"


async def test_end_of_file_marker_anchors_at_the_end(patch, workspace: Path) -> None:
    (workspace / "f.txt").write_text("x\ny\nx\ny\n")
    await patch.execute(
        "c",
        {
            "input": "*** Begin Patch\n*** Update File: f.txt\n x\n-y\n+z\n*** End of File\n*** End Patch"
        },
    )
    assert (workspace / "f.txt").read_text() == "x\ny\nx\nz\n"


async def test_failed_hunk_changes_nothing(patch, workspace: Path) -> None:
    (workspace / "a.txt").write_text("one\n")
    (workspace / "b.txt").write_text("two\n")
    text = (
        "*** Begin Patch\n*** Update File: a.txt\n-one\n+ONE\n"
        "*** Update File: b.txt\n-nothere\n+x\n*** End Patch"
    )
    with pytest.raises(PatchError, match=r"b\.txt: hunk 1 does not match"):
        await patch.execute("c", {"input": text})
    assert (workspace / "a.txt").read_text() == "one\n"
    assert (workspace / "b.txt").read_text() == "two\n"


async def test_malformed_patches_are_explained(patch) -> None:
    with pytest.raises(PatchError, match="must start with"):
        await patch.execute("c", {"input": "hello"})
    with pytest.raises(PatchError, match="every line must start with '\\+'"):
        await patch.execute(
            "c", {"input": "*** Begin Patch\n*** Add File: a\nno plus\n*** End Patch"}
        )


def test_apply_patch_is_offered_only_to_openai_when_enabled(make_tools) -> None:
    assert "apply_patch" not in make_tools(provider="openai", apply_patch=False)
    assert "apply_patch" not in make_tools(provider="anthropic", apply_patch=True)
    assert "apply_patch" in make_tools(provider="openai", model_id="gpt-5", apply_patch=True)
    limited = make_tools(
        provider="openai", model_id="gpt-4o", apply_patch=True, apply_patch_models=["gpt-5"]
    )
    assert "apply_patch" not in limited
