"""Which frames come back, and when: strategies, windows, budget, size, orientation."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from framejudge.frame_sampler import SamplingWarning, sample_frames
from tests.conftest import read_barcode, vfr_schedule


def sample(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SamplingWarning)
        return sample_frames(path, cache=None, **kw)


def assert_true_frames(result, schedule):
    """Every frame is the one its timestamp says: barcode == index == schedule position."""
    for f in result.frames:
        k = read_barcode(f.image)
        assert f.info.index == k
        assert f.info.timestamp == pytest.approx(schedule[k], abs=1e-3)


@pytest.mark.parametrize("n", [1, 4, 8, 16, 32])
def test_uniform_spreads_n_frames_over_the_clip(clips, n):
    schedule = [k / 30 for k in range(360)]
    r = sample(clips["h264"], n=n)
    assert len(r.frames) == n
    assert_true_frames(r, schedule)
    # bin centres: the k-th frame is the one on screen at (k + 0.5) * duration / n
    for k, f in enumerate(r.frames):
        target = (k + 0.5) * 12.0 / n
        assert f.info.timestamp <= target + 1e-9
        assert target - f.info.timestamp < 1 / 30 + 1e-6
    assert [f.info.reason for f in r.frames] == ["uniform"] * n


def test_uniform_never_decodes_the_whole_file(clips):
    r = sample(clips["h264"], n=2)
    assert 0 < r.packets_decoded < 360 / 2
    assert r.seeks == 2


def test_timestamps_on_vfr_follow_pts_not_average_rate(clips):
    schedule = vfr_schedule()
    r = sample(clips["vfr"], n=24)
    assert_true_frames(r, schedule)
    ts = r.timestamps
    assert ts == sorted(ts) and len(set(ts)) == len(ts)
    # The 2 s freeze holds one frame: targets inside it collapse onto that frame.
    frozen = schedule[138]
    assert frozen in ts
    assert not any(frozen < t < frozen + 2.0 for t in ts)


@pytest.mark.parametrize("clip,rate", [("ntsc", 30000 / 1001), ("odd", 26.777), ("fifty", 50.0), ("mpeg4", 25.0)])
def test_odd_frame_rates(clips, clip, rate):
    r = sample(clips[clip], n=10)
    for f in r.frames:
        k = read_barcode(f.image)
        assert f.info.index == k
        assert f.info.timestamp == pytest.approx(k / rate, abs=1 / rate)


@pytest.mark.parametrize("t", [0.0, 0.02, 3.3, 5.017, 7.9999, 11.95])
def test_end_at_window_never_shows_the_future(clips, t):
    schedule = [k / 30 for k in range(360)]
    r = sample(clips["h264"], n=8, end_at=t, lookback=4.0)
    assert_true_frames(r, schedule)
    assert all(f.info.timestamp <= t + 1e-9 for f in r.frames)
    last = r.frames[-1]
    expected_last = max(k for k, s in enumerate(schedule) if s <= t + 1e-9)
    assert last.info.index == expected_last
    assert "end_at" in last.info.reason
    assert r.window == (pytest.approx(max(0.0, t - 4.0)), pytest.approx(t))
    assert all(f.info.timestamp >= schedule[max(0, int((t - 4.0) * 30) - 1)] for f in r.frames)


def test_end_at_on_vfr_freeze_picks_the_frame_on_screen(clips):
    schedule = vfr_schedule()
    t = schedule[138] + 1.5  # inside the freeze
    r = sample(clips["vfr"], n=6, end_at=t, lookback=3)
    assert r.frames[-1].info.timestamp == pytest.approx(schedule[138], abs=1e-6)
    assert all(f.info.timestamp <= t for f in r.frames)


def test_explicit_window(clips):
    r = sample(clips["h264"], n=5, start=2.0, end=4.0)
    assert len(r.frames) == 5
    assert all(2.0 - 1 / 30 <= f.info.timestamp < 4.0 for f in r.frames)


def test_window_with_fewer_frames_than_budget_returns_each_once(clips):
    r = sample(clips["h264"], n=16, start=1.0, end=1.2)
    assert [f.info.index for f in r.frames] == list(range(30, 36))


@pytest.mark.parametrize("fps,expected", [(1.0, 12), (2.0, 16), (0.5, 6)])
def test_fps_strategy_is_capped_by_budget(clips, fps, expected):
    r = sample(clips["h264"], strategy="fps", fps=fps, n=16)
    assert len(r.frames) == expected
    if fps == 1.0:
        assert [f.info.index for f in r.frames] == [30 * k for k in range(12)]


def test_fps_with_end_at_is_anchored_at_the_question(clips):
    r = sample(clips["h264"], strategy="fps", fps=1.0, n=8, end_at=9.5, lookback=5)
    assert r.frames[-1].info.index == round(9.5 * 30)
    assert [round(f.info.timestamp, 3) for f in r.frames] == [4.5, 5.5, 6.5, 7.5, 8.5, 9.5]


def test_keyframes_strategy_returns_only_key_frames(clips):
    r = sample(clips["h264"], strategy="keyframes", n=5)
    assert len(r.frames) == 5
    assert all(f.info.keyframe for f in r.frames)
    assert all(f.info.index % 30 == 0 for f in r.frames)
    assert_true_frames(r, [k / 30 for k in range(360)])


def test_keyframes_with_end_at_adds_the_frame_at_t(clips):
    r = sample(clips["h264"], strategy="keyframes", n=4, end_at=5.5, lookback=10)
    assert r.frames[-1].info.index == 165 and not r.frames[-1].info.keyframe
    assert all(f.info.keyframe for f in r.frames[:-1])
    assert len(r.frames) <= 4


def test_scene_strategy_finds_the_cut(tmp_path):
    from framejudge.examples.clips import scene_cut
    from framejudge.examples.synth import cfr_times, write_video

    clip = write_video(tmp_path / "cut.mp4", scene_cut, cfr_times(8, 30), gop=60)
    r = sample(clip, strategy="scene", n=3)
    assert len(r.frames) == 3
    scene = [f for f in r.frames if f.info.reason == "scene"]
    assert [f.info.timestamp for f in scene] == [pytest.approx(4.0)]
    assert any("scene change" in w for w in r.warnings)  # fewer cuts than budget: uniform fill


def test_budget_is_always_respected(clips):
    for strategy, extra in [("uniform", {}), ("fps", {"fps": 30.0}), ("keyframes", {}), ("scene", {})]:
        for n in (1, 3):
            r = sample(clips["h264"], strategy=strategy, n=n, **extra)
            assert 1 <= len(r.frames) <= n, strategy


def test_resize_keeps_aspect_ratio(clips):
    r = sample(clips["wide"], n=1, max_side=320)
    img = r.frames[0].image
    assert img.shape == (40, 320, 3)
    assert r.frames[0].info.width == 320 and r.frames[0].info.height == 40
    r = sample(clips["h264"], n=1, max_side=768)
    assert r.frames[0].image.shape == (180, 320, 3)  # never upscaled


@pytest.mark.parametrize(
    "clip,undo,rotation",
    [("rot90", lambda a: np.rot90(a, -1), 90), ("rot270", lambda a: np.rot90(a, 1), 270), ("rot180", lambda a: a[::-1, ::-1], 180)],
)
def test_rotation_metadata_is_applied(clips, clip, undo, rotation):
    r = sample(clips[clip], n=4)
    assert r.video.rotation == rotation
    for f in r.frames:
        if rotation in (90, 270):
            assert f.image.shape == (320, 180, 3)
            assert (r.video.display_width, r.video.display_height) == (180, 320)
        stored = undo(f.image)
        assert read_barcode(stored) == f.info.index


def test_multiple_video_streams_pick_the_main_one_and_allow_choosing(clips):
    r = sample(clips["multi"], n=4)
    assert r.video.width == 320 and r.video.frame_count == 90
    assert r.video.stream_index == 1
    thumb = sample(clips["multi"], n=4, stream=0)
    assert thumb.video.width == 64 and len(thumb.frames) == 1


def test_video_shorter_than_audio_uses_video_timing(clips):
    r = sample(clips["with_audio"], n=4)
    assert r.video.duration == pytest.approx(2.0, abs=0.05)
    assert r.frames[-1].info.timestamp < 2.0


def test_truncated_file_returns_frames_before_the_damage_with_a_warning(clips):
    r = sample(clips["truncated"], n=8)
    assert 0 < r.video.duration < 10.0
    assert len(r.frames) == 8
    assert all(f.info.timestamp < r.video.duration for f in r.frames)
    assert_true_frames(r, [k / 30 for k in range(300)])
    assert any("damaged after" in w and " s " in w for w in r.warnings)


def test_deterministic(clips):
    a = sample(clips["vfr"], n=12, strategy="scene")
    b = sample(clips["vfr"], n=12, strategy="scene")
    assert a.timestamps == b.timestamps
    assert all(np.array_equal(x.image, y.image) for x, y in zip(a.frames, b.frames))


# 30 fps for a second, one frame held for 8 s, 30 fps for the last second.
FREEZE_SCHEDULE = [k / 30 for k in range(30)] + [1.0] + [9.0 + k / 30 for k in range(30)]


@pytest.fixture(scope="module")
def freeze_clip(tmp_path_factory):
    from framejudge.examples.synth import write_video
    from tests.conftest import barcode_frame

    path = tmp_path_factory.mktemp("freeze") / "freeze.mp4"
    return write_video(path, barcode_frame(320, 180), FREEZE_SCHEDULE, size=(320, 180), gop=30)


@pytest.mark.parametrize("n", [2, 3, 4, 8, 16])
def test_uniform_budget_is_spent_around_a_long_freeze(freeze_clip, n):
    r = sample(freeze_clip, n=n)
    assert_true_frames(r, FREEZE_SCHEDULE)
    ts = r.timestamps
    assert len(ts) == n and len(set(ts)) == n and ts == sorted(ts)
    assert 1.0 in ts  # the held frame is on screen for most of the clip
    assert max(ts) >= 9.0  # the last second is shown
    if n >= 3:
        assert min(ts) < 1.0  # and so is the first


@pytest.mark.parametrize("end_at,n", [(5.0, 4), (8.9, 6), (9.5, 6), (9.5, 2), (10.0, 8)])
def test_end_at_window_around_a_freeze_uses_the_whole_budget(freeze_clip, end_at, n):
    r = sample(freeze_clip, n=n, end_at=end_at, lookback=30)
    assert_true_frames(r, FREEZE_SCHEDULE)
    ts = r.timestamps
    assert len(ts) == n and len(set(ts)) == n
    assert all(t <= end_at for t in ts)
    on_screen = max(t for t in FREEZE_SCHEDULE if t <= end_at)
    assert ts[-1] == pytest.approx(on_screen, abs=1e-3) and "end_at" in r.frames[-1].info.reason


def test_explicit_window_over_a_freeze_uses_the_whole_budget(freeze_clip):
    r = sample(freeze_clip, n=4, start=0.5, end=9.5)
    ts = r.timestamps
    assert len(ts) == 4 and len(set(ts)) == 4
    assert all(0.5 - 1 / 30 <= t < 9.5 for t in ts)
    assert 1.0 in ts and max(ts) >= 9.0


def test_sparse_timestamps_use_the_whole_budget(tmp_path):
    from framejudge.examples.synth import write_video
    from tests.conftest import barcode_frame

    schedule = [0.0, 0.04, 0.08, 5.0, 9.9, 9.94]
    clip = write_video(tmp_path / "sparse.mp4", barcode_frame(320, 180), schedule, size=(320, 180))
    for n in (2, 3, 4, 5):
        r = sample(clip, n=n)
        assert_true_frames(r, schedule)
        assert len(r.timestamps) == n and len(set(r.timestamps)) == n
    r = sample(clip, n=3)
    assert r.timestamps[0] < 1.0 and 5.0 in r.timestamps and r.timestamps[-1] > 9.0


def test_duplicated_timestamps_around_a_freeze_use_the_whole_budget(tmp_path):
    from framejudge.examples.synth import write_video
    from tests.conftest import barcode_frame

    doubled = sorted(FREEZE_SCHEDULE + FREEZE_SCHEDULE)  # every timestamp written twice
    clip = write_video(
        tmp_path / "doubled.mkv", barcode_frame(320, 180), doubled, size=(320, 180), fmt="matroska",
        bframes=0,
    )
    r = sample(clip, n=6)
    assert any("duplicate timestamps" in w for w in r.warnings)
    assert len(set(r.timestamps)) == 6 and 1.0 in r.timestamps and max(r.timestamps) >= 9.0
