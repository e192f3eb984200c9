"""Clips of a turn's window (video_input clip): cut from videos written here with PyAV, and decoded
back with PyAV to check which frames of the source they hold and when.

Each source frame carries its own number as ten black-or-white bars (bit b in bar b), which
survive H.264 and scaling, so a decoded clip says exactly which source frames it shows."""

from __future__ import annotations

import hashlib
import io
import math

import av
import numpy as np
import pytest

from framejudge.examples.synth import cfr_times, write_video
from framejudge.frame_sampler import IsolatedSampler, cut_clip
from framejudge.frame_sampler.clip import (INLINE_REQUEST_BYTES, MAX_CLIP_BYTES, PROMPT_ALLOWANCE, ClipTooLarge,
                                          clip_bytes, request_bytes)
from framejudge.schema import SamplerParams

BITS = 10
SIZE = (320, 180)


def numbered(k: int, t: float) -> np.ndarray:
    w, h = SIZE
    img = np.zeros((h, w, 3), np.uint8)
    bar = w // BITS
    for b in range(BITS):
        if k >> b & 1:
            img[:, b * bar:(b + 1) * bar] = 255
    return img


def frame_number(image: np.ndarray) -> int:
    h, w = image.shape[:2]
    bar = w / BITS
    rows = image[h // 4: 3 * h // 4]
    return sum(1 << b for b in range(BITS)
               if rows[:, int((b + 0.3) * bar):int((b + 0.7) * bar)].mean() > 128)


def decoded(data: bytes) -> tuple[list[int], list[float], tuple[int, int]]:
    """The source frame numbers a clip shows, their times in the clip, and its frame size."""
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.video[0]
        frames = list(container.decode(stream))
    return ([frame_number(f.to_ndarray(format="rgb24")) for f in frames], [float(f.time) for f in frames],
            (frames[0].width, frames[0].height))


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    folder = tmp_path_factory.mktemp("clips")
    times = cfr_times(20, 30)
    return {
        "h264": write_video(folder / "h264.mp4", numbered, times, size=SIZE, gop=30, bframes=0),
        "mpeg4": write_video(folder / "mpeg4.mp4", numbered, times, size=SIZE, codec="mpeg4", gop=30),
        "long_gop": write_video(folder / "long_gop.mp4", numbered, times, size=SIZE, gop=150, bframes=0),
        "bframes": write_video(folder / "bframes.mp4", numbered, cfr_times(10, 30), size=SIZE, gop=60, bframes=2),
    }


def test_a_question_time_window_is_copied_from_the_key_frame_before_it(sources):
    clip = cut_clip(sources["h264"], SamplerParams(end_at=12.5, lookback=5))
    assert clip.method == "remux" and clip.window == (7.5, 12.5)
    assert clip.start == pytest.approx(7.0) and clip.end == pytest.approx(12.5)  # key frames every second
    numbers, times, size = decoded(clip.data)
    assert numbers == list(range(210, 376))  # 7.0 s to the frame on screen at 12.5 s, and nothing after it
    assert times[0] == pytest.approx(0.0, abs=1e-3)
    assert times[-1] == pytest.approx(12.5 - clip.start, abs=1 / 30)
    assert size == SIZE
    info = clip.info()
    assert info.sha256 == hashlib.sha256(clip.data).hexdigest() and info.bytes == len(clip.data)
    assert (info.start, info.end, info.fps, info.method) == (7.0, 12.5, 1.0, "remux")


def test_a_codec_that_is_not_copied_is_encoded_at_the_clip_rate(sources):
    clip = cut_clip(sources["mpeg4"], SamplerParams(end_at=12.5, lookback=5, max_side=160), fps=2)
    assert clip.method == "encode" and (clip.start, clip.end) == (7.5, 12.5)
    numbers, times, size = decoded(clip.data)
    # frame i is the frame on screen at 7.5 + i / 2 s: the frames a judge sampling at 2 fps sees
    assert numbers == [round((7.5 + i / 2) * 30) for i in range(10)]
    assert times == pytest.approx([i / 2 for i in range(10)], abs=1e-3)
    assert max(size) <= 160 and size[0] % 2 == 0 and size[1] % 2 == 0
    with av.open(io.BytesIO(clip.data)) as container:
        assert container.streams.video[0].codec_context.name == "h264"


def test_a_key_frame_far_before_the_window_is_not_copied(sources):
    """Key frames every 5 s: copying from 5.0 s would show 2.5 s before a 7.5 s window; it is
    encoded from the window's start instead."""
    clip = cut_clip(sources["long_gop"], SamplerParams(end_at=12.5, lookback=5))
    assert clip.method == "encode" and clip.start == 7.5
    numbers, _, _ = decoded(clip.data)
    assert numbers == [225 + 30 * i for i in range(5)]


def test_the_whole_video_without_a_question_time(sources):
    clip = cut_clip(sources["h264"], SamplerParams())
    numbers, times, _ = decoded(clip.data)
    assert clip.method == "remux" and clip.start == 0 and numbers == list(range(600))
    assert times[-1] == pytest.approx(599 / 30, abs=1e-3)


@pytest.mark.parametrize("end_at", [3.0, 4.05, 5.5, 6.1, 7.77, 9.9])
def test_reordered_frames_never_show_what_came_after_the_question(sources, end_at):
    """With B-frames, a frame before the question time may need one after it to decode: such a
    window is encoded, never copied with the later frame in it."""
    clip = cut_clip(sources["bframes"], SamplerParams(end_at=end_at, lookback=2))
    numbers, _, _ = decoded(clip.data)
    last = math.floor(end_at * 30 + 1e-6)
    assert max(numbers) <= last and numbers[-1] == (last if clip.method == "remux" else numbers[-1])
    if clip.method == "remux":
        assert numbers == list(range(numbers[0], last + 1)) and numbers[0] % 60 == 0  # from a key frame
    else:
        assert numbers == [math.floor((end_at - 2 + i) * 30 + 1e-6) for i in range(2)]


def test_a_copy_above_the_limit_is_encoded_and_an_encoding_above_it_refused(sources):
    params = SamplerParams(end_at=12.5, lookback=5)
    copied = cut_clip(sources["h264"], params)
    smaller = cut_clip(sources["h264"], params, max_bytes=len(copied.data) - 1)
    assert smaller.method == "encode" and len(smaller.data) < len(copied.data)
    with pytest.raises(ClipTooLarge) as refused:
        cut_clip(sources["h264"], params, fps=30, max_bytes=2000)
    assert refused.value.code == "clip_too_large"
    assert "above what the judge's provider takes inline" in str(refused.value) and "7.50-12.50 s at 30 fps" in str(refused.value)


def test_the_limit_leaves_room_for_base64_and_the_prompt():
    assert math.ceil(MAX_CLIP_BYTES / 3) * 4 + PROMPT_ALLOWANCE <= INLINE_REQUEST_BYTES
    assert MAX_CLIP_BYTES > 10 * 1000 * 1000
    for request in (2 * 10**6, INLINE_REQUEST_BYTES, 100 * 10**6):
        largest = clip_bytes(request)
        assert math.ceil(largest / 3) * 4 + PROMPT_ALLOWANCE <= request < math.ceil((largest + 4) / 3) * 4 + PROMPT_ALLOWANCE
        assert request_bytes(largest) == request


def test_the_isolated_sampler_cuts_the_same_clip_in_its_process(sources):
    params = SamplerParams(end_at=12.5, lookback=5)
    with IsolatedSampler(workers=1, timeout_s=60, cache_dir=None) as sampler:
        clip = sampler.cut(sources["h264"], params, 1.0)
    assert clip.sha256 == cut_clip(sources["h264"], params).sha256
