"""The OpenAPI document is usable by a client generator: openapi-python-client generates a client
from /openapi.json without dropping a schema or an operation, and that client, against a real
server on loopback, grades an item, submits a job and reads its verdicts, reads a rubric and a
problem, each parsed into its typed model."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from framejudge.service.app import create_app
from framejudge.service.settings import Settings
from framejudge.service.store import create_key, engine_for
from tests.service.servers import uvicorn_server

PACKAGE = "framejudge_generated_client"
ITEM = {"id": "q1", "turns": [{"question": "How many people?", "golden": "2 people.",
                               "response_a": "There are 2 people.", "response_b": "I cannot answer that."}]}
# what the generator says when it leaves out a schema or an operation
DROPPED = re.compile(r"Unable to (parse|process)|removal of|will not be generated|Could not find reference")


# The generator pins typer below the version framejudge uses, so `./run test` installs it in an
# environment of its own; one installed beside framejudge is used where there is no such environment.
TOOL = Path(__file__).parents[2] / ".tools" / "openapi-python-client" / "bin"


def generator() -> list[str] | None:
    if (TOOL / "openapi-python-client").exists():
        return [str(TOOL / "openapi-python-client")]
    if importlib.util.find_spec("openapi_python_client") is not None:
        return [sys.executable, "-m", "openapi_python_client"]
    return None


def generate(schema: dict, folder: Path) -> str:
    (folder / "openapi.json").write_text(json.dumps(schema))
    command = generator()
    assert command is not None
    # ruff, which the generator runs on its output, is beside it
    path = os.pathsep.join([str(Path(command[0]).parent), str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    done = subprocess.run([*command, "generate", "--path", "openapi.json", "--output-path", PACKAGE, "--meta", "none"],
                          cwd=folder, capture_output=True, text=True, timeout=300, env={**os.environ, "PATH": path})
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    return output


@pytest.fixture()
def settings(tmp_path):
    return Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", upload_dir=tmp_path / "uploads")


def test_the_document_names_each_schema_and_operation_once_and_declares_the_key(settings):
    schema = create_app(settings).openapi()
    names = list(schema["components"]["schemas"])
    assert [n for n in names if "__" in n or n.endswith(("-Input", "-Output"))] == []
    titles = [body.get("title", name) for name, body in schema["components"]["schemas"].items()]
    assert len(set(titles)) == len(titles)  # generators name their classes by title
    operations = [(path, method, op) for path, ops in schema["paths"].items() for method, op in ops.items()]
    ids = [op["operationId"] for _, _, op in operations]
    assert len(set(ids)) == len(ids) and {"grade", "submit_job", "get_job", "list_job_verdicts"} <= set(ids)
    assert schema["components"]["securitySchemes"] == {"bearer": {
        "type": "http", "scheme": "bearer", "description": "an API key (framejudge keys create)"}}
    for path, method, op in operations:
        assert not [p for p in op.get("parameters", []) if p["name"].lower() == "authorization"], (path, method)
        keyed = path.startswith("/v1/") or path == "/metrics"
        assert op.get("security") == ([{"bearer": []}] if keyed else [{"bearer": []}, {}] if path == "/readyz"
                                      else None), (path, method)
        assert {"401", "403", "429"} <= set(op["responses"]) or not keyed, (path, method)
    assert "404" not in schema["paths"]["/v1/jobs"]["get"]["responses"]
    assert "409" not in schema["paths"]["/v1/grade"]["post"]["responses"]
    assert set(schema["paths"]["/v1/jobs/{job_id}"]["get"]["responses"]) == {"200", "401", "403", "404", "422",
                                                                             "429", "500"}
    body = schema["paths"]["/v1/jobs"]["post"]["requestBody"]["content"]
    assert body["application/json"]["schema"] == {"$ref": "#/components/schemas/JobRequest"}
    verdicts = schema["paths"]["/v1/jobs/{job_id}/verdicts"]["get"]["responses"]["200"]["content"]
    assert verdicts["application/json"]["schema"] == {"$ref": "#/components/schemas/VerdictPage"}


@pytest.fixture()
def client_package(tmp_path, settings):
    if generator() is None:
        pytest.skip("openapi-python-client is not installed: ./run test installs it in .tools/ (apart from "
                    "framejudge's dependencies, as it pins typer below 0.28)")
    app = create_app(settings)
    output = generate(app.openapi(), tmp_path)
    assert not DROPPED.search(output), output
    # what it leaves out: a JSONL job body (JSON and multipart bodies remain) and the YAML of an
    # aligned rubric (the response is returned unparsed)
    skipped = set(re.findall(r"Unsupported content.type:? ?([\w/.+-]+)", output))
    assert skipped <= {"application/x-ndjson", "application/yaml"}, output
    sys.path.insert(0, str(tmp_path))
    try:
        yield importlib.import_module(PACKAGE), app, settings
    finally:
        sys.path.remove(str(tmp_path))
        for name in [n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + ".")]:
            del sys.modules[name]


def test_a_generated_client_grades_submits_jobs_and_reads_typed_answers(client_package):
    package, app, settings = client_package
    api = importlib.import_module(f"{PACKAGE}.api")
    grade = importlib.import_module(f"{PACKAGE}.api.grading.grade")
    submit_job = importlib.import_module(f"{PACKAGE}.api.jobs.submit_job")
    get_job = importlib.import_module(f"{PACKAGE}.api.jobs.get_job")
    list_job_verdicts = importlib.import_module(f"{PACKAGE}.api.jobs.list_job_verdicts")
    get_rubric = importlib.import_module(f"{PACKAGE}.api.rubrics.get_rubric")
    models = importlib.import_module(f"{PACKAGE}.models")
    assert api is not None
    key = create_key(engine_for(settings.database_url), ["grade"])

    with uvicorn_server(app) as url:
        client = package.AuthenticatedClient(base_url=url, token=key, raise_on_unexpected_status=True)

        graded = grade.sync(client=client, body=models.GradeRequest.from_dict({"item": ITEM}))
        assert isinstance(graded, models.GradeResponse), graded
        [verdict] = graded.records
        assert isinstance(verdict, models.Verdict) and verdict.item_id == "q1"
        assert verdict.preference.value == "A"

        body = models.JobRequest.from_dict(
            {"items": [{**ITEM, "id": f"q{k}"} for k in range(3)], "priority": 5})
        job = submit_job.sync(client=client, body=body)
        assert isinstance(job, models.JobStatus) and job.items == 3, job
        deadline = time.time() + 60
        while job.state not in ("done", "cancelled"):
            assert time.time() < deadline, f"job {job.id} did not finish: {job}"
            time.sleep(0.05)
            job = get_job.sync(job.id, client=client)
            assert isinstance(job, models.JobStatus), job
        assert job.state == "done" and job.done == 3

        page = list_job_verdicts.sync(job.id, client=client, offset=1, limit=2)
        assert isinstance(page, models.VerdictPage), page
        assert (page.offset, page.limit) == (1, 2)
        assert [r.item_id for r in page.records] == ["q1", "q2"]
        assert all(isinstance(r, models.Verdict) for r in page.records)

        rubric = get_rubric.sync("video-qa", client=client)
        assert isinstance(rubric, models.Rubric) and rubric.id == "video-qa", rubric

        missing = get_job.sync_detailed("0" * 32, client=client)
        assert missing.status_code == 404
        assert isinstance(missing.parsed, models.Problem) and missing.parsed.title == "No such job"

        refused = grade.sync_detailed(client=package.AuthenticatedClient(base_url=url, token="fj_nope"),
                                      body=models.GradeRequest.from_dict({"item": ITEM}))
        assert refused.status_code == 401 and isinstance(refused.parsed, models.Problem)


def test_the_bearer_scheme_leaves_the_header_to_the_service(settings):
    """The security scheme is documentation: the header is checked as it always was (any case of
    'bearer', spaces around the key), and refused with the service's own problems."""
    from fastapi.testclient import TestClient

    key = create_key(engine_for(settings.database_url), ["grade"])
    with TestClient(create_app(settings)) as client:
        for header in ({}, {"Authorization": "Basic abc"}, {"Authorization": "Bearer"}):
            r = client.get("/v1/rubrics", headers=header)
            assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer", header
            assert r.json()["detail"] == "send an API key as 'Authorization: Bearer <key>'", header
        r = client.get("/v1/rubrics", headers={"Authorization": "Bearer "})
        assert r.status_code == 401 and r.json()["detail"] == "unknown API key"
        assert client.get("/v1/rubrics", headers={"Authorization": f"bEaReR   {key}  "}).status_code == 200
        assert client.get("/readyz").json() == {"status": "ready"}  # the key is optional here
