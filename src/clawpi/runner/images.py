"""Images for the model: the ones a prompt refers to, and provider size limits for all of them.

A chat message often says "look at ./shot.png" or carries a gateway marker such as
`[media attached: /path/a.jpg (image/jpeg)]`; vision models should get those pixels with the
prompt. Only the current prompt is scanned (history images are already in the transcript), only
files inside the workspace (or explicitly allowed roots) are read, and every image is brought
within the limits providers enforce (Anthropic rejects sides over ~8000 px and payloads over
5 MB; OpenClaw keeps the longest side at 1200 px by default) by an EXIF-aware re-encode.
"""

from __future__ import annotations

import base64
import binascii
import io
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote, urlparse

from PIL import Image, ImageOps, UnidentifiedImageError

from clawpi.ai.mapping import is_mapping
from clawpi.ai.models import Model
from clawpi.errors import ClawpiError

DEFAULT_IMAGE_MAX_DIMENSION_PX: Final = 1200
DEFAULT_IMAGE_MAX_BYTES: Final = 5 * 1024 * 1024
MAX_SOURCE_IMAGE_BYTES: Final = 25 * 1024 * 1024
"""Largest file read from disk before shrinking (a phone photo is 3-12 MB)."""
RESIZE_SIDES: Final = (1800, 1600, 1400, 1200, 1000, 800, 600, 400)
JPEG_QUALITIES: Final = (85, 75, 65, 55, 45, 35)
IMAGE_EXTENSIONS: Final = (
    "png",
    "jpg",
    "jpeg",
    "gif",
    "webp",
    "bmp",
    "tiff",
    "tif",
    "heic",
    "heif",
)
UNREADABLE_IMAGE_TEXT: Final = "[image omitted: it could not be decoded or shrunk to the limits]"

_EXT: Final = "|".join(IMAGE_EXTENSIONS)
_MEDIA_ATTACHED_RE: Final = re.compile(r"\[media attached(?:\s+\d+/\d+)?:\s*([^\]]+)\]", re.I)
_MEDIA_ATTACHED_PATH_RE: Final = re.compile(rf"^\s*(.+?\.(?:{_EXT}))\s*(?:\(|$|\|)", re.I)
_MESSAGE_IMAGE_RE: Final = re.compile(rf"\[Image:\s*source:\s*([^\]]+\.(?:{_EXT}))\]", re.I)
_FILE_URL_RE: Final = re.compile(rf"file://[^\s<>\"'`\]]+\.(?:{_EXT})\b", re.I)
_PATH_RE: Final = re.compile(
    rf"(?:^|(?<=[\s\"'`(]))((?:\.\.?/|[~/])[^\s\"'`()\[\]]*\.(?:{_EXT}))\b", re.I
)
_DATA_URL_RE: Final = re.compile(
    r"data:(image/(?:png|jpe?g|gif|webp|bmp|tiff));base64,([A-Za-z0-9+/]+={0,2})", re.I
)
_FORMAT_MIME: Final = {
    "PNG": "image/png",
    "JPEG": "image/jpeg",
    "GIF": "image/gif",
    "WEBP": "image/webp",
    "BMP": "image/bmp",
    "TIFF": "image/tiff",
}
_PASSTHROUGH_FORMATS: Final = frozenset({"PNG", "JPEG", "GIF", "WEBP"})
"""Formats every vision provider accepts as they are; others are re-encoded."""


class ImageError(ClawpiError):
    """An image could not be read, decoded or brought within the provider limits."""


@dataclass(frozen=True, slots=True)
class ImageLimits:
    max_dimension_px: int = DEFAULT_IMAGE_MAX_DIMENSION_PX
    max_bytes: int = DEFAULT_IMAGE_MAX_BYTES


@dataclass(frozen=True, slots=True)
class ResizedImage:
    data: bytes
    mime_type: str
    width: int
    height: int
    changed: bool
    """False when the original bytes were already within the limits and are returned as-is."""


@dataclass(frozen=True, slots=True)
class ImageRef:
    """An image reference: a path (`kind="path"`), a data URL, or an attached image."""

    raw: str
    kind: str
    value: str
    """The path as written (for "path") or the data URL itself (for "data-url")."""


@dataclass(slots=True)
class PromptImages:
    images: list[dict[str, Any]] = field(default_factory=list)
    """`{"type": "image", "data": base64, "mimeType": ...}` blocks in prompt order."""
    refs: list[ImageRef] = field(default_factory=list)
    skipped: list[tuple[ImageRef, str]] = field(default_factory=list)
    """References that were not loaded, each with the reason (outside workspace, unreadable)."""


def resolve_image_limits(config: Mapping[str, Any] | None) -> ImageLimits:
    """`agents.defaults.imageMaxDimensionPx` from an OpenClaw-shaped config, else the defaults."""
    agents = config.get("agents") if is_mapping(config) else None
    defaults = agents.get("defaults") if is_mapping(agents) else None
    value = defaults.get("imageMaxDimensionPx") if is_mapping(defaults) else None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return ImageLimits(max_dimension_px=value)
    return ImageLimits()


# -- resizing ----------------------------------------------------------------------------------


def _open(data: bytes) -> Image.Image:
    try:
        image = Image.open(io.BytesIO(data))
        image.load()
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as exc:
        raise ImageError(
            f"Cannot decode image ({len(data)} bytes): {exc}. Send it as PNG, JPEG, GIF or WebP."
        ) from None
    return image


def _encode(image: Image.Image, fmt: str, quality: int | None = None) -> bytes:
    out = io.BytesIO()
    if fmt == "JPEG":
        if image.mode not in ("RGB", "L"):
            rgba = image.convert("RGBA")
            flat = Image.new("RGB", rgba.size, (255, 255, 255))
            flat.paste(rgba, mask=rgba.getchannel("A"))
            image = flat
        image.save(out, "JPEG", quality=quality or 85, optimize=True)
    else:
        image.save(out, "PNG")
    return out.getvalue()


def _fit(image: Image.Image, side: int) -> Image.Image:
    width, height = image.size
    longest = max(width, height)
    if longest <= side:
        return image
    scale = side / longest
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    return image.resize(size, Image.Resampling.LANCZOS)


def resize_image_for_provider(
    data: bytes, mime_type: str | None = None, limits: ImageLimits | None = None
) -> ResizedImage:
    """The image within `limits`: EXIF orientation applied, longest side and byte size capped.

    Bytes already within the limits (and upright) come back unchanged, so repeated calls are
    stable. Otherwise the image is re-encoded over decreasing sizes and JPEG qualities until both
    limits hold; PNG is tried first for images with transparency. Raises `ImageError` when the
    image cannot be decoded or shrunk.
    """
    limits = limits or ImageLimits()
    image = _open(data)
    fmt = (image.format or "").upper()
    width, height = image.size
    orientation = image.getexif().get(0x0112, 1)
    upright = orientation in (None, 1)
    if (
        upright
        and fmt in _PASSTHROUGH_FORMATS
        and max(width, height) <= limits.max_dimension_px
        and len(data) <= limits.max_bytes
    ):
        return ResizedImage(data, _FORMAT_MIME[fmt], width, height, changed=False)
    if getattr(image, "n_frames", 1) > 1:
        image.seek(0)
        image = image.copy()
    image = ImageOps.exif_transpose(image) or image
    has_alpha = image.mode in ("RGBA", "LA", "PA") or (
        image.mode == "P" and "transparency" in image.info
    )
    if image.mode not in ("RGB", "RGBA", "L", "LA"):
        image = image.convert("RGBA" if has_alpha else "RGB")
    sides = [limits.max_dimension_px] + [s for s in RESIZE_SIDES if s < limits.max_dimension_px]
    for side in sides:
        fitted = _fit(image, side)
        if has_alpha or fmt == "PNG":
            encoded = _encode(fitted, "PNG")
            if len(encoded) <= limits.max_bytes:
                return ResizedImage(encoded, "image/png", *fitted.size, changed=True)
        for quality in JPEG_QUALITIES:
            encoded = _encode(fitted, "JPEG", quality)
            if len(encoded) <= limits.max_bytes:
                return ResizedImage(encoded, "image/jpeg", *fitted.size, changed=True)
    raise ImageError(
        f"Cannot shrink image ({width}x{height}, {len(data)} bytes) below "
        f"{limits.max_bytes} bytes; send a smaller image."
    )


def sanitize_image_block(
    block: Mapping[str, Any], limits: ImageLimits | None = None
) -> dict[str, Any]:
    """An `image` content block within the limits, or a text note if it cannot be made so."""
    data = block.get("data")
    try:
        if not isinstance(data, str):
            raise ImageError("image block has no base64 data")
        raw = base64.b64decode(data, validate=True)
        resized = resize_image_for_provider(raw, block.get("mimeType"), limits)
    except (ImageError, binascii.Error, ValueError):
        return {"type": "text", "text": UNREADABLE_IMAGE_TEXT}
    if not resized.changed:
        if block.get("mimeType") == resized.mime_type:
            return dict(block)
        return {**block, "mimeType": resized.mime_type}
    return {
        **block,
        "data": base64.b64encode(resized.data).decode("ascii"),
        "mimeType": resized.mime_type,
    }


def image_block_within_limits(block: Mapping[str, Any], limits: ImageLimits) -> bool:
    """Cheap check (header only) that an image block needs no work."""
    data = block.get("data")
    if not isinstance(data, str) or len(data) * 3 // 4 > limits.max_bytes:
        return False
    try:
        raw = base64.b64decode(data, validate=True)
        with Image.open(io.BytesIO(raw)) as image:
            fmt = (image.format or "").upper()
            orientation = image.getexif().get(0x0112, 1)
            return (
                fmt in _PASSTHROUGH_FORMATS
                and orientation in (None, 1)
                and max(image.size) <= limits.max_dimension_px
                and block.get("mimeType") == _FORMAT_MIME[fmt]
            )
    except (UnidentifiedImageError, OSError, ValueError, binascii.Error):
        return False


# -- prompt references --------------------------------------------------------------------------


def _has_image_extension(path: str) -> bool:
    return os.path.splitext(path)[1].lower().lstrip(".") in IMAGE_EXTENSIONS


def detect_image_references(prompt: str) -> list[ImageRef]:
    """Image paths, `file://` URLs and data URLs in a prompt, first mention first, deduplicated.

    Remote http(s) URLs are ignored: the agent fetches those itself if it wants them.
    """
    refs: list[ImageRef] = []
    seen: set[str] = set()

    def add_path(raw: str) -> None:
        path = raw.strip()
        if not path or path in seen or path.startswith(("http://", "https://")):
            return
        if not _has_image_extension(path):
            return
        seen.add(path)
        refs.append(ImageRef(raw=path, kind="path", value=path))

    for match in _MEDIA_ATTACHED_RE.finditer(prompt):
        content = match.group(1)
        if re.fullmatch(r"\s*\d+\s+files?\s*", content, re.I):
            continue
        path_match = _MEDIA_ATTACHED_PATH_RE.match(content)
        if path_match:
            add_path(path_match.group(1))
    for match in _MESSAGE_IMAGE_RE.finditer(prompt):
        add_path(match.group(1))
    for match in _FILE_URL_RE.finditer(prompt):
        url = match.group(0)
        parsed = urlparse(url)
        if parsed.netloc not in ("", "localhost"):
            continue
        local = unquote(parsed.path)
        if local not in seen:
            seen.add(local)
            refs.append(ImageRef(raw=url, kind="path", value=local))
    for match in _PATH_RE.finditer(prompt):
        add_path(match.group(1))
    for match in _DATA_URL_RE.finditer(prompt):
        url = match.group(0)
        if url not in seen:
            seen.add(url)
            refs.append(ImageRef(raw=url, kind="data-url", value=url))
    return refs


def _is_within(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def _resolve_ref_path(ref: ImageRef, workspace: Path) -> Path:
    value = ref.value
    if value.startswith("~"):
        value = os.path.expanduser(value)
    path = Path(value)
    if not path.is_absolute():
        path = workspace / path
    return Path(os.path.realpath(path))


def _read_image_file(path: Path) -> bytes:
    try:
        size = path.stat().st_size
        if size > MAX_SOURCE_IMAGE_BYTES:
            raise ImageError(
                f"Image {path} is {size} bytes, more than the {MAX_SOURCE_IMAGE_BYTES}-byte "
                "limit for prompt images."
            )
        return path.read_bytes()
    except FileNotFoundError:
        raise ImageError(f"Image {path} does not exist.") from None
    except IsADirectoryError:
        raise ImageError(f"Image path {path} is a directory.") from None
    except PermissionError:
        raise ImageError(f"Image {path} is not readable (permission denied).") from None


def _load_ref(
    ref: ImageRef, workspace: Path, roots: Sequence[Path] | None, limits: ImageLimits
) -> dict[str, Any]:
    if ref.kind == "data-url":
        match = _DATA_URL_RE.fullmatch(ref.value)
        if match is None:
            raise ImageError("Malformed image data URL.")
        try:
            raw = base64.b64decode(match.group(2), validate=True)
        except (binascii.Error, ValueError):
            raise ImageError("Image data URL is not valid base64.") from None
        mime = match.group(1).lower()
    else:
        path = _resolve_ref_path(ref, workspace)
        if roots is not None and not _is_within(path, roots):
            raise ImageError(
                f"Image {ref.value} is outside the workspace {workspace}; "
                "only files inside the workspace are read."
            )
        raw = _read_image_file(path)
        mime = None
    resized = resize_image_for_provider(raw, mime, limits)
    return {
        "type": "image",
        "data": base64.b64encode(resized.data).decode("ascii"),
        "mimeType": resized.mime_type,
    }


def detect_and_load_prompt_images(
    prompt: str,
    workspace_dir: str | os.PathLike[str],
    *,
    model: Model | None = None,
    limits: ImageLimits | None = None,
    workspace_only: bool = True,
    extra_roots: Iterable[str | os.PathLike[str]] = (),
    existing_images: Sequence[Mapping[str, Any]] = (),
) -> PromptImages:
    """Load the images the current prompt refers to, ready to send with it.

    Paths are resolved against the workspace (`~` against home) and, with `workspace_only`,
    must lie inside it or inside one of `extra_roots` (e.g. a gateway's inbound media folder)
    after symlinks are resolved. A model without image input gets nothing. References that
    cannot be used are reported in `skipped` with the reason; they never fail the run.
    `existing_images` (images that came with the message itself) are brought within the limits
    and placed first.
    """
    result = PromptImages()
    if model is not None and not model.supports_images:
        return result
    limits = limits or ImageLimits()
    workspace = Path(os.path.realpath(workspace_dir))
    roots = (
        [workspace, *(Path(os.path.realpath(root)) for root in extra_roots)]
        if workspace_only
        else None
    )
    for number, image in enumerate(existing_images, start=1):
        block = sanitize_image_block(image, limits)
        if block.get("type") == "image":
            result.images.append(block)
        else:
            ref = ImageRef(raw=f"attached image {number}", kind="attached", value="")
            result.skipped.append((ref, "Attached image could not be decoded or shrunk."))
    result.refs = detect_image_references(prompt)
    loaded: set[str] = set()
    for ref in result.refs:
        key = str(_resolve_ref_path(ref, workspace)) if ref.kind == "path" else ref.value
        if key in loaded:
            continue
        try:
            result.images.append(_load_ref(ref, workspace, roots, limits))
        except ImageError as exc:
            result.skipped.append((ref, str(exc)))
        loaded.add(key)
    return result
