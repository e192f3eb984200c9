"""`grade`'s stdout is its summary alone with a litellm judge: litellm's banners ("Provider List",
"Give Feedback / Get Help") stay off it, on success and on provider errors, against a real
OpenAI-compatible server on loopback (bench/model_server.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("litellm")
pytest.importorskip("aiohttp")

from bench.model_server import ModelServer

ROOT = Path(__file__).parents[2]


def _grade(items: Path, server: ModelServer, *extra: str) -> subprocess.CompletedProcess[str]:
    """`framejudge grade` of `items` by the loopback server's model, into v.jsonl beside them."""
    return subprocess.run(
        [sys.executable, "-m", "framejudge.cli", "grade", str(items), "--out", str(items.parent / "v.jsonl"),
         "--judge", "litellm:openai/bench-vlm", "--api-base", server.base_url, "--yes", "--no-cache", "--no-swap",
         *extra],
        capture_output=True, text=True, timeout=300, cwd=items.parent,
        env={**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"})


@pytest.mark.parametrize("status_error", [None, 400, 500])
def test_summary_json_on_stdout_parses(tmp_path, status_error):
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": f"i{k}", "turns": [{
        "question": "How many people are on the bench?", "golden": f"{k} people.",
        "response_a": f"There are {k} people.", "response_b": f"There are {k + 1} people."}]}) + "\n"
        for k in range(3)))
    with ModelServer() as server:
        if status_error is not None:
            server.configure(status_error=status_error)
        proc = _grade(items, server, "--summary-json", "-")
    assert proc.returncode == (0 if status_error is None else 1), proc.stderr  # 1: turns that could not be graded
    summary = json.loads(proc.stdout)  # nothing but the summary
    if status_error is None:
        assert summary["turns_graded"] == 3
    else:
        assert summary["turns_graded"] == 0 and sum(summary["errors"].values()) == 3


def test_a_sampling_warning_is_one_plain_line_once(tmp_path, clips):
    # the damaged clip is decoded in a decoding process: its warning comes back on the result and
    # is said once, as the CLI's other notes, without Python's file, line and source
    import shutil

    shutil.copy(clips["truncated"], tmp_path / "truncated.mp4")
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"id": "t", "video": "truncated.mp4", "turns": [{
        "question": "What is shown?", "response_a": "A barcode.", "response_b": "Nothing."}]}) + "\n")
    with ModelServer() as server:
        proc = _grade(items, server, "-n", "2")
    assert proc.returncode == 0, proc.stderr
    said = [line for line in proc.stderr.splitlines() if "container damaged" in line]
    assert len(said) == 1 and said[0].startswith(f"warning: {tmp_path / 'truncated.mp4'}: container damaged after")
    assert "SamplingWarning" not in proc.stderr and ".py:" not in proc.stderr
