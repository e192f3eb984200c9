"""Reference-judge benchmark: turns that need no frames against turns whose on-screen text is read.

    python bench/eyes.py [--quick] [--plain 2000] [--videos 4] [--questions 4]

Each kind runs in a fresh process with a fresh frame cache (numerical libraries held to 2
threads). "plain": questions not about text on clips that exist; no frame is decoded. "read":
`--questions` text questions on each of `--videos` clips (a price tag, a departures board, a
cafe sign, a countdown; 10 s, 640x360), graded through the pipeline's sampler: each video's
window is decoded once (the other questions on it come from the frame cache) and OCR runs on
those frames only, once per frame. The read kind is timed cold (the first grading, decoding and
reading) and warm (the same items again in the same process: frames from the cache, reads
remembered). Peak memory is the process's maximum resident set.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QUESTIONS = {
    "price_tag.mp4": [("How much do the apples cost?", "The tag says $3.49 per pound.", "They're $2.99 a pound."),
                      ("What's the price per pound?", "$3.49.", "It is 4 dollars."),
                      ("What does the sign say?", "It says Organic Apples.", "It says Fresh Pears."),
                      ("How much is a pound of these?", "3.49 dollars.", "About a dollar.")],
    "departures.mp4": [("What time does the Harbour City train leave?", "At 2:35 PM.", "At 3:45 PM."),
                       ("When does the North Park train depart?", "15:10.", "At 4 PM."),
                       ("What does the board say at the top?", "It says Departures.", "It says Arrivals."),
                       ("Which platform number is shown?", "Platform 4.", "Platform 9.")],
    "text_sign.mp4": [("When does this cafe open?", "It opens at 8 AM.", "It opens at 10 AM."),
                      ("What's the name of this place?", "Green Leaf Cafe.", "Blue Door Bakery."),
                      ("How many calories are in two cookies?", "150 calories.", "300 calories."),
                      ("What does the label say about sugar?", "Sugar 9 g.", "Sugar 20 g.")],
    "countdown.mp4": [("What was the last number on screen?", "It was 2.", "It was 7."),
                      ("What number did the countdown start at?", "10.", "20."),
                      ("What numbers are shown on the screen?", "10, 9, 7 and so on down to 2.", "50 and 60."),
                      ("What does the screen show?", "A countdown from 10.", "A clock reading 12:00.")],
}
PLAIN = [("What colour is the ball?", "Red.", "The ball is red.", "It is blue."),
         ("Is the door open?", "Yes, the door is open.", "Yes, it's open.", "No, it's shut."),
         ("How many people are on the bench?", "Two people sit on the bench.", "Two people.", "Three people."),
         ("What is moving in this video?", "A red ball.", "A red ball bounces.", "A green triangle spins.")]


def _items(kind: str, videos: int, questions: int, plain: int) -> list:
    from framejudge.schema import Item

    names = list(QUESTIONS)[:videos]
    if kind == "plain":
        return [Item(id=f"p{k}", video=names[k % len(names)], turns=[{
            "question": q, "golden": g, "response_a": a, "response_b": b}])
            for k, (q, g, a, b) in ((k, PLAIN[k % len(PLAIN)]) for k in range(plain))]
    return [Item(id=f"r{v}-{k}", video=name, turns=[{"question": q, "golden": a, "response_a": a, "response_b": b}])
            for v, name in enumerate(names) for k, (q, a, b) in enumerate(QUESTIONS[name][:questions])]


def measure(kind: str, videos: int, questions: int, plain: int, clips: Path) -> dict:
    """One kind in this process: turns per second (cold and, for read, warm), decodes, reads, memory."""
    from framejudge.frame_sampler import sample_frames
    from framejudge.judge import Grader, ReferenceJudge, eyes
    from framejudge.rubrics import get_rubric
    from framejudge.schema import Verdict

    decodes = {"decoded": 0, "from_cache": 0}
    reads = {"frames": 0}
    recognise = eyes._recognise

    def counted_recognise(image, check=None):  # the OCR engine's work: frames actually read
        reads["frames"] += 1
        return recognise(image, check)

    eyes._recognise = counted_recognise

    def sample(path, params):
        result = sample_frames(path, params)
        decodes["from_cache" if result.from_cache else "decoded"] += 1
        return result

    items = _items(kind, videos, questions, plain)
    grader = Grader(ReferenceJudge(), get_rubric("video-qa"), media_root=clips, sample=sample)

    async def grade_all() -> list:
        return [r for item in items for r in await grader.grade(item)]

    started = time.perf_counter()
    records = asyncio.run(grade_all())
    cold = time.perf_counter() - started
    out = {"kind": kind, "turns": len(records), "seconds": round(cold, 3), "turns_per_s": round(len(records) / cold, 1),
           "windows_decoded": decodes["decoded"], "windows_from_cache": decodes["from_cache"],
           "frames_read": reads["frames"], "used_screen_text": sum(
               any(r.used for r in v.provenance.read_text or ()) for v in records if isinstance(v, Verdict)),
           "ocr": eyes.unavailable() or "RapidOCR",
           # read items: A states what is on screen, B something else (plain items: A right, B wrong too)
           "a_right_b_wrong": sum(isinstance(v, Verdict) and v.response_b is not None
                                  and (v.response_a.category.value, v.response_b.category.value)
                                  == ("Successful", "Not Successful") for v in records)}
    if kind == "read":
        before = dict(decodes), reads["frames"]
        started = time.perf_counter()
        again = asyncio.run(grade_all())
        warm = time.perf_counter() - started
        out.update(warm_seconds=round(warm, 3), warm_turns_per_s=round(len(again) / warm, 1),
                   warm_windows_decoded=decodes["decoded"] - before[0]["decoded"],
                   warm_frames_read=reads["frames"] - before[1])
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="200 plain turns, 2 videos")
    ap.add_argument("--plain", type=int, default=2000, help="turns that need no frames")
    ap.add_argument("--videos", type=int, default=4, help="clips with text (at most 4)")
    ap.add_argument("--questions", type=int, default=4, help="text questions per clip (at most 4)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--clips", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.quick:
        a.plain, a.videos = 200, 2
    a.videos, a.questions = max(1, min(4, a.videos)), max(1, min(4, a.questions))
    if a.child:
        print(json.dumps(measure(a.child, a.videos, a.questions, a.plain, Path(a.clips))))
        return
    from framejudge.examples.clips import make_examples

    with tempfile.TemporaryDirectory(prefix="framejudge-bench-eyes-") as tmp:
        clips = Path(tmp) / "clips"
        make_examples(clips)
        rows = []
        for kind in ("plain", "read"):
            env = {**os.environ, "FRAMEJUDGE_CACHE_DIR": str(Path(tmp) / f"cache-{kind}"), "OMP_NUM_THREADS": "2",
                   "OPENBLAS_NUM_THREADS": "2", "PYTHONPATH": str(ROOT)}
            env.pop("FRAMEJUDGE_NO_CACHE", None)
            proc = subprocess.run([sys.executable, __file__, "--child", kind, "--clips", str(clips),
                                   "--plain", str(a.plain), "--videos", str(a.videos), "--questions", str(a.questions)],
                                  capture_output=True, text=True, env=env, check=True)
            rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    for r in rows:
        print(json.dumps(r))
    plain, read = rows
    print(f"\nplain turns (no frames): {plain['turns']} at {plain['turns_per_s']:g} turns/s, "
          f"{plain['windows_decoded']} windows decoded, peak {plain['peak_rss_mb']:g} MB")
    print(f"read turns ({read['ocr']}): {read['turns']} at {read['turns_per_s']:g} turns/s cold "
          f"({read['windows_decoded']} windows decoded, {read['windows_from_cache']} from the frame cache, "
          f"{read['frames_read']} frames read), {read['warm_turns_per_s']:g} turns/s warm "
          f"({read['warm_windows_decoded']} decoded, {read['warm_frames_read']} read); "
          f"{read['used_screen_text']} verdicts used on-screen text, {read['a_right_b_wrong']} graded A Successful "
          f"and B Not Successful; peak {read['peak_rss_mb']:g} MB")


if __name__ == "__main__":
    main()
