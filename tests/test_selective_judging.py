"""Selective judging end to end through the CLI: a model judge whose label probabilities (token
log-probabilities from an OpenAI-compatible server on loopback, scripted because no model API is
reachable here; the real SmolLM2 judge's probabilities are tested in tests/judge) carry its
confidence; `calibrate` reports its reliability, `triage` chooses a threshold with a guarantee on
human labels, and `grade --triage` marks new verdicts auto or to_review by it."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys

from tests.judge.test_litellm_backend import ScriptedServer, with_logprobs

N = 600


def confidence_of(i: int) -> float:
    return 0.55 + 0.44 * ((i * 37) % 100) / 100  # spread over [0.55, 0.99)


def reply(body: dict):
    text = json.dumps(body["messages"])
    i = int(re.search(r"question q(\d+)", text).group(1))
    p = confidence_of(i)
    verdict = {"response_a": {"category": "Successful", "rationale": "it answers"}}
    return 200, with_logprobs(json.dumps(verdict), {"Successful": {"Not": round(1 - p, 6)}}), {}


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "framejudge.cli", *args], capture_output=True, text=True,
                          timeout=600, env=env)


def test_thresholds_chosen_on_labels_decide_what_new_verdicts_may_skip_people(tmp_path):
    import os

    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": f"i{i}", "turns": [{"question": f"question q{i}?", "golden": "yes",
                                                                   "response_a": "yes"}]}) + "\n" for i in range(N)))
    rng = random.Random(7)  # the humans agree with the judge as often as its confidence says
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"item_id": f"i{i}", "annotator": "h1", "category_a": "Successful"
                                          if rng.random() < confidence_of(i) else "Not Successful"}) + "\n"
                              for i in range(N)))
    with ScriptedServer([reply]) as base:
        judges = tmp_path / "judges.yaml"
        judges.write_text(f"judges:\n  - spec: litellm:openai/scripted\n    api_base: {base}\n"
                          "    api_key_env: SCRIPTED_KEY\n    price: {prompt_usd_per_token: 0.000001}\n")
        env = {**os.environ, "SCRIPTED_KEY": "k", "FRAMEJUDGE_CACHE_DIR": str(tmp_path / "cache")}
        common = ["--judge", "litellm:openai/scripted", "--judges", str(judges), "--yes"]
        graded = run("grade", str(items), "--out", str(tmp_path / "v.jsonl"), *common, env=env)
        assert graded.returncode == 0, graded.stderr
        verdicts = [json.loads(line) for line in (tmp_path / "v.jsonl").read_text().splitlines()]
        assert len(verdicts) == N and all(v["confidence"]["informative"] for v in verdicts)
        for v in verdicts:  # each verdict's confidence is its label's probability
            assert abs(v["confidence"]["fields"]["category_a"] - confidence_of(int(v["item_id"][1:]))) < 1e-4

        cal = run("calibrate", "--human", str(labels), "--judge", str(tmp_path / "v.jsonl"), "--replicates", "50",
                  "--out", str(tmp_path / "cal.json"))
        assert cal.returncode == 0, cal.stderr
        reliability = json.loads((tmp_path / "cal.json").read_text())["reliability"]
        field = next(r for r in reliability if r["field"] == "category_a")
        assert field["informative"] and field["ece"] < 0.15  # the simulated judge is calibrated

        chosen = run("triage", "--human", str(labels), "--judge", str(tmp_path / "v.jsonl"), "--target", "0.8",
                     "--delta", "0.1", "--field", "category_a", "--out", str(tmp_path / "t.json"))
        assert chosen.returncode == 0, chosen.stderr
        thresholds = json.loads((tmp_path / "t.json").read_text())
        assert list(thresholds["fields"]) == ["category_a"]
        t = thresholds["fields"]["category_a"]
        assert t["threshold"] is not None and 0.6 < t["threshold"] < 0.99 and t["guaranteed"] == 0.8

        marked = run("grade", str(items), "--out", str(tmp_path / "v2.jsonl"), "--triage", str(tmp_path / "t.json"),
                     "--review-out", str(tmp_path / "review.jsonl"), "--summary-json", str(tmp_path / "s.json"),
                     *common, env=env)
        assert marked.returncode == 0, marked.stderr
    again = [json.loads(line) for line in (tmp_path / "v2.jsonl").read_text().splitlines()]
    auto = [v for v in again if v["triage"]["decision"] == "auto"]
    review = [v for v in again if v["triage"]["decision"] == "to_review"]
    assert auto and review and len(auto) + len(review) == N
    assert all(v["confidence"]["fields"]["category_a"] >= t["threshold"] for v in auto)
    assert all(v["confidence"]["fields"]["category_a"] < t["threshold"] for v in review)
    summary = json.loads((tmp_path / "s.json").read_text())["triage"]
    assert summary["auto"] == len(auto) and summary["to_review"] == len(review)
    rows = [json.loads(line) for line in (tmp_path / "review.jsonl").read_text().splitlines()]
    assert sorted(r["item_id"] for r in rows) == sorted(v["item_id"] for v in review)
