"""JSON lines files the CLI reads (items, labels, predictions, verdicts) are read as JSON is
written down: a key given twice, NaN, Infinity and numbers too large to hold are refused naming the
file and line, never kept as a silent null or the last key's value; a verdicts file with lines that
are not objects is an error line, and commands that only read a verdicts file leave it as it is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
EXAMPLES = ROOT / "examples" / "items.jsonl"
TURN = '"turns": [{"question": "What is shown?", "response_a": "A red circle."}]'


def cli(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "framejudge.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})


def refused(proc: subprocess.CompletedProcess[str], words: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and words in proc.stderr, proc.stderr


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory, bundled_examples) -> Path:
    out = tmp_path_factory.mktemp("run") / "v.jsonl"
    proc = cli("grade", bundled_examples, "--out", out)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.parametrize("line, words", [
    ('{"id": "a", "id": "b", %s}' % TURN, ":1: key 'id' given twice"),
    ('{"id": "a", %s, "metadata": {"x": NaN}}' % TURN, ":1: NaN is not a JSON number"),
    ('{"id": "a", %s, "metadata": {"x": -Infinity}}' % TURN, ":1: -Infinity is not a JSON number"),
    ('{"id": "a", %s, "metadata": {"x": 1e999}}' % TURN, ":1: number 1e999 is too large"),
    ('{"id": "a", %s, "metadata": {"x": 1%s}}' % (TURN, "0" * 5000), ":1: a number has more than"),
])
def test_items_that_strict_json_refuses(tmp_path, line, words):
    items = tmp_path / "items.jsonl"
    items.write_text(line + "\n")
    out = tmp_path / "v.jsonl"
    refused(cli("grade", items, "--out", out), f"{items}{words}")
    assert not out.exists()


def test_numbers_written_as_strings_are_refused_in_items_and_labels(tmp_path, verdicts):
    items = tmp_path / "items.jsonl"
    items.write_text('{"id": "a", "task_type": "multi_turn", "turns": [{"time": "3", "question": "What is shown?", '
                     '"response_a": "A red circle."}]}\n')
    refused(cli("grade", items, "--out", tmp_path / "v.jsonl"), f"{items}:1: turns.0.time: Input should be a valid number")
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"item_id": "countdown-last", "turn": "0", "annotator": "h1", "category_a": "Successful"}\n')
    refused(cli("calibrate", "--human", labels, "--judge", verdicts), f"{labels}:1: turn: Input should be a valid integer")
    labels.write_text('{"item_id": "countdown-last", "annotator": "h1", "integrity_a": "no"}\n')  # a switch too
    refused(cli("calibrate", "--human", labels, "--judge", verdicts), f"{labels}:1: integrity_a: Input should be a valid boolean")


def test_labels_and_predictions_with_a_key_given_twice(tmp_path, verdicts):
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"item_id": "countdown-last", "annotator": "h1", "category_a": "Successful", '
                      '"category_a": "Not Successful"}\n')
    refused(cli("calibrate", "--human", labels, "--judge", verdicts), f"{labels}:1: key 'category_a' given twice")
    pred, gold = tmp_path / "pred.jsonl", tmp_path / "gold.jsonl"
    pred.write_text('{"video_path": "a", "mcq_answer": "A", "mcq_answer": "B"}\n')
    gold.write_text('{"video_path": "a", "mcq_answer": "A", "mcq_options": ["A. x", "B. y"]}\n')
    refused(cli("mcq", "score", pred, gold), f"{pred}:1: key 'mcq_answer' given twice")


def test_a_video_name_with_a_nul_character(tmp_path):
    items = tmp_path / "items.jsonl"
    items.write_text('{"id": "a", "video": "c.mp4\\u0000.txt", %s}\n' % TURN)
    refused(cli("grade", items, "--out", tmp_path / "v.jsonl"), f"{items}:1: video: holds a NUL character")


@pytest.mark.parametrize("line", ["[1, 2]", '"verdict"', "5", "null", "[" * 100_000 + "]" * 100_000],
                         ids=["list", "string", "number", "null", "nested-100000-deep"])
def test_a_verdicts_file_with_a_line_that_is_not_a_record(tmp_path, verdicts, line):
    out = tmp_path / "v.jsonl"
    out.write_text(verdicts.read_text() + line + "\n")
    n = len(verdicts.read_text().splitlines()) + 1
    refused(cli("grade", EXAMPLES, "--out", out), f"{out}:{n}: not a verdict or judge error record")
    labels = tmp_path / "labels.jsonl"
    labels.write_text(json.dumps({"item_id": "countdown-last", "annotator": "h1", "category_a": "Successful"}) + "\n")
    refused(cli("calibrate", "--human", labels, "--judge", out, "--replicates", 10),
            f"{out}:{n}: not a verdict or judge error record")


def test_calibrate_leaves_a_verdicts_file_being_written_as_it_is(tmp_path, verdicts):
    """A torn last line is what a running grade has half written: a reader leaves it out and does
    not cut it from the file."""
    out = tmp_path / "v.jsonl"
    text = verdicts.read_text()
    last = text.splitlines()[-1]
    out.write_text("\n".join(text.splitlines()[:-1]) + "\n" + last[: len(last) // 2])
    before = out.read_bytes()
    labels = tmp_path / "labels.jsonl"
    ids = [json.loads(line)["id"] for line in EXAMPLES.read_text().splitlines()]
    labels.write_text("".join(json.dumps({"item_id": i, "annotator": a, "category_a": "Successful"}) + "\n"
                              for i in ids for a in ("h1", "h2")))
    proc = cli("calibrate", "--human", labels, "--judge", out, "--replicates", 10)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == before
