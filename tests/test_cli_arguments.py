"""Arguments that would quietly do nothing are refused (exit 2, naming the argument) or warned
about: grade's samples, blind control, media root and decoding limits; mcq score's empty or
impossible inputs; calibrate's labels without verdicts and --by keys nobody has."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
EXAMPLES = ROOT / "examples" / "items.jsonl"


def cli(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "framejudge.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})


def refused(proc: subprocess.CompletedProcess[str], words: str) -> None:
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"error: {words}" in proc.stderr, proc.stderr


@pytest.mark.parametrize("args, words", [
    (["--concurrency", "0"], "--concurrency 0: Input should be greater than or equal to 1"),
    (["--concurrency", "-4"], "--concurrency -4: Input should be greater than or equal to 1"),
    (["--max-concurrency", "5000"], "--max-concurrency 5000: Input should be less than or equal to 4096"),
    (["--samples", "5"], "--samples 5: the reference judge is deterministic"),
    (["--samples", "1000"], "samples: Input should be less than or equal to 32"),
    (["--video-input", "clip"], "--video-input clip: the reference judge sends frames only"),
    (["--clip-fps", "0"], "clip_fps: Input should be greater than 0"),
    (["--service-tier", "flex"], "--service-tier flex: the reference judge calls no model server"),
    (["--sample-temperature", "0"], "sample_temperature: Input should be greater than 0"),
    (["--media-root", "/nonexistent-media"], "--media-root /nonexistent-media: no such folder"),
    (["--media-root", EXAMPLES], f"--media-root {EXAMPLES}: not a folder"),
    (["--decode-memory-mb", "0"], "--decode-memory-mb 0: Input should be greater than or equal to 256"),
    (["--decode-workers", "0"], "--decode-workers 0: Input should be greater than or equal to 1"),
    (["--decode-workers", "100000"], "--decode-workers 100000: Input should be less than or equal to 256"),
    (["--decode-memory-mb", "99999999999999"], "--decode-memory-mb 99999999999999: Input should be less than or "
                                                "equal to 1048576"),
])
def test_grade_refuses_arguments_that_do_nothing(tmp_path, args, words):
    out = tmp_path / "v.jsonl"
    refused(cli("grade", EXAMPLES, "--out", out, *args), words)
    assert not out.exists()


def test_a_clip_for_a_judge_whose_provider_takes_no_video_is_refused(tmp_path):
    proc = cli("grade", EXAMPLES, "--out", tmp_path / "v.jsonl", "--judge", "litellm:openai/gpt-4o",
               "--api-base", "http://127.0.0.1:9/v1", "--video-input", "clip")
    refused(proc, "--video-input clip: the litellm:openai/gpt-4o judge's provider takes images, not video")


def test_samples_above_the_limit_with_a_model_judge_name_the_limit(tmp_path):
    proc = cli("grade", EXAMPLES, "--out", tmp_path / "v.jsonl", "--judge", "litellm:openai/m", "--samples", "1000")
    refused(proc, "samples: Input should be less than or equal to 32")


@pytest.fixture()
def mcq(tmp_path):
    pred = tmp_path / "p.jsonl"
    pred.write_text('{"video_path": "a", "mcq_answer": "B"}\n')
    return tmp_path, pred


def test_mcq_score_refuses_an_empty_predictions_file(mcq):
    tmp_path, _ = mcq
    (tmp_path / "none.jsonl").write_text("\n")
    (tmp_path / "g.jsonl").write_text('{"video_path": "a", "mcq_answer": "B", "mcq_options": ["x", "y"]}\n')
    refused(cli("mcq", "score", tmp_path / "none.jsonl", tmp_path / "g.jsonl"), f"{tmp_path / 'none.jsonl'}: no predictions")


@pytest.mark.parametrize("gold, allowed", [('"C", "mcq_options": ["x", "y"]', "(A, B)"),
                                           ('"E"', "(A, B, C, D)"), ('"maybe"', "(A, B, C, D)")])
def test_mcq_score_refuses_gold_letters_outside_the_options(mcq, gold, allowed):
    tmp_path, pred = mcq
    g = tmp_path / "g.jsonl"
    g.write_text('{"video_path": "z", "mcq_answer": "A"}\n{"video_path": "a", "mcq_answer": %s}\n' % gold)
    refused(cli("mcq", "score", pred, g), f"{g}:2: mcq_answer")
    assert allowed in cli("mcq", "score", pred, g).stderr


@pytest.mark.parametrize("options, shape", [("5", "a number"), ('[{"x": 1}, 5]', "a list holding number, object"),
                                            ('{"A": 5, "B": null}', "an object holding null, number"),
                                            ("true", "a true/false")])
def test_mcq_score_refuses_options_of_another_shape(tmp_path, options, shape):
    pred, gold = tmp_path / "p.jsonl", tmp_path / "g.jsonl"
    pred.write_text('{"video_path": "a", "mcq_answer": "the red one"}\n')
    gold.write_text('{"video_path": "a", "mcq_answer": "A", "mcq_options": %s}\n' % options)
    refused(cli("mcq", "score", pred, gold), f"{gold}:1: mcq_options must be one string")
    assert f"not {shape}" in cli("mcq", "score", pred, gold).stderr


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory, bundled_examples) -> Path:
    out = tmp_path_factory.mktemp("run") / "v.jsonl"
    assert cli("grade", bundled_examples, "--out", out).returncode == 0
    return out


def labels(path: Path, ids: list[str], **extra: str) -> Path:
    path.write_text("".join(json.dumps({"item_id": i, "annotator": a, "category_a": "Successful", **extra}) + "\n"
                            for i in ids for a in ("h1", "h2")))
    return path


def test_calibrate_refuses_labels_of_another_run(tmp_path, verdicts):
    human = labels(tmp_path / "l.jsonl", ["ghost-1", "ghost-2"])
    refused(cli("calibrate", "--human", human, "--judge", verdicts, "--replicates", "10"),
            f"none of the 2 labelled turn(s) has a verdict in {verdicts}")


def test_calibrate_warns_about_labels_without_a_verdict(tmp_path, verdicts):
    human = labels(tmp_path / "l.jsonl", ["countdown-last", "sign-hours", "ghost"])
    proc = cli("calibrate", "--human", human, "--judge", verdicts, "--replicates", "10")
    assert proc.returncode == 0, proc.stderr
    assert "warning: 1 of 3 labelled turn(s) have no verdict" in proc.stderr and "'ghost' turn 0" in proc.stderr


def test_calibrate_refuses_a_by_key_nobody_has(tmp_path, verdicts):
    human = labels(tmp_path / "l.jsonl", ["countdown-last", "sign-hours"])
    base = ["calibrate", "--human", human, "--judge", verdicts, "--replicates", "10"]
    proc = cli(*base, "--by", "colour")
    refused(proc, "--by colour: no label or verdict has it")
    assert "task_type" in proc.stderr
    for key in ("turn", "category_a", "task_type"):
        proc = cli(*base, "--by", key)
        assert proc.returncode == 0 and f"by {key}" in proc.stdout, proc.stderr


@pytest.mark.parametrize("days", ["inf", "1e308", "36501"])
def test_uploads_prune_refuses_ages_no_date_can_hold(tmp_path, days):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FRAMEJUDGE_SERVICE_DB": f"sqlite:///{tmp_path / 's.db'}",
           "FRAMEJUDGE_UPLOAD_DIR": str(tmp_path / "uploads")}
    proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "uploads", "prune", "--older-than-days", days],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "--older-than-days" in proc.stderr and "36500" in proc.stderr


@pytest.mark.parametrize("var, value", [("FRAMEJUDGE_DECODE_WORKERS", "100000"),
                                        ("FRAMEJUDGE_DECODE_MEMORY_MB", "99999999999999")])
def test_service_decode_settings_have_an_upper_bound(tmp_path, var, value):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FRAMEJUDGE_SERVICE_DB": f"sqlite:///{tmp_path / 's.db'}", var: value}
    proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "worker"], capture_output=True, text=True,
                          timeout=60, env=env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"error: {var}: Input should be less than or equal to" in proc.stderr


def test_option_help_says_its_default_in_full():
    # help text in square brackets is read as Rich markup and dropped: a default said that way vanished
    from typer.main import get_command

    from framejudge.cli import app

    said = {}
    for name, command in get_command(app).commands.items():
        for param in command.params:
            if getattr(param, "help", None):
                said[(name, param.name)] = param.help
    assert said and not [key for key, text in said.items() if "[" in text and "]" in text], said
    shown = subprocess.run([sys.executable, "-m", "framejudge.cli", "grade", "--help"], capture_output=True, text=True,
                           timeout=120, check=False,
                           env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "250"}).stdout
    assert "decoding processes, working while model calls wait (default: the CPU count)" in shown
