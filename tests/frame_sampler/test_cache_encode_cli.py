"""The on-disk frame cache, the payload encoders and the `framejudge frames` command."""

from __future__ import annotations

import base64
import io
import os
import shutil
import subprocess
import sys
import warnings

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from framejudge.cli import app
from framejudge.frame_sampler import (
    FrameCache,
    InvalidRequest,
    SamplingWarning,
    contact_sheet,
    format_timestamp,
    sample_frames,
    to_data_url,
    to_jpeg,
)
from tests.conftest import read_barcode, vfr_schedule


@pytest.fixture()
def cache(tmp_path):
    c = FrameCache(tmp_path / "cache")
    yield c
    c.close()


def test_second_call_is_served_from_the_cache(clips, cache):
    a = sample_frames(clips["h264"], n=6, end_at=7.0, cache=cache)
    b = sample_frames(clips["h264"], n=6, end_at=7.0, cache=cache)
    assert not a.from_cache and a.packets_decoded > 0
    assert b.from_cache and b.packets_decoded == 0
    assert a.timestamps == b.timestamps
    assert all(np.array_equal(x.image, y.image) for x, y in zip(a.frames, b.frames))
    assert cache.count() == 1


def test_cache_is_keyed_by_content_and_parameters(clips, cache, tmp_path):
    sample_frames(clips["h264"], n=6, cache=cache)
    assert not sample_frames(clips["h264"], n=7, cache=cache).from_cache
    copy = tmp_path / "renamed.mp4"
    shutil.copy(clips["h264"], copy)
    hit = sample_frames(copy, n=6, cache=cache)
    assert hit.from_cache and hit.video.path == str(copy)
    # Editing the file changes its hash: a miss, never stale frames.
    shutil.copy(clips["long_gop"], copy)
    os.utime(copy, ns=(1, 1))
    miss = sample_frames(copy, n=6, cache=cache)
    assert not miss.from_cache and miss.video.duration == pytest.approx(20.0, abs=0.05)


def test_cache_shared_across_processes(clips, tmp_path):
    code = (
        "import sys; from framejudge.frame_sampler import sample_frames, FrameCache;"
        f"r = sample_frames({str(clips['h264'])!r}, n=5, cache=FrameCache({str(tmp_path / 'c')!r}));"
        "print(r.from_cache)"
    )
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True) for _ in range(2)]
    assert [r.stdout.strip() for r in runs] == ["False", "True"]


@pytest.mark.parametrize("value, cached", [("0", True), ("false", True), ("off", True), ("", True), ("1", False),
                                           ("true", False), ("YES", False)])
def test_framejudge_no_cache_is_a_switch_that_0_leaves_on(clips, monkeypatch, tmp_path, value, cached):
    monkeypatch.setenv("FRAMEJUDGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("FRAMEJUDGE_NO_CACHE", value)
    sample_frames(clips["h264"], n=3)
    assert sample_frames(clips["h264"], n=3).from_cache is cached
    assert (tmp_path / "cache").exists() is cached


def test_a_framejudge_no_cache_that_is_neither_on_nor_off_is_refused(clips, monkeypatch):
    monkeypatch.setenv("FRAMEJUDGE_NO_CACHE", "maybe")
    with pytest.raises(ValueError, match="FRAMEJUDGE_NO_CACHE='maybe': set it to 1"):
        sample_frames(clips["h264"], n=3)
    for args in (["frames", str(clips["h264"]), "-n", "2", "--json"], ["rubrics", "list"]):
        proc = subprocess.run([sys.executable, "-m", "framejudge.cli", *args], capture_output=True, text=True,
                              timeout=120, env={**os.environ, "FRAMEJUDGE_NO_CACHE": "maybe"})
        assert proc.returncode == 2 and proc.stderr.startswith("error: FRAMEJUDGE_NO_CACHE='maybe'"), proc.stderr
        assert "Traceback" not in proc.stderr


def test_cached_result_still_warns(clips, cache):
    with pytest.warns(SamplingWarning):
        sample_frames(clips["truncated"], n=2, cache=cache)
    with pytest.warns(SamplingWarning):
        assert sample_frames(clips["truncated"], n=2, cache=cache).from_cache


def test_jpeg_and_data_url(clips):
    r = sample_frames(clips["h264"], n=1, cache=None)
    data = to_jpeg(r.frames[0].image, quality=90)
    assert data[:3] == b"\xff\xd8\xff"
    decoded = np.asarray(Image.open(io.BytesIO(data)))
    assert decoded.shape == r.frames[0].image.shape
    assert read_barcode(decoded) == r.frames[0].info.index
    url = to_data_url(r.frames[0].image)
    assert url.startswith("data:image/jpeg;base64,")
    assert base64.b64decode(url.split(",", 1)[1])[:3] == b"\xff\xd8\xff"
    assert len(to_jpeg(r.frames[0].image, 30)) < len(to_jpeg(r.frames[0].image, 95))
    with pytest.raises(InvalidRequest):
        to_jpeg(r.frames[0].image, 0)


def test_frames_encoded_where_decoded_give_the_same_data_urls_at_a_fraction_of_the_size(clips):
    import pickle

    from framejudge.frame_sampler import EncodedFrame

    r = sample_frames(clips["h264"], n=4, cache=None)
    carried = r.encoded(85)
    assert all(isinstance(f, EncodedFrame) for f in carried.frames)
    assert carried.timestamps == r.timestamps and carried.video == r.video and r.frames[0].image is not None
    # what a model call sends is the same, byte for byte
    assert [f.data_url(85) for f in carried.frames] == [f.data_url(85) for f in r.frames]
    # at another quality the frame is encoded again, from its JPEG's pixels
    assert carried.frames[0].data_url(60).startswith("data:image/jpeg;base64,")
    assert carried.frames[0].data_url(60) != carried.frames[0].data_url(85)
    # the pixels, read back from the JPEG, show the same frame
    assert carried.frames[1].image.shape == r.frames[1].image.shape
    assert read_barcode(carried.frames[1].image) == r.frames[1].info.index
    # and what crosses a process or a machine is a tenth of the pixels or less
    assert len(pickle.dumps(carried)) * 10 < len(pickle.dumps(r))
    assert carried.encoded(85).frames == carried.frames  # encoding twice changes nothing


def test_contact_sheet_grid_with_timestamps(clips):
    r = sample_frames(clips["h264"], n=5, cache=None)
    sheet = contact_sheet([f.image for f in r.frames], r.timestamps, cell=160)
    assert sheet.size[0] == 3 * 160  # ceil(sqrt(5)) columns
    rows = 2
    assert sheet.size[1] >= rows * 90
    assert format_timestamp(3725.5) == "1:02:05.500"
    assert format_timestamp(12.25) == "00:12.250"
    with pytest.raises(InvalidRequest):
        contact_sheet([], [])


runner = CliRunner()


def test_cli_frames_writes_jpegs_named_by_timestamp(clips, tmp_path):
    out = tmp_path / "frames"
    res = runner.invoke(
        app, ["frames", str(clips["h264"]), "-n", "4", "--end-at", "6.5", "--lookback", "3",
              "--out", str(out), "--contact-sheet", str(tmp_path / "sheet.jpg"), "--no-cache"],
    )
    assert res.exit_code == 0, res.output
    names = sorted(p.name for p in out.iterdir())
    assert names == ["000003.500s.jpg", "000004.500s.jpg", "000005.500s.jpg", "000006.500s.jpg"]
    assert "6.500" in res.output and "end_at" in res.output
    assert (tmp_path / "sheet.jpg").stat().st_size > 0


def test_cli_json_output(clips):
    res = runner.invoke(app, ["frames", str(clips["vfr"]), "-n", "3", "--json", "--no-cache"])
    assert res.exit_code == 0, res.output
    import json

    payload = json.loads(res.stdout)
    assert len(payload["frames"]) == 3
    assert payload["video"]["frame_count"] == len(vfr_schedule()) == 184
    assert payload["params"]["strategy"] == "uniform"


@pytest.mark.parametrize(
    "args,message",
    [
        (["frames", "/nonexistent/clip.mp4"], "file not found"),
        (["frames", "{h264}", "-n", "0"], "frame budget must be at least 1"),
        (["frames", "{h264}", "--end-at", "99"], "after the end of the clip"),
        (["frames", "{h264}", "--strategy", "fps"], "needs fps"),
    ],
)
def test_cli_bad_input_is_one_line_and_nonzero(clips, args, message):
    args = [a.format(h264=clips["h264"]) for a in args]
    proc = subprocess.run(
        [sys.executable, "-m", "framejudge.cli", *args], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0]


def test_cli_not_a_video(tmp_path):
    bad = tmp_path / "page.mp4"
    bad.write_text("<html>403</html>")
    res = runner.invoke(app, ["frames", str(bad), "--no-cache"])
    assert res.exit_code == 2
    assert "not a readable media file" in res.output


def test_examples_make(tmp_path):
    res = runner.invoke(app, ["examples", "make", str(tmp_path / "ex")])
    assert res.exit_code == 0, res.output
    names = sorted(p.name for p in (tmp_path / "ex").iterdir())
    assert names == ["countdown.mp4", "departures.mp4", "price_tag.mp4", "scene_cut.mp4", "shapes.mp4", "text_sign.mp4"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SamplingWarning)
        r = sample_frames(tmp_path / "ex" / "scene_cut.mp4", strategy="scene", n=2, cache=None)
    assert [f.info.reason for f in r.frames].count("scene") == 1
