"""File names, ids and messages reach the terminal as they are: square brackets in a name are not
taken as console markup (which dropped them from error lines, or failed on '[/]' with a traceback)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from framejudge.examples.clips import countdown
from framejudge.examples.synth import cfr_times, write_video

ROOT = Path(__file__).parents[1]
RUBRIC = ROOT / "framejudge" / "rubrics" / "builtin" / "video-qa.yaml"


def cli(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "framejudge.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "300"})


@pytest.mark.parametrize("name", ["x[/]y.jsonl", "clip[red].jsonl", "[bold]items.jsonl"])
def test_error_lines_keep_brackets_in_file_names(tmp_path, name):
    missing = tmp_path / "in[dim]" / name
    proc = cli("grade", missing, "--out", tmp_path / "v.jsonl")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"error: {missing}: no such items file" in proc.stderr


def test_tables_keep_brackets_in_names(tmp_path):
    video = tmp_path / "clip[bold].mp4"
    write_video(video, countdown, cfr_times(1, 10), gop=10)
    proc = cli("frames", video, "-n", 1, "--no-cache")
    assert proc.returncode == 0 and "clip[bold].mp4: " in proc.stdout, proc.stdout
    folder = tmp_path / "rubrics[red]"
    folder.mkdir()
    (folder / "mine.yaml").write_text(RUBRIC.read_text().replace("id: video-qa\n", "id: mine\n", 1))
    proc = cli("rubrics", "list", "--dir", folder)
    assert proc.returncode == 0 and str(folder / "mine.yaml") in proc.stdout, proc.stdout
