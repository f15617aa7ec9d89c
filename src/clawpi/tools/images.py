"""Images for the read tool: magic-byte detection and downscaling to provider limits."""

from __future__ import annotations

import base64
import dataclasses
import io

from PIL import Image

MAX_IMAGE_SIDE = 2000
MAX_IMAGE_BYTES = int(4.5 * 1024 * 1024)
_JPEG_QUALITIES = (85, 70, 55, 40)
_SCALES = (1.0, 0.75, 0.5, 0.35, 0.25)


def detect_image_mime(head: bytes) -> str | None:
    """jpeg/png/gif/webp by their magic bytes; the file extension is ignored on purpose."""
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(head) >= 12 and head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


@dataclasses.dataclass(slots=True)
class PreparedImage:
    data: str
    mime_type: str
    original: tuple[int, int] | None = None
    displayed: tuple[int, int] | None = None

    def dimension_note(self) -> str | None:
        if not self.original or not self.displayed or self.original == self.displayed:
            return None
        (ow, oh), (dw, dh) = self.original, self.displayed
        scale = ow / dw if dw else 1.0
        return (
            f"[Image: original {ow}x{oh}, displayed at {dw}x{dh}. "
            f"Multiply coordinates by {scale:.2f} to map to original image.]"
        )


def _encode(image: Image.Image, fmt: str, quality: int | None = None) -> bytes:
    out = io.BytesIO()
    if fmt == "JPEG":
        image = image.convert("RGB")
        image.save(out, format="JPEG", quality=quality or 85)
    else:
        image.save(out, format="PNG")
    return out.getvalue()


def prepare_image(data: bytes, mime_type: str, *, auto_resize: bool = True) -> PreparedImage:
    """Return the image as base64, downscaled to <=2000x2000 and <=4.5 MB when needed."""
    if not auto_resize:
        return PreparedImage(base64.b64encode(data).decode("ascii"), mime_type)
    try:
        with Image.open(io.BytesIO(data)) as opened:
            opened.load()
            image = opened.copy()
    except Exception:
        return PreparedImage(base64.b64encode(data).decode("ascii"), mime_type)
    size = image.size
    if size[0] <= MAX_IMAGE_SIDE and size[1] <= MAX_IMAGE_SIDE and len(data) <= MAX_IMAGE_BYTES:
        return PreparedImage(base64.b64encode(data).decode("ascii"), mime_type, size, size)
    resized = image
    target = size
    for scale in _SCALES:
        factor = min(1.0, MAX_IMAGE_SIDE / max(size)) * scale
        target = (max(1, round(size[0] * factor)), max(1, round(size[1] * factor)))
        resized = image.resize(target, Image.Resampling.LANCZOS) if target != size else image
        # The smaller of PNG and JPEG first, then lower JPEG qualities, then smaller sizes.
        first = min(
            [("image/png", _encode(resized, "PNG")), ("image/jpeg", _encode(resized, "JPEG", 85))],
            key=lambda c: len(c[1]),
        )
        if len(first[1]) <= MAX_IMAGE_BYTES:
            return PreparedImage(base64.b64encode(first[1]).decode("ascii"), first[0], size, target)
        for quality in _JPEG_QUALITIES[1:]:
            encoded = _encode(resized, "JPEG", quality)
            if len(encoded) <= MAX_IMAGE_BYTES:
                data64 = base64.b64encode(encoded).decode("ascii")
                return PreparedImage(data64, "image/jpeg", size, target)
    encoded = _encode(resized, "JPEG", _JPEG_QUALITIES[-1])
    return PreparedImage(base64.b64encode(encoded).decode("ascii"), "image/jpeg", size, target)
