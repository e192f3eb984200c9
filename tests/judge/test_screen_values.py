"""Values on screen compared whole (values read by their parts, claims contradicting the screen, a
value shown elsewhere, bare yes and no), with the real OCR and the real reference judge.

Each clip (tests/judge/screens.py) shows a value beside distractor text that shares parts of it: a
clock at 06:41:49 beside "HUMIDITY 46%", a door plate "ROOM 404" beside "Call 555-0199", gate "B32"
beside flight "TP 950". Every clip is read once per module; the reading is checked first (what the
OCR must read on each clip), so a failing grade says the judging went wrong, not the reading.

The classes, each with cases on both sides:
1. whole values: times (seconds, 12/24-hour, leading zero or not), dates, phone numbers, prices with
   their currency and codes agree as whole values, never by a shared part;
2. every claim of the asked kind counts: a contradicted claim, a negated claim taken as stated,
   several incompatible candidates or text that was not read make an answer not Successful; number
   words count as numbers; a refusal to read is Missing;
3. a golden response that the screen confirms stands against a value shown elsewhere on screen;
4. a bare yes/no whose polarity matches the golden response is an answer (and these are text
   rules: they hold without any reads too).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from framejudge.frame_sampler import sample_frames
from framejudge.judge import Grader, ReferenceJudge, eyes
from framejudge.rubrics import get_rubric
from framejudge.schema import Category, GradeOptions, Item, Preference, ReadText, SamplerParams, Verdict

from .screens import SCENES, flat, write_clips

RUBRIC = get_rubric("video-qa")
ROOT = Path(__file__).parents[2]
FRAMES = 2  # frames sampled per clip: the clips are still, so the second is not read again

S, NS, MISSING = Category.successful, Category.not_successful, Category.missing


# ----------------------------------------------------------------------------- the clips, read once

@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> dict[str, Path]:
    return write_clips(tmp_path_factory.mktemp("screen-values"))


@pytest.fixture(scope="module")
def screens(clips) -> dict[str, list[ReadText]]:
    """What the OCR reads on each clip, FRAMES frames each; read once for the module."""
    if eyes.unavailable() is not None:
        pytest.skip(str(eyes.unavailable()))
    return {name: eyes.read_frames(sample_frames(path, n=FRAMES, cache=None).frames) for name, path in clips.items()}


def read(screens: dict[str, list[ReadText]], clip: str) -> list[ReadText]:
    """The lines read on a clip, once it is checked that they hold what the clip shows."""
    reads = screens[clip]
    seen = flat(" ".join(r.text for r in reads))
    missing = [t for t in SCENES[clip][1] if flat(t) not in seen]
    assert not missing, f"reading, not judging, failed: {missing} not read on {clip} (read: {[r.text for r in reads]})"
    return reads


@pytest.mark.parametrize("clip", list(SCENES))
def test_the_ocr_reads_each_clip(screens, clip):
    reads = read(screens, clip)
    assert {r.timestamp for r in reads} == {0.2, 0.7}  # both frames, the second from the first's read
    assert all(r.score >= eyes.MIN_SCORE for r in reads)


def decide(question: str, golden: str | None, a: str, b: str | None = None, reads=(), video: str | None = "clip.mp4"):
    """The reference judge's judgement for one turn, graded against the lines read."""
    item = Item(id="screen", video=video, turns=[{"question": question, "golden": golden, "response_a": a,
                                                  "response_b": b}])
    judgement, *_ = ReferenceJudge().decide_with(RUBRIC, item, 0, list(reads))
    return judgement


def category(question: str, golden: str | None, answer: str, reads=()) -> Category:
    return decide(question, golden, answer, reads=reads).response_a.category


# ----------------------------------------------------------------------------- 1. whole values

CLOCK_S = ("clock_seconds", "What time does the clock show?", "06:41:49.")
CLOCK_AM = ("clock_am", "What time is on the clock?", "It's 6:41 AM.")
CLOCK_AM_SAYS = ("clock_am", "What does the clock say?", "It says 6:41 AM.")
CLOCK_24 = ("clock_24h", "What time does the clock say?", "9 PM.")
DATE = ("date_stamp", "What date is stamped on the footage?", "19 October 2020.")
STAMP_TIME = ("date_stamp", "What time is stamped on the footage?", "06:41:49.")
ROOM = ("door", "What room number is on the door?", "Room 404.")
PHONE = ("door", "What number does the notice say to call?", "555-0199.")
SPEED = ("speed_sign", "What speed limit does the sign show?", "50.")
USD = ("price_usd", "How much do the apples cost?", "$3.49 a pound.")
EUR = ("price_eur", "How much is the T-shirt?", "12.50 euros.")
DEPART = ("departures", "What time does the flight to Lisbon leave?", "It leaves at 09:05.")
BOARD = ("departures", "What does the departures board say about the Lisbon flight?",
         "Flight TP 950 to Lisbon leaves from gate B32 at 09:05.")
GATE = ("departures", "Which gate does the Lisbon flight leave from?", "Gate B32.")
CODE = ("locker_code", "What code is on the locker's screen?", "7HX-429.")

WHOLE_VALUES = [
    # times with seconds: the seconds count
    (CLOCK_S, "06:41:49", S),
    (CLOCK_S, "It shows 6:41:49.", S),  # no leading zero: the same time
    (CLOCK_S, "It's 6:41.", S),  # to the minute: states no seconds, so none that disagree
    (CLOCK_S, "06:41:46", NS),  # 46 is read, but in "HUMIDITY 46%"
    (CLOCK_S, "06:14:49", NS),  # the same parts in another order
    # 12-hour clocks: AM and PM are different times
    (CLOCK_AM, "6:41 AM", S),
    (CLOCK_AM, "06:41", S),
    (CLOCK_AM, "6:41 PM", NS),
    (CLOCK_AM, "18:41", NS),
    (CLOCK_AM, "It's 7:41 AM.", NS),
    (CLOCK_AM_SAYS, "It says 6:41 AM.", S),
    (CLOCK_AM_SAYS, "It says 6:41 PM.", NS),  # a question about what it says: its digits 6 and 41 are read
    # 24-hour clocks: 21:00 is 9 PM
    (CLOCK_24, "21:00", S),
    (CLOCK_24, "9 PM", S),
    (CLOCK_24, "It's 9:00 p.m.", S),
    (CLOCK_24, "9 AM", NS),
    (CLOCK_24, "9:21 PM", NS),  # 21 on the clock, 9 on "CHANNEL 9"
    # dates, in any common order
    (DATE, "2020/10/19", S),
    (DATE, "October 19, 2020.", S),
    (DATE, "19/10/2020", S),
    (DATE, "2021/10/19", NS),  # a year off
    (DATE, "2020/10/18", NS),  # a day off
    (DATE, "2020/01/19", NS),  # January, not October
    (STAMP_TIME, "06:41:49", S),  # read run into the date: "2020/10/1906:41:49"
    (STAMP_TIME, "06:41:46", NS),
    # phone numbers and room numbers: whole, not by their groups of digits
    (ROOM, "Room 404.", S),
    (ROOM, "404", S),
    (ROOM, "It's room four hundred and four.", S),
    (ROOM, "Room 199.", NS),
    (ROOM, "Room 4.", NS),
    (PHONE, "Call 555-0199.", S),
    (PHONE, "555 0199", S),
    (PHONE, "555-0404", NS),  # both groups are read, not as this number
    (PHONE, "555-0919", NS),
    # prices: the amount and, where both say it, the currency
    (USD, "$3.49", S),
    (USD, "3.49 dollars a pound.", S),
    (USD, "Three dollars and forty-nine cents.", S),
    (USD, "$3.94", NS),
    (USD, "$349", NS),
    # The tag reads "$3.49": a price is an amount in a currency, so 3.49 euros is another price,
    # not the same one said another way (an answer naming no currency is judged by its amount).
    (USD, "3.49 euros.", NS),
    (EUR, "€12.50", S),
    (EUR, "12,50 €", S),
    (EUR, "It costs 12.50 euros.", S),
    (EUR, "EUR 12.50", S),
    (EUR, "$12.50", NS),  # the tag says EUR
    (EUR, "€12.05", NS),
    (EUR, "€1.25", NS),
    # times on a board: the flight number TP 950 is not a time
    (DEPART, "09:05", S),
    (DEPART, "At 9:05 AM.", S),
    (DEPART, "9:50", NS),
    (DEPART, "09:50", NS),
    (BOARD, "It leaves at 9:05 from gate B32.", S),
    (BOARD, "It leaves at 9:50.", NS),
    # codes: letters and digits together, case and separators aside
    (GATE, "B32", S),
    (GATE, "It leaves from gate B32.", S),
    (GATE, "Gate A32.", NS),
    (GATE, "Gate B23.", NS),
    (CODE, "7HX-429", S),
    (CODE, "7hx 429", S),
    (CODE, "7HX-492", NS),
    (CODE, "7HK-429", NS),  # one letter off is another code, not an OCR slip
    (CODE, "HX-429", NS),
]


def cases(rows) -> list:
    """(clip, question, golden), answer, expected -> parameters named "clip:answer->expected"."""
    return [pytest.param(case, answer, expected, id=f"{case[0]}:{answer}->{expected.name}")
            for case, answer, expected in rows]


@pytest.mark.parametrize("with_golden", [True, False], ids=["golden", "screen-only"])
@pytest.mark.parametrize("case,answer,expected", cases(WHOLE_VALUES))
def test_values_on_screen_are_compared_whole(screens, case, answer, expected, with_golden):
    """With the golden response, and with the screen alone: the grade is the same."""
    clip, question, golden = case
    got = category(question, golden if with_golden else None, answer, read(screens, clip))
    assert got is expected, f"{answer!r} for {question!r} on {clip}: {got.value}"


# The same values in the text rules alone (no frames read): the golden response compared whole.
TEXT_VALUES = [
    (CLOCK_S, "06:41:49", S),
    (CLOCK_S, "06:41:46", NS),
    (CLOCK_AM, "6:41 PM", NS),
    (CLOCK_AM, "6:41 AM", S),
    (CLOCK_24, "21:00", S),  # 9 PM
    (CLOCK_24, "21:09", NS),
    (DATE, "2020/10/19", S),
    (DATE, "2021/10/19", NS),
    (DEPART, "9:50", NS),
    (DEPART, "9:05", S),
    (PHONE, "555-0404", NS),
    (PHONE, "555-0199", S),
    (USD, "3.49 euros.", NS),
    (USD, "$3.49", S),
    (CODE, "7HX-492", NS),
    (CODE, "7HX-429", S),
    (ROOM, "It's room four hundred and four.", S),
    (SPEED, "Fifty.", S),
]


@pytest.mark.parametrize("case,answer,expected", cases(TEXT_VALUES))
def test_the_text_rules_compare_values_whole_too(case, answer, expected):
    _, question, golden = case
    got = category(question, golden, answer)
    assert got is expected, f"{answer!r} against the golden {golden!r}: {got.value}"


@pytest.mark.parametrize("answer,expected", [
    ("One thousand two hundred and fifty.", S),
    ("Twelve hundred and fifty.", S),
    ("1,250", S),
    ("One thousand two hundred.", NS),
    ("Two thousand one hundred and fifty.", NS),
])
def test_number_words_count_up_to_the_thousands(answer, expected):
    got = category("What number is on the banner?", "1,250.", answer)
    assert got is expected, f"{answer!r}: {got.value}"


# ----------------------------------------------------------------------------- 2. every claim counts

SIGN = ("speed_sign", "What does the sign say?", "It says SPEED LIMIT 50.")

CLAIMS = [
    ("It says 50.", S),
    ("It says fifty.", S),
    ("Fifty miles per hour.", S),
    ("It says 50, not 30.", S),  # a negated claim, taken as stated: it is not 30
    ("The sign says 30, not 50.", NS),
    ("It's not 50.", NS),
    ("It could be 30, 50, 70 or 12345.", NS),  # a shotgun: several incompatible candidates
    ("Either 50 or 30.", NS),
    ("It says five hundred.", NS),
    ("It says fifteen.", NS),
    ("It says SPEED LIMIT 50.", S),
    ("It says SPEED LIMIT 50, and the green sign says EXIT 7.", S),  # more text, all of it read
    ("It says SPEED LIMIT 50 and SCHOOL ZONE below.", NS),  # text that is not there
    ('It reads "SPEED LIMIT 50, MINIMUM 30".', NS),
    ("Sorry, I can't read the sign.", MISSING),  # a refusal, not a claim that it says "Sorry"
    ("I'm sorry, the sign is too blurry for me to read.", MISSING),
]


@pytest.mark.parametrize("with_golden", [True, False], ids=["golden", "screen-only"])
@pytest.mark.parametrize("answer,expected", CLAIMS, ids=[f"{a}->{e.name}" for a, e in CLAIMS])
def test_every_claim_of_the_asked_kind_is_checked(screens, answer, expected, with_golden):
    clip, question, golden = SIGN
    got = category(question, golden if with_golden else None, answer, read(screens, clip))
    assert got is expected, f"{answer!r}: {got.value}"


@pytest.mark.parametrize("case,answer,expected", cases([
    (GATE, "Gate B32, B23 or A32.", NS),
    (DEPART, "Either 09:05 or 9:50.", NS),
    (CLOCK_S, "06:41:49 or 06:41:46.", NS),
    (DATE, "It is 2020/10/19, not 2021/10/19.", S),
    (DATE, "It is 2021/10/19, not 2020/10/19.", NS),
]))
def test_candidates_and_negations_of_whole_values(screens, case, answer, expected):
    clip, question, golden = case
    got = category(question, golden, answer, read(screens, clip))
    assert got is expected, f"{answer!r} for {question!r}: {got.value}"


# ----------------------------------------------------------------------------- 3. the golden value the screen confirms

@pytest.mark.parametrize("case,answer,expected", cases([
    (ROOM, "Room 555.", NS),  # 555 is read, in the phone number beside the door
    (ROOM, "Room 0199.", NS),
    (ROOM, "Call 555-0199.", NS),  # the phone number, read whole, is not the room
    (ROOM, "Room 404.", S),
    (ROOM, "Room 404; the notice says to call 555-0199.", S),  # both read, each where it is
    (SPEED, "The limit is 7.", NS),  # 7 is read, on the exit sign
    (SPEED, "The limit is 50.", S),
    (USD, "They cost $4,133.", NS),  # the product code, not a price
    (GATE, "Gate 950.", NS),  # the flight number
    (GATE, "Gate B32.", S),
    (CODE, "Locker 29.", NS),  # the locker's number
    (CODE, "29", NS),
    (CODE, "7HX-429", S),
]))
def test_a_golden_value_the_screen_confirms_stands(screens, case, answer, expected):
    clip, question, golden = case
    got = category(question, golden, answer, read(screens, clip))
    assert got is expected, f"{answer!r} against the golden {golden!r} read on {clip}: {got.value}"


# ----------------------------------------------------------------------------- 4. bare yes and no

YES_NO_ON_SCREEN = [
    ("Is the speed limit 50?", "Yes, it is 50.", "Yes.", S),
    ("Is the speed limit 50?", "Yes, it is 50.", "Yep.", S),
    ("Is the speed limit 50?", "Yes, it is 50.", "No.", NS),
    ("Is the speed limit 30?", "No, it is 50.", "No.", S),
    ("Is the speed limit 30?", "No, it is 50.", "Nope.", S),
    ("Is the speed limit 30?", "No, it is 50.", "Yes.", NS),
]


@pytest.mark.parametrize("question,golden,answer,expected", YES_NO_ON_SCREEN)
def test_a_bare_yes_or_no_about_the_screen(screens, question, golden, answer, expected):
    got = category(question, golden, answer, read(screens, "speed_sign"))
    assert got is expected, f"{answer!r} to {question!r} (golden {golden!r}): {got.value}"


YES_NO = [
    ("Is the door open?", "No, it is closed.", "No.", S),
    ("Is the door open?", "No, it is closed.", "Nope.", S),
    ("Is the door open?", "No, it is closed.", "Yes.", NS),
    ("Is there a dog on the sofa?", "Yes, a brown dog is lying on the sofa.", "Yes.", S),
    ("Is there a dog on the sofa?", "Yes, a brown dog is lying on the sofa.", "Yeah.", S),
    ("Is there a dog on the sofa?", "Yes, a brown dog is lying on the sofa.", "No.", NS),
    ("Does the man pick up the cup?", "No.", "Nope.", S),
    ("Does the man pick up the cup?", "No.", "Yes.", NS),
    *YES_NO_ON_SCREEN,
]


@pytest.mark.parametrize("question,golden,answer,expected", YES_NO)
def test_a_bare_yes_or_no_in_the_text_rules(question, golden, answer, expected):
    got = category(question, golden, answer)
    assert got is expected, f"{answer!r} to {question!r} (golden {golden!r}): {got.value}"


# ----------------------------------------------------------------------------- pairs

SHOTGUN, SINGLE = "It could be 30, 50, 70 or 12345.", "The sign says 50."


@pytest.mark.parametrize("with_golden", [True, False], ids=["golden", "screen-only"])
def test_the_shotgun_answer_is_not_preferred_over_the_right_one(screens, with_golden):
    clip, question, golden = SIGN
    golden = golden if with_golden else None
    reads = read(screens, clip)
    ab = decide(question, golden, SHOTGUN, SINGLE, reads)
    ba = decide(question, golden, SINGLE, SHOTGUN, reads)
    assert (ab.response_a.category, ab.response_b.category, ab.preference) == (NS, S, Preference.B)
    assert (ba.response_a.category, ba.response_b.category, ba.preference) == (S, NS, Preference.A)


def test_listing_every_candidate_is_not_preferred_without_a_screen():
    """The leaderboard's shotgun model: every year near the right one, against the right one."""
    question, golden = "What year is carved on the plaque?", "1989."
    shotgun, single = "1987, 1988, 1989, 1990 or 1991.", "It says 1989."
    ab, ba = decide(question, golden, shotgun, single), decide(question, golden, single, shotgun)
    assert (ab.response_b.category, ab.preference) == (S, Preference.B)
    assert (ba.response_a.category, ba.preference) == (S, Preference.A)
    assert ab.response_a.category is not S and ba.response_b.category is not S


@pytest.mark.parametrize("case,right,wrong", [
    pytest.param(case, right, wrong, id=f"{case[0]}:{right}-over-{wrong}") for case, right, wrong in [
        (ROOM, "Room 404.", "Room 555."),
        (CLOCK_S, "06:41:49", "06:41:46"),
        (CLOCK_24, "21:00", "9:21 PM"),
        (DEPART, "09:05", "9:50"),
        (CODE, "7HX-429", "7HX-492"),
    ]])
def test_the_right_value_is_preferred_in_either_order(screens, case, right, wrong):
    clip, question, golden = case
    reads = read(screens, clip)
    assert decide(question, golden, right, wrong, reads).preference is Preference.A
    assert decide(question, golden, wrong, right, reads).preference is Preference.B


# ----------------------------------------------------------------------------- the whole pipeline

PIPELINE_ITEMS = [
    Item(id="sign", video="speed_sign.mp4", turns=[{
        "question": SIGN[1], "golden": SIGN[2], "response_a": SHOTGUN, "response_b": SINGLE}]),
    Item(id="room", video="door.mp4", turns=[{
        "question": ROOM[1], "golden": ROOM[2], "response_a": "Room 555.", "response_b": "Room 404."}]),
    Item(id="clock", video="clock_seconds.mp4", turns=[{
        "question": CLOCK_S[1], "golden": CLOCK_S[2], "response_a": "06:41:49", "response_b": "06:41:46"}]),
    Item(id="refusal", video="speed_sign.mp4", turns=[{
        "question": SIGN[1], "golden": SIGN[2], "response_a": "Sorry, I can't read the sign.",
        "response_b": "It says fifty."}]),
]
# item -> (category A, category B, preference)
PIPELINE_EXPECTED = {
    "sign": ("Not Successful", "Successful", "B"),
    "room": ("Not Successful", "Successful", "B"),
    "clock": ("Successful", "Not Successful", "A"),
    "refusal": ("Missing", "Successful", "B"),
}


def test_the_grader_grades_the_values_read(clips, screens):
    for name in ("speed_sign", "door", "clock_seconds"):
        read(screens, name)
    grader = Grader(ReferenceJudge(), RUBRIC, GradeOptions(sampler=SamplerParams(n=FRAMES)),
                    media_root=next(iter(clips.values())).parent)
    got = {}
    for item in PIPELINE_ITEMS:
        [v] = asyncio.run(grader.grade(item))
        assert isinstance(v, Verdict), v
        assert v.provenance.read_text, f"{item.id}: nothing read"
        got[item.id] = (v.response_a.category.value, v.response_b.category.value, v.preference.value)
    assert got == PIPELINE_EXPECTED


def test_the_cli_grades_the_values_read(clips, screens, tmp_path):
    for name in ("speed_sign", "door", "clock_seconds"):
        read(screens, name)
    items = tmp_path / "items.jsonl"
    items.write_text("".join(i.model_dump_json() + "\n" for i in PIPELINE_ITEMS))
    out = tmp_path / "verdicts.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "grade", str(items), "--out", str(out),
                           "--media-root", str(next(iter(clips.values())).parent), "--frames", str(FRAMES)],
                          capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    verdicts = {v["item_id"]: v for v in map(json.loads, out.read_text().splitlines())}
    got = {k: (v["response_a"]["category"], v["response_b"]["category"], v["preference"]) for k, v in verdicts.items()}
    assert got == PIPELINE_EXPECTED
    assert json.loads(proc.stdout)["used_screen_text"] == len(PIPELINE_ITEMS)


# ----------------------------------------------------------------------------- the real dashcam clip

DASHCAM = "research-data/autoeval-video/video/155.mp4"
DASHCAM_FRAMES = 4  # 0.5, 1.5, 2.5 and 3.5 s: the stamp's clock reads 06:41:46 to 06:41:49


@pytest.fixture(scope="module")
def dashcam(shared_dir) -> tuple[Path, list[ReadText]]:
    clip = shared_dir / DASHCAM
    if not clip.exists():
        pytest.skip(f"{clip} is absent")
    if eyes.unavailable() is not None:
        pytest.skip(str(eyes.unavailable()))
    return clip, eyes.read_frames(sample_frames(clip, n=DASHCAM_FRAMES, cache=None).frames)


@pytest.mark.shared
def test_the_dashcam_stamp_is_read(dashcam):
    """AutoEval-Video item 155 (a truck hits two cars): the recorder's stamp, date and time run
    together ("2020/10/1906:41:46"), one second later on each frame."""
    _, reads = dashcam
    stamps = {r.timestamp: flat(r.text) for r in reads if "2020/10/19" in r.text}
    assert stamps == {0.5: "2020/10/1906:41:46", 1.5: "2020/10/1906:41:47", 2.5: "2020/10/1906:41:48",
                      3.5: "2020/10/1906:41:49"}, [r.text for r in reads]


@pytest.mark.shared
@pytest.mark.parametrize("question,golden,answer,expected", [
    ("What date does the dashcam show?", "19 October 2020.", "2020/10/19", S),
    ("What date does the dashcam show?", "19 October 2020.", "October 19, 2020.", S),
    ("What date does the dashcam show?", "19 October 2020.", "2021/10/19", NS),
    ("What date does the dashcam show?", "19 October 2020.", "2020/10/09", NS),
    ("What time does the dashcam clock show at the end?", "06:41:49.", "06:41:49", S),
    ("What time does the dashcam clock show at the end?", "06:41:49.", "6:41:49 AM", S),
    ("What time does the dashcam clock show at the end?", "06:41:49.", "06:41:46", NS),  # the start
    ("What time does the dashcam clock show at the end?", "06:41:49.", "06:41:59", NS),
    ("What time does the dashcam clock show at the start?", "06:41:46.", "06:41:46", S),
    ("What time does the dashcam clock show at the start?", "06:41:46.", "06:41:49", NS),
])
def test_the_dashcam_stamp_grades_answers(dashcam, question, golden, answer, expected):
    clip, reads = dashcam
    item = Item(id="155", video=str(clip), turns=[{"question": question, "golden": golden, "response_a": answer}])
    judgement, *_ = ReferenceJudge().decide_with(RUBRIC, item, 0, reads)
    got = judgement.response_a.category
    assert got is expected, f"{answer!r} for {question!r}: {got.value}"


# ----------------------------------------------------------------------------- values as OCR reads them

OFFER = ("cafe_offer", "How much is one flat white?", "€12.50.")
OFFER_TWO = ("cafe_offer", "How much are two flat whites?", "€20.")
GATE_RUN = ("gate_sign", "Which gate is shown?", "Gate B12.")
LIFT = ("lift_notice", "What does the sign say?", "No more than 6 people.")
COLD = ("thermometer", "What temperature does the display show?", "-12°C.")
PARKING = ("no_parking", "What does the sign say?", "No parking.")

READ_AS_OCR_READS = [
    # a decimal comma is a decimal point; a multi-buy is the price of several, not of one
    (OFFER, "€12.50", S),
    (OFFER, "12,50 €", S),
    (OFFER, "It costs 12.50 euros.", S),
    (OFFER, "€20", NS),  # "2 FOR EUR 20" prices two
    (OFFER, "€2", NS),
    (OFFER, "$12.50", NS),  # the board says EUR
    (OFFER_TWO, "€20", S),
    (OFFER_TWO, "€25", NS),
    # a label run into its code ("GATEB12") holds the code
    (GATE_RUN, "Gate B12.", S),
    (GATE_RUN, "B12", S),
    (GATE_RUN, "Gate 12.", NS),
    (GATE_RUN, "Gate B21.", NS),
    # "no more than 6", read without its spaces, states 6
    (LIFT, "No more than 6 people.", S),
    (LIFT, "It says at most 6 people.", S),
    (LIFT, "No more than 8 people.", NS),
    (LIFT, "It says not 6 people.", NS),
    # a minus run into the word before it is still a minus
    (COLD, "-12°C", S),
    (COLD, "Minus 12 degrees.", S),
    (COLD, "12°C", NS),
    (COLD, "12 degrees.", NS),
    # an answer is judged by what it says is written, not by what it says is not
    (PARKING, "It does not say no parking; it says free parking.", NS),
    (PARKING, "It says free parking.", NS),
    (PARKING, "It says free parking, not no parking.", NS),
    (PARKING, "It does not say free parking; it says no parking.", S),
    (PARKING, "It says no parking, not free parking.", S),
    (PARKING, "It says no parking.", S),
]


@pytest.mark.parametrize("with_golden", [True, False], ids=["golden", "screen-only"])
@pytest.mark.parametrize("case,answer,expected", cases(READ_AS_OCR_READS))
def test_values_as_the_ocr_reads_them(screens, case, answer, expected, with_golden):
    """Decimal commas, multi-buys, codes and signs run into words, bounds and denials, on lines as
    the OCR reads them ("GATEB12", "OUTSIDE-12°C", "NOMORETHAN6PEOPLE")."""
    clip, question, golden = case
    got = category(question, golden if with_golden else None, answer, read(screens, clip))
    assert got is expected, f"{answer!r} for {question!r} on {clip}: {got.value}"
