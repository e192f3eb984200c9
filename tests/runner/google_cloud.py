"""Google Cloud on loopback, for the batch runs of Vertex AI judges: an OAuth2 token endpoint that
grants access tokens for a service account key made here (the JWT-bearer grant google-auth sends,
its assertion's RS256 signature checked with the key's public half); Cloud Storage, as
gcp-storage-emulator serves its JSON API, behind a check of the Bearer token; and Vertex AI's
generateContent and batchPredictionJobs for Gemini, which read a job's requests from that storage
and write its predictions there (`finish`), as Vertex AI does.

    with ServiceAccount(tmp_path) as account, GoogleCloud(account, reply) as cloud:
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(account.key_file))
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", cloud.storage_host)
        ... a vertex_ai/ judge with api_base cloud.vertex.api_base ...

Nothing here imitates a model: each answer is what the test sets."""

from __future__ import annotations

import base64
import json
import re
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

import httpx

from tests.judge.providers import DROP, Answer, GeminiServer, Recorded, Reply

PROJECT = "frame-judge-tests"
LOCATION = "us-central1"
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
AUDIENCE = "https://oauth2.googleapis.com/token"  # a grant's audience: Google's token endpoint, wherever it is sent


def _b64url(data: str) -> bytes:
    return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))


class TokenServer:
    """Google's OAuth2 token endpoint for one service account: a POST of the JWT-bearer grant whose
    assertion is signed by the account's key (RS256), names the account as issuer, this endpoint as
    audience, the cloud-platform scope and a time window around now, is answered with a fresh access
    token; anything else with 400 invalid_grant, as Google answers it."""

    def __init__(self, public_key: Any, email: str) -> None:
        self.public_key = public_key
        self.email = email
        self.tokens: set[str] = set()
        self.grants: list[dict] = []  # the claims of each assertion granted
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                form = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
                status, body = server.grant(self.path, {k: v[0] for k, v in form.items()})
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/token"

    def grant(self, path: str, form: dict[str, str]) -> tuple[int, dict]:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        refused = (400, {"error": "invalid_grant", "error_description": "Invalid JWT Signature."})
        if path != "/token" or form.get("grant_type") != JWT_BEARER:
            return 400, {"error": "unsupported_grant_type", "error_description": "Invalid grant_type"}
        try:
            head, body, signature = form["assertion"].split(".")
            header, claims = json.loads(_b64url(head)), json.loads(_b64url(body))
            self.public_key.verify(_b64url(signature), f"{head}.{body}".encode(), padding.PKCS1v15(), hashes.SHA256())
        except (KeyError, ValueError, InvalidSignature):
            return refused
        now = time.time()
        if header.get("alg") != "RS256" or claims.get("iss") != self.email or claims.get("aud") != AUDIENCE:
            return refused
        if not claims.get("iat", now + 999) - 300 <= now <= claims.get("exp", 0) or \
                CLOUD_PLATFORM not in str(claims.get("scope", "")).split():
            return 400, {"error": "invalid_scope", "error_description": "Invalid OAuth scope or ID token audience"}
        token = "ya29." + secrets.token_urlsafe(24)
        self.tokens.add(token)
        self.grants.append(claims)
        return 200, {"access_token": token, "expires_in": 3599, "token_type": "Bearer"}

    def allows(self, headers: Any) -> bool:
        found = re.fullmatch(r"Bearer (\S+)", headers.get("Authorization") or headers.get("authorization") or "")
        return found is not None and found.group(1) in self.tokens


UNAUTHENTICATED = {"error": {"code": 401, "message": "Request had invalid authentication credentials. Expected "
                                                     "OAuth 2 access token, login cookie or other valid "
                                                     "authentication credential.", "status": "UNAUTHENTICATED"}}


def storage_server(tokens: TokenServer, bucket: str) -> tuple[ThreadingHTTPServer, Any]:
    """gcp-storage-emulator's JSON API (its router and in-memory storage) with `bucket` made,
    answering 401 to a request without a token the token endpoint granted; the server and its
    storage."""
    from gcp_storage_emulator.handlers import buckets
    from gcp_storage_emulator.server import RequestHandler
    from gcp_storage_emulator.storage import Storage

    storage = Storage(use_memory_fs=True)
    buckets.create_bucket(bucket, storage)
    lock = threading.Lock()

    class Checked(RequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _refused(self) -> bool:
            if tokens.allows(self.headers):
                return False
            data = json.dumps(UNAUTHENTICATED).encode()
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return True

        def do_GET(self) -> None:
            if not self._refused():
                with lock:
                    super().do_GET()

        def do_POST(self) -> None:
            if not self._refused():
                with lock:
                    super().do_POST()

        def do_PUT(self) -> None:
            if not self._refused():
                with lock:
                    super().do_PUT()

        def do_DELETE(self) -> None:
            if not self._refused():
                with lock:
                    super().do_DELETE()

    return ThreadingHTTPServer(("127.0.0.1", 0), partial(Checked, storage)), storage


class VertexServer(GeminiServer):
    """Vertex AI for Gemini models, as litellm reaches it with an `api_base` (no path) and Google
    documents it (REST v1):

    - POST /v1/projects/{p}/locations/{l}/publishers/google/models/{m}:generateContent: an online
      call, answered as GeminiServer answers it.
    - POST /v1/projects/{p}/locations/{l}/batchPredictionJobs with `{displayName, model:
      publishers/google/models/{m}, inputConfig: {instancesFormat: jsonl, gcsSource: {uris: [gs://...]}},
      outputConfig: {predictionsFormat: jsonl, gcsDestination: {outputUriPrefix: gs://...}}}`: the job
      (`name` projects/{p}/locations/{l}/batchPredictionJobs/{id}, `state` JOB_STATE_PENDING), its
      input file read from Cloud Storage then: a file that is missing, or whose lines are not
      `{"request": GenerateContentRequest}`, is refused 400 INVALID_ARGUMENT.
    - GET /v1/projects/{p}/locations/{l}/batchPredictionJobs/{id}: the job; after `finish`,
      JOB_STATE_SUCCEEDED and `outputInfo.gcsOutputDirectory`, under which its predictions.jsonl was
      written: one line per request, `{"status": "", "processed_time", "request", "response"}` (the
      request as it was sent, its labels with it), or a failed one's `status` (an error's text).
    - GET /v1/projects/{p}/locations/{l}/batchPredictionJobs?filter=&pageSize=&pageToken=: the jobs,
      newest first (`{"batchPredictionJobs", "nextPageToken"}`), those a `labels.KEY=VALUE` filter names.

    `drop_creates = n`: the next n create calls make their job and then close the connection without
    an answer.

    Every call needs an access token the token endpoint granted (401 UNAUTHENTICATED otherwise),
    and names project `project` (403 PERMISSION_DENIED otherwise)."""

    prefix = "vertex_ai"
    base_path = ""

    def __init__(self, reply: Reply, tokens: TokenServer, storage_root: str, project: str = PROJECT) -> None:
        super().__init__(reply)
        self.tokens = tokens
        self.storage_root = storage_root
        self.project = project
        self.agent_token = "ya29.agent-" + secrets.token_urlsafe(12)  # the service agent's, for its storage calls
        tokens.tokens.add(self.agent_token)
        self.jobs: dict[str, dict] = {}
        self.job_calls: dict[str, Recorded] = {}
        self.lines: dict[str, list[dict]] = {}
        self.drop_creates = 0

    def _where(self, path: str) -> re.Match[str] | None:
        return re.fullmatch(r"/v1/projects/([^/]+)/locations/([^/]+)/(.+)", path)

    def handles(self, path: str) -> bool:
        found = self._where(path)
        return found is not None and (re.fullmatch(r"publishers/google/models/[^/:]+:generateContent", found.group(3))
                                      is not None or found.group(3) == "batchPredictionJobs")

    def _refused(self, seen: Recorded) -> Answer | None:
        if not self.tokens.allows(seen.headers):
            return 401, UNAUTHENTICATED, {}
        found = self._where(seen.path)
        if found is None or found.group(1) != self.project:
            return 403, {"error": {"code": 403, "message": f"Permission denied on resource project "
                                                           f"{found.group(1) if found else '?'}.",
                                   "status": "PERMISSION_DENIED"}}, {}
        return None

    def answer(self, seen: Recorded) -> Answer:
        refused = self._refused(seen)
        if refused is not None:
            return refused
        if seen.path.endswith("/batchPredictionJobs"):
            return self._create(seen)
        return super().answer(seen)

    def get(self, seen: Recorded) -> Answer:
        refused = self._refused(seen)
        if refused is not None:
            return refused
        path, _, query = seen.path.partition("?")
        if path.endswith("/batchPredictionJobs"):
            return 200, self._listing(parse_qs(query)), {}
        job = self.jobs.get(path.removeprefix("/v1/"))
        return (200, job, {}) if job else self.refuse(404, f"{seen.path} not found")

    def _listing(self, query: dict[str, list[str]]) -> dict:
        jobs = list(reversed(self.jobs.values()))
        wanted = re.fullmatch(r'labels\.(\w+)\s*=\s*"?([\w-]*)"?', (query.get("filter") or [""])[0].strip())
        if wanted:
            jobs = [j for j in jobs if (j.get("labels") or {}).get(wanted.group(1)) == wanted.group(2)]
        start = int((query.get("pageToken") or ["0"])[0])
        size = int((query.get("pageSize") or ["100"])[0])
        page: dict = {"batchPredictionJobs": jobs[start:start + size]}
        if start + size < len(jobs):
            page["nextPageToken"] = str(start + size)
        return page

    # ---------------------------------------------------------------- storage, as the service agent

    def _read(self, uri: str) -> bytes | None:
        bucket, _, name = uri.removeprefix("gs://").partition("/")
        response = httpx.get(f"{self.storage_root}/storage/v1/b/{bucket}/o/{quote(name, safe='')}?alt=media",
                             headers={"Authorization": f"Bearer {self.agent_token}"})
        return response.content if response.status_code == 200 else None

    def _write(self, uri: str, data: bytes) -> None:
        bucket, _, name = uri.removeprefix("gs://").partition("/")
        response = httpx.post(f"{self.storage_root}/upload/storage/v1/b/{bucket}/o?uploadType=media&name="
                              f"{quote(name, safe='')}", content=data,
                              headers={"Authorization": f"Bearer {self.agent_token}",
                                       "Content-Type": "application/octet-stream"})
        response.raise_for_status()

    # ---------------------------------------------------------------- jobs

    def _create(self, seen: Recorded) -> Answer:
        body = seen.body if isinstance(seen.body, dict) else {}
        model = str(body.get("model") or "")
        source = ((body.get("inputConfig") or {}).get("gcsSource") or {}).get("uris") or []
        destination = ((body.get("outputConfig") or {}).get("gcsDestination") or {}).get("outputUriPrefix")
        if not re.fullmatch(r"publishers/google/models/gemini-[\w.-]+", model):
            return self.refuse(400, f"model: {model!r} is not a Gemini publisher model")
        if (body.get("inputConfig") or {}).get("instancesFormat") != "jsonl" or len(source) != 1 or \
                (body.get("outputConfig") or {}).get("predictionsFormat") != "jsonl" or \
                not str(destination or "").startswith("gs://") or not body.get("displayName"):
            return self.refuse(400, "displayName, a jsonl gcsSource and a jsonl gcsDestination are required")
        data = self._read(source[0])
        if data is None:
            return self.refuse(400, f"Failed to read the input file {source[0]}")
        lines = []
        for k, text in enumerate(data.decode().splitlines(), 1):
            try:
                line = json.loads(text)
                ok = set(line) == {"request"} and isinstance(line["request"]["contents"], list)
            except (ValueError, KeyError, TypeError):
                ok = False
            if not ok:
                return self.refuse(400, f"line {k}: not a {{\"request\": GenerateContentRequest}} line")
            lines.append(line)
        found = self._where(seen.path)
        assert found is not None
        name = f"projects/{self.project}/locations/{found.group(2)}/batchPredictionJobs/{uuid.uuid4().int % 10**19}"
        self.jobs[name] = {"name": name, "displayName": body["displayName"], "model": model,
                           "inputConfig": body["inputConfig"], "outputConfig": body["outputConfig"],
                           "state": "JOB_STATE_PENDING", "createTime": "2026-12-02T12:00:00.000000Z",
                           "updateTime": "2026-12-02T12:00:00.000000Z", "modelVersionId": "1",
                           **({"labels": body["labels"]} if body.get("labels") else {})}
        self.job_calls[name] = seen
        self.lines[name] = lines
        if self.drop_creates:
            self.drop_creates -= 1
            return DROP
        return 200, self.jobs[name], {}

    def requests_of(self, name: str) -> list[dict]:
        """The job's input file's lines as read when it was made: `{"request"}` each."""
        return self.lines[name]

    def finish(self, name: str, answer: Callable[[dict], Any] | None = None, state: str = "SUCCEEDED") -> None:
        """The job ended (`state`) with predictions: `answer(line)` gives each line's result: a reply
        text, ("error", HTTP status, status name, message) for a failed request, None for no line, or a
        list of those (a line each); by default `reply`. Its predictions.jsonl is written under the
        output prefix."""
        job = self.jobs[name]
        rows = []
        model = job["model"].rpartition("/")[2]
        for line in self.requests_of(name):
            seen = Recorded("POST", f"/v1/{name.rsplit('/', 2)[0]}/publishers/google/models/{model}:generateContent",
                            {}, line["request"])
            got = answer(line) if answer is not None else (self.reply(seen) if callable(self.reply) else self.reply)
            for one in got if isinstance(got, list) else [got]:
                if one is None:
                    continue
                row: dict[str, Any] = {"processed_time": "2026-12-02T12:30:00.000+00:00", "request": line["request"]}
                if isinstance(one, tuple) and one[0] == "error":
                    row.update(status=json.dumps({"code": one[1], "message": one[3], "status": one[2]}), response=None)
                else:
                    row.update(status="", response=self.success(one, seen))
                rows.append(row)
        directory = f"{job['outputConfig']['gcsDestination']['outputUriPrefix']}/prediction-model-2026-12-02T12:00:00.000000Z"
        self._write(f"{directory}/predictions.jsonl", "".join(json.dumps(r) + "\n" for r in rows).encode())
        job.update(state=f"JOB_STATE_{state}", endTime="2026-12-02T13:00:00.000000Z",
                   outputInfo={"gcsOutputDirectory": directory},
                   completionStats={"successfulCount": str(sum(not r["status"] for r in rows)),
                                    "failedCount": str(sum(bool(r["status"]) for r in rows))})

    def end(self, name: str, state: str) -> None:
        """The job ended without predictions: FAILED, CANCELLED or EXPIRED."""
        job = self.jobs[name]
        job.update(state=f"JOB_STATE_{state}", endTime="2026-12-02T13:00:00.000000Z")
        if state == "FAILED":
            job["error"] = {"code": 13, "message": "Internal error encountered."}


class ServiceAccount:
    """A service account key file (a fresh RSA key; `project` as its project_id, or none) and the
    token endpoint its `token_uri` names, started on `with`."""

    def __init__(self, folder: Path, project: str | None = PROJECT,
                 email: str = "grader@frame-judge-tests.iam.gserviceaccount.com") -> None:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.tokens = TokenServer(key.public_key(), email)
        info = {"type": "service_account", "private_key_id": secrets.token_hex(20),
                "private_key": key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                 serialization.NoEncryption()).decode(),
                "client_email": email, "client_id": "1234567890", "token_uri": self.tokens.uri,
                "auth_uri": "https://accounts.google.com/o/oauth2/auth"}
        if project is not None:
            info["project_id"] = project
        self.key_file = folder / "service-account.json"
        self.key_file.write_text(json.dumps(info))

    def __enter__(self) -> ServiceAccount:
        self.tokens.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.tokens.httpd.shutdown()
        self.tokens.httpd.server_close()


class GoogleCloud:
    """Cloud Storage with `bucket`, and Vertex AI answering `reply` for `project`, both taking the
    access tokens of `account`'s token endpoint; on loopback, started on `with`."""

    def __init__(self, account: ServiceAccount, reply: Reply, bucket: str = "frame-batches",
                 project: str = PROJECT) -> None:
        self.account = account
        self.bucket = bucket
        self.storage_httpd, self.storage = storage_server(account.tokens, bucket)
        self.vertex = VertexServer(reply, account.tokens, self.storage_host, project)
        self._thread = threading.Thread(target=self.storage_httpd.serve_forever, daemon=True)

    @property
    def storage_host(self) -> str:
        return f"http://127.0.0.1:{self.storage_httpd.server_address[1]}"

    def objects(self, prefix: str = "") -> list[str]:
        """The names of the bucket's objects under `prefix`, as the storage lists them."""
        response = httpx.get(f"{self.storage_host}/storage/v1/b/{self.bucket}/o", params={"prefix": prefix},
                             headers={"Authorization": f"Bearer {self.vertex.agent_token}"})
        response.raise_for_status()
        return [i["name"] for i in response.json().get("items") or []]

    def __enter__(self) -> GoogleCloud:
        self._thread.start()
        self.vertex.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.vertex.__exit__(*exc)
        self.storage_httpd.shutdown()
        self.storage_httpd.server_close()
