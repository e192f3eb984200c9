"""A cache folder (FRAMEJUDGE_CACHE_DIR) that cannot be written is one error line naming the
setting before any work, for every command that uses a cache; with the caches turned off it is
not needed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from framejudge.examples.clips import countdown
from framejudge.examples.synth import cfr_times, write_video

ROOT = Path(__file__).parents[1]
MODEL = ["--judge", "litellm:openai/gpt-4o-mini", "--api-base", "http://127.0.0.1:9/v1", "--yes"]


def cli(*args: object, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "framejudge.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT), **env})


@pytest.fixture()
def setup(tmp_path) -> dict[str, Path]:
    video = tmp_path / "c.mp4"
    write_video(video, countdown, cfr_times(1, 10), gop=10)
    items = tmp_path / "items.jsonl"
    items.write_text('{"id": "a", "video": "c.mp4", "turns": [{"question": "What number is shown?", '
                     '"response_a": "I cannot answer that."}]}\n')
    return {"video": video, "items": items, "not_a_folder": items, "db": tmp_path / "s.db"}


@pytest.mark.parametrize("command", ["frames", "grade", "serve", "worker"])
def test_a_cache_folder_that_is_a_file(setup, command):
    args = {"frames": ["frames", setup["video"], "-n", 2],
            "grade": ["grade", setup["items"], "--out", setup["items"].with_name("v.jsonl"), *MODEL],
            "serve": ["serve", "--port", 0], "worker": ["worker"]}[command]
    proc = cli(*args, FRAMEJUDGE_CACHE_DIR=str(setup["not_a_folder"]), FRAMEJUDGE_SERVICE_DB=f"sqlite:///{setup['db']}")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{setup['not_a_folder']} is not a folder (FRAMEJUDGE_CACHE_DIR)" in proc.stderr
    assert not setup["items"].with_name("v.jsonl").exists()


def test_no_cache_needs_no_cache_folder(setup):
    bad = {"FRAMEJUDGE_CACHE_DIR": str(setup["not_a_folder"])}
    assert cli("frames", setup["video"], "-n", 2, "--no-cache", **bad).returncode == 0
    out = setup["items"].with_name("v.jsonl")
    proc = cli("grade", setup["items"], "--out", out, *MODEL, "--no-cache", FRAMEJUDGE_NO_CACHE="1", **bad)
    assert proc.returncode == 0, proc.stderr
    assert '"Error message"' in out.read_text()  # graded by the rules, no call made
