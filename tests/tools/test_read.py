"""The read tool on real files: pi's caps, notices, offsets, images and refusals."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pytest
from PIL import Image

from clawpi.tools import ToolError
from tests.tools.conftest import text_of


@pytest.fixture
def read(make_tools):  # type: ignore[no-untyped-def]
    return make_tools()["read"]


async def test_read_returns_text_without_line_numbers(read, workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\nbeta\n")
    result = await read.execute("c1", {"path": "a.txt"})
    assert text_of(result) == "alpha\nbeta\n"
    assert result.details is None


async def test_read_offset_and_limit_slice_with_more_lines_notice(read, workspace: Path) -> None:
    (workspace / "n.txt").write_text("\n".join(f"line {i}" for i in range(1, 11)))
    result = await read.execute("c1", {"path": "n.txt", "offset": 3, "limit": 2})
    assert text_of(result) == "line 3\nline 4\n\n[6 more lines in file. Use offset=5 to continue.]"


async def test_read_offset_beyond_end_is_an_error(read, workspace: Path) -> None:
    (workspace / "n.txt").write_text("a\nb")
    with pytest.raises(ToolError, match=r"Offset 5 is beyond end of file \(2 lines total\)"):
        await read.execute("c1", {"path": "n.txt", "offset": 5})


async def test_read_caps_at_2000_lines_with_continue_notice(read, workspace: Path) -> None:
    (workspace / "big.txt").write_text("\n".join(str(i) for i in range(1, 2501)))
    result = await read.execute("c1", {"path": "big.txt"})
    text = text_of(result)
    assert text.endswith("\n\n[Showing lines 1-2000 of 2500. Use offset=2001 to continue.]")
    assert text.split("\n")[1999] == "2000"
    assert result.details["truncation"]["truncatedBy"] == "lines"
    follow = await read.execute("c1", {"path": "big.txt", "offset": 2001})
    assert text_of(follow).startswith("2001\n") and text_of(follow).endswith("2500")


async def test_read_caps_at_50kb_with_limit_notice(read, workspace: Path) -> None:
    line = "x" * 99
    (workspace / "wide.txt").write_text("\n".join([line] * 1000))  # 100 KB in 1000 lines
    result = await read.execute("c1", {"path": "wide.txt"})
    text = text_of(result)
    body, notice = text.rsplit("\n\n", 1)
    assert len(body.encode()) <= 50 * 1024
    shown = body.count("\n") + 1
    assert shown == 512  # 512 lines of 100 bytes (with newline) fit in 51,200 bytes
    assert (
        notice
        == f"[Showing lines 1-{shown} of 1000 (50.0KB limit). Use offset={shown + 1} to continue.]"
    )
    assert result.details["truncation"]["truncatedBy"] == "bytes"


async def test_read_first_line_over_50kb_points_to_bash(read, workspace: Path) -> None:
    (workspace / "one.txt").write_text("y" * 60000 + "\nshort")
    result = await read.execute("c1", {"path": "one.txt"})
    assert text_of(result) == (
        "[Line 1 is 58.6KB, exceeds 50.0KB limit. Use bash: sed -n '1p' one.txt | head -c 51200]"
    )
    assert result.details["truncation"]["firstLineExceedsLimit"] is True


async def test_read_png_is_returned_as_image_content(read, workspace: Path) -> None:
    buffer = io.BytesIO()
    Image.new("RGB", (20, 10), (255, 0, 0)).save(buffer, format="PNG")
    (workspace / "pic.dat").write_bytes(buffer.getvalue())  # extension ignored: magic bytes
    result = await read.execute("c1", {"path": "pic.dat"})
    assert result.content[0] == {"type": "text", "text": "Read image file [image/png]"}
    image = result.content[1]
    assert image["type"] == "image" and image["mimeType"] == "image/png"
    assert base64.b64decode(image["data"]) == buffer.getvalue()


async def test_read_large_image_is_downscaled_with_dimension_note(read, workspace: Path) -> None:
    buffer = io.BytesIO()
    Image.new("RGB", (2400, 600), (0, 128, 255)).save(buffer, format="PNG")
    (workspace / "big.png").write_bytes(buffer.getvalue())
    result = await read.execute("c1", {"path": "big.png"})
    note = text_of(result)
    assert "[Image: original 2400x600, displayed at 2000x500. Multiply coordinates by 1.20" in note
    data = base64.b64decode(result.content[1]["data"])
    with Image.open(io.BytesIO(data)) as shown:
        assert shown.size == (2000, 500)


async def test_read_refuses_binary_files_clearly(read, workspace: Path) -> None:
    (workspace / "blob.bin").write_bytes(b"\x7fELF\x02\x01\x00\x00" + bytes(range(256)))
    with pytest.raises(ToolError, match=r"blob\.bin is a binary file .*read returns text"):
        await read.execute("c1", {"path": "blob.bin"})


async def test_read_missing_file_names_the_path(read) -> None:
    with pytest.raises(ToolError, match=r"File not found: nope\.txt"):
        await read.execute("c1", {"path": "nope.txt"})


async def test_read_expands_tilde_and_strips_at_prefix(read, workspace: Path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(workspace))
    (workspace / "home.txt").write_text("at home")
    assert text_of(await read.execute("c1", {"path": "~/home.txt"})) == "at home"
    assert text_of(await read.execute("c1", {"path": "@home.txt"})) == "at home"


async def test_read_normalises_unicode_spaces_in_paths(read, workspace: Path) -> None:
    (workspace / "my file.txt").write_text("spaced")
    assert text_of(await read.execute("c1", {"path": "my\u00a0file.txt"})) == "spaced"


async def test_read_accepts_claude_file_path_alias(read, workspace: Path) -> None:
    (workspace / "a.txt").write_text("aliased")
    assert "file_path" in read.parameters["properties"]
    assert "path" in read.parameters["properties"]
    assert text_of(await read.execute("c1", {"file_path": "a.txt"})) == "aliased"


async def test_read_keeps_invalid_utf8_readable(read, workspace: Path) -> None:
    (workspace / "latin.txt").write_bytes("café".encode("latin-1") + b"\nok")
    assert text_of(await read.execute("c1", {"path": "latin.txt"})) == "caf\ufffd\nok"


async def test_read_deep_offset_in_a_multi_megabyte_file(read, workspace: Path) -> None:
    (workspace / "deep.txt").write_text("".join(f"{i}\n" for i in range(1, 400_001)))  # ~2.7 MB
    result = await read.execute("c1", {"path": "deep.txt", "offset": 300_000, "limit": 2})
    assert text_of(result) == (
        "300000\n300001\n\n[100000 more lines in file. Use offset=300002 to continue.]"
    )
