"""Schemathesis over the served OpenAPI schema: generated requests to every operation must never
get a 5xx, and every response must match what the schema documents (status codes, media types,
bodies). Bounded example counts keep this short; the defects earlier random runs found have their
own tests (a NUL in a video reference, an empty Idempotency-Key, a negative seed).

Not applied: schemathesis's positive-data check (cross-field rules such as "fps only with the fps
strategy" or "exactly one of verdicts and job_id" cannot be written in JSON Schema, so it flags
their correct 422s), its negative-data check (pydantic accepts false for an integer 0 by design)
and its Allow-header check (Starlette lists the methods of one route per path)."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is a test dependency (pip install -e '.[test]')")
from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from framejudge.examples.clips import countdown  # noqa: E402
from framejudge.examples.synth import cfr_times, write_video  # noqa: E402
from framejudge.service.app import create_app  # noqa: E402
from framejudge.service.settings import Settings  # noqa: E402
from framejudge.service.store import create_key, engine_for  # noqa: E402


# The schema is read from the app at collection time (schemathesis's lazy fixture loader does
# not support this pytest); the app's database and media live in a folder removed afterwards.
ROOT = Path(tempfile.mkdtemp(prefix="framejudge-fuzz-"))
# every process that collects this module makes the folder (each worker of a parallel run), and
# only the one running its tests uses the fixture: each removes its own folder when it exits
atexit.register(shutil.rmtree, ROOT, True)
SETTINGS = Settings(database_url=f"sqlite:///{ROOT / 'db.sqlite'}", media_root=ROOT / "media",
                    requests_per_minute=1_000_000, run_worker=False)
APP = create_app(SETTINGS)
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


@pytest.fixture(scope="module")
def served():
    (ROOT / "media").mkdir(exist_ok=True)
    write_video(ROOT / "media" / "c.mp4", countdown, cfr_times(2, 30), gop=30)
    yield create_key(engine_for(SETTINGS.database_url), ["admin"])


@schemathesis.serializer("application/x-ndjson")
def _jsonl(_ctx: object, value: object) -> bytes:
    """JSONL bodies: the generated list of items, one per line."""
    rows = value if isinstance(value, list) else [value]
    return "\n".join(json.dumps(row) for row in rows).encode()


# CI runs a fixed set (derandomized: a submission's result does not depend on the draw); set
# FRAMEJUDGE_FUZZ_EXAMPLES for a deeper, random run.
EXAMPLES = int(os.environ.get("FRAMEJUDGE_FUZZ_EXAMPLES", "30"))
DERANDOMIZE = "FRAMEJUDGE_FUZZ_EXAMPLES" not in os.environ
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@schema.parametrize()
@settings(max_examples=EXAMPLES, derandomize=DERANDOMIZE, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors(case, served):
    case.call_and_validate(headers={"Authorization": f"Bearer {served}"}, checks=CHECKS)
