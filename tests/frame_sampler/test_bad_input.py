"""Bad input: a specific error type with a plain message, never a traceback or a wrong frame."""

from __future__ import annotations

import os
import random
import warnings
from pathlib import Path

import pytest

from framejudge.frame_sampler import (
    BadDimensions,
    DecodeFailed,
    EmptyFile,
    FrameSamplerError,
    InvalidRequest,
    Limits,
    NoFrames,
    NotARegularFile,
    NotAVideo,
    NoVideoStream,
    SamplingWarning,
    StreamNotFound,
    VideoNotFound,
    WindowOutOfRange,
    sample_frames,
)
from framejudge.examples.synth import write_video


def sample(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SamplingWarning)
        return sample_frames(path, cache=None, **kw)


def test_missing_file(tmp_path):
    with pytest.raises(VideoNotFound, match="file not found"):
        sample(tmp_path / "nope.mp4")


def test_directory(tmp_path):
    (tmp_path / "d.mp4").mkdir()
    with pytest.raises(NotARegularFile, match="directory"):
        sample(tmp_path / "d.mp4")


def test_fifo_is_rejected_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "pipe.mp4")
    with pytest.raises(NotARegularFile, match="named pipe"):
        sample(tmp_path / "pipe.mp4")


def test_symlink_loop(tmp_path):
    os.symlink(tmp_path / "loop.mp4", tmp_path / "loop.mp4")
    with pytest.raises(NotARegularFile, match="link loop"):
        sample(tmp_path / "loop.mp4")


def test_empty_file(tmp_path):
    (tmp_path / "e.mp4").touch()
    with pytest.raises(EmptyFile, match="empty"):
        sample(tmp_path / "e.mp4")


def noise(seed: int) -> bytes:
    return random.Random(seed).randbytes(64 * 1024)


@pytest.mark.parametrize("content", [b"<html><body>403 Forbidden</body></html>" * 20, noise(0)])
def test_not_a_video(tmp_path, content):
    (tmp_path / "x.mp4").write_bytes(content)
    with pytest.raises(NotAVideo, match="not a readable media file"):
        sample(tmp_path / "x.mp4")


# About 1 in 120 blocks of random bytes passes FFmpeg's probe as something: seed 131 reads as an
# LRC subtitle file, seed 1297 as a raw H.263 stream. Neither is a container framejudge reads: each
# is refused by FFmpeg's format allow-list before its demuxer runs.
@pytest.mark.parametrize("seed", [131, 1297])
def test_noise_that_passes_the_probe(tmp_path, seed):
    (tmp_path / "x.mp4").write_bytes(noise(seed))
    with pytest.raises(NotAVideo, match="not a container framejudge reads: only MP4/MOV, Matroska/WebM, AVI"):
        sample(tmp_path / "x.mp4")


def test_noise_always_gets_a_sampler_error(tmp_path):
    for seed in range(40):
        (tmp_path / "x.mp4").write_bytes(noise(seed))
        with pytest.raises(FrameSamplerError):
            sample(tmp_path / "x.mp4")


def test_audio_only(tmp_path):
    import av
    import numpy as np

    path = tmp_path / "a.m4a"
    with av.open(str(path), "w", format="mp4") as out:
        st = out.add_stream("aac", rate=48000)
        st.layout = "mono"
        for i in range(50):
            f = av.AudioFrame.from_ndarray(np.zeros((1, 1024), np.float32), format="fltp", layout="mono")
            f.sample_rate, f.pts = 48000, i * 1024
            out.mux(st.encode(f))
        out.mux(st.encode(None))
    with pytest.raises(NoVideoStream, match="no video stream .*audio"):
        sample(path)


def test_zero_frames(tmp_path):
    # AVI keeps a video stream with no packets; MP4 drops the empty track altogether.
    avi = write_video(tmp_path / "z.avi", lambda k, t: None, [], size=(64, 64))
    with pytest.raises(NoFrames, match="holds no frames"):
        sample(avi)
    mp4 = write_video(tmp_path / "z.mp4", lambda k, t: None, [], size=(64, 64))
    with pytest.raises(NoVideoStream, match="no streams at all"):
        sample(mp4)


def test_header_only(clips, tmp_path):
    head = tmp_path / "head.mp4"
    head.write_bytes(clips["h264"].read_bytes()[:2048])
    with pytest.raises((NotAVideo, NoFrames, DecodeFailed)):
        sample(head)


def test_moov_at_end_cut_in_half(clips, tmp_path):
    cut = tmp_path / "cut.mp4"
    data = clips["h264"].read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(NotAVideo, match="not a readable media file"):
        sample(cut)


@pytest.mark.parametrize("n", [0, -3, 5000])
def test_absurd_budget(clips, n):
    with pytest.raises(InvalidRequest, match="budget"):
        sample(clips["h264"], n=n)


@pytest.mark.parametrize("side", [0, 8, 100_000])
def test_absurd_size(clips, side):
    with pytest.raises(InvalidRequest, match="max_side"):
        sample(clips["h264"], max_side=side)


def test_bad_parameters_name_the_problem(clips):
    with pytest.raises(InvalidRequest, match="fps strategy needs fps"):
        sample(clips["h264"], strategy="fps")
    with pytest.raises(InvalidRequest, match="either end_at"):
        sample(clips["h264"], end_at=3, start=1)
    with pytest.raises(InvalidRequest, match="end_at must be a finite time"):
        sample(clips["h264"], end_at=-1)
    with pytest.raises(InvalidRequest, match="must be after its start"):
        sample(clips["h264"], start=5, end=2)
    with pytest.raises(InvalidRequest, match="lookback"):
        sample(clips["h264"], end_at=3, lookback=0)
    with pytest.raises(InvalidRequest, match="strategy"):
        sample(clips["h264"], strategy="random")


def test_window_outside_the_clip(clips):
    with pytest.raises(WindowOutOfRange, match="clip ends at 12.000 s"):
        sample(clips["h264"], start=30, end=40)


def test_end_at_beyond_the_end(clips):
    with pytest.raises(WindowOutOfRange, match="after the end of the clip"):
        sample(clips["h264"], end_at=20)
    # A question asked a moment after the last frame is still answered from the end.
    r = sample(clips["h264"], end_at=12.4, n=2)
    assert r.frames[-1].info.index == 359
    assert any("past the clip end" in w for w in r.warnings)


def test_window_end_past_the_clip_is_clipped(clips):
    r = sample(clips["h264"], start=10, end=50, n=4)
    assert r.window == (10.0, 12.0)
    assert any("clipped" in w for w in r.warnings)


def test_missing_stream_index(clips):
    with pytest.raises(StreamNotFound, match="video stream 3 requested but the file has 2"):
        sample(clips["multi"], stream=3)


def test_pixel_limits_checked_before_decoding(clips):
    with pytest.raises(BadDimensions, match="Mpixel"):
        sample(clips["h264"], limits=Limits(max_pixels=10_000))
    with pytest.raises(BadDimensions, match="aspect ratio of 8:1"):
        sample(clips["wide"], limits=Limits(max_aspect=4))


def test_every_error_has_a_code_and_the_path(tmp_path):
    (tmp_path / "e.mp4").touch()
    with pytest.raises(EmptyFile) as info:
        sample(tmp_path / "e.mp4")
    assert info.value.code == "empty_file"
    assert str(info.value) == f"{tmp_path / 'e.mp4'}: file is empty (0 bytes)"


def test_corrupt_payload_keeps_going_and_reports_the_time(clips, tmp_path):
    data = bytearray(clips["long_gop"].read_bytes())
    import numpy as np

    rng = np.random.default_rng(3)
    start = len(data) // 3
    for off in range(start, start + 6 * 4096, 4096):
        data[off : off + 512] = rng.integers(0, 256, 512, dtype=np.uint8).tobytes()
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(bytes(data))
    r = sample(bad, n=8)
    assert 1 <= len(r.frames) <= 8
    assert r.frames == sorted(r.frames, key=lambda f: f.info.timestamp)


def test_warnings_are_also_python_warnings(clips):
    with pytest.warns(SamplingWarning, match="damaged after"):
        sample_frames(clips["truncated"], n=2, cache=None)


def test_path_is_str_or_path(clips):
    assert sample(str(clips["h264"]), n=1).frames
    assert sample(Path(clips["h264"]), n=1).frames
