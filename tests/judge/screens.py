"""Scenes with on-screen values, each beside distractor text that shares parts of it: a clock with
seconds beside a humidity of 46 %, a door plate beside a phone number, a gate code beside a flight
number. Rendered with PIL into short still clips with PyAV, and what the OCR must read on each.

Shared by the tests of the screen rules (tests/judge/test_screen_values.py) and any other test
that needs values on screen; nothing here grades anything.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from framejudge.examples.synth import cfr_times, write_video

W, H = 640, 360
Draw = ImageDraw.ImageDraw


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def _text(draw: Draw, xy: tuple[float, float], text: str, size: int, fill, centre: bool = False) -> None:
    font = _font(size)
    x, y = xy
    if centre:
        box = draw.textbbox((0, 0), text, font=font)
        x -= (box[2] - box[0]) / 2
    draw.text((x, y), text, font=font, fill=fill)


def _scene(bg) -> tuple[Image.Image, Draw]:
    img = Image.new("RGB", (W, H), bg)
    return img, ImageDraw.Draw(img)


def clock_seconds() -> np.ndarray:
    """A bedside clock with seconds; beside it a humidity reading that shares "46" with a wrong answer."""
    img, d = _scene((30, 30, 34))
    d.rounded_rectangle((90, 60, 550, 210), 18, fill=(8, 8, 8), outline=(90, 90, 90), width=4)
    _text(d, (W / 2, 90), "06:41:49", 84, (60, 230, 90), centre=True)
    _text(d, (W / 2, 250), "HUMIDITY 46%", 30, (230, 230, 230), centre=True)
    return np.asarray(img)


def clock_am() -> np.ndarray:
    """A 12-hour clock showing the morning; beside it the day of the month."""
    img, d = _scene((235, 235, 240))
    d.rounded_rectangle((110, 70, 530, 200), 16, fill=(20, 20, 20))
    _text(d, (W / 2, 100), "06:41 AM", 72, (240, 240, 240), centre=True)
    _text(d, (W / 2, 240), "TUE OCT 20", 32, (40, 40, 40), centre=True)
    return np.asarray(img)


def clock_24h() -> np.ndarray:
    """A 24-hour clock at nine in the evening; beside it a channel number 9."""
    img, d = _scene((20, 24, 40))
    _text(d, (W / 2, 80), "21:00", 110, (255, 120, 40), centre=True)
    _text(d, (W / 2, 250), "CHANNEL 9", 30, (220, 220, 220), centre=True)
    return np.asarray(img)


def date_stamp() -> np.ndarray:
    """A dashcam frame: road and sky, and the recorder's stamp along the bottom edge."""
    img, d = _scene((120, 150, 190))
    d.rectangle((0, 170, W, H), fill=(70, 70, 70))
    d.polygon([(300, 170), (340, 170), (420, H), (220, H)], fill=(95, 95, 95))
    d.rectangle((0, 318, W, H), fill=(0, 0, 0))
    _text(d, (12, 326), "2020/10/19 06:41:49", 24, "white")
    _text(d, (330, 326), "0Km/h", 24, "white")
    _text(d, (450, 326), "13.8V", 24, "white")
    return np.asarray(img)


def door() -> np.ndarray:
    """A door with its room plate; on the wall beside it a notice with a phone number."""
    img, d = _scene((214, 205, 190))
    d.rectangle((60, 40, 300, H), fill=(120, 80, 50))
    d.rectangle((80, 88, 280, 152), fill=(245, 245, 245), outline=(40, 40, 40), width=3)
    _text(d, (180, 102), "ROOM 404", 34, (20, 20, 20), centre=True)
    d.ellipse((265, 220, 285, 240), fill=(200, 180, 90))
    d.rectangle((350, 110, 610, 250), fill=(255, 255, 235), outline=(60, 60, 60), width=2)
    _text(d, (480, 130), "LOST KEYS?", 30, (20, 20, 20), centre=True)
    _text(d, (480, 185), "Call 555-0199", 30, (20, 20, 20), centre=True)
    return np.asarray(img)


def speed_sign() -> np.ndarray:
    """A speed limit sign, and a green exit sign beside it."""
    img, d = _scene((150, 190, 230))
    d.rectangle((0, 260, W, H), fill=(90, 140, 70))
    d.rectangle((120, 40, 300, 260), fill="white", outline="black", width=5)
    _text(d, (210, 60), "SPEED", 36, "black", centre=True)
    _text(d, (210, 100), "LIMIT", 36, "black", centre=True)
    _text(d, (210, 145), "50", 96, "black", centre=True)
    d.rectangle((380, 90, 560, 170), fill=(0, 110, 60), outline="white", width=3)
    _text(d, (470, 110), "EXIT 7", 36, "white", centre=True)
    return np.asarray(img)


def price_usd() -> np.ndarray:
    """A shelf tag in dollars; its product code below the price."""
    img, d = _scene((90, 60, 40))
    d.rectangle((120, 60, 520, 300), fill=(250, 230, 60), outline="black", width=3)
    _text(d, (W / 2, 80), "GALA APPLES", 34, "black", centre=True)
    _text(d, (W / 2, 130), "$3.49", 90, (200, 20, 20), centre=True)
    _text(d, (W / 2, 250), "PLU 4133", 26, "black", centre=True)
    return np.asarray(img)


def price_eur() -> np.ndarray:
    """A clothes tag in euros, with a decimal comma, and the size. (The euro sign itself is not in
    the OCR model's alphabet: "€12.50" reads as "≥12.50"; the tag spells the currency out.)"""
    img, d = _scene((200, 200, 205))
    d.rectangle((140, 50, 500, 310), fill="white", outline=(30, 30, 30), width=3)
    _text(d, (W / 2, 70), "T-SHIRT", 34, "black", centre=True)
    _text(d, (W / 2, 135), "12,50 EUR", 64, "black", centre=True)
    _text(d, (W / 2, 250), "SIZE M", 28, "black", centre=True)
    return np.asarray(img)


def departures() -> np.ndarray:
    """An airport departures board: one flight, its number, gate and time."""
    img, d = _scene((10, 14, 50))
    _text(d, (W / 2, 24), "DEPARTURES", 36, (255, 210, 60), centre=True)
    for x, head in ((30, "FLIGHT"), (190, "TO"), (410, "GATE"), (520, "TIME")):
        _text(d, (x, 110), head, 22, (170, 170, 200))
    for x, cell in ((30, "TP 950"), (190, "LISBON"), (410, "B32"), (520, "09:05")):
        _text(d, (x, 160), cell, 36, "white")
    return np.asarray(img)


def locker_code() -> np.ndarray:
    """A parcel locker's screen with a plate-like pickup code; the locker number beside it."""
    img, d = _scene((60, 60, 66))
    d.rectangle((100, 50, 540, 310), fill=(225, 240, 250), outline=(20, 20, 20), width=4)
    _text(d, (W / 2, 70), "PICKUP CODE", 32, (20, 20, 60), centre=True)
    _text(d, (W / 2, 125), "7HX-429", 80, (0, 0, 0), centre=True)
    _text(d, (W / 2, 245), "LOCKER 29", 30, (20, 20, 60), centre=True)
    return np.asarray(img)


def cafe_offer() -> np.ndarray:
    """A café's price board: one flat white at a decimal-comma price, and a multi-buy below it.
    (The euro sign is not in the OCR model's alphabet, so the board spells the currency out.)"""
    img, d = _scene((250, 245, 230))
    _text(d, (W / 2, 60), "FLAT WHITE", 40, "black", centre=True)
    _text(d, (W / 2, 130), "EUR 12,50", 70, "black", centre=True)
    _text(d, (W / 2, 240), "2 FOR EUR 20", 40, "black", centre=True)
    return np.asarray(img)


def gate_sign() -> np.ndarray:
    """A gate sign in large letters: the OCR reads it without its space, "GATEB12"."""
    img, d = _scene((20, 30, 60))
    _text(d, (W / 2, 120), "GATE B12", 90, (255, 220, 0), centre=True)
    return np.asarray(img)


def lift_notice() -> np.ndarray:
    """A notice in a lift: the OCR reads "NOMORETHAN6PEOPLE"."""
    img, d = _scene((200, 200, 200))
    d.rectangle((100, 60, 540, 300), fill="white", outline="black", width=4)
    _text(d, (W / 2, 100), "LIFT", 40, "black", centre=True)
    _text(d, (W / 2, 170), "NO MORE THAN 6 PEOPLE", 34, "black", centre=True)
    return np.asarray(img)


def thermometer() -> np.ndarray:
    """An outdoor thermometer below freezing: the OCR runs the word into the sign, "OUTSIDE-12°C"."""
    img, d = _scene((10, 10, 20))
    _text(d, (W / 2, 140), "OUTSIDE -12°C", 60, "white", centre=True)
    return np.asarray(img)


def no_parking() -> np.ndarray:
    """A no-parking sign."""
    img, d = _scene((10, 10, 20))
    _text(d, (W / 2, 140), "NO PARKING", 60, "white", centre=True)
    return np.asarray(img)


# clip name -> (scene, the texts the OCR must read on it, as they appear on screen)
SCENES: dict[str, tuple[Callable[[], np.ndarray], tuple[str, ...]]] = {
    "clock_seconds": (clock_seconds, ("06:41:49", "HUMIDITY 46%")),
    "clock_am": (clock_am, ("06:41 AM", "TUE OCT 20")),
    "clock_24h": (clock_24h, ("21:00", "CHANNEL 9")),
    "date_stamp": (date_stamp, ("2020/10/19", "06:41:49")),
    "door": (door, ("ROOM 404", "Call 555-0199")),
    "speed_sign": (speed_sign, ("SPEED", "LIMIT", "50", "EXIT 7")),
    "price_usd": (price_usd, ("GALA APPLES", "$3.49", "PLU 4133")),
    "price_eur": (price_eur, ("T-SHIRT", "12,50 EUR", "SIZE M")),
    "departures": (departures, ("DEPARTURES", "TP 950", "LISBON", "B32", "09:05")),
    "locker_code": (locker_code, ("PICKUP CODE", "7HX-429", "LOCKER 29")),
    "cafe_offer": (cafe_offer, ("EUR 12,50", "2 FOR EUR 20")),
    "gate_sign": (gate_sign, ("GATEB12",)),
    "lift_notice": (lift_notice, ("LIFT", "NOMORETHAN6PEOPLE")),
    "thermometer": (thermometer, ("OUTSIDE-12°C",)),
    "no_parking": (no_parking, ("NO PARKING",)),
}


def write_clips(folder: Path, seconds: float = 1.0, rate: int = 10) -> dict[str, Path]:
    """Each scene as a still clip `<name>.mp4` in `folder` (a second at 10 fps by default)."""
    out = {}
    for name, (scene, _) in SCENES.items():
        frame = scene()
        out[name] = write_video(folder / f"{name}.mp4", lambda k, t, f=frame: f, cfr_times(seconds, rate),
                                size=(W, H), rate=rate)
    return out


def flat(text: str) -> str:
    """Letters, digits and the signs that carry a value ($ % : / - . ,), lower case, nothing else:
    how a text read is compared with the text rendered (OCR drops and adds spaces)."""
    return "".join(ch for ch in text.lower() if ch.isalnum() or ch in "$%:/-.,")
