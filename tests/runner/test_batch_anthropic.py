"""Batch runs of Anthropic judges against a loopback server that speaks Anthropic's Messages API and
its Message Batches API (tests/judge/providers.py: AnthropicBatchServer): the batch's request lines
are the bodies litellm sends online for the same calls (frames as image blocks in order, the
rubric as the system text, the reply's schema, the model, the token limit), each custom_id the
batch's tag and the sha256 of its body; a run submits, the next collects and writes the records an
online run of the same items writes, at half the cost; errored, canceled and expired requests are
asked again."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("litellm")

from framejudge import grade
from framejudge.api import InvalidOptions
from framejudge.records import latest, read_records
from framejudge.rubrics import get_rubric
from framejudge.rubrics.prompt import render_prompt
from framejudge.runner.batch_api import anthropic_key, key_label
from framejudge.schema import Item, JudgeError, Verdict
from tests.runner.batches import FPS, assert_collected_as_online, frame_number, judgement_for, write_items
from tests.judge.providers import AnthropicBatchServer, AnthropicServer, Image

ROOT = Path(__file__).resolve().parents[2]
STRUCTURED = "claude-sonnet-4-5-20250929"  # litellm sends output_format (structured outputs) for it
TOOL_JSON = "claude-3-5-haiku-20241022"  # litellm forces its json_tool_call tool for it


def by_order(seen) -> str:
    return judgement_for(seen.body["messages"])


@pytest.fixture(scope="module")
def items(tmp_path_factory) -> Path:
    return write_items(tmp_path_factory.mktemp("anthropic-batch"))


def judges_file(tmp_path: Path, server: AnthropicServer, model: str) -> Path:
    path = tmp_path / "judges.yaml"
    path.write_text(f"judges:\n  - spec: litellm:anthropic/{model}\n    api_base: {server.api_base}\n"
                    "    api_key_env: ANTHROPIC_API_KEY\n")
    return path


def run(items: Path, out: Path, judges: Path, model: str, **kw):
    return grade(items, judge=f"litellm:anthropic/{model}", judges_file=judges, out=out,
                 options={"cache": False, "sampler": {"n": 4}}, **kw)


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "batch-test-key")


@pytest.mark.parametrize("model", [STRUCTURED, TOOL_JSON])
def test_a_batch_run_sends_the_online_bodies_and_writes_the_online_records_at_half_the_cost(tmp_path, items, model):
    with AnthropicBatchServer(by_order) as server:
        judges = judges_file(tmp_path, server, model)
        online = run(items, tmp_path / "online.jsonl", judges, model)
        sent_online = [c.body for c in server.calls if c.path == "/v1/messages"]
        assert len(online) == 3 and all(isinstance(r, Verdict) for r in online)
        assert len(sent_online) == 6  # both orders of each of three turns

        out = tmp_path / "batch.jsonl"
        assert run(items, out, judges, model, batch=True) == []  # submitted, nothing graded yet
        [batch_id] = server.batches
        requests = server.requests_of(batch_id)
        create = server.batch_calls[batch_id]

        # the batch file format: one request per call, its params the body litellm sent online for
        # that call, its custom_id the batch's tag (the ledger's id for it) and the sha256 of that body
        assert len(requests) == 6
        assert sorted(json.dumps(r["params"], sort_keys=True) for r in requests) == \
            sorted(json.dumps(b, sort_keys=True) for b in sent_online)
        [entry] = json.loads((tmp_path / "batch.batches.json").read_text())["batches"]
        for r in requests:
            canonical = json.dumps(r["params"], sort_keys=True, separators=(",", ":")).encode()
            assert r["custom_id"] == f"{entry['tag']}-{key_label(hashlib.sha256(canonical).hexdigest())}"
            assert len(r["custom_id"]) <= 64
            params = r["params"]
            assert params["model"] == model and params["max_tokens"] == 1024 and params["temperature"] == 0
            assert server.system_text(params) == render_prompt(get_rubric("video-qa"), Item.model_validate(
                {"id": "x", "turns": [{"question": "q", "golden": "g", "response_a": "a"}]}), [], 0
            ).messages[0]["content"]
            # the reply held to the verdict's schema, as litellm holds it online for this model
            schema = server.schema(params)
            assert schema is not None and set(schema["properties"]) >= {"response_a", "response_b", "preference"}
            if model == STRUCTURED:
                assert params["output_format"]["type"] == "json_schema" and "tools" not in params
            else:
                assert params["tool_choice"] == {"type": "tool", "name": "json_tool_call"}
        # the frames as base64 image blocks, in order, each labelled with its time just before it
        with_video = [r["params"] for r in requests if "clip 0" in json.dumps(r["params"]["messages"])]
        assert len(with_video) == 2
        timestamps = {v.item_id: v.provenance.frame_timestamps for v in online}["bird-0"]
        for params in with_video:
            images = server.images(params)
            assert [i.mime for i in images] == ["image/jpeg"] * 4
            assert [frame_number(i) for i in images] == [round(t * FPS) for t in timestamps]
            parts = server.user_parts(params)
            assert [parts[k - 1] for k, p in enumerate(parts) if isinstance(p, Image)] == \
                [f"[t = {t:.2f} s]" for t in timestamps]
        without = [r["params"] for r in requests if "clip 2" in json.dumps(r["params"]["messages"])]
        assert len(without) == 2 and all(server.images(p) == [] for p in without)
        # the key, and the beta features the online calls carry, on the create call
        assert create.headers["x-api-key"] == "batch-test-key" and create.headers["anthropic-version"] == "2023-06-01"
        betas = {b.strip() for b in create.headers.get("anthropic-beta", "").split(",")}
        online_betas = {b.strip() for c in server.calls if c.path == "/v1/messages"
                        for b in c.headers.get("anthropic-beta", "").split(",") if b.strip()}
        assert "message-batches-2024-09-24" in betas and online_betas <= betas
        assert any(b.startswith("structured-outputs-") for b in online_betas) == (model == STRUCTURED)

        assert run(items, out, judges, model, batch=True) == []  # still in progress: nothing new sent
        assert len(server.batches) == 1

        server.finish(batch_id)
        records = run(items, out, judges, model, batch=True)
        assert len(records) == 3
        assert_collected_as_online(records, online, "Anthropic's Message Batches API")

        again = run(items, out, judges, model, batch=True)  # everything graded: nothing sent, nothing written twice
        assert len(again) == 3 and len(server.batches) == 1
        assert len([r for r in read_records(out) if isinstance(r, Verdict)]) == 3


def test_errored_canceled_and_expired_requests_are_asked_again(tmp_path, items):
    with AnthropicBatchServer(by_order) as server:
        judges = judges_file(tmp_path, server, STRUCTURED)
        out = tmp_path / "batch.jsonl"
        run(items, out, judges, STRUCTURED, batch=True)
        [first] = server.batches
        ids = [anthropic_key(r["custom_id"]) for r in server.requests_of(first)]
        fates = {ids[0]: ("errored", "api_error", "Internal server error"), ids[1]: "expired", ids[2]: "canceled"}
        server.finish(first, lambda r: fates.get(anthropic_key(r["custom_id"])) or judgement_for(r["params"]))

        run(items, out, judges, STRUCTURED, batch=True)
        second = [b for b in server.batches if b != first]
        assert len(second) == 1
        # the same requests again
        assert {anthropic_key(r["custom_id"]) for r in server.requests_of(second[0])} == set(ids[:3])
        ledger = json.loads((tmp_path / "batch.batches.json").read_text())
        assert ledger["failures"] == {ids[0]: 1}  # an errored request counts; a canceled or expired one does not
        replies = [json.loads(line) for line in (tmp_path / "batch.batch-replies.jsonl").read_text().splitlines()]
        assert {r["key"]: r["status_code"] for r in replies if "error" in r} == {ids[0]: 500, ids[1]: None, ids[2]: None}

        server.finish(second[0])
        records = run(items, out, judges, STRUCTURED, batch=True)
        assert len(records) == 3 and all(isinstance(r, Verdict) for r in records)
        verdicts, errors = latest(read_records(out))
        assert len(verdicts) == 3 and not errors


def test_a_request_anthropic_keeps_failing_becomes_a_judge_error(tmp_path, items):
    with AnthropicBatchServer(by_order) as server:
        judges = judges_file(tmp_path, server, STRUCTURED)
        out = tmp_path / "batch.jsonl"
        run(items, out, judges, STRUCTURED, batch=True)
        doomed = anthropic_key(server.requests_of(next(iter(server.batches)))[0]["custom_id"])

        def answers(r):
            if anthropic_key(r["custom_id"]) == doomed:
                return ("errored", "overloaded_error", "Overloaded")
            return judgement_for(r["params"])

        for _ in range(3):
            server.finish(list(server.batches)[-1], answers)
            records = run(items, out, judges, STRUCTURED, batch=True)
        errors = [r for r in records if isinstance(r, JudgeError)]
        assert len(errors) == 1 and "failed this request 3 times" in errors[0].message
        assert "overloaded_error" in errors[0].message
        assert len([r for r in records if isinstance(r, Verdict)]) == 2


def test_the_command_line_submits_then_collects(tmp_path, items):
    with AnthropicBatchServer(by_order) as server:
        judges = judges_file(tmp_path, server, STRUCTURED)
        out = tmp_path / "verdicts.jsonl"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "FRAMEJUDGE_NO_CACHE": "1"}
        command = [sys.executable, "-m", "framejudge.cli", "grade", str(items), "--out", str(out), "--judges",
                   str(judges), "--judge", f"litellm:anthropic/{STRUCTURED}", "--batch", "--yes", "--no-cache", "-n", "4"]
        first = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
        assert first.returncode == 0, first.stderr
        [batch_id] = server.batches
        assert f"submitted batch {batch_id} (3 turn(s) waiting" in first.stderr
        server.finish(batch_id)
        second = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
        assert second.returncode == 0, second.stderr
        assert f"collected 1 batch(es): {batch_id}" in second.stderr
        assert "3 turn(s) graded from batch replies (0 error(s))" in second.stderr
        assert json.loads(second.stdout)["turns_graded"] == 3


def test_the_python_api_wants_an_out_file_and_a_batchable_judge(tmp_path, items):
    with pytest.raises(InvalidOptions, match="give out"):
        grade(items, judge=f"litellm:anthropic/{STRUCTURED}", batch=True)
    from framejudge.runner.batch_api import BatchUnsupported

    with pytest.raises(BatchUnsupported, match="calls no provider"):
        grade(items, judge="reference", batch=True, out=tmp_path / "v.jsonl")


def test_a_schema_anthropic_refuses_in_a_batch_is_asked_again_without_it(tmp_path, items):
    with AnthropicBatchServer(by_order) as server:
        judges = judges_file(tmp_path, server, STRUCTURED)
        out = tmp_path / "batch.jsonl"
        run(items, out, judges, STRUCTURED, batch=True)
        [first] = server.batches
        server.finish(first, lambda r: ("errored", "invalid_request_error", "output_format: schema not supported"))
        assert run(items, out, judges, STRUCTURED, batch=True) == []
        [second] = [b for b in server.batches if b != first]
        again = [r["params"] for r in server.requests_of(second)]
        # JSON mode as litellm sends it online to Anthropic: nothing that holds the reply to a schema
        assert len(again) == 6 and all("output_format" not in p and "tools" not in p for p in again)
        server.finish(second)
        records = run(items, out, judges, STRUCTURED, batch=True)
        assert len(records) == 3 and all(isinstance(r, Verdict) for r in records)
        assert all(any("refused the reply's JSON schema" in n or "output mode: json_object" in n
                       for n in r.provenance.notes) for r in records)


def test_requests_beyond_a_batchs_limit_go_in_more_batches(tmp_path, items, monkeypatch):
    from framejudge.runner.batch_api import BATCH_APIS

    monkeypatch.setattr(BATCH_APIS["anthropic"], "max_requests", 4)
    with AnthropicBatchServer(by_order) as server:
        judges = judges_file(tmp_path, server, STRUCTURED)
        out = tmp_path / "batch.jsonl"
        run(items, out, judges, STRUCTURED, batch=True)
        assert [len(server.requests_of(b)) for b in server.batches] == [4, 2]
        ledger = json.loads((tmp_path / "batch.batches.json").read_text())
        assert [b["id"] for b in ledger["batches"]] == list(server.batches)
        for batch_id in server.batches:
            server.finish(batch_id)
        records = run(items, out, judges, STRUCTURED, batch=True)
        assert len(records) == 3 and all(isinstance(r, Verdict) for r in records)


def ledger_of(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "batch.batches.json").read_text())


def test_a_batch_made_whose_answer_was_lost_is_found_and_collected_not_sent_again(tmp_path, items):
    """Anthropic makes the batch and the connection drops before its answer: the run stops, the
    batch kept in the ledger as asked for; the next run finds it in the listing (a batch carries no
    metadata: the one made just after the intent with as many requests) and collects it: one batch."""
    from framejudge.runner.batch_api import BatchError

    with AnthropicBatchServer(by_order) as server:
        judges = judges_file(tmp_path, server, STRUCTURED)
        out = tmp_path / "batch.jsonl"
        server.drop_creates = 1
        with pytest.raises(BatchError, match=r"the batch of 6 request\(s\) was not accepted: .*the next run looks for "
                                             r"it before sending its 6 request\(s\) again"):
            run(items, out, judges, STRUCTURED, batch=True)
        [made] = server.batches  # made, once
        [intent] = ledger_of(tmp_path)["intents"]
        assert {r["custom_id"] for r in server.requests_of(made)} == \
            {f"{intent['tag']}-{key_label(k)}" for k in intent["keys"]}

        server.finish(made)
        records = run(items, out, judges, STRUCTURED, batch=True)
        assert list(server.batches) == [made]  # exactly one batch: nothing paid twice
        assert len(records) == 3 and all(isinstance(r, Verdict) for r in records)
        ledger = ledger_of(tmp_path)
        [found] = ledger["batches"]
        assert ledger["intents"] == [] and (found["id"], found["status"]) == (made, "collected")
        assert "with 6 request(s)" in found["found"]


def test_a_batch_found_by_its_time_and_size_that_is_anothers_gives_its_requests_back(tmp_path, items):
    """The create call's connection drops before Anthropic made the batch, and another run makes one
    of the same size just after: the next run takes that one (Anthropic's batches carry no metadata),
    and when it ends having answered none of the requests, they are sent again, in a batch of their
    own; the other run's batch is left as it is."""
    import httpx
    from typer.testing import CliRunner

    from framejudge.cli import app
    from framejudge.runner.batch_api import BatchError

    with AnthropicBatchServer(by_order) as server:
        judges = judges_file(tmp_path, server, STRUCTURED)
        out = tmp_path / "batch.jsonl"
        server.lose_creates = 1
        with pytest.raises(BatchError, match="the next run looks for it"):
            run(items, out, judges, STRUCTURED, batch=True)
        assert server.batches == {}
        others = {"requests": [{"custom_id": f"other-{k}", "params": {
            "model": STRUCTURED, "max_tokens": 16, "messages": [{"role": "user", "content": f"question {k}"}]}}
            for k in range(6)]}
        foreign = httpx.post(f"{server.api_base}/v1/messages/batches", json=others).json()["id"]

        assert run(items, out, judges, STRUCTURED, batch=True) == []  # taken for the intent's: waits for it
        assert list(server.batches) == [foreign]
        assert ledger_of(tmp_path)["batches"][0]["id"] == foreign
        server.finish(foreign, lambda r: judgement_for(r["params"]))
        done = CliRunner().invoke(app, ["grade", str(items), "--out", str(out), "--judges", str(judges), "--judge",
                                        f"litellm:anthropic/{STRUCTURED}", "--batch", "--yes", "--no-cache", "-n", "4"])
        assert done.exit_code == 0, done.output
        [ours] = [b for b in server.batches if b != foreign]  # none answered: sent again
        said = "".join(done.stderr.split())  # however the console wraps its lines
        assert "".join(f"batch {foreign}, found by its time and size, answered none of its requests: it was another's "
                       "(left as it is); its requests are sent again".split()) in said
        assert "".join(f"submitted batch {ours} (3 turn(s) waiting, 6 request(s) asked again)".split()) in said
        assert len(server.requests_of(ours)) == 6
        server.finish(ours)
        records = run(items, out, judges, STRUCTURED, batch=True)
        assert len(records) == 3 and all(isinstance(r, Verdict) for r in records)
        assert [b["status"] for b in ledger_of(tmp_path)["batches"]] == ["collected", "collected"]


def test_two_different_replies_to_one_request_are_an_error_naming_it(tmp_path, items):
    """Anthropic's results answer one request twice, differently: the turn is an error naming the
    request; a request answered twice alike is taken."""
    other = json.dumps({"response_a": {"category": "Not Successful", "rationale": "misses the heron"},
                        "response_b": {"category": "Successful", "rationale": "a jay"}, "preference": "B",
                        "deciding_criterion": "category"})
    with AnthropicBatchServer(by_order) as server:
        judges = judges_file(tmp_path, server, STRUCTURED)
        out = tmp_path / "batch.jsonl"
        run(items, out, judges, STRUCTURED, batch=True)
        [first] = server.batches
        requests = server.requests_of(first)
        twice, same = requests[0]["custom_id"], requests[1]["custom_id"]

        def answers(r):
            text = judgement_for(r["params"])
            return [text, other] if r["custom_id"] == twice else [text, text] if r["custom_id"] == same else text

        server.finish(first, answers)
        records = run(items, out, judges, STRUCTURED, batch=True)
        errors = [r for r in records if isinstance(r, JudgeError)]
        assert len(errors) == 1
        assert f"the batch API gave 2 different replies to request {anthropic_key(twice)}" in errors[0].message
        assert len([r for r in records if isinstance(r, Verdict)]) == 2
        assert list(server.batches) == [first]
