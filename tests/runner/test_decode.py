"""A video and window wanted by several items at once is decoded once."""

from __future__ import annotations

import asyncio
import threading
import time

from framejudge.frame_sampler import FrameSamplerError, sample_frames
from framejudge.judge import Grader, JudgeRequest, JudgeResult
from framejudge.rubrics import get_rubric
from framejudge.runner.decode import SharedDecodes
from framejudge.schema import GradeOptions, Item, Judgement, SamplerParams


class Counting:
    """The real sampler (no frame cache, so a second decode would really decode), counting calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, path, params):
        with self.lock:
            self.calls += 1
        time.sleep(0.05)  # long enough for the others to arrive while it runs
        return sample_frames(path, params, cache=None)


class SeesFrames:
    backend, model_id, needs_frames, sees_images, deterministic = "seeing", "s", True, False, True

    async def judge(self, request: JudgeRequest) -> JudgeResult:
        await asyncio.sleep(0.01)
        return JudgeResult(Judgement.model_validate({"response_a": {"category": "Successful", "rationale": "ok"}}))


def test_concurrent_requests_for_one_video_and_window_share_one_decode(clips):
    counting = Counting()
    shared = SharedDecodes(counting)
    params = SamplerParams(n=4)
    results = [None] * 8

    def ask(k: int) -> None:
        results[k] = shared(clips["h264"], params)

    threads = [threading.Thread(target=ask, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counting.calls == 1 and shared.decodes == 1
    assert all(r.timestamps == results[0].timestamps for r in results)
    shared(clips["h264"], SamplerParams(n=5))  # another window is another decode
    assert counting.calls == 2


def test_items_sharing_a_video_decode_it_once_in_a_batch(clips):
    counting = Counting()
    grader = Grader(SeesFrames(), get_rubric("video-qa"), GradeOptions(sampler=SamplerParams(n=3), cache=False),
                    sample=SharedDecodes(counting))
    items = [Item(id=f"i{k}", video=str(clips["h264"]), turns=[{"question": "Q?", "response_a": f"A{k}."}])
             for k in range(6)]

    async def run():
        return await asyncio.gather(*(grader.grade(it) for it in items))

    records = [r for rs in asyncio.run(run()) for r in rs]
    assert len(records) == 6 and all(r.record == "verdict" and len(r.provenance.frame_timestamps) == 3 for r in records)
    assert counting.calls == 1


def test_a_failed_decode_fails_every_waiter_and_is_not_remembered(tmp_path):
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"not a video at all" * 100)
    counting = Counting()
    shared = SharedDecodes(counting)
    errors = []

    def ask() -> None:
        try:
            shared(broken, SamplerParams(n=2))
        except FrameSamplerError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 4 and counting.calls == 1
    ask()  # a later request tries again
    assert counting.calls == 2
