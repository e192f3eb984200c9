"""On-screen text: the question classifier, the claim matching, the real OCR models on generated
clips with known text, the reference judge following the screen, and the judge without OCR."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from framejudge.examples.clips import departures, price_tag
from framejudge.examples.synth import cfr_times, write_video
from framejudge.frame_sampler import sample_frames
from framejudge.judge import Grader, ReferenceJudge, eyes
from framejudge.judge.base import unused_options
from framejudge.judge.batch import summarize
from framejudge.judge import values
from framejudge.judge.screen import check_answer, close, read_values, text_kinds
from framejudge.rubrics import get_rubric
from framejudge.schema import Category, GradeOptions, Item, Preference, ReadText, Verdict

RUBRIC = get_rubric("video-qa")
ROOT = Path(__file__).parents[2]
W, H = 640, 360

needs_ocr = pytest.mark.skipif(eyes.unavailable() is not None, reason=str(eyes.unavailable()))


# ----------------------------------------------------------------------------- questions and claims

@pytest.mark.parametrize("question,expected", [
    ("What does the sign say?", True),
    ("What number is on the door?", True),
    ("How much does this cost?", True),
    ("What's the price of the apples?", True),
    ("What time does the shop open?", True),
    ("When does this cafe open?", True),
    ("What's on the screen?", True),
    ("What does the label say?", True),
    ("Read me the menu.", True),
    ("What was the last number on screen?", True),
    ("What's the name of this place?", True),
    ("How many calories are in two cookies?", True),
    ("What colour is the barn?", False),
    ("How many people are on the bench?", False),
    ("How old does the person behind the counter look?", False),
    ("Where am I right now?", False),
    ("What is moving in this video?", False),
    ("Is this healthy to watch before bed?", False),
    ("How much does this bag weigh?", False),
    ("What is the licence plate number?", False),  # personal information is not read out
    ("Can you read the credit card number?", False),
])
def test_text_questions_are_told_from_the_others(question, expected):
    assert bool(text_kinds(question)) is expected


def _read(text: str, kind: str) -> list:
    return [v.meanings for v in read_values(text) if v.kind == kind]


def test_times_numbers_and_words_are_normalised():
    assert set(_read("OPEN8AM-6PM", values.TIME)) == {frozenset({(480, None)}), frozenset({(1080, None)})}
    assert _read("departs 14:35", values.TIME) == [frozenset({(875, None)})]
    assert _read("at 2:35 pm", values.TIME) == [frozenset({(875, None)})]
    assert _read("at 2:35", values.TIME) == [frozenset({(155, None), (875, None)})]  # no am/pm: either
    assert _read("noon", values.TIME) == [frozenset({(720, None)})]
    # OCR ran "PLATFORM 4" into the clock beside it
    assert _read("PLATFORM 414:20", values.TIME) == [frozenset({(860, None)})]
    assert frozenset({4.0}) in _read("PLATFORM 414:20", values.NUMBER)
    assert _read("$3.49", values.PRICE) == [frozenset({("USD", 3.49)})]
    assert _read("3,49 €", values.PRICE) == [frozenset({("EUR", 3.49)})]
    assert _read("1,200 people", values.NUMBER) == [frozenset({1200.0})]
    assert _read("two cookies", values.NUMBER) == [frozenset({2.0})]
    assert close("cafe", "cafe") and close("opens", "open") and close("nutrition", "nutritlon")
    assert not close("door", "per") and not close("bakery", "cafe")


def lines(*texts: str, at: float = 1.0) -> list[ReadText]:
    return [ReadText(timestamp=at, text=t, score=0.99, box=[0, 0, 10, 10]) for t in texts]


@pytest.mark.parametrize("question,answer,stated", [
    ("What time does the train leave?", "It leaves at 2:35 PM.", True),
    ("What time does the train leave?", "At 3:45 PM.", False),
    ("How much are the apples?", "The tag says $3.49 a pound.", True),
    ("How much are the apples?", "They're 2.99 dollars.", False),
    ("What does the sign say?", "It says Harbour City.", True),
    ("What does the sign say?", "It says North Park.", False),
    ("What does the sign say?", "It says Harbour Park.", None),  # half of it read: unsettled
    ("What time does the train leave?", "I can't make out the board.", None),  # no claim
])
def test_answers_against_the_lines_read(question, answer, stated):
    read = lines("DEPARTURES", "14:35 HARBOURCITY", "$3.49 per Ib")
    check = check_answer(question, answer, read)
    assert (check.states_screen if check else None) is stated


def test_the_last_value_is_the_latest_frame_showing_one():
    read = lines("10", at=0.5) + lines("5", at=5.5) + lines("2", at=8.5)
    q = "What number did the countdown end on?"
    assert check_answer(q, "It ended on 2.", read).states_screen
    assert not check_answer(q, "It ended on 5.", read).states_screen  # shown earlier, not at the end
    assert check_answer(q, "It ended on 1.", read) is None  # after the last frame read: unsettled


# ----------------------------------------------------------------------------- the real OCR models

def _text_frame(text: str, size: int, fg=(0, 0, 0), bg=(245, 240, 225), angle: float = 0.0) -> np.ndarray:
    font = ImageFont.load_default(size=size)
    probe = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    box = probe.textbbox((0, 0), text, font=font)
    patch = Image.new("RGB", (box[2] - box[0] + 20, box[3] - box[1] + 20), bg)
    ImageDraw.Draw(patch).text((10 - box[0], 10 - box[1]), text, font=font, fill=fg)
    if angle:
        patch = patch.rotate(angle, expand=True, fillcolor=bg)
    img = Image.new("RGB", (W, H), bg)
    img.paste(patch, ((W - patch.width) // 2, (H - patch.height) // 2))
    return np.asarray(img)


CASES = {
    "large": (lambda: _text_frame("EXIT 42", 96), "exit 42"),
    "small": (lambda: _text_frame("Platform 7 closes at 23:15", 15), "platform 7 closes at 23:15"),
    "rotated": (lambda: _text_frame("STOP AHEAD", 60, angle=15), "stop ahead"),
    "low_contrast": (lambda: _text_frame("SALE 30%", 64, fg=(150, 150, 150), bg=(120, 120, 120)), "sale 30%"),
}


@pytest.fixture(scope="module")
def text_clips(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("text-clips")
    out = {}
    for name, (make, _) in CASES.items():
        frame = make()
        out[name] = write_video(folder / f"{name}.mp4", lambda k, t, f=frame: f, cfr_times(1.0, 10), size=(W, H), rate=10)
    rng = np.random.default_rng(3)
    out["no_text"] = write_video(folder / "no_text.mp4", lambda k, t: _scene(rng, k), cfr_times(1.0, 10),
                                 size=(W, H), rate=10)
    return out


def _scene(rng: np.random.Generator, k: int) -> np.ndarray:
    img = Image.new("RGB", (W, H), (110, 160, 220))
    draw = ImageDraw.Draw(img)
    draw.rectangle((0, 220, W, H), fill=(70, 150, 70))
    draw.ellipse((60 + 10 * k, 60, 160 + 10 * k, 160), fill=(250, 220, 60))
    return np.asarray(img)


def _flat(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


@needs_ocr
@pytest.mark.parametrize("name", list(CASES))
def test_the_ocr_reads_rendered_text(text_clips, name):
    result = sample_frames(text_clips[name], n=2, cache=None)
    read = eyes.read_frames(result.frames)
    expected = CASES[name][1]
    seen = " ".join(r.text for r in read)
    assert _flat(expected) in _flat(seen), seen
    assert {r.timestamp for r in read} == set(result.timestamps)  # every frame read, with its time
    for r in read:
        x0, y0, x1, y1 = r.box
        assert 0 <= x0 < x1 <= W + 2 and 0 <= y0 < y1 <= H + 2 and 0.5 <= r.score <= 1


@needs_ocr
def test_a_clip_without_text_reads_nothing_worth_a_word(text_clips):
    read = eyes.read_frames(sample_frames(text_clips["no_text"], n=4, cache=None).frames)
    assert not [r for r in read if sum(ch.isalnum() for ch in r.text) >= 3], read


@needs_ocr
def test_coloured_text_reads_from_the_samplers_rgb_frames():
    """Frames come from the sampler as RGB; red text on blue reads the same as the sampler gives it."""
    frame = _text_frame("OPEN 24 HOURS", 56, fg=(230, 20, 20), bg=(20, 40, 160))

    class F:
        image, timestamp = frame, 0.0

    assert "open24hours" in _flat(" ".join(r.text for r in eyes.read_frames([F()])))


def test_a_still_frame_is_not_read_twice():
    a = _text_frame("EXIT 42", 96)
    noisy = np.clip(a.astype(int) + np.random.default_rng(0).integers(-2, 3, a.shape), 0, 255).astype(np.uint8)
    changed = _text_frame("EXIT 43", 96)
    assert eyes.same_picture(a, noisy)
    assert not eyes.same_picture(a, changed)  # one digit differs


# ----------------------------------------------------------------------------- the judge follows the screen

@pytest.fixture(scope="module")
def screen_clips(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("screen")
    write_video(folder / "price_tag.mp4", price_tag, cfr_times(2.0, 10), size=(W, H), rate=10)
    write_video(folder / "departures.mp4", departures, cfr_times(2.0, 10), size=(W, H), rate=10)
    return folder


def _items() -> list[Item]:
    return [
        Item(id="price", video="price_tag.mp4", turns=[{
            "question": "How much do the apples cost?", "golden": "They cost $2.99 a pound.",
            "response_a": "The tag says $3.49 per pound.", "response_b": "They're $2.99 a pound."}]),
        Item(id="train", video="departures.mp4", turns=[{
            "question": "What time does the train to Harbour City leave?", "golden": "It leaves at 3:45 PM.",
            "response_a": "The Harbour City train leaves at 3:45 PM.", "response_b": "It departs at 2:35 PM."}]),
        Item(id="colour", video="price_tag.mp4", turns=[{
            "question": "What colour is the tag?", "golden": "It is yellow.", "response_a": "The tag is yellow."}]),
    ]


class Counting:
    """The real sampler, counting the turns that asked for frames."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, path, params):
        self.calls.append(Path(path).name)
        return sample_frames(path, params, cache=None)


@needs_ocr
def test_the_judge_follows_the_screen_over_a_wrong_golden_response(screen_clips):
    sampler = Counting()
    grader = Grader(ReferenceJudge(), RUBRIC, media_root=screen_clips, sample=sampler)
    price, train, colour = [asyncio.run(grader.grade(item))[0] for item in _items()]
    assert all(isinstance(v, Verdict) for v in (price, train, colour))
    assert (price.response_a.category, price.response_b.category) == (Category.successful, Category.not_successful)
    assert price.preference is Preference.A and "3.49" in price.response_a.rationale
    assert "would be Not Successful" in price.response_a.rationale  # the golden response said otherwise
    assert (train.response_a.category, train.response_b.category) == (Category.not_successful, Category.successful)
    assert train.preference is Preference.B and "14:35" in train.response_b.rationale  # 2:35 PM is 14:35
    for v in (price, train):
        assert v.response_a.evidence_timestamps and set(v.response_a.evidence_timestamps) <= set(v.provenance.frame_timestamps)
        assert v.provenance.read_text and any(r.used for r in v.provenance.read_text)
        assert any("RapidOCR" in n for n in v.provenance.notes)
    assert any(r.used and "3.49" in r.text for r in price.provenance.read_text)
    # the colour question is not about text: no frames decoded, nothing read
    assert sampler.calls == ["price_tag.mp4", "departures.mp4"]
    assert colour.provenance.frame_timestamps == [] and colour.provenance.read_text is None
    assert summarize([price, train, colour], 3).used_screen_text == 2


@needs_ocr
def test_the_blind_control_grades_the_read_turns_again_without_the_screen(screen_clips):
    grader = Grader(ReferenceJudge(), RUBRIC, GradeOptions(blind=True, cache=False), media_root=screen_clips)
    price, train, colour = [asyncio.run(grader.grade(item))[0] for item in _items()]
    # the screen overruled the wrong golden response: without the frames the verdict is another one
    assert price.blind_unchanged is False and train.blind_unchanged is False
    # a turn that reads no frames has no blind control
    assert colour.blind_unchanged is None
    agreeing = Item(id="same", video="price_tag.mp4", turns=[{
        "question": "How much do the apples cost?", "golden": "They cost $3.49 a pound.",
        "response_a": "The tag says $3.49 per pound."}])
    [same] = asyncio.run(grader.grade(agreeing))
    assert same.blind_unchanged is True  # the screen and the golden response say the same


def test_blind_is_refused_where_the_reference_judge_reads_nothing():
    assert "reading on-screen text is off" in unused_options(ReferenceJudge(read_text=False), "reference", 1, True)
    if eyes.unavailable() is None:
        assert unused_options(ReferenceJudge(), "reference", 1, True) is None


def test_questions_not_about_text_never_decode(tmp_path):
    """Without even a video file that decodes: the judge asks for no frames for these turns."""
    sampler = Counting()
    (tmp_path / "clip.mp4").write_bytes(b"not a video at all")
    grader = Grader(ReferenceJudge(), RUBRIC, media_root=tmp_path, sample=sampler)
    items = [Item(id="x", video="clip.mp4", turns=[{"question": "What colour is the car?", "golden": "Red.",
                                                    "response_a": "It is red.", "response_b": "Blue."}]),
             Item(id="y", video="clip.mp4", turns=[{"question": "How many people are there?", "response_a": "Two."}])]
    records = [r for item in items for r in asyncio.run(grader.grade(item))]
    assert all(isinstance(r, Verdict) and r.provenance.frame_timestamps == [] for r in records)
    assert sampler.calls == []


BLOCK = """
import sys
sys.modules["rapidocr_onnxruntime"] = None  # importing it raises ImportError, as when it is not installed
"""


def test_without_the_ocr_package_the_judge_grades_as_before_and_says_so(tmp_path, screen_clips):
    (tmp_path / "block").mkdir()
    (tmp_path / "block" / "sitecustomize.py").write_text(BLOCK)
    items = tmp_path / "items.jsonl"
    items.write_text("".join(i.model_dump_json() + "\n" for i in _items()))
    out = tmp_path / "v.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "block"), str(ROOT)])}
    proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "grade", str(items), "--out", str(out),
                           "--media-root", str(screen_clips)], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    verdicts = {v["item_id"]: v for v in map(json.loads, out.read_text().splitlines())}
    price, train = verdicts["price"], verdicts["train"]
    # the text rules alone: the (wrong) golden response decides
    assert (price["response_a"]["category"], price["response_b"]["category"]) == ("Not Successful", "Successful")
    assert (train["response_a"]["category"], train["response_b"]["category"]) == ("Successful", "Not Successful")
    for v in (price, train):
        assert v["provenance"]["frame_timestamps"] == [] and v["provenance"]["read_text"] is None
        assert any("on-screen text not read" in n and "pip install '.[eyes]'" in n for n in v["provenance"]["notes"])
    # nothing about on-screen text where no text was asked about
    assert not any("on-screen text" in n for n in verdicts["colour"]["provenance"]["notes"])
    assert json.loads(proc.stdout)["used_screen_text"] == 0
    if eyes.unavailable() is not None:
        return
    # With the OCR back, the verdicts graded without it are graded differently: refused, then regraded
    env["PYTHONPATH"] = str(ROOT)
    again = [sys.executable, "-m", "framejudge.cli", "grade", str(items), "--out", str(out), "--media-root", str(screen_clips)]
    proc = subprocess.run(again, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 2 and "on-screen text: not read in the file, read now" in proc.stderr, proc.stderr
    proc = subprocess.run([*again, "--regrade"], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "2 verdict(s) graded differently" in proc.stderr and json.loads(proc.stdout)["used_screen_text"] == 2


# ----------------------------------------------------------------------------- real footage

@needs_ocr
@pytest.mark.shared
def test_real_footage_of_a_keyboard(shared_dir):
    """A phone clip of a keyboard (stored upside down, shown upright): the keys' labels are read,
    and the judge grades answers about them by what was read."""
    clip = shared_dir / "research-data/video-assets/decord/video_180.mov"
    if not clip.exists():
        pytest.skip(f"{clip} is absent")
    read = eyes.read_frames(sample_frames(clip, n=2, cache=None).frames)
    seen = {r.text for r in read}
    assert {"PgUp", "PgDn", "Ctrl"} <= seen, seen
    item = Item(id="keys", video=str(clip), turns=[{
        "question": "What do the keys say?", "golden": "F1 and Esc.",
        "response_a": "They read PgDn and PrtSc.", "response_b": "They read Home and Insert."}])
    j, checks, *_ = ReferenceJudge().decide_with(RUBRIC, item, 0, read)
    assert (j.response_a.category, j.response_b.category) == (Category.successful, Category.not_successful)
    assert len(checks) == 2 and j.response_a.evidence_timestamps
