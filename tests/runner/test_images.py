"""Prompt images and provider image limits (reference §4.29), with real files and real images."""

from __future__ import annotations

import base64
import io
import os
from pathlib import Path

import pytest
from PIL import Image

from clawpi.ai.models import Model
from clawpi.runner.images import (
    UNREADABLE_IMAGE_TEXT,
    ImageError,
    ImageLimits,
    detect_and_load_prompt_images,
    detect_image_references,
    resize_image_for_provider,
    resolve_image_limits,
    sanitize_image_block,
)


def encode(image: Image.Image, fmt: str = "PNG", **params: object) -> bytes:
    out = io.BytesIO()
    image.save(out, fmt, **params)
    return out.getvalue()


def decoded(block: dict[str, str]) -> Image.Image:
    return Image.open(io.BytesIO(base64.b64decode(block["data"])))


def write_png(path: Path, size: tuple[int, int] = (40, 30), color: str = "blue") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(encode(Image.new("RGB", size, color)))
    return path


def model(*inputs: str) -> Model:
    return Model(
        id="m",
        api="openai-completions",
        provider="p",
        base_url="http://127.0.0.1",
        input=list(inputs),
    )


# -- detection ----------------------------------------------------------------------------------


def test_media_attached_marker_is_detected() -> None:
    refs = detect_image_references("hi\n[media attached: /tmp/a.png (image/png) | https://x/a]")
    assert [r.value for r in refs] == ["/tmp/a.png"]


def test_numbered_media_markers_and_paths_with_spaces_are_detected() -> None:
    prompt = (
        "[media attached: 2 files]\n[media attached 1/2: /in/Screen Shot 1.jpg (image/jpeg)]"
        "\n[media attached 2/2: /in/b.webp]"
    )
    assert [r.value for r in detect_image_references(prompt)] == [
        "/in/Screen Shot 1.jpg",
        "/in/b.webp",
    ]


def test_image_source_markers_file_urls_and_plain_paths_are_detected() -> None:
    prompt = (
        "[Image: source: /m/c.gif] see file:///home/u/d%20e.png and ./shots/f.JPG, "
        "../g.tiff or ~/h.bmp"
    )
    values = [r.value for r in detect_image_references(prompt)]
    assert values == ["/m/c.gif", "/home/u/d e.png", "./shots/f.JPG", "../g.tiff", "~/h.bmp"]


def test_http_urls_are_not_detected() -> None:
    assert detect_image_references("look at https://example.com/cat.png please") == []


def test_paths_with_non_image_extensions_are_ignored() -> None:
    assert detect_image_references("read ./notes.txt and /etc/passwd and ./a.pngx") == []


def test_duplicates_are_detected_once() -> None:
    prompt = "./a.png then ./a.png again [media attached: ./a.png (image/png)]"
    assert len(detect_image_references(prompt)) == 1


def test_data_urls_are_detected() -> None:
    data = base64.b64encode(encode(Image.new("RGB", (2, 2)))).decode()
    refs = detect_image_references(f"inline data:image/png;base64,{data} here")
    assert [r.kind for r in refs] == ["data-url"]


# -- loading ------------------------------------------------------------------------------------


def test_relative_and_absolute_workspace_images_are_loaded(workspace: Path) -> None:
    write_png(workspace / "shots" / "a.png", (40, 30))
    absolute = write_png(workspace / "b.png", (10, 10), "green")
    result = detect_and_load_prompt_images(
        f"compare ./shots/a.png with {absolute}", workspace, model=model("text", "image")
    )
    assert result.skipped == []
    assert [decoded(i).size for i in result.images] == [(40, 30), (10, 10)]
    assert all(i["mimeType"] == "image/png" for i in result.images)


def test_a_model_without_image_input_gets_no_images(workspace: Path) -> None:
    write_png(workspace / "a.png")
    result = detect_and_load_prompt_images("./a.png", workspace, model=model("text"))
    assert result.images == [] and result.refs == []


def test_paths_outside_the_workspace_are_rejected(workspace: Path, tmp_path: Path) -> None:
    outside = write_png(tmp_path / "elsewhere" / "x.png")
    result = detect_and_load_prompt_images(f"{outside} and /etc/x.png", workspace)
    assert result.images == []
    assert [r.value for r, _ in result.skipped] == [str(outside), "/etc/x.png"]
    assert all("outside the workspace" in reason for _, reason in result.skipped)


def test_a_symlink_escaping_the_workspace_is_rejected(workspace: Path, tmp_path: Path) -> None:
    target = write_png(tmp_path / "secret" / "s.png")
    os.symlink(target, workspace / "link.png")
    result = detect_and_load_prompt_images("./link.png", workspace)
    assert result.images == [] and "outside the workspace" in result.skipped[0][1]


def test_extra_roots_and_workspace_only_off_allow_outside_files(
    workspace: Path, tmp_path: Path
) -> None:
    inbound = write_png(tmp_path / "media" / "inbound" / "in.png")
    prompt = f"[media attached: {inbound} (image/png)]"
    allowed = detect_and_load_prompt_images(prompt, workspace, extra_roots=[inbound.parent])
    assert len(allowed.images) == 1
    unconfined = detect_and_load_prompt_images(prompt, workspace, workspace_only=False)
    assert len(unconfined.images) == 1


def test_missing_and_unreadable_files_are_skipped_with_a_reason(workspace: Path) -> None:
    (workspace / "broken.png").write_bytes(b"this is not a png")
    result = detect_and_load_prompt_images("./missing.png ./broken.png", workspace)
    assert result.images == []
    reasons = {r.value: why for r, why in result.skipped}
    assert "does not exist" in reasons["./missing.png"]
    assert "Cannot decode image" in reasons["./broken.png"]


def test_a_duplicate_reference_is_loaded_once(workspace: Path) -> None:
    write_png(workspace / "a.png")
    result = detect_and_load_prompt_images(
        f"./a.png and {workspace / 'a.png'} and ./a.png", workspace
    )
    assert len(result.images) == 1  # two spellings of one file


def test_data_url_images_are_loaded_and_resized(workspace: Path) -> None:
    data = base64.b64encode(encode(Image.new("RGB", (3000, 1500), "red"))).decode()
    result = detect_and_load_prompt_images(f"data:image/png;base64,{data}", workspace)
    assert decoded(result.images[0]).size == (1200, 600)


def test_existing_images_come_first_within_limits(workspace: Path) -> None:
    big = {
        "type": "image",
        "mimeType": "image/png",
        "data": base64.b64encode(encode(Image.new("RGB", (2000, 100)))).decode(),
    }
    write_png(workspace / "a.png")
    result = detect_and_load_prompt_images("./a.png", workspace, existing_images=[big])
    assert [decoded(i).size for i in result.images] == [(1200, 60), (40, 30)]


# -- resizing -----------------------------------------------------------------------------------


def test_an_image_within_limits_is_returned_unchanged() -> None:
    data = encode(Image.new("RGB", (800, 600)), "JPEG")
    resized = resize_image_for_provider(data)
    assert resized.data == data and not resized.changed
    assert resized.mime_type == "image/jpeg"


def test_the_longest_side_is_capped_at_1200_px() -> None:
    resized = resize_image_for_provider(encode(Image.new("RGB", (1000, 4000), "white")))
    assert (resized.width, resized.height) == (300, 1200)
    assert Image.open(io.BytesIO(resized.data)).size == (300, 1200)


def test_the_max_dimension_comes_from_config() -> None:
    limits = resolve_image_limits({"agents": {"defaults": {"imageMaxDimensionPx": 500}}})
    resized = resize_image_for_provider(encode(Image.new("RGB", (1000, 1000))), None, limits)
    assert max(resized.width, resized.height) == 500


def test_exif_orientation_is_applied() -> None:
    image = Image.new("RGB", (200, 100), "red")
    exif = image.getexif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to display
    data = encode(image, "JPEG", exif=exif.tobytes())
    resized = resize_image_for_provider(data)
    assert resized.changed and (resized.width, resized.height) == (100, 200)
    assert Image.open(io.BytesIO(resized.data)).getexif().get(0x0112, 1) == 1


def test_the_byte_limit_is_enforced_by_recompressing() -> None:
    noise = Image.frombytes("RGB", (1100, 1100), os.urandom(1100 * 1100 * 3))
    data = encode(noise)
    limits = ImageLimits(max_bytes=400_000)
    assert len(data) > limits.max_bytes
    resized = resize_image_for_provider(data, "image/png", limits)
    assert len(resized.data) <= limits.max_bytes
    assert resized.mime_type == "image/jpeg"


def test_transparency_is_kept_as_png() -> None:
    image = Image.new("RGBA", (2400, 100), (255, 0, 0, 0))
    resized = resize_image_for_provider(encode(image))
    assert resized.mime_type == "image/png"
    assert Image.open(io.BytesIO(resized.data)).mode == "RGBA"


def test_bmp_is_re_encoded_to_a_provider_format() -> None:
    resized = resize_image_for_provider(encode(Image.new("RGB", (20, 20)), "BMP"))
    assert resized.mime_type in ("image/png", "image/jpeg") and resized.changed


def test_undecodable_bytes_raise_a_clear_error() -> None:
    with pytest.raises(ImageError, match="Cannot decode image"):
        resize_image_for_provider(b"\x89PNG\r\n\x1a\n garbage")


def test_an_undecodable_image_block_becomes_a_text_note() -> None:
    block = {"type": "image", "data": "!!!not base64", "mimeType": "image/png"}
    assert sanitize_image_block(block) == {"type": "text", "text": UNREADABLE_IMAGE_TEXT}


def test_an_undecodable_attached_image_is_reported(workspace: Path) -> None:
    broken = {"type": "image", "data": base64.b64encode(b"nope").decode(), "mimeType": "image/png"}
    result = detect_and_load_prompt_images("no refs here", workspace, existing_images=[broken])
    assert result.images == []
    assert [(r.kind, r.raw) for r, _ in result.skipped] == [("attached", "attached image 1")]
