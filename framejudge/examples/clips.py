"""The bundled example clips, generated (never downloaded): moving shapes, readable text,
a scene cut, a countdown, a shelf price tag and a departures board. Deterministic, small, and
quick to make."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from .synth import cfr_times, write_video

W, H = 640, 360
RATE = 30


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def _canvas(colour: tuple[int, int, int]) -> tuple[Image.Image, ImageDraw.ImageDraw]:
    img = Image.new("RGB", (W, H), colour)
    return img, ImageDraw.Draw(img)


def _centered(draw: ImageDraw.ImageDraw, text: str, y: int, size: int, fill: str | tuple[int, int, int]) -> None:
    font = _font(size)
    box = draw.textbbox((0, 0), text, font=font)
    draw.text(((W - (box[2] - box[0])) / 2, y), text, font=font, fill=fill)


def shapes(k: int, t: float) -> np.ndarray:
    """A red ball bouncing left to right and a blue square circling, on grey."""
    img, draw = _canvas((200, 200, 200))
    x = 40 + (W - 80) * abs(((t / 4.0) % 2) - 1)
    draw.ellipse((x - 30, 150, x + 30, 210), fill=(220, 30, 30))
    cx, cy = W / 2 + 120 * np.cos(t), H / 2 + 80 * np.sin(t)
    draw.rectangle((cx - 25, cy - 25, cx + 25, cy + 25), fill=(30, 60, 220))
    return np.asarray(img)


def text_sign(k: int, t: float) -> np.ndarray:
    """A shop sign and a nutrition label, slowly panning: text to read."""
    img, draw = _canvas((245, 240, 225))
    dx = int(10 * np.sin(t))
    draw.rectangle((40 + dx, 30, 600 + dx, 130), fill=(20, 90, 40))
    _centered(draw, "GREEN LEAF CAFE", 50, 44, "white")
    _centered(draw, "OPEN 8 AM - 6 PM", 150, 36, "black")
    draw.rectangle((170 + dx, 210, 470 + dx, 340), outline="black", width=3)
    _centered(draw, "Nutrition Facts", 218, 28, "black")
    _centered(draw, "Calories 150 per 2 cookies", 262, 22, "black")
    _centered(draw, "Sugar 9 g", 298, 22, "black")
    return np.asarray(img)


def scene_cut(k: int, t: float) -> np.ndarray:
    """A beach at sunset for 4 s, then a hard cut to a green garden with a red barn."""
    if t < 4.0:
        img, draw = _canvas((250, 170, 90))
        draw.rectangle((0, 230, W, H), fill=(230, 210, 150))
        sun_y = 120 + 15 * t
        draw.ellipse((280, sun_y, 360, sun_y + 80), fill=(255, 90, 40))
        _centered(draw, "BEACH", 20, 32, "white")
    else:
        img, draw = _canvas((120, 180, 240))
        draw.rectangle((0, 200, W, H), fill=(60, 160, 60))
        draw.rectangle((400, 120, 560, 240), fill=(170, 30, 30))
        draw.polygon([(390, 120), (480, 60), (570, 120)], fill=(120, 20, 20))
        for i in range(6):
            x = 40 + 55 * i + int(5 * np.sin(t + i))
            draw.ellipse((x, 250, x + 30, 280), fill=(250, 220, 40))
        _centered(draw, "GARDEN", 20, 32, "white")
    return np.asarray(img)


def countdown(k: int, t: float) -> np.ndarray:
    """10 down to 1, one number per second, with a sweeping hand."""
    img, draw = _canvas((20, 20, 30))
    number = 10 - int(t)
    _centered(draw, str(number), 90, 150, "white")
    angle = 2 * np.pi * (t % 1.0)
    draw.line((W / 2, H / 2, W / 2 + 160 * np.sin(angle), H / 2 - 160 * np.cos(angle)), fill="orange", width=4)
    return np.asarray(img)


def price_tag(k: int, t: float) -> np.ndarray:
    """A supermarket shelf tag for apples, the camera drifting slightly."""
    img, draw = _canvas((90, 60, 40))
    dy = int(6 * np.sin(t / 2))
    draw.rectangle((120, 70 + dy, 520, 290 + dy), fill=(250, 230, 60), outline="black", width=3)
    _centered(draw, "ORGANIC APPLES", 90 + dy, 34, "black")
    _centered(draw, "$3.49", 140 + dy, 90, (200, 20, 20))
    _centered(draw, "per lb", 250 + dy, 26, "black")
    return np.asarray(img)


def departures(k: int, t: float) -> np.ndarray:
    """A station's departures board in 24-hour time, its clock ticking."""
    img, draw = _canvas((15, 15, 60))
    _centered(draw, "DEPARTURES", 20, 34, (255, 210, 60))
    draw.text((60, 110), "14:35", font=_font(40), fill="white")
    draw.text((220, 110), "HARBOUR CITY", font=_font(40), fill="white")
    draw.text((60, 190), "15:10", font=_font(40), fill="white")
    draw.text((220, 190), "NORTH PARK", font=_font(40), fill="white")
    _centered(draw, f"PLATFORM 4   {14 + int(t) // 60:02d}:{20 + int(t):02d}", 290, 28, (255, 210, 60))
    return np.asarray(img)


CLIPS: dict[str, tuple[Callable[[int, float], np.ndarray], float]] = {
    "shapes.mp4": (shapes, 10.0),
    "text_sign.mp4": (text_sign, 6.0),
    "scene_cut.mp4": (scene_cut, 8.0),
    "countdown.mp4": (countdown, 10.0),
    "price_tag.mp4": (price_tag, 4.0),
    "departures.mp4": (departures, 4.0),
}


def make_examples(directory: str | Path, overwrite: bool = False) -> list[Path]:
    """Write the example clips into `directory` (skipping ones already there)."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (render, seconds) in CLIPS.items():
        path = out / name
        if overwrite or not path.exists() or path.stat().st_size == 0:
            tmp = path.with_suffix(".part.mp4")
            write_video(tmp, render, cfr_times(seconds, RATE), size=(W, H), rate=RATE, gop=60)
            tmp.replace(path)
        written.append(path)
    return written
