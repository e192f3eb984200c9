"""Multiple-choice scoring reads stated letters and quoted options, and never invents one."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framejudge.rubrics.mcq import match_option_text, normalize_answer, score_mcq, split_options

OPTIONS = ("A. A stone wall on the right side of the paved area. B. A brown trash can on the left "
           "side of the path. C. A concrete bench on the left side of the path. D. A wooden post "
           "standing at the edge of the walkway.")

LETTER_FORMATS = [
    ("A", "A"), ("b", "B"), ("a.", "A"), ("B:", "B"), ("(B)", "B"), ("C)", "C"), ("[D]", "D"),
    ("Option D", "D"), ("option b", "B"), ("Answer: C", "C"), ("Answer:\n\nB", "B"),
    ("The answer is A.", "A"), ("The answer is: (C)", "C"), ("Final answer: D", "D"),
    ("**A**", "A"), ("*B*", "B"), ("__C__", "C"), ("'D'", "D"), ('"A"', "A"), ("- B", "B"),
    ("1. C", "C"), ("> D", "D"), ("`A`", "A"), ("A</s>", "A"), ("B<|eot_id|>", "B"),
    ("  C  \n", "C"), ("\n\nD\n", "D"), ("I think D", "D"), ("(C) is correct", "C"),
    ("B. A brown trash can on the left side of the path.", "B"),
]


@pytest.mark.parametrize("reply,letter", LETTER_FORMATS)
def test_letter_formats(reply, letter):
    for options in (OPTIONS, None):
        got = normalize_answer(reply, options)
        assert got.letter == letter, (reply, options is None)
        assert got.given == reply


@pytest.mark.parametrize(
    "reply,letter",
    [
        ("A concrete bench on the left side of the path.", "C"),
        ("a concrete bench on the LEFT side of the path", "C"),
        ("The answer is a concrete bench on the left side of the path.", "C"),
        ("A brown trash can on the left side of the path", "B"),
        ("I believe it was a wooden post standing at the edge of the walkway.", "D"),
    ],
)
def test_quoted_option_text_resolves_to_its_option(reply, letter):
    got = normalize_answer(reply, OPTIONS)
    assert got.letter == letter and got.method == "option_text"


@pytest.mark.parametrize(
    "reply",
    ["a dog", "A dog ran past.", "Definitely", "Cannot determine", "Cooking eggs", "Bread",
     "I am not sure", "", "   ", "A or B", "Either B or C", "None of the above",
     "A bench somewhere near the lake."],
)
def test_nothing_identified_means_no_letter_and_incorrect(reply):
    got = normalize_answer(reply, OPTIONS)
    assert got.letter is None and got.method == "none"
    assert not score_mcq(reply, OPTIONS, "C").correct


def test_nested_option_text_takes_the_longest_match():
    opts = {"A": "a bench", "B": "a concrete bench by the lake", "C": "a tree", "D": "a car"}
    assert match_option_text("It was a concrete bench by the lake", opts) == "B"
    assert match_option_text("a bench", opts) == "A"
    assert match_option_text("a tree or a car", opts) is None


def test_split_options_forms():
    assert split_options(OPTIONS)["C"] == "A concrete bench on the left side of the path."
    assert split_options(["x", "y"]) == {"A": "x", "B": "y"}
    assert split_options({"a": "x"}) == {"A": "x"}
    assert split_options(None) == {}


def test_letters_outside_the_options_are_not_accepted():
    opts = {"A": "yes", "B": "no"}
    assert normalize_answer("D", opts).letter is None


def test_score():
    s = score_mcq("Answer: C", OPTIONS, "c")
    assert s.correct and s.gold == "C" and s.answer.letter == "C"
    assert not score_mcq("B", OPTIONS, "C").correct


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ABCDabcdIiot .:()*'\"-\n>`1<>/s")), max_size=12) | st.text(max_size=40))
def test_property_no_letter_is_ever_invented(reply):
    got = normalize_answer(reply)
    assert got.letter is None or got.letter in reply.upper()


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["A", "B", "C", "D"]), st.sampled_from(["{}", "({})", "Answer: {}", "**{}**", "{}.", "Option {}"]))
def test_property_stated_letters_are_read(letter, fmt):
    assert normalize_answer(fmt.format(letter), OPTIONS).letter == letter


@pytest.fixture(scope="module")
def egolongqa(shared_dir):
    path = shared_dir / "research-data/wearable-ai-egolongqa/wearable_ai_2026_egolongqa_val_700.jsonl"
    return path, [json.loads(line) for line in path.open()]


def test_egolongqa_option_text_is_scored_by_meaning(egolongqa, tmp_path):
    path, rows = egolongqa
    right = tmp_path / "right.jsonl"
    wrong = tmp_path / "wrong.jsonl"
    with right.open("w") as r, wrong.open("w") as w:
        for row in rows:
            opts = split_options(row["mcq_options"])
            assert len(opts) == 4
            other = next(k for k in opts if k != row["mcq_answer"])
            r.write(json.dumps({"video_path": row["video_path"], "mcq_answer": opts[row["mcq_answer"]]}) + "\n")
            w.write(json.dumps({"video_path": row["video_path"], "mcq_answer": opts[other]}) + "\n")

    def run(pred):
        proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "mcq", "score", str(pred), str(path)],
                              capture_output=True, text=True, check=True)
        return json.loads(proc.stdout)

    good, bad = run(right), run(wrong)
    assert good["total"] == 700 and good["accuracy"] == 1.0 and good["unparseable"] == 0
    assert bad["accuracy"] == 0.0


def test_mcq_cli_reports_unparseable_apart(egolongqa, tmp_path):
    path, rows = egolongqa
    pred = tmp_path / "p.jsonl"
    replies = ["C", "Definitely", "(B)", "a dog"]
    with pred.open("w") as f:
        for row, reply in zip(rows[:4], replies):
            f.write(json.dumps({"video_path": row["video_path"], "mcq_answer": reply}) + "\n")
    proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "mcq", "score", str(pred), str(path)],
                          capture_output=True, text=True, check=True)
    report = json.loads(proc.stdout)
    assert report["total"] == 700 and report["missing_predictions"] == 696
    assert report["unparseable"] == 2
    expected = sum(1 for row, reply in zip(rows[:4], replies) if reply in "ABCD" and reply[-1] == row["mcq_answer"] or
                   reply == "(B)" and row["mcq_answer"] == "B")
    assert report["correct"] == expected


def test_mcq_cli_bad_file(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"video_path": "x", "mcq_answer": "A"}\nnot json\n')
    proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "mcq", "score", str(bad), str(bad)],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "bad.jsonl:2: not JSON" in proc.stderr and "Traceback" not in proc.stderr
