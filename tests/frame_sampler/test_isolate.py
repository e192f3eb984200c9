"""Sampling in killable, memory-capped worker processes: the same frames as in-process, errors that
cross the process boundary whole, a time limit that stops a decode, a memory cap that turns a
runaway allocation into an error, and a worker replaced after each."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from framejudge.examples.clips import countdown
from framejudge.examples.synth import cfr_times, write_video
from framejudge.frame_sampler import (
    DecoderDied,
    DecodeTimedOut,
    IsolatedSampler,
    NotAVideo,
    SamplingWarning,
    VideoNotFound,
    sample_frames,
)
from tests.conftest import read_barcode


@pytest.fixture(scope="module")
def isolated():
    with IsolatedSampler(workers=1, timeout_s=60, cache_dir=None) as sampler:
        yield sampler


def test_same_frames_as_in_process(isolated, clips):
    for name in ("h264", "vfr", "rot90"):
        here = sample_frames(clips[name], n=8, cache=None)
        there = isolated.sample(clips[name], n=8)
        assert [f.info for f in there.frames] == [f.info for f in here.frames]
        assert all(np.array_equal(a.image, b.image) for a, b in zip(there.frames, here.frames, strict=True))
        assert there.video == here.video
    picks = [read_barcode(f.image) for f in isolated.sample(clips["h264"], n=4).frames]
    assert picks == [read_barcode(f.image) for f in sample_frames(clips["h264"], n=4, cache=None).frames]


def test_warnings_and_errors_cross_the_boundary(isolated, clips, tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = isolated.sample(clips["truncated"], n=4)
    assert result.warnings and any(issubclass(w.category, SamplingWarning) for w in caught)
    with pytest.raises(VideoNotFound) as err:
        isolated.sample(tmp_path / "missing.mp4")
    assert err.value.path == str(tmp_path / "missing.mp4") and err.value.code == "video_not_found"
    page = tmp_path / "page.mp4"
    page.write_text("<html>404</html>")
    with pytest.raises(NotAVideo):
        isolated.sample(page)


def test_a_decode_past_the_time_limit_is_stopped_and_the_worker_replaced(tmp_path):
    clip = write_video(tmp_path / "hd.mp4", countdown, cfr_times(4, 30), size=(1920, 1080), gop=60)
    with IsolatedSampler(workers=1, timeout_s=60, cache_dir=None) as sampler:
        sampler.sample(clip, n=1)  # the worker is up
        sampler.timeout_s = 0.01  # far below what decoding 16 HD frames takes
        with pytest.raises(DecodeTimedOut) as err:
            sampler.sample(clip, n=16)
        assert "longer than 0.01 s" in str(err.value) and err.value.code == "decode_timed_out"
        sampler.timeout_s = 60
        assert len(sampler.sample(clip, n=4).frames) == 4  # a fresh worker took over


def test_the_memory_cap_stops_a_big_decode_not_the_caller(tmp_path):
    small = write_video(tmp_path / "small.mp4", countdown, cfr_times(1, 10), size=(640, 360), gop=10)
    huge = write_video(tmp_path / "8k.mp4", countdown, cfr_times(0.2, 10), size=(7680, 4320), gop=10)
    # 640x360 decodes in about 90 MB resident, 8K in about 250 MB
    with IsolatedSampler(workers=1, timeout_s=120, max_memory_mb=160, cache_dir=None) as sampler:
        assert len(sampler.sample(small, n=2).frames) == 2
        with pytest.raises(DecoderDied) as err:
            sampler.sample(huge, n=2)
        assert "over the memory cap of 160 MB" in str(err.value) and err.value.code == "decoder_died"
        assert len(sampler.sample(small, n=2).frames) == 2  # a fresh worker took over
    # the same 8K clip decodes where memory allows
    with IsolatedSampler(workers=1, timeout_s=120, max_memory_mb=None, cache_dir=None) as sampler:
        assert len(sampler.sample(huge, n=2).frames) == 2


def test_closed_samplers_start_again(clips):
    sampler = IsolatedSampler(workers=1, timeout_s=60, cache_dir=None)
    assert len(sampler.sample(clips["h264"], n=2).frames) == 2
    sampler.close()
    assert len(sampler.sample(clips["h264"], n=2).frames) == 2
    sampler.close()


def test_calls_waiting_when_the_sampler_is_closed_end_instead_of_waiting_for_ever(tmp_path):
    """A run being stopped closes its sampler from another thread while calls wait on it (one
    decoding, others queued behind it). A stopped pool resolves nothing it had queued: each call
    now raises DecodingStopped (or returns, if its decode finished first) instead of hanging the
    process's shutdown, which waits for those threads."""
    import threading
    import time

    from framejudge.frame_sampler.isolate import DecodingStopped

    clip = write_video(tmp_path / "hd.mp4", countdown, cfr_times(4, 30), size=(1920, 1080), gop=60)
    sampler = IsolatedSampler(workers=1, timeout_s=120, cache_dir=None)
    sampler.start()
    ended: list[str] = []

    def call() -> None:
        try:
            sampler.sample(clip, n=16)
            ended.append("decoded")
        except DecodingStopped as exc:
            assert "stopped" in str(exc) and "hd.mp4" in str(exc)
            ended.append("stopped")

    threads = [threading.Thread(target=call, daemon=True) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.3)  # one decoding, two queued behind it
    sampler.close()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a call still waits on the closed sampler"
    assert len(ended) == 3 and "stopped" in ended, ended
    assert len(sampler.sample(clip, n=2).frames) == 2  # and it starts again
    sampler.close()


def _readme_example() -> str:
    """The IsolatedSampler example of docs/frame-sampling.md, as written there."""
    import re
    from pathlib import Path

    page = (Path(__file__).parents[2] / "docs" / "frame-sampling.md").read_text()
    [code] = [c for c in re.findall(r"```python\n(.*?)```", page, re.DOTALL) if "IsolatedSampler(" in c]
    return code


def test_the_readme_example_runs_as_a_script_and_without_its_guard_says_why_in_one_line(clips, tmp_path):
    import os
    import shutil
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    shutil.copy(clips["h264"], tmp_path / "upload.mp4")
    guarded = _readme_example() + "    print(len(result.frames))\n"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2]), "FRAMEJUDGE_NO_CACHE": "1"}
    (tmp_path / "guarded.py").write_text(guarded)
    ran = subprocess.run([sys.executable, "guarded.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120, check=False)
    assert ran.returncode == 0 and ran.stdout == "8\n", ran.stderr
    # the same code without its guard: every decoding process would run it again on import
    head, _, body = guarded.partition('if __name__ == "__main__":')
    (tmp_path / "unguarded.py").write_text(head + textwrap.dedent(body.split("\n", 1)[1]))
    ran = subprocess.run([sys.executable, "unguarded.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120, check=False)
    last = ran.stderr.strip().splitlines()[-1]
    assert ran.returncode == 1 and last.startswith("framejudge.frame_sampler.isolate.UnguardedScript: the decoding "
                                                   "processes could not start"), ran.stderr
    assert 'under `if __name__ == "__main__":`' in last and "BrokenProcessPool" not in ran.stderr
