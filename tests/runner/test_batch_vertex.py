"""Batch runs of Vertex AI judges (`vertex_ai/gemini-...`) against Google Cloud on loopback
(tests/runner/google_cloud.py): a service account key made here, whose token endpoint checks the
JWT-bearer grant's signature and grants access tokens; Cloud Storage (gcp-storage-emulator) and
Vertex AI's generateContent and batchPredictionJobs, each taking only those tokens. A run writes
the requests file to the bucket (each line `{"request"}`, the GenerateContentRequest litellm sends
online for the same call, with its key in the request's labels) and makes a batch prediction job
of it; the next collects the job's predictions.jsonl and writes the records an online run of the
same items writes, at half the cost; failed lines are asked again, then become judge errors."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("litellm")
pytest.importorskip("google.auth")
pytest.importorskip("gcp_storage_emulator")

from framejudge import grade
from framejudge.records import latest, read_records
from framejudge.rubrics import get_rubric
from framejudge.rubrics.prompt import render_prompt
from framejudge.schema import Item, JudgeError, Verdict
from tests.judge.providers import Image
from tests.runner.batches import FPS, assert_collected_as_online, frame_number, judgement_for, write_items
from tests.runner.google_cloud import LOCATION, PROJECT, GoogleCloud, ServiceAccount

ROOT = Path(__file__).resolve().parents[2]
MODEL = "gemini-2.5-flash"
SPEC = f"litellm:vertex_ai/{MODEL}"
GOOGLE_ENV = ("GOOGLE_APPLICATION_CREDENTIALS", "VERTEXAI_CREDENTIALS", "VERTEXAI_PROJECT", "VERTEXAI_LOCATION",
              "VERTEX_LOCATION", "GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT", "STORAGE_EMULATOR_HOST",
              "FRAMEJUDGE_BATCH_BUCKET")


def by_order(seen) -> str:
    return judgement_for(seen.body["contents"])


def by_line(line: dict) -> str:
    return judgement_for(line["request"]["contents"])


def without_labels(request: dict) -> dict:
    return {k: v for k, v in request.items() if k != "labels"}


@pytest.fixture(scope="module")
def items(tmp_path_factory) -> Path:
    return write_items(tmp_path_factory.mktemp("vertex-batch"))


@pytest.fixture(scope="module")
def account(tmp_path_factory):
    # one key for the module: litellm keeps the credentials of online vertex calls for the process
    with ServiceAccount(tmp_path_factory.mktemp("vertex-account")) as account:
        yield account


@pytest.fixture(autouse=True)
def _google(monkeypatch, account, tmp_path):
    for name in GOOGLE_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(account.key_file))
    monkeypatch.setenv("NO_GCE_CHECK", "true")


@pytest.fixture
def cloud(account, monkeypatch):
    with GoogleCloud(account, by_order) as cloud:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", cloud.storage_host)
        yield cloud


def judges_file(tmp_path: Path, cloud: GoogleCloud, extra: str = "") -> Path:
    # no log-probabilities: a batch line asks for none, so the online run that is compared asks for none
    path = tmp_path / "judges.yaml"
    path.write_text(f"judges:\n  - spec: {SPEC}\n    api_base: {cloud.vertex.api_base}\n    logprobs: false\n"
                    f"    batch_bucket: gs://{cloud.bucket}/runs\n{extra}")
    return path


def run(items: Path, out: Path, judges: Path, **kw):
    return grade(items, judge=SPEC, judges_file=judges, out=out, options={"cache": False, "sampler": {"n": 4}}, **kw)


def only_job(cloud: GoogleCloud) -> str:
    [name] = cloud.vertex.jobs
    return name


def test_a_batch_run_sends_the_online_requests_and_writes_the_online_records_at_half_the_cost(tmp_path, items, cloud):
    vertex = cloud.vertex
    judges = judges_file(tmp_path, cloud)
    online = run(items, tmp_path / "online.jsonl", judges)
    generate = f"/v1/projects/{PROJECT}/locations/{LOCATION}/publishers/google/models/{MODEL}:generateContent"
    sent_online = [c.body for c in vertex.calls if c.path == generate]
    assert len(online) == 3 and all(isinstance(r, Verdict) for r in online)
    assert len(sent_online) == 6 and {c.path for c in vertex.calls} == {generate}  # both orders of three turns

    out = tmp_path / "batch.jsonl"
    assert run(items, out, judges, batch=True) == []  # submitted, nothing graded yet
    name = only_job(cloud)
    assert name.startswith(f"projects/{PROJECT}/locations/{LOCATION}/batchPredictionJobs/")
    create = vertex.job_calls[name]
    # the job: made in the credentials' project, for the publisher model, from the file in the bucket
    assert create.path == f"/v1/projects/{PROJECT}/locations/{LOCATION}/batchPredictionJobs"
    assert create.headers["authorization"].startswith("Bearer ya29.")
    [source] = create.body["inputConfig"]["gcsSource"]["uris"]
    folder = source.removeprefix(f"gs://{cloud.bucket}/").removesuffix("/requests.jsonl")
    assert folder.startswith("runs/framejudge-") and cloud.objects("runs/") == [f"{folder}/requests.jsonl"]
    assert create.body["model"] == f"publishers/google/models/{MODEL}"
    assert create.body["inputConfig"]["instancesFormat"] == "jsonl"
    assert create.body["outputConfig"] == {"predictionsFormat": "jsonl", "gcsDestination": {
        "outputUriPrefix": f"gs://{cloud.bucket}/{folder}/output"}}
    assert create.body["displayName"] == folder.removeprefix("runs/")
    # the access token: granted for the key's signed assertion, with the cloud-platform scope
    assert cloud.account.tokens.grants and all(g["iss"] == "grader@frame-judge-tests.iam.gserviceaccount.com"
                                               for g in cloud.account.tokens.grants)

    # the requests file: one line per call, its request the body litellm sent online for that call,
    # with the sha256 of that body in its labels
    lines = vertex.requests_of(name)
    assert len(lines) == 6
    assert sorted(json.dumps(without_labels(line["request"]), sort_keys=True) for line in lines) == \
        sorted(json.dumps(b, sort_keys=True) for b in sent_online)
    from framejudge.runner.batch_api import label_key

    system = render_prompt(get_rubric("video-qa"), Item.model_validate(
        {"id": "x", "turns": [{"question": "q", "golden": "g", "response_a": "a"}]}), [], 0).messages[0]["content"]
    for line in lines:
        request = line["request"]
        [(label, value)] = request["labels"].items()
        canonical = json.dumps(without_labels(request), sort_keys=True, separators=(",", ":")).encode()
        assert label == "framejudge_key" and label_key(value) == hashlib.sha256(canonical).hexdigest()
        assert len(value) <= 63 and value == value.lower()  # a label value Vertex takes
        assert vertex.system_text(request) == system
        assert vertex.temperature(request) == 0
        assert vertex.json_mode(request) == "application/json"
        schema = vertex.schema(request)
        assert schema is not None and set(schema["properties"]) >= {"response_a", "response_b", "preference"}
    # the frames as inline images, in order, each labelled with its time just before it
    timestamps = {v.item_id: v.provenance.frame_timestamps for v in online}["bird-0"]
    with_video = [line["request"] for line in lines if "clip 0" in json.dumps(line["request"]["contents"])]
    assert len(with_video) == 2
    for request in with_video:
        assert [frame_number(i) for i in vertex.images(request)] == [round(t * FPS) for t in timestamps]
        parts = vertex.user_parts(request)
        assert [parts[k - 1] for k, p in enumerate(parts) if isinstance(p, Image)] == \
            [f"[t = {t:.2f} s]" for t in timestamps]

    asked = len(vertex.requests)
    assert run(items, out, judges, batch=True) == []  # still pending: asked after, nothing new sent
    assert len(vertex.jobs) == 1 and len(cloud.objects("runs/")) == 1
    assert [(r.method, r.path) for r in vertex.requests[asked:]] == [("GET", f"/v1/{name}")]

    vertex.finish(name)
    records = run(items, out, judges, batch=True)
    assert len(records) == 3
    assert_collected_as_online(records, online, "Vertex AI's batch prediction")

    again = run(items, out, judges, batch=True)  # everything graded: nothing sent, nothing written twice
    assert len(again) == 3 and len(vertex.jobs) == 1
    assert len([r for r in read_records(out) if isinstance(r, Verdict)]) == 3


def test_failed_lines_and_missing_lines_are_asked_again(tmp_path, items, cloud):
    vertex = cloud.vertex
    judges = judges_file(tmp_path, cloud)
    out = tmp_path / "batch.jsonl"
    run(items, out, judges, batch=True)
    first = only_job(cloud)
    lines = vertex.requests_of(first)
    labels = [line["request"]["labels"]["framejudge_key"] for line in lines]
    fates = {labels[0]: ("error", 500, "INTERNAL", "Internal error encountered."),
             labels[1]: ("error", 429, "RESOURCE_EXHAUSTED", "Resource exhausted. Please try again later.")}
    vertex.finish(first, lambda line: None if line["request"]["labels"]["framejudge_key"] == labels[2]
                  else fates.get(line["request"]["labels"]["framejudge_key"]) or by_line(line))

    run(items, out, judges, batch=True)
    [second] = [j for j in vertex.jobs if j != first]
    assert {line["request"]["labels"]["framejudge_key"] for line in vertex.requests_of(second)} == set(labels[:3])
    from framejudge.runner.batch_api import label_key

    keys = [label_key(v) for v in labels]
    ledger = json.loads((tmp_path / "batch.batches.json").read_text())
    assert ledger["failures"] == {keys[0]: 1, keys[1]: 1}  # a failed line counts; one with no line does not
    replies = [json.loads(line) for line in (tmp_path / "batch.batch-replies.jsonl").read_text().splitlines()]
    assert {r["key"]: r["status_code"] for r in replies if "error" in r} == {keys[0]: 500, keys[1]: 429}

    vertex.finish(second, by_line)
    records = run(items, out, judges, batch=True)
    assert len(records) == 3 and all(isinstance(r, Verdict) for r in records)
    verdicts, errors = latest(read_records(out))
    assert len(verdicts) == 3 and not errors


@pytest.mark.parametrize("state", ["EXPIRED", "CANCELLED", "FAILED"])
def test_a_job_that_ends_without_predictions_gives_its_requests_back(tmp_path, items, cloud, state):
    vertex = cloud.vertex
    judges = judges_file(tmp_path, cloud)
    out = tmp_path / "batch.jsonl"
    run(items, out, judges, batch=True)
    first = only_job(cloud)
    vertex.end(first, state)
    assert run(items, out, judges, batch=True) == []
    [second] = [j for j in vertex.jobs if j != first]
    assert sorted(json.dumps(line) for line in vertex.requests_of(second)) == \
        sorted(json.dumps(line) for line in vertex.requests_of(first))
    ledger = json.loads((tmp_path / "batch.batches.json").read_text())
    assert [(b["status"], b["provider_status"]) for b in ledger["batches"]] == \
        [("failed", f"JOB_STATE_{state}"), ("submitted", "JOB_STATE_PENDING")]
    assert ledger["failures"] == {}
    vertex.finish(second, by_line)
    assert len(run(items, out, judges, batch=True)) == 3


def test_a_job_cancelled_part_way_keeps_its_predictions_and_gives_the_rest_back(tmp_path, items, cloud):
    vertex = cloud.vertex
    judges = judges_file(tmp_path, cloud)
    out = tmp_path / "batch.jsonl"
    run(items, out, judges, batch=True)
    first = only_job(cloud)
    done = vertex.requests_of(first)[:4]
    vertex.finish(first, lambda line: by_line(line) if line in done else None, state="CANCELLED")
    run(items, out, judges, batch=True)
    [second] = [j for j in vertex.jobs if j != first]
    assert len(vertex.requests_of(second)) == 2
    vertex.finish(second, by_line)
    records = run(items, out, judges, batch=True)
    assert len(records) == 3 and all(isinstance(r, Verdict) for r in records)


def test_a_request_vertex_keeps_failing_becomes_a_judge_error(tmp_path, items, cloud):
    vertex = cloud.vertex
    judges = judges_file(tmp_path, cloud)
    out = tmp_path / "batch.jsonl"
    run(items, out, judges, batch=True)
    doomed = vertex.requests_of(only_job(cloud))[0]["request"]["labels"]["framejudge_key"]

    def answers(line):
        return ("error", 503, "UNAVAILABLE", "The service is currently unavailable.") \
            if line["request"]["labels"]["framejudge_key"] == doomed else by_line(line)

    for _ in range(3):
        vertex.finish(list(vertex.jobs)[-1], answers)
        records = run(items, out, judges, batch=True)
    errors = [r for r in records if isinstance(r, JudgeError)]
    assert len(errors) == 1 and "failed this request 3 times" in errors[0].message
    assert "The service is currently unavailable" in errors[0].message
    assert len([r for r in records if isinstance(r, Verdict)]) == 2


def test_a_schema_vertex_refuses_in_a_batch_is_asked_again_in_json_mode(tmp_path, items, cloud):
    vertex = cloud.vertex
    judges = judges_file(tmp_path, cloud)
    out = tmp_path / "batch.jsonl"
    run(items, out, judges, batch=True)
    first = only_job(cloud)
    vertex.finish(first, lambda line: ("error", 400, "INVALID_ARGUMENT", 'Invalid JSON payload received. Unknown '
                                                                         'name "response_json_schema"'))
    assert run(items, out, judges, batch=True) == []
    [second] = [j for j in vertex.jobs if j != first]
    again = [line["request"] for line in vertex.requests_of(second)]
    assert len(again) == 6  # JSON mode as litellm sends it online to Gemini: the JSON MIME type, no schema
    assert all(vertex.json_mode(r) == "application/json" and vertex.schema(r) is None for r in again)
    vertex.finish(second, by_line)
    records = run(items, out, judges, batch=True)
    assert len(records) == 3 and all(isinstance(r, Verdict) for r in records)
    assert all(any("refused the reply's JSON schema" in n or "output mode: json_object" in n
                   for n in r.provenance.notes) for r in records)


def test_the_judges_file_names_the_project_and_region(tmp_path, items, account, monkeypatch):
    with GoogleCloud(account, by_order, project="another-project") as cloud:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", cloud.storage_host)
        judges = judges_file(tmp_path, cloud, "    vertex_project: another-project\n    vertex_location: europe-west4\n")
        run(items, tmp_path / "online.jsonl", judges)
        assert {c.path for c in cloud.vertex.calls} == {
            f"/v1/projects/another-project/locations/europe-west4/publishers/google/models/{MODEL}:generateContent"}
        run(items, tmp_path / "batch.jsonl", judges, batch=True)
        name = only_job(cloud)
        assert name.startswith("projects/another-project/locations/europe-west4/batchPredictionJobs/")
        cloud.vertex.finish(name, by_line)
        assert len(run(items, tmp_path / "batch.jsonl", judges, batch=True)) == 3


def cli(items: Path, out: Path, judges: Path | None, env: dict[str, str], *more: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "framejudge.cli", "grade", str(items), "--out", str(out), "--judge", SPEC,
               "--batch", "--yes", "--no-cache", "-n", "4", *(["--judges", str(judges)] if judges else []), *more]
    return subprocess.run(command, capture_output=True, text=True, timeout=300,
                          env={**env, "PYTHONPATH": str(ROOT), "FRAMEJUDGE_NO_CACHE": "1", "COLUMNS": "300"})


def test_the_command_line_submits_then_collects(tmp_path, items, cloud):
    judges = tmp_path / "judges.yaml"  # the bucket from the command line, this time
    judges.write_text(f"judges:\n  - spec: {SPEC}\n    api_base: {cloud.vertex.api_base}\n    logprobs: false\n")
    out = tmp_path / "verdicts.jsonl"
    first = cli(items, out, judges, dict(os.environ), "--batch-bucket", f"gs://{cloud.bucket}/cli/")
    assert first.returncode == 0, first.stderr
    name = only_job(cloud)
    assert f"submitted batch {name} (3 turn(s) waiting" in first.stderr
    assert [o.rpartition("/")[2] for o in cloud.objects("cli/")] == ["requests.jsonl"]
    cloud.vertex.finish(name, by_line)
    second = cli(items, out, judges, {**os.environ, "FRAMEJUDGE_BATCH_BUCKET": f"gs://{cloud.bucket}/cli"})
    assert second.returncode == 0, second.stderr
    assert f"collected 1 batch(es): {name}" in second.stderr
    assert "3 turn(s) graded from batch replies (0 error(s))" in second.stderr
    assert json.loads(second.stdout)["turns_graded"] == 3


def test_without_a_bucket_nothing_is_sent_and_the_error_says_what_to_set(tmp_path, items, cloud):
    judges = tmp_path / "judges.yaml"
    judges.write_text(f"judges:\n  - spec: {SPEC}\n    api_base: {cloud.vertex.api_base}\n")
    proc = cli(items, tmp_path / "v.jsonl", judges, dict(os.environ))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "error: Vertex AI's batch prediction reads a batch's requests from Cloud Storage" in proc.stderr
    assert "--batch-bucket gs://BUCKET[/PREFIX] (or FRAMEJUDGE_BATCH_BUCKET, or batch_bucket" in proc.stderr
    assert cloud.vertex.requests == [] and cloud.objects() == []


@pytest.mark.parametrize("bucket, words", [("s3://frames", "'s3://frames' is not a Cloud Storage location"),
                                           ("gs://Frames", "'gs://Frames' is not a Cloud Storage location")])
def test_a_bucket_that_is_not_one_is_refused(tmp_path, items, bucket, words):
    proc = cli(items, tmp_path / "v.jsonl", None, dict(os.environ), "--batch-bucket", bucket)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"error: --batch-bucket {bucket}: {words}" in proc.stderr


def test_without_a_project_nothing_is_sent_and_the_error_says_what_to_set(tmp_path, items, account, monkeypatch):
    with ServiceAccount(tmp_path, project=None) as nameless, GoogleCloud(nameless, by_order) as cloud:
        env = {**os.environ, "GOOGLE_APPLICATION_CREDENTIALS": str(nameless.key_file),
               "STORAGE_EMULATOR_HOST": cloud.storage_host}
        proc = cli(items, tmp_path / "v.jsonl", judges_file(tmp_path, cloud), env)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert "error: Vertex AI's batch prediction: no Google Cloud project (set vertex_project in the judge's " \
               "judges-file entry, or VERTEXAI_PROJECT or GOOGLE_CLOUD_PROJECT)" in proc.stderr
        assert cloud.vertex.requests == [] and cloud.objects() == []
        # GOOGLE_CLOUD_PROJECT names it, as google-auth reads it
        proc = cli(items, tmp_path / "v.jsonl", judges_file(tmp_path, cloud), {**env, "GOOGLE_CLOUD_PROJECT": PROJECT})
        assert proc.returncode == 0, proc.stderr
        assert only_job(cloud).startswith(f"projects/{PROJECT}/")


def test_without_credentials_nothing_is_sent_and_the_error_says_what_to_set(tmp_path, items, cloud):
    env = {k: v for k, v in os.environ.items() if k != "GOOGLE_APPLICATION_CREDENTIALS"}
    env.update(HOME=str(tmp_path), CLOUDSDK_CONFIG=str(tmp_path / "gcloud"), NO_GCE_CHECK="true")
    proc = cli(items, tmp_path / "v.jsonl", judges_file(tmp_path, cloud), env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "error: Vertex AI's batch prediction: no Google Cloud credentials (set GOOGLE_APPLICATION_CREDENTIALS" \
        in proc.stderr
    assert cloud.vertex.requests == [] and cloud.objects() == []


def test_credentials_the_token_endpoint_refuses_are_a_clear_error(tmp_path, items, account, cloud):
    with ServiceAccount(tmp_path) as stranger:  # its key is not the one the token endpoint checks against
        info = json.loads(stranger.key_file.read_text())
        info["token_uri"] = account.tokens.uri
        forged = tmp_path / "forged.json"
        forged.write_text(json.dumps(info))
    proc = cli(items, tmp_path / "v.jsonl", judges_file(tmp_path, cloud),
               {**os.environ, "GOOGLE_APPLICATION_CREDENTIALS": str(forged)})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "error: Vertex AI's batch prediction: the credentials were refused" in proc.stderr
    assert "invalid_grant" in proc.stderr
    assert cloud.vertex.requests == [] and cloud.objects() == []


def test_the_key_of_a_line_and_the_status_a_failed_line_reads_as():
    from framejudge.runner.batch_api import _vertex_status, key_label, label_key

    key = hashlib.sha256(b"a request").hexdigest()
    assert label_key(key_label(key)) == key and len(key_label(key)) == 52
    assert label_key("not-a-key") is None and label_key(None) is None
    assert [_vertex_status(s) for s in (
        '{"code": 400, "message": "m", "status": "INVALID_ARGUMENT"}', {"code": 3, "message": "m"},
        'Bad Request: {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED"}}', "RESOURCE_EXHAUSTED: quota",
        "503 Service Unavailable", "something broke")] == [400, 400, 429, 429, 503, 500]


@pytest.mark.parametrize("entry, words", [
    ("spec: litellm:gemini/gemini-2.5-flash\n    batch_bucket: gs://frames",
     "batch_bucket: for Vertex AI judges (litellm:vertex_ai/<model>), not 'litellm:gemini/gemini-2.5-flash'"),
    ("spec: litellm:openai/gpt-4o\n    vertex_project: my-project", "vertex_project: for Vertex AI judges"),
    (f"spec: {SPEC}\n    batch_bucket: frames", "'frames' is not a Cloud Storage location"),
    (f"spec: {SPEC}\n    vertex_location: Europe West", "judges.0.vertex_location: String should match pattern"),
])
def test_the_judges_file_refuses_google_settings_that_cannot_apply(tmp_path, entry, words):
    from framejudge.runner.judges import JudgesFileError, load_judges_file

    path = tmp_path / "judges.yaml"
    path.write_text(f"judges:\n  - {entry}\n")
    with pytest.raises(JudgesFileError, match=re.escape(words)):
        load_judges_file(path)
    good = tmp_path / "good.yaml"
    good.write_text(f"judges:\n  - spec: {SPEC}\n    batch_bucket: gs://frames/runs/\n    vertex_project: my-project\n")
    [config] = load_judges_file(good)
    assert (config.batch_bucket, config.vertex_project) == ("gs://frames/runs", "my-project")


def test_a_job_made_whose_answer_was_lost_is_found_and_collected_not_sent_again(tmp_path, items, cloud):
    """Vertex AI makes the job and the connection drops before its answer: the run stops, the job
    kept in the ledger as asked for (its tag in the job's label and display name); the next run finds
    it by its label in the listing of jobs and collects it: one job, one requests file, paid once."""
    from framejudge.runner.batch_api import BatchError

    vertex = cloud.vertex
    judges = judges_file(tmp_path, cloud)
    out = tmp_path / "batch.jsonl"
    vertex.drop_creates = 1
    with pytest.raises(BatchError, match=r"the batch of 6 request\(s\) was not accepted: .*the next run looks for it "
                                         r"before sending its 6 request\(s\) again"):
        run(items, out, judges, batch=True)
    name = only_job(cloud)  # made, once
    [intent] = json.loads((tmp_path / "batch.batches.json").read_text())["intents"]
    job = vertex.jobs[name]
    assert job["labels"] == {"framejudge_batch": intent["tag"]} and job["displayName"] == f"framejudge-{intent['tag']}"
    assert job["inputConfig"]["gcsSource"]["uris"] == [intent["input_file_id"]]

    vertex.finish(name, by_line)
    records = run(items, out, judges, batch=True)
    assert list(vertex.jobs) == [name] and len(cloud.objects("runs/")) == 2  # the requests and the predictions
    assert len(records) == 3 and all(isinstance(r, Verdict) for r in records)
    ledger = json.loads((tmp_path / "batch.batches.json").read_text())
    [found] = ledger["batches"]
    assert ledger["intents"] == [] and (found["id"], found["status"]) == (name, "collected")
    assert found["found"] == f"its label framejudge_batch={intent['tag']}"


def test_two_different_replies_to_one_request_are_an_error_naming_it(tmp_path, items, cloud):
    """The predictions answer one request twice, differently: the turn is an error naming the
    request; a request answered twice alike is taken."""
    from framejudge.runner.batch_api import label_key

    other = json.dumps({"response_a": {"category": "Not Successful", "rationale": "misses the heron"},
                        "response_b": {"category": "Successful", "rationale": "a jay"}, "preference": "B",
                        "deciding_criterion": "category"})
    vertex = cloud.vertex
    judges = judges_file(tmp_path, cloud)
    out = tmp_path / "batch.jsonl"
    run(items, out, judges, batch=True)
    name = only_job(cloud)
    labels = [line["request"]["labels"]["framejudge_key"] for line in vertex.requests_of(name)]

    def answers(line):
        text, label = by_line(line), line["request"]["labels"]["framejudge_key"]
        return [text, other] if label == labels[0] else [text, text] if label == labels[1] else text

    vertex.finish(name, answers)
    records = run(items, out, judges, batch=True)
    errors = [r for r in records if isinstance(r, JudgeError)]
    assert len(errors) == 1
    assert f"the batch API gave 2 different replies to request {label_key(labels[0])}" in errors[0].message
    assert len([r for r in records if isinstance(r, Verdict)]) == 2
    assert list(vertex.jobs) == [name]
