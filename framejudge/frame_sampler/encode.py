"""Frames as payloads for model APIs: JPEG bytes, base64 data URLs, a captioned contact sheet."""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Sequence

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from .errors import InvalidRequest


def to_jpeg(image: np.ndarray | Image.Image, quality: int = 85) -> bytes:
    if not 1 <= quality <= 100:
        raise InvalidRequest(f"JPEG quality must be 1-100, got {quality}")
    pil = image if isinstance(image, Image.Image) else Image.fromarray(image)
    buf = io.BytesIO()
    pil.convert("RGB").save(buf, format="JPEG", quality=quality, optimize=False)
    return buf.getvalue()


def to_data_url(image: np.ndarray | Image.Image, quality: int = 85) -> str:
    """`data:image/jpeg;base64,...`, the form OpenAI-compatible APIs take as an image part."""
    return "data:image/jpeg;base64," + base64.b64encode(to_jpeg(image, quality)).decode("ascii")


def format_timestamp(seconds: float) -> str:
    minutes, secs = divmod(seconds, 60.0)
    hours, minutes = divmod(int(minutes), 60)
    if hours:
        return f"{hours}:{minutes:02d}:{secs:06.3f}"
    return f"{minutes:02d}:{secs:06.3f}"


def sheet_size(count: int, cell: int = 320, columns: int | None = None) -> tuple[int, int]:
    """The largest (width, height) a contact sheet of `count` frames can have."""
    cols = columns or math.ceil(math.sqrt(count))
    rows = math.ceil(count / cols)
    return cols * cell, rows * (cell + max(12, cell // 14) + 8)


def contact_sheet(
    images: Sequence[np.ndarray],
    timestamps: Sequence[float],
    columns: int | None = None,
    cell: int = 320,
) -> Image.Image:
    """A grid of the frames, each captioned with its timestamp, for models that take one image."""
    if not images:
        raise InvalidRequest("a contact sheet needs at least one frame")
    if len(images) != len(timestamps):
        raise InvalidRequest("one timestamp per frame is needed")
    if not 32 <= cell <= 2048:
        raise InvalidRequest(f"cell size must be 32-2048 pixels, got {cell}")
    cols = columns or math.ceil(math.sqrt(len(images)))
    if cols <= 0:
        raise InvalidRequest(f"columns must be >= 1, got {cols}")
    rows = math.ceil(len(images) / cols)
    thumbs = []
    for img in images:
        pil = Image.fromarray(img)
        pil.thumbnail((cell, cell))
        thumbs.append(pil)
    cell_h = max(t.height for t in thumbs)
    caption = max(12, cell // 14)
    font = ImageFont.load_default(size=caption)
    row_h = cell_h + caption + 8
    sheet = Image.new("RGB", (cols * cell, rows * row_h), "black")
    draw = ImageDraw.Draw(sheet)
    for i, (pil, t) in enumerate(zip(thumbs, timestamps)):
        x, y = (i % cols) * cell, (i // cols) * row_h
        sheet.paste(pil, (x + (cell - pil.width) // 2, y + (cell_h - pil.height) // 2))
        draw.text((x + 4, y + cell_h + 3), format_timestamp(t), fill="white", font=font)
    return sheet
