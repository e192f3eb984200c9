"""Batch runs (`framejudge grade ... --batch`): a run's judge calls sent through the provider's batch
API (half price, answered within 24 hours: OpenAI, Anthropic, the Gemini API, Vertex AI), resumable
by running the same command again.

Each run of the command does three things, in this order:

1. **Collect.** Every batch an earlier run asked for without recording the provider's answer (an
   intent in the ledger, `<out>.batches.json`) is looked for at the provider first (see "Paid once"
   below). Then every batch in the ledger that is not collected yet is asked for its status; an
   ended one's results are read into the replies file (`<out>.batch-replies.jsonl`, one line per
   request: its key and the provider's answer). A batch that failed, expired or was cancelled
   without results gives its requests back to be submitted again.
2. **Grade.** The turns still to grade (the same resume rules as an online run: `runner/resume.py`)
   go through the same pipeline as an online run, with `BatchedLiteLLM` as the judge: where the
   call it would make has a reply, the reply is used exactly as an online reply would be (usage,
   cost, the re-ask loop, log-probabilities); where it has none, the request is set aside and the
   turn waits (no record). A reply that breaks the rubric makes its re-ask the next request, so
   re-asks go in the next batch. A request the provider failed is submitted again, at most
   `MAX_FAILURES` times, then the turn is recorded as a JudgeError. Turns that finish are appended to
   the verdicts file as records, as an online run writes them.
3. **Submit.** The requests set aside that no open batch carries are submitted as batches (as many
   as the provider's limits on requests and bytes per batch ask), each written to the ledger as an
   intent before anything is sent (see "Paid once").

A request's key is the sha256 of the body the provider is sent (model, messages, the reply's schema
or JSON mode, temperature, seed, token limit), so the same call in a later run finds its reply, and a
call that changed (another rubric, other frames) is a new request. The key is the request's
`custom_id` in the batch (Anthropic: the batch's tag, `-`, then the key in base32; Gemini: its `key`;
Vertex AI: a label of the request; Gemini's request carries no model, which is named in the batch's
URL instead, and a ledger holds one judge's batches).

**Paid once.** A batch is written to the ledger as an intent (`BatchIntent`: a tag, the ledger's id
for it; the request keys and their sha256; the time) before its requests file is uploaded, the
file's id is added once it is, and the intent is replaced by the batch (its id, with the tag) once
the provider answers the create call. The create call is made once: never retried, by framejudge
or by the client under it (the OpenAI SDK's retries are turned off for it), since a retry after an
answer that was lost makes a second batch of the same requests. A create call refused (a 4xx, a
redirect) made nothing: the intent goes. One that got no answer (a dropped connection, a timeout, a
5xx, a run killed or stopped while it waited) leaves the intent, and the run stops with an error
that says so; the next run looks for the batch before anything else, by the tag it carries, and
takes the one it finds into the ledger (`found` says how), to be collected as any other, or, where
there is none, sends its requests again. What carries the tag: OpenAI, the batch's `metadata`
(`framejudge_batch`), found in the listing of batches (`GET /v1/batches`) with its input file as a
second key; the Gemini API, the batch's display name (`framejudge-<tag>`) and input file, found in
`GET /v1beta/batches`; Vertex AI, the job's label `framejudge_batch`, its display name and its
requests file's folder, found with `GET .../batchPredictionJobs?filter=labels.framejudge_batch=<tag>`;
Anthropic's Message Batches carry no metadata, and a batch's custom_ids (which carry the tag) can be
read only once it has ended, so the batch found is the one in `GET /v1/messages/batches` with as many
requests as the intent, made nearest after it; a batch so found whose results answer other requests
than the intent's was another's, and its requests are sent again (the other batch is left alone).
A listing that cannot be read stops the run before anything is sent. Two different replies to one
request (in one results file, or from two batches; a reply's own id and time aside) are never
chosen between: the turn is recorded as a JudgeError that names the request and its batches, and
the run says so; deleting the line not wanted from the replies file settles it. The same reply
twice is taken, and an error never replaces a reply.

**Providers** are one table, `BATCH_APIS`: one `BatchAPI` each, which builds a call's request line,
submits a batch, asks where it stands, reads its results, turns a result into the reply an online
call would have had, and gives the share of the synchronous price a batch is billed at (cost:
litellm's price for each reply, or the judges file's price, times that share).

- `openai` (`OpenAIBatches`): OpenAI's Batch API (files and batches, `/v1/chat/completions` lines),
  spoken through litellm (`acreate_file`, `acreate_batch`, `aretrieve_batch`, `afile_content`), for
  OpenAI and servers that implement it (`openai/` judges, with or without `api_base`). Billed at 50 %
  ("50% cost discount compared to synchronous APIs").
- `anthropic` (`AnthropicBatches`): Anthropic's Message Batches API (`POST /v1/messages/batches`
  with `requests: [{custom_id, params}]`, `GET /v1/messages/batches/{id}`, the results JSONL at
  `GET /v1/messages/batches/{id}/results`). Billed at 50 % ("50% of standard API prices"). Each
  request's `params` is the messages body litellm sends online for that call, made by litellm's own
  Anthropic transformation (`get_optional_params`, then the provider config's `transform_request`,
  as litellm's HTTP handler does, built here rather than captured from a completion call, which
  costs some 20 times more; tests/runner/test_batch_anthropic.py holds it equal to the body
  litellm puts on the wire online for the same call), with the beta headers that call carries
  (`structured-outputs-...` for `output_format`) sent with the batch; a succeeded result's message
  becomes the reply through litellm's `AnthropicConfig.transform_response`, with the JSON mode the
  online call has (a forced `json_tool_call` tool's input is the reply's text). What goes through
  litellm and what not: litellm's `aretrieve_batch` speaks Anthropic's retrieve and is used for the
  status; litellm has no batch creation for Anthropic (`AnthropicBatchesConfig.
  transform_create_batch_request` raises NotImplementedError, and `create_batch` does not take the
  provider), so the create call is made here with httpx, to the URL and with the headers (key,
  version, `message-batches` beta) litellm's `AnthropicBatchesConfig` gives; litellm's results
  reader (`afile_content`) rewrites every result in OpenAI's shape without the call's JSON mode (a
  forced tool's reply comes back empty) and reports `canceled` and `expired` requests as 400
  `invalid_request_error`s (which would read as a refused schema), so the results are read here with
  httpx from Anthropic's results endpoint and each message is transformed as above.

- `gemini` (`GeminiBatches`): the Gemini API's Batch Mode (Google AI Studio keys, `gemini/` judges),
  as Google's guide (ai.google.dev/gemini-api/docs/batch-mode, "Input file") and API reference
  (ai.google.dev/api/batch-mode) give it. The requests go in a JSONL input file, one
  `{"key": ..., "request": GenerateContentRequest}` a line (up to 2 GB), uploaded through the Files
  API's resumable upload (`POST /upload/v1beta/files` with `X-Goog-Upload-Protocol: resumable`,
  `X-Goog-Upload-Command: start`, the length and type in `X-Goog-Upload-Header-Content-Length` /
  `-Type`, answered with `X-Goog-Upload-URL`, taken only on the API root's origin; the bytes to that URL with `X-Goog-Upload-Command:
  upload, finalize` at `X-Goog-Upload-Offset: 0`, answered with the file `files/...`); the batch is
  `POST /v1beta/models/{model}:batchGenerateContent` with `{"batch": {"display_name", "input_config":
  {"file_name"}}}`, answered with its operation (`batches/...`); `GET /v1beta/{batches/...}` says
  where it stands (`metadata.state`: the guide writes JOB_STATE_PENDING, RUNNING, SUCCEEDED, FAILED,
  CANCELLED, EXPIRED, the API and litellm's reader BATCH_STATE_*; both are read) and, once it
  succeeded, names the responses file (`response.responsesFile`, also `metadata.output`), read with
  `GET /download/v1beta/{file}:download?alt=media`: one line a request, its `key` with the
  `response` (a GenerateContentResponse) or an error status (a google.rpc.Status, read as the HTTP
  status the same error has online: a refused schema, INVALID_ARGUMENT, is a 400). An expired,
  cancelled or failed batch has no results ("The job will not have any results to retrieve"): its
  requests are given back. The large-request route (the input file) is used, not inline requests
  (for "smaller batches that keep the total request size under 20MB"): a run's frames are inline
  images. The key goes in `x-goog-api-key`, as litellm sends it online. Billed at 50 % ("50% of the
  standard cost"). Each request is the generateContent body litellm sends online for that call,
  made by litellm's own Gemini transformation (`get_optional_params`, then
  `sync_transform_request_body`, as its Gemini handler does: the frames as inline data, the rubric as
  the system instruction, generationConfig with the reply's `response_json_schema` or JSON mode,
  temperature, seed, maxOutputTokens; tests/runner/test_batch_gemini.py holds each line's request
  equal to the body litellm puts on the wire online for the same call); a response becomes the reply
  through litellm's Gemini response transformation (`GoogleAIStudioGeminiConfig.transform_response`),
  so usage, cost and the re-ask loop are as online. What goes through litellm and what not: litellm's
  own `gemini` batch route (litellm 1.110: `GeminiBatchesConfig`) runs the uploaded file as it is and
  reads the results as OpenAI-shaped rows (`custom_id`, `response.body`), a shape Google's guide does
  not document, and builds no request line from a call; so the upload, create, status and download
  calls are made here with httpx, to the URLs above under the judge's API root (its `api_base` without the API
  version its online calls name, else GEMINI_API_BASE, else generativelanguage.googleapis.com).

- `vertex_ai` (`VertexBatches`): Vertex AI's batch prediction for Gemini (`vertex_ai/gemini-...`
  judges), as Google's guide ("Batch inference from Cloud Storage") and the REST reference
  (`projects.locations.batchPredictionJobs`) give it. The requests go in a JSONL file in Cloud Storage,
  one `{"request": GenerateContentRequest}` a line, written with the Cloud Storage JSON API's media
  upload (`POST /upload/storage/v1/b/{bucket}/o?uploadType=media&name=...`) under the judge's
  `batch_bucket` (gs://BUCKET[/PREFIX]: its judges-file entry, `--batch-bucket`,
  FRAMEJUDGE_BATCH_BUCKET; refused before anything is sent without one); the job is `POST
  /v1/projects/{project}/locations/{location}/batchPredictionJobs` with `model:
  publishers/google/models/{model}`, `inputConfig` {instancesFormat jsonl, gcsSource.uris} and
  `outputConfig` {predictionsFormat jsonl, gcsDestination.outputUriPrefix}; `GET /v1/{job name}` says
  where it stands (`state`: JOB_STATE_QUEUED, PENDING, RUNNING, SUCCEEDED, PARTIALLY_SUCCEEDED,
  FAILED, CANCELLING, CANCELLED, EXPIRED, ...) and, once it wrote predictions,
  `outputInfo.gcsOutputDirectory`, whose `predictions*.jsonl` objects (listed with `GET
  /storage/v1/b/{bucket}/o?prefix=`, read with `?alt=media`) hold one line a request: the request as it
  was sent, `status` (empty, or a failed request's error as text) and `response` (a
  GenerateContentResponse). A failed, cancelled or expired job has what it wrote read; the requests
  without a line are given back. A line is matched to its call by a key: Vertex keeps no `key` field
  of an input line for Gemini (the guide documents none, and litellm's own Vertex batch route matches
  Gemini lines by request labels), but it echoes the request, labels included, so each request carries
  the label `framejudge_key` (the key in base32: 52 characters, within a label value's 63); a line whose
  request has no label is matched by the sha256 of the request, where it came back as it was sent
  (exact equality is not relied on: Vertex may write the echoed request in another form). A failed
  line's `status` is read as the HTTP status of its error (a google.rpc.Status, or the JSON of one in
  the text, or a status name or HTTP reason in it; else 500): a refused schema (INVALID_ARGUMENT) is a
  400, as online. Each request is the generateContent body litellm sends online to Vertex AI for that
  call (the Gemini route's transformation with the `vertex_ai` provider;
  tests/runner/test_batch_vertex.py holds each line's request, without the label, equal to the body
  litellm puts on the wire online for the same call), and each response becomes the reply through
  litellm's `VertexGeminiConfig.transform_response`, priced at litellm's Vertex AI price. Auth is
  litellm's for online calls (`VertexBase.get_access_token_async`: VERTEXAI_CREDENTIALS, else
  Application Default Credentials through google-auth), a Bearer token on every call, to Vertex AI and
  to Cloud Storage; the project is the judge's `vertex_project`, else VERTEXAI_PROJECT, else the
  credentials' (GOOGLE_CLOUD_PROJECT, the key file's); the region its `vertex_location`, else
  VERTEXAI_LOCATION, else litellm's for the model. The API roots: Vertex AI's is the judge's api_base
  where its path is empty or an API version (as litellm reads one online), else
  `{region}-aiplatform.googleapis.com`; Cloud Storage's is STORAGE_EMULATOR_HOST where it is set (as
  Google's client libraries read it), else storage.googleapis.com. Billed at 50 % ("discounted 50%
  from standard requests"). What goes through litellm and what not: litellm's `vertex_ai` batch route
  takes OpenAI-shaped input files, uploads them to its own GCS_BUCKET_NAME and returns OpenAI-shaped
  rows; so the upload, job, status, listing and download calls are made here with httpx.

Other providers are refused with the reason before anything is sent (`NOT_SPOKEN`), as are partner
models on Vertex AI (`vertex_ai/claude-...`, whose batch lines are another format).

**What is read, and where calls go.** No call of a batch run follows a redirect: litellm's (the
OpenAI SDK's files and batches client included) go through judge/model_http.py's bounded transport,
and the calls made here with httpx (`_send`, `_read_results`) refuse a 3xx with a BatchError that
names it. An answer to a create, status or listing call is read up to the reply cap
(FRAMEJUDGE_MAX_REPLY_MB). A results file (`file_caps`) is read as it arrives, line by line: a line
longer than the reply cap and an envelope (on Vertex AI, whose lines repeat the request, plus the
batch's byte limit) is cut to its start, which names its request, and becomes that request's error
(`reply larger than N MB`: counted, as any failed request); the file as a whole may hold the cap
(and envelope) for each request in the batch, and a larger one stops the collection with a
BatchError, the batch left to collect again. OpenAI's results come through litellm's
`afile_content`, which holds a file whole: the same whole-file cap applies to it as it is read.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import hashlib
import json
import logging
import os
import re
import secrets
from collections.abc import AsyncIterator, Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from ..endpoint import UnlimitedGate
from ..errors import FramejudgeError
from ..judge.base import JudgeRequest, JudgeResult
from ..judge.litellm_backend import LiteLLMJudge
from ..judge.model_http import (ACCEPT_ENCODING, Decoder, RedirectRefused, ReplyLimit, ReplyTooLarge, bound_litellm,
                                is_redirect, limit_of, max_reply_bytes, mb, read_capped, reply_cap)
from ..judge.pipeline import Grader
from ..judge.usage import RAW_REPLY
from ..net import same_origin
from ..records import Record
from ..schema import Item, JudgeError
from ..schema.batches import BatchIntent, BatchLedger, SubmittedBatch
from .resume import ResumePlan, apply_plan

MAX_FAILURES = 3  # times a request the provider failed is submitted again before the turn is an error
CLOSED = {"failed", "expired", "cancelled"}  # OpenAI batch states that will never produce an output


class BatchUnsupported(FramejudgeError, ValueError):
    """A batch run asked of a judge whose provider has no batch API framejudge speaks."""

    code = "batch_unsupported"


class BatchError(FramejudgeError, RuntimeError):
    """The provider's batch API refused an upload or a batch, or its files could not be read."""

    code = "batch_failed"


class BatchRefused(BatchError):
    """The provider answered a call with a refusal (4xx, or a redirect, which is never followed):
    nothing was made. Other failures (no answer, a dropped connection, a 5xx) leave it unknown."""

    code = "batch_refused"


class Deferred(BaseException):  # a signal, not an error: it passes every `except Exception`
    """Raised by `BatchedLiteLLM` for a call whose reply is not in yet: the turn waits for a later run."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


# the requests one turn set aside (inside BatchRun.run, per turn: each turn is its own task)
WAITING: ContextVar[list[str] | None] = ContextVar("framejudge_batch_waiting", default=None)


@dataclass
class Pending:
    """A request set aside for the next batch: the body the provider is sent, and the headers the
    online call would have carried that the batch must carry (Anthropic's beta features)."""

    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Poll:
    """Where a submitted batch stands: the provider's word for it, whether its results can be read
    (`ended`), or whether it never will have any (`closed`: its requests are given back)."""

    status: str
    ended: bool = False
    closed: bool = False
    sources: tuple[str, ...] = ()  # where its results are (OpenAI: the output and error files)


def answer_row(key: str, status: int | None, body: Any = None, error: Any = None, counts: bool = True) -> dict[str, Any]:
    """One result as the replies file keeps it: a reply (`body`, the provider's own answer) or an
    error; `counts`: whether the error counts against the request's MAX_FAILURES (a request
    cancelled or expired with its batch does not)."""
    if error is None:
        return {"key": key, "status_code": status, "body": body}
    return {"key": key, "status_code": status, "error": error, "counts": counts}


class BatchAPI:
    """One provider's batch API: how a call becomes a request line, how a batch is submitted, asked
    after and read, how a result becomes the reply an online call would have had, and its price."""

    name = ""
    title = ""  # for messages: whose batch API
    price = 1.0  # the share of the synchronous price a batch's calls are billed at
    max_requests = 50_000  # per batch
    max_bytes = 190 * 1024 * 1024  # per batch, with room under the provider's limit
    echoes = False  # whether each line of its results repeats the request (Vertex AI)

    def request(self, judge: LiteLLMJudge, messages: list[dict[str, Any]], temperature: float, seed: int,
                mode: str) -> Pending:
        raise NotImplementedError

    def reply(self, pending: Pending, answer: dict[str, Any], messages: list[dict[str, Any]]) -> Any:
        """A succeeded result as the litellm.ModelResponse an online call returns."""
        raise NotImplementedError

    def line_size(self, key: str, pending: Pending) -> int:
        return len(json.dumps({"custom_id": key, "body": pending.body})) + 64

    def check(self, judge: LiteLLMJudge) -> None:
        """Refuses, before anything is sent, a judge this API cannot batch as configured."""

    async def upload(self, judge: LiteLLMJudge, requests: dict[str, Pending], intent: BatchIntent) -> str | None:
        """Puts the requests where the batch will read them (a file the provider keeps, or Cloud
        Storage), named after `intent.tag`; the file's id, or None where the requests go in the create
        call itself (Anthropic). Nothing is billed for it."""
        return None

    async def create(self, judge: LiteLLMJudge, requests: dict[str, Pending], intent: BatchIntent) -> SubmittedBatch:
        """Asks the provider to make the batch, carrying `intent.tag` as the provider allows; made once
        (never retried: a retry after a lost answer could make it twice). BatchRefused where the
        provider answered no; any other BatchError leaves it unknown whether the batch was made."""
        raise NotImplementedError

    async def find(self, judge: LiteLLMJudge, intent: BatchIntent, taken: set[str]) -> SubmittedBatch | None:
        """The batch `intent` asked for, where the provider made it (batches whose ids are in `taken`
        are another's); None where it has none. A BatchError where the provider cannot be asked."""
        raise NotImplementedError

    async def poll(self, judge: LiteLLMJudge, batch: SubmittedBatch) -> Poll:
        raise NotImplementedError

    async def results(self, judge: LiteLLMJudge, batch: SubmittedBatch, poll: Poll) -> list[dict[str, Any]]:
        """The batch's results as answer_row rows (any custom_id; the caller keeps its own)."""
        raise NotImplementedError


async def _send(method: str, url: str, headers: dict[str, str], what: str, *, payload: Any = None,
                content: bytes | None = None) -> Any:
    """One request of a batch API framejudge speaks itself (Anthropic's, the Gemini API's, Vertex
    AI's); an answer of 400 or more, a redirect (never followed), a body over the reply cap
    (FRAMEJUDGE_MAX_REPLY_MB), or no answer, is a BatchError that says `what` was being done."""
    import httpx

    cap = max_reply_bytes()
    try:
        async with httpx.AsyncClient(timeout=600.0) as client:
            async with client.stream(method, url, headers={**headers, "Accept-Encoding": ACCEPT_ENCODING},
                                     json=payload, content=content) as streamed:
                _refuse_redirect(streamed, what)
                data = await read_capped(streamed.aiter_raw(), cap, streamed.headers.get("content-encoding"))
    except ReplyLimit as exc:
        raise BatchError(f"{what}: {exc}"[:800]) from None
    except httpx.HTTPError as exc:
        raise BatchError(f"{what}: {type(exc).__name__}: {exc}"[:800]) from None
    kept = [(k, v) for k, v in streamed.headers.multi_items() if k.lower() not in ("content-encoding", "content-length")]
    response = httpx.Response(streamed.status_code, headers=kept, content=data, request=streamed.request)
    if response.status_code >= 400:
        error = BatchRefused if response.status_code < 500 else BatchError
        raise error(f"{what}: HTTP {response.status_code}: {response.text}"[:800])
    return response


def _refuse_redirect(response: Any, what: str) -> None:
    if is_redirect(response.status_code):
        raise BatchRefused(f"{what}: {RedirectRefused(response.status_code, response.headers.get('location'))}"[:800])


def _failed_call(exc: BaseException, what: str) -> BatchError:
    """A failed call through litellm as a BatchError: BatchRefused where the provider answered with
    a refusal (a 4xx status, or a redirect, not followed)."""
    limit = limit_of(exc)
    status = getattr(exc, "status_code", None)
    refused = isinstance(limit, RedirectRefused) or (isinstance(status, int) and 400 <= status < 500)
    return (BatchRefused if refused else BatchError)(f"{what}: {limit or exc}"[:800])


TAG_KEY = "framejudge_batch"  # the metadata key (OpenAI) or label (Vertex AI) that carries a batch's tag
LOOKBACK_S = 3600  # how long before its intent was written a batch may say it was made (clocks differ)
FIND_PAGES = 20  # pages of the provider's batch listing read for a batch an intent asked for


def new_tag() -> str:
    """The ledger's id for a batch about to be made: 10 lowercase letters and digits, which every
    provider takes where it is carried (OpenAI metadata, Anthropic custom_id prefixes, Gemini display
    names, Vertex AI labels)."""
    return "fj" + secrets.token_hex(4)


def requests_digest(keys: Iterable[str]) -> str:
    return hashlib.sha256("".join(k + "\n" for k in keys).encode()).hexdigest()


def _when(text: Any) -> float | None:
    """An RFC 3339 time (any number of fractional digits), or epoch seconds, as epoch seconds."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    if not isinstance(text, str):
        return None
    found = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)?", text.strip())
    if found is None:
        return None
    stamp = datetime.fromisoformat(found.group(1) + (found.group(3) or "Z").replace("Z", "+00:00"))
    return stamp.timestamp() + float("0." + (found.group(2) or "0"))


def _found(intent: BatchIntent, batch_id: str, status: Any, how: str) -> SubmittedBatch:
    return SubmittedBatch(id=batch_id, tag=intent.tag, input_file_id=intent.input_file_id, keys=list(intent.keys),
                          submitted_at=intent.written_at, provider_status=str(status or "") or None, found=how)


async def _google_pages(url: str, headers: dict[str, str], field: str, what: str, kind: str,
                        pages: int | None = FIND_PAGES) -> AsyncIterator[list[dict[str, Any]]]:
    """The entries (`field`) of a Google API listing (the Gemini API's, Vertex AI's, Cloud Storage's),
    page by page (`pageToken`, `nextPageToken`), at most `pages` pages (None: all); an answer that is
    not a listing is a BatchError that says `what` was being done and that it was not `kind`."""
    from urllib.parse import quote

    token = ""
    read = 0
    while pages is None or read < pages:
        response = await _send("GET", url + (f"&pageToken={quote(token, safe='')}" if token else ""), headers, what)
        try:
            listing = response.json()
            entries = [e for e in listing.get(field) or [] if isinstance(e, dict)]
        except (ValueError, AttributeError):
            raise BatchError(f"{what}: not {kind}: {response.text[:300]}") from None
        yield entries
        read += 1
        token = str(listing.get("nextPageToken") or "")
        if not token:
            return


@dataclass(frozen=True)
class FileCaps:
    """How much of a batch's results file is read: each line at most `line` bytes, the file at most
    `whole` (decompressed)."""

    line: int
    whole: int


def file_caps(api: BatchAPI, batch: SubmittedBatch) -> FileCaps:
    """A results file holds a line a request: each line the reply cap (FRAMEJUDGE_MAX_REPLY_MB) and
    an envelope, plus, where the API echoes each request on its line (Vertex AI), the largest request
    that can have been sent (the batch's byte limit); the file that much per request of the batch."""
    cap = max_reply_bytes()
    line = cap + 64 * 1024 + (api.max_bytes if api.echoes else 0)
    return FileCaps(line, (cap + 64 * 1024) * max(1, len(batch.keys)) + (api.max_bytes if api.echoes else 0))


KEY_IN_LINE = re.compile(rb"[0-9a-f]{64}|[a-z2-7]{52}")


async def _lines(chunks: AsyncIterator[bytes], caps: FileCaps, encoding: str | None,
                 what: str) -> AsyncIterator[tuple[bytes, bool]]:
    """A JSON-lines body's lines as they arrive, each with whether it ran past the line cap (then
    only its start is kept: enough to find whose reply it was); the body as a whole no larger than
    `caps.whole` (a BatchError)."""
    decoder = Decoder(encoding, caps.whole)
    buffer = bytearray()
    over = False

    async def pieces() -> AsyncIterator[bytes]:
        try:
            async for chunk in chunks:
                for piece in decoder.feed(chunk):
                    yield piece
            for piece in decoder.end():
                yield piece
        except ReplyTooLarge:
            raise BatchError(f"{what}: the results file is larger than {mb(caps.whole)} MB (the reply cap for "
                             "each request in the batch): not read") from None
        except ReplyLimit as exc:
            raise BatchError(f"{what}: {exc}") from None

    async for piece in pieces():
        start = 0
        while True:
            end = piece.find(b"\n", start)
            part = piece[start:] if end < 0 else piece[start:end]
            if not over:
                buffer += part
                if len(buffer) > caps.line:
                    over = True
                    del buffer[64 * 1024:]
            if end < 0:
                break
            yield bytes(buffer), over
            buffer.clear()
            over = False
            start = end + 1
    if buffer:
        yield bytes(buffer), over


async def _read_results(url: str, headers: dict[str, str], what: str, caps: FileCaps, keys: Iterable[str],
                        read: Callable[[dict[str, Any]], dict[str, Any] | None],
                        model: str | None = None) -> list[dict[str, Any]]:
    """A batch's results file, streamed: its answer rows (reply_rows), no line longer than
    `caps.line` (one that is longer is its request's error, `reply larger than N MB`, where its key
    can be found in its start; else left out, asked again as any missing reply is), no more of it
    than `caps.whole`."""
    import httpx

    rows: list[dict[str, Any]] = []
    known = {k: k for k in keys}
    known.update({key_label(k): k for k in list(known)})
    try:
        async with httpx.AsyncClient(timeout=600.0) as client:
            async with client.stream("GET", url, headers={**headers, "Accept-Encoding": ACCEPT_ENCODING}) as response:
                _refuse_redirect(response, what)
                encoding = response.headers.get("content-encoding")
                if response.status_code >= 400:
                    try:
                        text = (await read_capped(response.aiter_raw(), 64 * 1024, encoding)).decode(
                            "utf-8", errors="replace")
                    except ReplyLimit:
                        text = "(an error body larger than 64 KB)"
                    raise BatchError(f"{what}: HTTP {response.status_code}: {text}"[:800])
                async for line, over in _lines(response.aiter_raw(), caps, encoding, what):
                    if over:
                        rows += _oversized(line, known, caps)
                    else:
                        rows += reply_rows([line.decode("utf-8", errors="replace")], read, model)
    except httpx.HTTPError as exc:
        raise BatchError(f"{what}: {type(exc).__name__}: {exc}"[:800]) from None
    return rows


def _oversized(start: bytes, known: dict[str, str], caps: FileCaps) -> list[dict[str, Any]]:
    """The error row of a results line over the line cap, for the request whose key its start names."""
    for found in KEY_IN_LINE.findall(start):
        key = known.get(found.decode("ascii"))
        if key is not None:
            return [answer_row(key, None, error={"message": f"reply larger than {mb(max_reply_bytes())} MB"})]
    return []


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


class OpenAIBatches(BatchAPI):
    """OpenAI's Batch API through litellm: the requests uploaded as a JSONL file of chat-completions
    bodies, a batch made of it, its output and error files read when it completes."""

    name = "openai"
    title = "OpenAI's Batch API"
    price = 0.5  # "50% cost discount compared to synchronous APIs"
    max_requests = 50_000
    max_bytes = 190 * 1024 * 1024  # OpenAI: 200 MB an input file
    endpoint = "/v1/chat/completions"

    def _kwargs(self, judge: LiteLLMJudge) -> dict[str, Any]:
        bound_litellm()  # no redirects followed, files read up to their cap
        return {"custom_llm_provider": "openai", "api_base": judge.api_base, "api_key": judge.api_key}

    def request(self, judge: LiteLLMJudge, messages: list[dict[str, Any]], temperature: float, seed: int,
                mode: str) -> Pending:
        """The chat-completions body an online call would send (the model without its provider prefix),
        with the reply's schema or JSON mode as the judge's output mode says."""
        return Pending(judge.wire_body(messages, temperature, seed, mode))

    def reply(self, pending: Pending, answer: dict[str, Any], messages: list[dict[str, Any]]) -> Any:
        import litellm

        return litellm.ModelResponse(**answer["body"])

    async def upload(self, judge: LiteLLMJudge, requests: dict[str, Pending], intent: BatchIntent) -> str | None:
        import litellm

        lines = "".join(json.dumps({"custom_id": key, "method": "POST", "url": self.endpoint, "body": p.body}) + "\n"
                        for key, p in requests.items())
        try:
            uploaded = await litellm.acreate_file(file=(f"framejudge-{intent.tag}.jsonl", lines.encode("utf-8"),
                                                        "application/jsonl"), purpose="batch", **self._kwargs(judge))
        except Exception as exc:
            raise _failed_call(exc, f"the requests file of {len(requests)} request(s) was not uploaded") from None
        return str(uploaded.id)

    async def create(self, judge: LiteLLMJudge, requests: dict[str, Pending], intent: BatchIntent) -> SubmittedBatch:
        import litellm

        try:
            # max_retries 0: the OpenAI SDK would send the create again after a dropped answer
            batch = await litellm.acreate_batch(completion_window="24h", endpoint=self.endpoint,
                                                input_file_id=str(intent.input_file_id), metadata={TAG_KEY: intent.tag},
                                                max_retries=0, **self._kwargs(judge))
        except Exception as exc:
            raise _failed_call(exc, f"the batch of {len(requests)} request(s) was not accepted") from None
        return SubmittedBatch(id=batch.id, tag=intent.tag, input_file_id=intent.input_file_id, keys=list(requests),
                              submitted_at=_now(), provider_status=str(batch.status))

    async def find(self, judge: LiteLLMJudge, intent: BatchIntent, taken: set[str]) -> SubmittedBatch | None:
        """The batch whose metadata carries the intent's tag, or that reads its uploaded file, in the
        listing of batches (`GET /v1/batches`, newest first), read back to an hour before the intent."""
        import litellm

        since = (_when(intent.written_at) or 0) - LOOKBACK_S
        after: str | None = None
        for _ in range(FIND_PAGES):
            try:
                page = await litellm.alist_batches(after=after, limit=100, **self._kwargs(judge))
            except Exception as exc:
                raise _failed_call(exc, "the batches could not be listed") from None
            found = list(getattr(page, "data", None) or [])
            for batch in found:
                metadata = getattr(batch, "metadata", None) or {}
                if batch.id in taken:
                    continue
                if metadata.get(TAG_KEY) == intent.tag:
                    return _found(intent, batch.id, batch.status, f"its metadata {TAG_KEY}={intent.tag}")
                if intent.input_file_id and getattr(batch, "input_file_id", None) == intent.input_file_id:
                    return _found(intent, batch.id, batch.status, f"its input file {intent.input_file_id}")
            oldest = _when(getattr(found[-1], "created_at", None)) if found else None
            if not found or not getattr(page, "has_more", False) or (oldest is not None and oldest < since):
                return None
            after = found[-1].id
        return None

    async def poll(self, judge: LiteLLMJudge, batch: SubmittedBatch) -> Poll:
        import litellm

        try:
            state = await litellm.aretrieve_batch(batch_id=batch.id, **self._kwargs(judge))
        except Exception as exc:
            raise BatchError(f"batch {batch.id}: the provider could not say where it stands: {exc}"[:800]) from None
        files = tuple(f for f in (state.output_file_id, state.error_file_id) if f)
        status = str(state.status)
        return Poll(status, ended=status == "completed" or (status in CLOSED and bool(files)),
                    closed=status in CLOSED and not files, sources=files)

    async def results(self, judge: LiteLLMJudge, batch: SubmittedBatch, poll: Poll) -> list[dict[str, Any]]:
        import litellm

        rows = []
        caps = file_caps(self, batch)
        known = {k: k for k in batch.keys}
        for file_id in poll.sources:
            token = reply_cap.set(caps.whole)  # the file is read through litellm's bounded transport
            try:
                content = await litellm.afile_content(file_id=file_id, **self._kwargs(judge))
            except Exception as exc:
                limit = limit_of(exc)
                if isinstance(limit, ReplyTooLarge):
                    raise BatchError(f"file {file_id}: the results file is larger than {mb(caps.whole)} MB (the "
                                     "reply cap for each request in the batch): not read") from None
                raise BatchError(f"file {file_id}: could not be read: {limit or exc}"[:800]) from None
            finally:
                reply_cap.reset(token)
            data = content.content if hasattr(content, "content") else bytes(content)
            for line in data.split(b"\n"):
                if len(line) > caps.line:
                    rows += _oversized(line[:64 * 1024], known, caps)
                else:
                    rows += reply_rows([line.decode("utf-8", errors="replace")], _openai_line)
        return rows


class AnthropicBatches(BatchAPI):
    """Anthropic's Message Batches API: the requests sent in the create call (`{custom_id, params}`,
    params the messages body of the online call), the status through litellm, the results JSONL
    read from the batch's results endpoint (see the module's description for what goes through
    litellm and why the rest does not)."""

    name = "anthropic"
    title = "Anthropic's Message Batches API"
    price = 0.5  # "50% of standard API prices"
    max_requests = 100_000
    max_bytes = 250 * 1024 * 1024  # Anthropic: 256 MB a batch

    def _model(self, judge: LiteLLMJudge) -> str:
        return judge.model.split("/", 1)[1] if judge.model.startswith("anthropic/") else judge.model

    def request(self, judge: LiteLLMJudge, messages: list[dict[str, Any]], temperature: float, seed: int,
                mode: str) -> Pending:
        """The messages body litellm sends online for this call, made as litellm's completion makes
        it: the OpenAI parameters mapped by `get_optional_params`, `json_mode` taken out (the HTTP
        handler pops it before the request is built), headers from `validate_environment` (the beta
        features the body uses), the body from `transform_request`."""
        import litellm
        from litellm.utils import ProviderConfigManager, get_optional_params

        from ..judge.litellm_backend import response_format

        model = self._model(judge)
        kwargs = judge.call_kwargs(messages, temperature, seed)
        sent: Any = messages  # litellm's message types are TypedDicts; these are the judge's dicts
        params = {k: kwargs[k] for k in ("temperature", "max_tokens", "seed", "service_tier") if k in kwargs}
        config = ProviderConfigManager.get_provider_chat_config(model=model, provider=litellm.LlmProviders.ANTHROPIC)
        if config is None:
            raise BatchError(f"litellm has no Anthropic messages transformation for {model!r}")
        try:
            optional = get_optional_params(model=model, custom_llm_provider="anthropic", messages=sent,
                                           response_format=response_format(mode, "anthropic"), **params)
            optional.pop("json_mode", None)
            headers = config.validate_environment(headers={}, model=model, messages=copy.deepcopy(sent),
                                                  optional_params=optional, litellm_params={},
                                                  api_key=judge.api_key or "unused", api_base=judge.api_base)
            # transform_request adds to the headers the beta features the body uses, as it does online
            body = config.transform_request(model=model, messages=copy.deepcopy(sent), optional_params=optional,
                                            litellm_params={}, headers=headers)
        except Exception as exc:
            raise BatchError(f"litellm could not build the Anthropic request for {model!r}: {exc}"[:800]) from None
        beta = headers.get("anthropic-beta")
        return Pending(json.loads(json.dumps(body)), {"anthropic-beta": beta} if beta else {})

    def reply(self, pending: Pending, answer: dict[str, Any], messages: list[dict[str, Any]]) -> Any:
        """The message through litellm's Anthropic response transformation, with the JSON mode the
        online call has: any reply format asked (output_format, or the forced json_tool_call tool)."""
        import httpx
        import litellm
        from litellm.litellm_core_utils.litellm_logging import Logging
        from litellm.llms.anthropic.chat.transformation import AnthropicConfig

        body = pending.body
        sent: Any = messages
        json_mode = "output_format" in body or "output_config" in body or any(
            t.get("name") == "json_tool_call" for t in body.get("tools") or [])
        raw = httpx.Response(200, json=answer["body"], request=httpx.Request("POST", "https://api.anthropic.com/v1/messages"))
        log = Logging(model=body.get("model", ""), messages=messages, stream=False, call_type="acompletion",
                      litellm_call_id="batch-" + answer.get("key", "")[:16], start_time=datetime.now(),
                      function_id="batch")
        response = AnthropicConfig().transform_response(
            model=body.get("model", ""), raw_response=raw, model_response=litellm.ModelResponse(), logging_obj=log,
            request_data=body, messages=sent, optional_params={"tools": body.get("tools")}, litellm_params={},
            encoding=None, json_mode=json_mode)
        response._hidden_params["custom_llm_provider"] = "anthropic"
        return response

    def _endpoint(self, judge: LiteLLMJudge, headers: dict[str, str] | None = None) -> tuple[str, dict[str, str]]:
        """The batches URL and the headers (key, version, message-batches beta, and `headers`'
        betas) that litellm's AnthropicBatchesConfig gives."""
        from litellm.llms.anthropic.batches.transformation import AnthropicBatchesConfig

        config = AnthropicBatchesConfig()
        try:
            sent = config.validate_environment(headers=dict(headers or {}), model="", messages=[], optional_params={},
                                               litellm_params={}, api_key=judge.api_key, api_base=judge.api_base)
        except ValueError as exc:
            raise BatchError(f"{self.title}: {exc}") from None
        url = config.get_complete_batch_url(api_base=judge.api_base, api_key=judge.api_key, model="",
                                            optional_params={}, litellm_params={},
                                            data={"completion_window": "24h", "endpoint": "/v1/chat/completions",
                                                  "input_file_id": ""})
        return url, {k: str(v) for k, v in sent.items()}

    async def create(self, judge: LiteLLMJudge, requests: dict[str, Pending], intent: BatchIntent) -> SubmittedBatch:
        """The create call carries the requests; a batch has no metadata, so each request's custom_id
        carries the tag (`anthropic_custom_id`)."""
        from litellm.llms.anthropic.common_utils import merge_anthropic_beta_headers

        beta: str | None = None
        for p in requests.values():
            beta = merge_anthropic_beta_headers(beta, p.headers.get("anthropic-beta"))
        url, headers = self._endpoint(judge, {"anthropic-beta": beta} if beta else None)
        payload = {"requests": [{"custom_id": anthropic_custom_id(intent.tag, key), "params": p.body}
                                for key, p in requests.items()]}
        response = await _send("POST", url, headers, f"the batch of {len(requests)} request(s) was not accepted",
                               payload=payload)
        try:
            batch = response.json()
            return SubmittedBatch(id=batch["id"], tag=intent.tag, keys=list(requests), submitted_at=_now(),
                                  provider_status=str(batch.get("processing_status")))
        except (ValueError, KeyError, TypeError):
            raise BatchError(f"the batch was sent, but the answer names no batch: {response.text[:300]}") from None

    async def find(self, judge: LiteLLMJudge, intent: BatchIntent, taken: set[str]) -> SubmittedBatch | None:
        """Anthropic's batches carry no metadata, and the custom_ids (which carry the tag) can be read
        only once a batch has ended: the batch found is the one, in the listing of batches (`GET
        /v1/messages/batches`, newest first), that holds as many requests as the intent and was made
        nearest after it (within an hour before it, as clocks differ). When it is collected, a batch
        whose results answer none of the intent's requests is said to be another's, and the requests
        are sent again."""
        url, headers = self._endpoint(judge)
        written = _when(intent.written_at) or 0
        since = written - LOOKBACK_S
        best: tuple[float, dict[str, Any]] | None = None
        after: str | None = None
        for _ in range(FIND_PAGES):
            response = await _send("GET", f"{url}?limit=100" + (f"&after_id={after}" if after else ""), headers,
                                   "the batches could not be listed")
            try:
                page = response.json()
                found = [b for b in page.get("data") or [] if isinstance(b, dict) and isinstance(b.get("id"), str)]
            except (ValueError, AttributeError):
                raise BatchError(f"the batches could not be listed: not a list of batches: {response.text[:300]}") from None
            for batch in found:
                made = _when(batch.get("created_at"))
                counts = batch.get("request_counts") or {}
                size = sum(v for v in counts.values() if isinstance(v, int)) if isinstance(counts, dict) else -1
                if batch["id"] in taken or made is None or made < since or size != len(intent.keys):
                    continue
                distance = made - written if made >= written else (written - made) * 10  # after it, likelier
                if best is None or distance < best[0]:
                    best = (distance, batch)
            oldest = _when(found[-1].get("created_at")) if found else None
            if not found or not page.get("has_more") or (oldest is not None and oldest < since):
                break
            after = found[-1]["id"]
        if best is None:
            return None
        return _found(intent, best[1]["id"], best[1].get("processing_status"),
                      f"made {best[1].get('created_at')} with {len(intent.keys)} request(s), as the intent (tag "
                      f"{intent.tag}) asked")

    async def poll(self, judge: LiteLLMJudge, batch: SubmittedBatch) -> Poll:
        import litellm

        try:
            state = await litellm.aretrieve_batch(batch_id=batch.id, custom_llm_provider="anthropic",
                                                  api_base=judge.api_base, api_key=judge.api_key)
        except Exception as exc:
            raise BatchError(f"batch {batch.id}: the provider could not say where it stands: {exc}"[:800]) from None
        status = str(state.status)  # litellm's words: in_progress, cancelling, completed (Anthropic's `ended`)
        return Poll("ended" if status == "completed" else status, ended=status == "completed")

    async def results(self, judge: LiteLLMJudge, batch: SubmittedBatch, poll: Poll) -> list[dict[str, Any]]:
        from litellm.llms.anthropic.common_utils import ANTHROPIC_ERROR_STATUS_CODE_MAP

        url, headers = self._endpoint(judge)

        def read(row: dict[str, Any]) -> dict[str, Any] | None:
            result = row.get("result")
            if "custom_id" not in row or not isinstance(result, dict) or "type" not in result:
                return None
            key, kind = anthropic_key(str(row["custom_id"])), result["type"]
            if kind == "succeeded" and isinstance(result.get("message"), dict):
                return answer_row(key, 200, result["message"])
            if kind == "errored":
                error = result.get("error") or {}
                inner = error.get("error", error) if isinstance(error, dict) else {}
                status = ANTHROPIC_ERROR_STATUS_CODE_MAP.get(str(inner.get("type")), 500) if isinstance(inner, dict) else 500
                return answer_row(key, status, error=error or {"type": "errored"})
            # canceled, expired: the batch ended before the request was processed
            return answer_row(key, None, error={"type": kind}, counts=False)

        return await _read_results(f"{url.rstrip('/')}/{batch.id}/results", headers,
                                   f"batch {batch.id}: its results could not be read", file_caps(self, batch),
                                   batch.keys, read)


def anthropic_custom_id(tag: str, key: str) -> str:
    """An Anthropic request's custom_id (^[a-zA-Z0-9_-]{1,64}$): the batch's tag, then the request's
    key in base32 (`key_label`): 10 + 1 + 52 characters."""
    return f"{tag}-{key_label(key)}"


def anthropic_key(custom_id: str) -> str:
    """The request key an Anthropic custom_id stands for (a bare key: batches made before custom_ids
    carried the tag)."""
    return label_key(custom_id.rpartition("-")[2]) or custom_id


GEMINI_ROOT = "https://generativelanguage.googleapis.com"
GEMINI_ENDED = {"SUCCEEDED"}  # Gemini batch states (BATCH_STATE_* on the wire, JOB_STATE_* in the guide)
GEMINI_CLOSED = {"FAILED", "CANCELLED", "EXPIRED"}  # "will not have any results to retrieve" (expired)


class GeminiBatches(BatchAPI):
    """The Gemini API's Batch Mode (`gemini/` judges): the requests uploaded through the Files API as
    a JSONL file of `{"key", "request"}` lines, each request the GenerateContentRequest litellm sends
    online for that call; a batch made of it with `batchGenerateContent`, asked after with a GET of
    the batch, its responses file downloaded when it succeeded (see the module's description)."""

    name = "gemini"
    # litellm's provider, whose transformations build each request and read each reply
    provider: Literal["gemini", "vertex_ai"] = "gemini"
    title = "the Gemini API's Batch Mode"
    price = 0.5  # "50% of the standard cost"
    max_requests = 50_000  # no count limit is documented; framejudge's own, as for OpenAI
    max_bytes = 500 * 1024 * 1024  # Gemini: 2 GB an input file; less, as the file is built in memory

    def _model(self, judge: LiteLLMJudge) -> str:
        return judge.model.split("/", 1)[1] if judge.model.startswith("gemini/") else judge.model

    def _root(self, judge: LiteLLMJudge) -> str:
        """The Gemini API's root URL: the judge's api_base (GEMINI_API_BASE, or Google's) without the
        API version its online calls name (litellm posts to `{api_base}/models/...:generateContent`,
        so an api_base for online calls ends in `/v1beta`)."""
        from litellm.llms.gemini.common_utils import GeminiModelInfo

        base = GeminiModelInfo.get_api_base(judge.api_base).rstrip("/")
        return re.sub(r"/v1(?:alpha|beta)?$", "", base)

    def _key(self, judge: LiteLLMJudge) -> dict[str, str]:
        from litellm.llms.gemini.common_utils import GeminiModelInfo

        key = GeminiModelInfo.get_api_key(judge.api_key)
        if not key:
            raise BatchError(f"{self.title}: no API key (set GEMINI_API_KEY, or api_key_env in the judges file)")
        return {"x-goog-api-key": key}

    def request(self, judge: LiteLLMJudge, messages: list[dict[str, Any]], temperature: float, seed: int,
                mode: str) -> Pending:
        """The generateContent body litellm sends online for this call, made as litellm's completion
        makes it: the OpenAI parameters mapped by `get_optional_params`, the body from litellm's
        Gemini request transformation (`sync_transform_request_body`: contents with the frames as
        inline data, systemInstruction, generationConfig with the reply's schema or JSON mode)."""
        from litellm.litellm_core_utils.litellm_logging import Logging
        from litellm.llms.vertex_ai.gemini.transformation import sync_transform_request_body
        from litellm.utils import get_optional_params

        from ..judge.litellm_backend import response_format

        model = self._model(judge)
        kwargs = judge.call_kwargs(messages, temperature, seed)
        sent: Any = messages
        params = {k: kwargs[k] for k in ("temperature", "max_tokens", "seed", "service_tier") if k in kwargs}
        try:
            optional = get_optional_params(model=model, custom_llm_provider=self.provider, messages=sent,
                                           response_format=response_format(mode, self.provider), **params)
            log = Logging(model=model, messages=sent, stream=False, call_type="acompletion",
                          litellm_call_id="batch", start_time=datetime.now(), function_id="batch")
            body = sync_transform_request_body(
                gemini_api_key=judge.api_key or "unused", messages=copy.deepcopy(sent), api_base=None, model=model,
                client=None, timeout=None, extra_headers=None, optional_params=optional, logging_obj=log,
                custom_llm_provider=self.provider, litellm_params={}, vertex_project=None, vertex_location=None,
                vertex_auth_header=None)
        except Exception as exc:
            raise BatchError(f"litellm could not build the {self.title} request for {model!r}: {exc}"[:800]) from None
        return Pending(json.loads(json.dumps(body)))

    def line_size(self, key: str, pending: Pending) -> int:
        return len(json.dumps({"key": key, "request": pending.body})) + 16

    def reply(self, pending: Pending, answer: dict[str, Any], messages: list[dict[str, Any]]) -> Any:
        """The GenerateContentResponse through litellm's Gemini response transformation, as online."""
        import httpx
        import litellm
        from litellm.litellm_core_utils.litellm_logging import Logging
        model = str(answer.get("model") or "")
        sent: Any = messages
        raw = httpx.Response(200, json=answer["body"],
                             request=httpx.Request("POST", f"{GEMINI_ROOT}/v1beta/models/{model}:generateContent"))
        log = Logging(model=model, messages=sent, stream=False, call_type="acompletion",
                      litellm_call_id="batch-" + answer.get("key", "")[:16], start_time=datetime.now(),
                      function_id="batch")
        # what litellm's completion sets on the call's log before the reply is read (the call asks for no tools)
        log.update_environment_variables(litellm_params={}, optional_params={}, model=model)
        response = self._config().transform_response(
            model=model, raw_response=raw, model_response=litellm.ModelResponse(), logging_obj=log,
            request_data=pending.body, messages=sent, optional_params={}, litellm_params={}, encoding=None)
        response._hidden_params["custom_llm_provider"] = self.provider
        return response

    def _config(self) -> Any:
        """litellm's response transformation of this route (Google AI Studio's)."""
        from litellm.llms.gemini.chat.transformation import GoogleAIStudioGeminiConfig

        return GoogleAIStudioGeminiConfig()

    async def _upload(self, judge: LiteLLMJudge, data: bytes, display_name: str) -> str:
        """The Files API's resumable upload: a start request with the file's metadata, answered with
        the upload URL in `X-Goog-Upload-URL`, then the bytes to it; the file's name (`files/...`)."""
        what = f"the batch's requests file ({len(data)} bytes) was not uploaded"
        start = await _send(
            "POST", f"{self._root(judge)}/upload/v1beta/files",
            {**self._key(judge), "X-Goog-Upload-Protocol": "resumable", "X-Goog-Upload-Command": "start",
             "X-Goog-Upload-Header-Content-Length": str(len(data)),
             "X-Goog-Upload-Header-Content-Type": "application/jsonl", "Content-Type": "application/json"},
            what, payload={"file": {"display_name": display_name}})
        url = start.headers.get("x-goog-upload-url")
        if not url:
            raise BatchError(f"{what}: the Files API gave no upload URL (X-Goog-Upload-URL)")
        if not same_origin(url, self._root(judge)):  # the requests go only to the API the operator named
            raise BatchError(f"{what}: the Files API's upload URL {url[:200]!r} is not on {self._root(judge)}: "
                             "nothing sent there")
        done = await _send("POST", url, {"Content-Length": str(len(data)), "X-Goog-Upload-Offset": "0",
                                              "X-Goog-Upload-Command": "upload, finalize"}, what, content=data)
        try:
            return str(done.json()["file"]["name"])
        except (ValueError, KeyError, TypeError):
            raise BatchError(f"{what}: the Files API's answer names no file: {done.text[:300]}") from None

    async def upload(self, judge: LiteLLMJudge, requests: dict[str, Pending], intent: BatchIntent) -> str | None:
        lines = "".join(json.dumps({"key": key, "request": p.body}) + "\n" for key, p in requests.items())
        return await self._upload(judge, lines.encode("utf-8"), f"framejudge-{intent.tag}.jsonl")

    async def create(self, judge: LiteLLMJudge, requests: dict[str, Pending], intent: BatchIntent) -> SubmittedBatch:
        """The batch's display name carries the tag (`framejudge-<tag>`)."""
        model = self._model(judge)
        response = await _send(
            "POST", f"{self._root(judge)}/v1beta/models/{model}:batchGenerateContent",
            {**self._key(judge), "Content-Type": "application/json"},
            f"the batch of {len(requests)} request(s) was not accepted",
            payload={"batch": {"display_name": f"framejudge-{intent.tag}",
                               "input_config": {"file_name": intent.input_file_id}}})
        try:
            batch = response.json()
            return SubmittedBatch(id=str(batch["name"]), tag=intent.tag, input_file_id=intent.input_file_id,
                                  keys=list(requests), submitted_at=_now(), provider_status=_gemini_state(batch) or None)
        except (ValueError, KeyError, TypeError):
            raise BatchError(f"the batch was sent, but the answer names no batch: {response.text[:300]}") from None

    async def find(self, judge: LiteLLMJudge, intent: BatchIntent, taken: set[str]) -> SubmittedBatch | None:
        """The batch whose display name carries the intent's tag, or that reads its uploaded file, in
        the listing of batches (`GET /v1beta/batches`: their operations, page by page)."""
        name = f"framejudge-{intent.tag}"
        async for operations in _google_pages(f"{self._root(judge)}/v1beta/batches?pageSize=100", self._key(judge),
                                              "operations", "the batches could not be listed", "a list of batches"):
            for operation in operations:
                meta = operation.get("metadata")
                batch: dict[str, Any] = meta if isinstance(meta, dict) else operation
                if not isinstance(operation.get("name"), str) or operation["name"] in taken:
                    continue
                source = batch.get("inputConfig") or batch.get("input_config") or {}
                source = source.get("fileName") or source.get("file_name") if isinstance(source, dict) else None
                if (batch.get("displayName") or batch.get("display_name")) == name:
                    return _found(intent, operation["name"], _gemini_state(operation), f"its display name {name}")
                if intent.input_file_id and source == intent.input_file_id:
                    return _found(intent, operation["name"], _gemini_state(operation),
                                  f"its input file {intent.input_file_id}")
        return None

    async def poll(self, judge: LiteLLMJudge, batch: SubmittedBatch) -> Poll:
        response = await _send("GET", f"{self._root(judge)}/v1beta/{batch.id}", self._key(judge),
                                    f"batch {batch.id}: the provider could not say where it stands")
        try:
            operation = response.json()
        except ValueError:
            raise BatchError(f"batch {batch.id}: not a batch: {response.text[:300]}") from None
        state = _gemini_state(operation)
        word = state.rpartition("_STATE_")[2]
        output = (operation.get("response") or {}).get("responsesFile") or \
            ((operation.get("metadata") or {}).get("output") or {}).get("responsesFile")
        files = (str(output),) if output else ()
        return Poll(state or "unknown", ended=word in GEMINI_ENDED or (word in GEMINI_CLOSED and bool(files)),
                    closed=word in GEMINI_CLOSED and not files, sources=files)

    async def results(self, judge: LiteLLMJudge, batch: SubmittedBatch, poll: Poll) -> list[dict[str, Any]]:
        model = self._model(judge)
        rows = []
        for file_name in poll.sources:
            rows += await _read_results(f"{self._root(judge)}/download/v1beta/{file_name}:download?alt=media",
                                        self._key(judge), f"batch {batch.id}: its responses file {file_name} could "
                                                          "not be read", file_caps(self, batch), batch.keys,
                                        _gemini_line, model)
        return rows


GCS_ROOT = "https://storage.googleapis.com"
VERTEX_ENDED = {"SUCCEEDED", "PARTIALLY_SUCCEEDED"}  # JOB_STATE_*: its predictions can be read
VERTEX_CLOSED = {"FAILED", "CANCELLED", "EXPIRED"}  # ended; read where it says it wrote predictions, else given back
KEY_LABEL = "framejudge_key"  # the request label that carries a line's key (its sha256 in base32: 52 characters)


def key_label(key: str) -> str:
    """A request key (64 hex digits) as a label value Vertex takes: lowercase letters and digits,
    at most 63 characters (base32 of the 32 bytes, without padding: 52)."""
    return base64.b32encode(bytes.fromhex(key)).decode("ascii").rstrip("=").lower()


def label_key(value: Any) -> str | None:
    """The request key a `key_label` value stands for (None for any other value)."""
    if not isinstance(value, str) or len(value) != 52:
        return None
    try:
        return base64.b32decode(value.upper() + "====").hex()
    except (ValueError, TypeError):
        return None


def gcs_root() -> str:
    """The Cloud Storage JSON API's root: STORAGE_EMULATOR_HOST where it is set (as Google's client
    libraries read it: a host:port, or a URL), else Google's."""
    host = os.environ.get("STORAGE_EMULATOR_HOST", "").strip().rstrip("/")
    if not host:
        return GCS_ROOT
    return host if re.match(r"^https?://", host) else f"http://{host}"


def split_gs(uri: str) -> tuple[str, str]:
    """gs://BUCKET/PATH as (BUCKET, PATH)."""
    bucket, _, path = uri.removeprefix("gs://").partition("/")
    return bucket, path


class VertexBatches(GeminiBatches):
    """Vertex AI's batch prediction for Gemini (`vertex_ai/` judges): the requests written to Cloud
    Storage as a JSONL file of `{"request": GenerateContentRequest}` lines (each the body litellm
    sends online for that call, its key in the request's labels), a batchPredictionJob made of it
    with a Cloud Storage destination, asked after, and its predictions read from where it says it
    wrote them (see the module's description)."""

    name = "vertex_ai"
    provider: Literal["gemini", "vertex_ai"] = "vertex_ai"
    title = "Vertex AI's batch prediction"
    price = 0.5  # "discounted 50% from standard requests"
    max_requests = 200_000  # Vertex: up to 200,000 requests a job
    max_bytes = 500 * 1024 * 1024  # Vertex: 1 GB an input file; less, as the file is built in memory
    echoes = True  # each predictions line holds the request as it was sent

    def _model(self, judge: LiteLLMJudge) -> str:
        return judge.model.split("/", 1)[1] if judge.model.startswith("vertex_ai/") else judge.model

    def _config(self) -> Any:
        from litellm.llms.vertex_ai.gemini.vertex_and_google_ai_studio_gemini import VertexGeminiConfig

        return VertexGeminiConfig()

    def check(self, judge: LiteLLMJudge) -> None:
        model = self._model(judge)
        if not model.startswith("gemini-"):
            raise BatchUnsupported(f"--batch speaks {self.title} for Gemini models (litellm:vertex_ai/gemini-...); "
                                   f"{model!r} is not one: grade it online (without --batch)")
        if not getattr(judge, "batch_bucket", None):
            raise BatchError(f"{self.title} reads a batch's requests from Cloud Storage and writes its results "
                             "there: give the bucket with --batch-bucket gs://BUCKET[/PREFIX] (or "
                             "FRAMEJUDGE_BATCH_BUCKET, or batch_bucket in the judge's judges-file entry)")
        self._root(judge)

    def _root(self, judge: LiteLLMJudge) -> str:
        """The Vertex AI API's root: the judge's api_base, as litellm reads one for online calls whose
        path is empty or an API version (the version left out), else Google's regional endpoint."""
        from urllib.parse import urlsplit

        if judge.api_base:
            path = urlsplit(judge.api_base).path.rstrip("/")
            if path not in ("", "/v1", "/v1beta1"):
                raise BatchError(f"{self.title}: api_base {judge.api_base!r} names a path online calls are posted "
                                 "to as it is; a batch run needs the Vertex AI API's root (https://HOST, or "
                                 "https://HOST/v1)")
            return judge.api_base.rstrip("/").removesuffix(path)
        from litellm.llms.vertex_ai.common_utils import get_vertex_base_url

        return str(get_vertex_base_url(self._location(judge))).rstrip("/")

    def _location(self, judge: LiteLLMJudge) -> str:
        """The region, as litellm picks it online: the judge's vertex_location, else VERTEXAI_LOCATION
        (VERTEX_LOCATION), else the model's default (us-central1, or the region it is served in)."""
        from litellm.llms.vertex_ai.vertex_llm_base import VertexBase

        asked = getattr(judge, "vertex_location", None) or VertexBase.safe_get_vertex_ai_location({})
        return str(VertexBase.get_vertex_region(asked, self._model(judge)))

    async def _auth(self, judge: LiteLLMJudge) -> tuple[dict[str, str], str]:
        """An OAuth2 access token and the project, as litellm gets them for online calls: the
        credentials of VERTEXAI_CREDENTIALS, else Application Default Credentials (google-auth:
        GOOGLE_APPLICATION_CREDENTIALS, gcloud's, the metadata server); the project of the judge's
        vertex_project, else VERTEXAI_PROJECT, else the credentials' (GOOGLE_CLOUD_PROJECT, the key
        file's project_id)."""
        try:
            import google.auth  # noqa: F401 (litellm's vertex route needs it; say so before it does)
            from google.auth import exceptions
        except ImportError:
            raise BatchError(f"{self.title} needs google-auth: pip install '.[api]'") from None
        from litellm.llms.vertex_ai.vertex_llm_base import VertexBase

        vertex = VertexBase()  # a fresh one: litellm's caches its credentials per process
        credentials = VertexBase.safe_get_vertex_ai_credentials({})
        project = getattr(judge, "vertex_project", None) or VertexBase.safe_get_vertex_ai_project({})
        quiet = logging.getLogger("LiteLLM")  # it logs a failure's traceback before raising it: said below instead
        was, quiet.disabled = quiet.disabled, True
        try:
            token, project = await vertex.get_access_token_async(credentials=credentials, project_id=project)
        except exceptions.DefaultCredentialsError:
            raise BatchError(f"{self.title}: no Google Cloud credentials (set GOOGLE_APPLICATION_CREDENTIALS to a "
                             "service account key file, or VERTEXAI_CREDENTIALS, or run `gcloud auth "
                             "application-default login`)") from None
        except exceptions.GoogleAuthError as exc:
            raise BatchError(f"{self.title}: the credentials were refused: {exc}"[:800]) from None
        except ValueError as exc:
            if "project" in str(exc).lower():
                raise BatchError(f"{self.title}: no Google Cloud project (set vertex_project in the judge's "
                                 "judges-file entry, or VERTEXAI_PROJECT or GOOGLE_CLOUD_PROJECT)") from None
            raise BatchError(f"{self.title}: the credentials could not be used: {exc}"[:800]) from None
        finally:
            quiet.disabled = was
        return {"Authorization": f"Bearer {token}"}, project

    def line_size(self, key: str, pending: Pending) -> int:
        return len(json.dumps({"request": pending.body})) + 96

    def _folder(self, judge: LiteLLMJudge, intent: BatchIntent) -> tuple[str, str]:
        """The bucket, and the batch's folder in it (under the bucket's prefix, named after the tag)."""
        bucket, prefix = split_gs(str(judge.batch_bucket))
        name = f"framejudge-{intent.tag}"
        return bucket, f"{prefix.rstrip('/')}/{name}" if prefix.rstrip("/") else name

    async def upload(self, judge: LiteLLMJudge, requests: dict[str, Pending], intent: BatchIntent) -> str | None:
        from urllib.parse import quote

        self.check(judge)
        auth, _ = await self._auth(judge)
        bucket, folder = self._folder(judge, intent)
        lines = "".join(json.dumps({"request": {**p.body, "labels": {KEY_LABEL: key_label(key)}}}) + "\n"
                        for key, p in requests.items()).encode("utf-8")
        # the Cloud Storage JSON API's simple (media) upload, of up to 5 GB
        await _send("POST", f"{gcs_root()}/upload/storage/v1/b/{quote(bucket, safe='')}/o?uploadType=media&name="
                            f"{quote(folder + '/requests.jsonl', safe='')}",
                    {**auth, "Content-Type": "application/octet-stream"},  # Cloud Storage's type for any file
                    f"the batch's requests file ({len(lines)} bytes) was not written to gs://{bucket}/{folder}/",
                    content=lines)
        return f"gs://{bucket}/{folder}/requests.jsonl"

    async def create(self, judge: LiteLLMJudge, requests: dict[str, Pending], intent: BatchIntent) -> SubmittedBatch:
        """The job's display name (`framejudge-<tag>`) and its label `framejudge_batch` carry the tag."""
        self.check(judge)
        auth, project = await self._auth(judge)
        bucket, folder = self._folder(judge, intent)
        location = self._location(judge)
        response = await _send(
            "POST", f"{self._root(judge)}/v1/projects/{project}/locations/{location}/batchPredictionJobs",
            {**auth, "Content-Type": "application/json"}, f"the batch of {len(requests)} request(s) was not accepted",
            payload={"displayName": f"framejudge-{intent.tag}", "labels": {TAG_KEY: intent.tag},
                     "model": f"publishers/google/models/{self._model(judge)}",
                     "inputConfig": {"instancesFormat": "jsonl", "gcsSource": {"uris": [str(intent.input_file_id)]}},
                     "outputConfig": {"predictionsFormat": "jsonl",
                                      "gcsDestination": {"outputUriPrefix": f"gs://{bucket}/{folder}/output"}}})
        try:
            job = response.json()
            return SubmittedBatch(id=str(job["name"]), tag=intent.tag, input_file_id=intent.input_file_id,
                                  keys=list(requests), submitted_at=_now(),
                                  provider_status=str(job.get("state") or "") or None)
        except (ValueError, KeyError, TypeError):
            raise BatchError(f"the batch was sent, but the answer names no job: {response.text[:300]}") from None

    async def find(self, judge: LiteLLMJudge, intent: BatchIntent, taken: set[str]) -> SubmittedBatch | None:
        """The job labelled with the intent's tag (`labels.framejudge_batch`, asked of the listing of
        batch prediction jobs as its filter, and checked on each job listed), or named after it, or
        that reads its requests file."""
        from urllib.parse import quote

        auth, project = await self._auth(judge)
        name = f"framejudge-{intent.tag}"
        where = (f"{self._root(judge)}/v1/projects/{project}/locations/{self._location(judge)}/batchPredictionJobs"
                 f"?pageSize=100&filter={quote(f'labels.{TAG_KEY}={intent.tag}', safe='')}")
        async for jobs in _google_pages(where, auth, "batchPredictionJobs",
                                        "the batch prediction jobs could not be listed", "a list of jobs"):
            for job in jobs:
                if not isinstance(job.get("name"), str) or job["name"] in taken:
                    continue
                labels = job["labels"] if isinstance(job.get("labels"), dict) else {}
                uris = ((job.get("inputConfig") or {}).get("gcsSource") or {}).get("uris") or []
                if labels.get(TAG_KEY) == intent.tag:
                    return _found(intent, job["name"], job.get("state"), f"its label {TAG_KEY}={intent.tag}")
                if job.get("displayName") == name:
                    return _found(intent, job["name"], job.get("state"), f"its display name {name}")
                if intent.input_file_id and intent.input_file_id in uris:
                    return _found(intent, job["name"], job.get("state"), f"its requests file {intent.input_file_id}")
        return None

    async def poll(self, judge: LiteLLMJudge, batch: SubmittedBatch) -> Poll:
        auth, _ = await self._auth(judge)
        response = await _send("GET", f"{self._root(judge)}/v1/{batch.id}", auth,
                               f"batch {batch.id}: the provider could not say where it stands")
        try:
            job = response.json()
            state = str(job.get("state") or "")
        except (ValueError, AttributeError):
            raise BatchError(f"batch {batch.id}: not a batch prediction job: {response.text[:300]}") from None
        word = state.removeprefix("JOB_STATE_")
        output = (job.get("outputInfo") or {}).get("gcsOutputDirectory")
        files = (str(output),) if output and (word in VERTEX_ENDED or word in VERTEX_CLOSED) else ()
        return Poll(state or "unknown", ended=word in VERTEX_ENDED or (word in VERTEX_CLOSED and bool(files)),
                    closed=word in VERTEX_CLOSED and not files, sources=files)

    async def results(self, judge: LiteLLMJudge, batch: SubmittedBatch, poll: Poll) -> list[dict[str, Any]]:
        from urllib.parse import quote

        auth, _ = await self._auth(judge)
        model = self._model(judge)
        known = set(batch.keys)
        rows = []
        for directory in poll.sources:
            bucket, path = split_gs(directory.rstrip("/"))
            what = f"batch {batch.id}: its predictions in {directory} could not be read"
            names: list[str] = []
            async for items in _google_pages(f"{gcs_root()}/storage/v1/b/{quote(bucket, safe='')}/o?prefix="
                                             f"{quote(path + '/', safe='')}", auth, "items", what,
                                             "a list of objects", pages=None):  # the output directory's objects
                names += [str(i["name"]) for i in items if "name" in i]
            for name in sorted(n for n in names if re.fullmatch(r"predictions[^/]*\.jsonl", n.rpartition("/")[2])):
                found_rows = await _read_results(f"{gcs_root()}/storage/v1/b/{quote(bucket, safe='')}/o/"
                                                 f"{quote(name, safe='')}?alt=media", auth, what,
                                                 file_caps(self, batch), batch.keys, _vertex_line, model)
                rows += [row for row in found_rows if row["key"] in known]
        return rows


def reply_rows(text: str | Iterable[str], read: Callable[[dict[str, Any]], dict[str, Any] | None],
               model: str | None = None) -> list[dict[str, Any]]:
    """The answer rows (answer_row) of a JSON-lines replies file (its text, or its lines), as the
    provider's `read` makes out each line; lines that are not JSON objects, or no reply, are left out
    (asked again, as any missing reply is). `model`: stamped on each reply, where the provider's reply
    does not say it."""
    rows = []
    for line in text.splitlines() if isinstance(text, str) else text:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        answer = read(row) if isinstance(row, dict) else None
        if answer is None:
            continue
        if model is not None and "body" in answer:
            answer["model"] = model
        rows.append(answer)
    return rows


def _openai_line(row: dict[str, Any]) -> dict[str, Any] | None:
    """An OpenAI batch output line: `custom_id`, then `response` (status and body) or `error`."""
    if "custom_id" not in row:
        return None
    key, response = row["custom_id"], row.get("response") or {}
    status = response.get("status_code") if isinstance(response, dict) else None
    if row.get("error") is None and status == 200 and isinstance(response.get("body"), dict):
        return answer_row(key, 200, response["body"])
    body = response.get("body") if isinstance(response, dict) else None
    return answer_row(key, status, error=row.get("error") or body or {"status_code": status})


def _gemini_line(row: dict[str, Any]) -> dict[str, Any] | None:
    """A Gemini batch's replies line: `key`, then `response` (a GenerateContentResponse) or `error`/`status`."""
    if "key" not in row:
        return None
    if isinstance(row.get("response"), dict):
        return answer_row(str(row["key"]), 200, row["response"])
    error = row.get("error") or row.get("status") or {"message": "no response"}
    return answer_row(str(row["key"]), _http_status(error), error=error)


def _vertex_line(row: dict[str, Any]) -> dict[str, Any] | None:
    """A Vertex AI prediction line: the `request` it answers (its key in a label, else the sha256 of the
    request as it was sent, if it came back as it was), then `response` or a `status`."""
    if not isinstance(row.get("request"), dict):
        return None
    request = dict(row["request"])
    labels = request.pop("labels", None)
    key = label_key(labels.get(KEY_LABEL) if isinstance(labels, dict) else None) or request_key(request)
    status, response = row.get("status"), row.get("response")
    if not status and isinstance(response, dict) and response.get("candidates") is not None:
        return answer_row(key, 200, response)
    error = status or {"message": "no response"}
    return answer_row(key, _vertex_status(error), error=error)


def _vertex_status(status: Any) -> int:
    """The HTTP status a failed prediction's `status` reads as: a google.rpc.Status (or the JSON of
    an error inside its text), else a status name or an HTTP reason in its text; 500 otherwise."""
    if isinstance(status, dict):
        return _http_status(status.get("error", status))
    text = str(status)
    start = text.find("{")
    if start >= 0:
        try:
            found = json.loads(text[start:])
            if isinstance(found, dict):
                return _http_status(found.get("error", found))
        except ValueError:
            pass
    for name, code in STATUS_HTTP.items():
        if name in text:
            return code
    for reason, code in (("Bad Request", 400), ("Unauthorized", 401), ("Forbidden", 403), ("Not Found", 404),
                         ("Too Many Requests", 429), ("Service Unavailable", 503), ("Gateway Timeout", 504)):
        if reason.lower() in text.lower():
            return code
    return 500


# a result line's error is a google.rpc.Status: its code a gRPC code (an HTTP status where one is given),
# read as the HTTP status the same error has online (a refused schema is INVALID_ARGUMENT: 400)
GRPC_HTTP = {1: 499, 2: 500, 3: 400, 4: 504, 5: 404, 6: 409, 7: 403, 8: 429, 9: 400, 10: 409, 11: 400, 12: 501,
             13: 500, 14: 503, 15: 500, 16: 401}
STATUS_HTTP = {"CANCELLED": 499, "INVALID_ARGUMENT": 400, "FAILED_PRECONDITION": 400, "OUT_OF_RANGE": 400,
               "NOT_FOUND": 404, "PERMISSION_DENIED": 403, "UNAUTHENTICATED": 401, "RESOURCE_EXHAUSTED": 429,
               "UNAVAILABLE": 503, "DEADLINE_EXCEEDED": 504, "INTERNAL": 500, "UNIMPLEMENTED": 501}


def _http_status(error: Any) -> int:
    if isinstance(error, dict):
        if error.get("status") in STATUS_HTTP:
            return STATUS_HTTP[error["status"]]
        code = error.get("code")
        if isinstance(code, int):
            return code if code >= 100 else GRPC_HTTP.get(code, 500)
    return 500


def _gemini_state(operation: Any) -> str:
    """A Gemini batch's state from its operation (`metadata.state`), or from a bare batch (`state`)."""
    if not isinstance(operation, dict):
        return ""
    return str((operation.get("metadata") or {}).get("state") or operation.get("state") or "")


BATCH_APIS: dict[str, BatchAPI] = {api.name: api for api in (OpenAIBatches(), AnthropicBatches(), GeminiBatches(),
                                                                 VertexBatches())}
PROVIDERS = tuple(BATCH_APIS)  # litellm providers whose batch API framejudge speaks
# why the batch APIs of other providers are not spoken (yet)
NOT_SPOKEN: dict[str, str] = {
    "vertex_ai_beta": "litellm's vertex_ai_beta route; the same models as litellm:vertex_ai/<model> can be graded "
                      "with --batch",
}


def _placeholder(request: JudgeRequest) -> Any:
    """A stand-in judgement for a call with no reply yet, so that the turn's other calls (the swapped
    order, more samples, the blind control) are set aside in the same batch instead of the next one.
    The turn's record is never written while it waits: BatchRun drops it."""
    from ..schema import Judgement

    has_b = request.item.turns[request.turn].response_b is not None
    grade = {"category": "Successful", "rationale": "waiting for the batch reply"}
    return Judgement.model_validate({"response_a": grade, "response_b": grade if has_b else None,
                                     "preference": "Both" if has_b else None,
                                     "deciding_criterion": "category" if has_b else None})


def ledger_path(out: Path) -> Path:
    return out.with_name(out.name.removesuffix(".jsonl") + ".batches.json")


def replies_path(out: Path) -> Path:
    return out.with_name(out.name.removesuffix(".jsonl") + ".batch-replies.jsonl")


def request_key(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def batch_api(judge: Any, spec: str) -> BatchAPI:
    """The batch API of the judge's provider; refused, before anything is sent, where framejudge
    speaks none."""
    if not isinstance(judge, LiteLLMJudge):
        raise BatchUnsupported(f"--batch sends a run's calls through a provider's batch API; judge {spec!r} "
                               "calls no provider (batch runs are for litellm judges)")
    import litellm

    bound_litellm()  # every call litellm makes for the run: no redirects, replies and files capped
    try:
        _, provider, _, _ = litellm.get_llm_provider(judge.model, api_base=judge.api_base)
    except Exception as exc:  # a model litellm cannot place
        raise BatchUnsupported(f"--batch: litellm cannot place {judge.model!r}: {exc}") from None
    api = BATCH_APIS.get(provider)
    if api is None:
        why = f" ({NOT_SPOKEN[provider]})" if provider in NOT_SPOKEN else ""
        raise BatchUnsupported(f"--batch speaks the batch APIs of {', '.join(repr(p) for p in PROVIDERS)} "
                               f"(OpenAI's files and batches, also for servers that implement it; Anthropic's "
                               f"Message Batches; the Gemini API's Batch Mode; Vertex AI's batch prediction for "
                               f"Gemini); {spec!r} goes to {provider!r}, which it does not speak{why}: grade it online "
                               "(without --batch)")
    api.check(judge)
    return api


class BatchedLiteLLM(LiteLLMJudge):
    """The litellm judge answered from batch replies: `_complete` returns the reply a batch gave to
    exactly this request, or raises Deferred after setting the request aside."""

    def __init__(self, inner: LiteLLMJudge, api: BatchAPI, replies: dict[str, dict[str, Any]],
                 failures: dict[str, int], conflicts: dict[str, list[str]] | None = None,
                 replies_file: Path | None = None) -> None:
        self.__dict__.update(inner.__dict__)
        self.api = api
        self.replies = replies  # key -> the provider's answer line ({"status_code", "body"} or {"error"})
        self.failures = failures
        self.conflicts = conflicts or {}  # key -> the batches that gave it different replies
        self.replies_file = replies_file
        self.pending: dict[str, Pending] = {}  # key -> request, for the next batch
        self.logprobs = False  # a batch line's reply carries none unless asked; asked for none
        self.gate = UnlimitedGate()  # no call is made: nothing to pace
        # a batch is a tier of its own: its lines name no service tier, and its price is the batch
        # API's share of the standard price, never also the flex tier's
        self.service_tier = None

    def body(self, messages: list[dict[str, Any]], temperature: float, seed: int) -> dict[str, Any]:
        """The request body this call puts in a batch, in the judge's output mode."""
        return self.api.request(self, messages, temperature, seed, self.output).body

    async def _complete(self, messages: list[dict[str, Any]], temperature: float, seed: int,
                        notes: list[str], direct: bool = False,
                        fields: dict[str, Any] | None = None) -> tuple[Any, str]:
        mode = self.output  # `fields` are for clips, which no batch API here takes
        request = self.api.request(self, messages, temperature, seed, mode)
        key = request_key(request.body)
        if key in self.conflicts:
            batches = ", ".join(self.conflicts[key])
            raise BatchError(f"the batch API gave {len(self.conflicts[key])} different replies to request {key} "
                             f"(batch(es) {batches}): none is taken; keep the one to use in "
                             f"{self.replies_file or 'the replies file'} (delete the other lines with this key) "
                             "and run again")
        answer = self.replies.get(key)
        if (answer is not None and answer.get("error") is not None and mode == "schema"
                and answer.get("status_code") in (400, 422)):
            # the provider refused the schema in a batch line, as it would online: JSON mode from now on
            self.output = "json_object"
            notes.append(f"the batch API refused the reply's JSON schema ({json.dumps(answer['error'])[:200]}); "
                         "JSON mode (json_object) from now on")
            return await self._complete(messages, temperature, seed, notes)
        if answer is None or (answer.get("error") is not None and self.failures.get(key, 0) < MAX_FAILURES):
            self.pending[key] = request
            raise Deferred(key)
        if answer.get("error") is not None:
            raise BatchError(f"the batch API failed this request {self.failures.get(key, 0)} times: "
                             f"{json.dumps(answer['error'])[:500]}")
        response = self.api.reply(request, answer, messages)
        if isinstance(answer.get("body"), dict) and isinstance(getattr(response, "_hidden_params", None), dict):
            response._hidden_params[RAW_REPLY] = answer["body"]  # its usage checked as the provider sent it
        return response, mode

    async def judge(self, request: JudgeRequest) -> JudgeResult:
        try:
            result = await super().judge(request)
        except Deferred as waiting:
            asked = WAITING.get()
            if asked is None:  # not inside a batch run's turn: nothing can wait
                raise
            asked.append(waiting.key)
            return JudgeResult(_placeholder(request), None, None, None, ["waiting for the batch reply"])
        if result.usage is not None and result.usage.cost_usd is not None:
            result.usage.cost_usd *= self.api.price
        result.notes = [*result.notes, f"graded through the batch API ({self.api.title}, billed at "
                                       f"{self.api.price:.0%} of the synchronous price)"]
        return result

    def _failure(self, exc: BaseException, raws: list[str], usage: Any, tries: int) -> Any:
        from ..judge.base import JudgeFailure
        from ..schema import JudgeErrorKind

        if isinstance(exc, BatchError):
            return JudgeFailure(JudgeErrorKind.backend_error, str(exc), "\n---\n".join(raws) or None, usage)
        return super()._failure(exc, raws, usage, tries)


@dataclass
class BatchReport:
    """What one batch run did: records written, turns waiting, batches submitted or still open."""

    written: list[Record] = field(default_factory=list)
    waiting: int = 0  # turns with a request in a batch
    submitted: list[str] = field(default_factory=list)  # batch ids submitted by this run
    open: list[str] = field(default_factory=list)  # batch ids still being processed
    collected: list[str] = field(default_factory=list)  # batch ids read by this run
    resubmitted: int = 0  # requests given back by a failed or expired batch, or failed by the provider
    found: list[SubmittedBatch] = field(default_factory=list)  # batches an earlier, cut-off run asked for
    unmade: int = 0  # requests of batches an earlier run asked for that the provider never made: sent again
    strangers: list[str] = field(default_factory=list)  # found batches whose results answer none of their requests
    conflicts: dict[str, list[str]] = field(default_factory=dict)  # request key -> batches with different replies


def chunks(api: BatchAPI, requests: dict[str, Pending]) -> list[dict[str, Pending]]:
    """`requests` cut into batches within the provider's limits on requests and bytes per batch."""
    out: list[dict[str, Pending]] = [{}]
    size = 0
    for key, pending in requests.items():
        line = api.line_size(key, pending)
        if out[-1] and (len(out[-1]) >= api.max_requests or size + line > api.max_bytes):
            out.append({})
            size = 0
        out[-1][key] = pending
        size += line
    return [c for c in out if c]


class BatchRun:
    """One `grade --batch` run over a verdicts file (see the module's description)."""

    def __init__(self, grader: Grader, spec: str, out: Path) -> None:
        self.api = batch_api(grader.judge, spec)
        assert isinstance(grader.judge, LiteLLMJudge)  # what batch_api checked first
        self.grader = grader
        self.spec = spec
        self.out = out
        self.inner: LiteLLMJudge = grader.judge
        self.ledger = self._read_ledger()
        self.replies: dict[str, dict[str, Any]] = {}
        self.conflicts: dict[str, list[str]] = {}  # key -> the batches that gave it different replies
        self._read_replies()

    # ------------------------------------------------------------------ files
    def _read_ledger(self) -> BatchLedger:
        path = ledger_path(self.out)
        if not path.exists():
            return BatchLedger(judge=self.spec)
        try:
            ledger = BatchLedger.model_validate_json(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise BatchError(f"{path}: not a batch ledger ({str(exc).splitlines()[0]}); move it aside to start "
                             "the batches again") from None
        if ledger.judge != self.spec:
            raise BatchError(f"{path} holds batches of judge {ledger.judge!r}, not {self.spec!r}: give another "
                             "--out, or move the ledger aside")
        return ledger

    def _write_ledger(self) -> None:
        path = ledger_path(self.out)
        scratch = path.with_name(path.name + ".tmp")
        scratch.write_text(self.ledger.model_dump_json(indent=1), encoding="utf-8")
        scratch.replace(path)  # whole or not at all: the ids are what a later run collects

    def _read_replies(self) -> None:
        path = replies_path(self.out)
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                    if not isinstance(row["key"], str):
                        continue
                except (ValueError, KeyError, TypeError):
                    continue  # a torn last line of an interrupted run: that batch's lines are read again
                self._take(row)

    def _take(self, row: dict[str, Any]) -> None:
        """One answer row into the replies: an error gives way to a reply, a reply stands against a
        later error, and a second reply to the same request that differs from the first is a conflict
        (the turn is recorded as an error naming the request: which reply is right is not known)."""
        key = row["key"]
        seen = self.replies.get(key)
        if seen is None or seen.get("error") is not None:
            self.replies[key] = row
        elif row.get("error") is None and _reply_of(row) != _reply_of(seen):
            batches = self.conflicts.setdefault(key, [str(seen.get("batch", "?"))])
            batches.append(str(row.get("batch", "?")))

    def _keep_replies(self, rows: list[dict[str, Any]]) -> None:
        with open(replies_path(self.out), "a", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
            f.flush()
        for row in rows:
            self._take(row)

    # ------------------------------------------------------------------ the provider
    async def _find_intents(self, report: BatchReport) -> None:
        """Each batch an earlier run asked for without recording the answer (killed, or cut off while
        it waited) is looked for at the provider: one found is taken into the ledger and collected as
        any other; where there is none, the provider never made it, and its requests are sent again."""
        for intent in list(self.ledger.intents):
            taken = {b.id for b in self.ledger.batches}
            try:
                found = await self.api.find(self.inner, intent, taken)
            except BatchError as exc:
                raise BatchError(f"{exc} -- a batch of {len(intent.keys)} request(s) was asked for at "
                                 f"{intent.written_at} (tag {intent.tag}) and no answer was recorded; it is looked "
                                 "for before its requests are sent again, so nothing was sent: run the same command "
                                 "again (where the provider cannot list its batches, delete that entry from "
                                 f"\"intents\" in {ledger_path(self.out)} to send the requests again, paying again "
                                 "if the batch was made)") from None
            self.ledger.intents.remove(intent)
            if found is not None:
                self.ledger.batches.append(found)
                report.found.append(found)
            else:
                report.unmade += len(intent.keys)
            self._write_ledger()

    async def _collect(self, report: BatchReport) -> None:
        await self._find_intents(report)
        for batch in self.ledger.batches:
            if batch.status != "submitted":
                continue
            poll = await self.api.poll(self.inner, batch)
            batch.provider_status = poll.status
            if poll.ended:
                known = set(batch.keys)
                rows = []
                read = await self.api.results(self.inner, batch, poll)
                for row in read:
                    if row["key"] not in known:
                        continue
                    row["batch"] = batch.id
                    if row.get("error") is not None and row.pop("counts", True):
                        self.ledger.failures[row["key"]] = self.ledger.failures.get(row["key"], 0) + 1
                    rows.append(row)
                self._keep_replies(rows)
                answered = {r["key"] for r in rows}
                if batch.found is not None and read and not answered:
                    report.strangers.append(batch.id)  # it answers other requests: not the batch the intent asked for
                for key in batch.keys:
                    seen = self.replies.get(key)
                    if key not in answered and (seen is None or seen.get("error") is not None):
                        report.resubmitted += 1  # in the batch, but with no answer: asked again
                batch.status = "collected"
                report.collected.append(batch.id)
            elif poll.closed:
                batch.status = "failed"  # its requests have no reply: the grading pass sets them aside again
                report.resubmitted += len(batch.keys)
            else:
                report.open.append(batch.id)
            self._write_ledger()

    async def _submit(self, requests: dict[str, Pending], report: BatchReport) -> None:
        """Each batch written to the ledger as an intent before anything is sent, its file uploaded,
        then made with one create call. Where that call is refused, the intent goes (nothing was made);
        where it gets no answer (a dropped connection, a 5xx, a run killed or cut off while waiting),
        the intent stays, and the next run looks for the batch before sending its requests again."""
        for part in chunks(self.api, requests):
            keys = list(part)
            intent = BatchIntent(tag=new_tag(), keys=keys, requests_sha256=requests_digest(keys), written_at=_now())
            self.ledger.intents.append(intent)
            self._write_ledger()
            try:
                intent.input_file_id = await self.api.upload(self.inner, part, intent)
            except Exception:
                self._forget(intent)  # no create call was sent: no batch can have been made
                raise
            if intent.input_file_id is not None:
                self._write_ledger()
            try:
                batch = await self.api.create(self.inner, part, intent)
            except BatchRefused:
                self._forget(intent)
                raise
            except BatchError as exc:
                raise BatchError(f"{exc} -- the provider may have made the batch before its answer was lost: it "
                                 f"stays in the ledger ({ledger_path(self.out)}) as asked for (tag {intent.tag}), "
                                 f"and the next run looks for it before sending its {len(keys)} request(s) again"
                                 ) from None
            self.ledger.intents.remove(intent)
            self.ledger.batches.append(batch)
            self._write_ledger()
            report.submitted.append(batch.id)

    def _forget(self, intent: BatchIntent) -> None:
        self.ledger.intents.remove(intent)
        self._write_ledger()

    # ------------------------------------------------------------------ the run
    async def run(self, items: list[Item], plan: ResumePlan,
                  mark: Callable[[Record], Record] | None = None, concurrency: int = 4) -> BatchReport:
        """Collect, grade what has its replies, submit what has none (see the module's description)."""
        report = BatchReport()
        await self._collect(report)
        judge = BatchedLiteLLM(self.inner, self.api, self.replies, self.ledger.failures, self.conflicts,
                               replies_path(self.out))
        report.conflicts = {k: list(v) for k, v in self.conflicts.items()}
        # the verdict cache would keep a waiting turn's stand-in judgements: the replies file is this
        # run's cache instead
        cache, self.grader._cache = self.grader._cache, None
        self.grader.judge = judge
        in_batches = {k for b in self.ledger.batches if b.status == "submitted" for k in b.keys}
        self.out.parent.mkdir(parents=True, exist_ok=True)
        apply_plan(plan, self.out)
        room = asyncio.Semaphore(max(1, concurrency))
        with open(self.out, "a", encoding="utf-8") as f:

            async def one(item: Item, turn: int) -> None:
                async with room:
                    asked: list[str] = []
                    WAITING.set(asked)  # this turn's task only
                    try:
                        record = await self.grader.grade_turn(item, turn)
                    except Exception:
                        if not asked:
                            raise
                        # a stand-in judgement went where a real one was needed: the turn waits
                    if asked:
                        report.waiting += 1
                        return
                if mark is not None:
                    record = mark(record)
                f.write(record.model_dump_json() + "\n")
                f.flush()
                report.written.append(record)

            await asyncio.gather(*(one(item, t) for item, skip in plan.work
                                   for t in range(len(item.turns)) if t not in skip))
        self.grader.judge, self.grader._cache = self.inner, cache
        fresh = {k: b for k, b in judge.pending.items() if k not in in_batches}
        if fresh:
            await self._submit(fresh, report)
        report.open = sorted(set(report.open) | set(report.submitted))
        return report


# what differs between two answers to one request that say the same: the reply's own id and time
REPLY_STAMPS = ("id", "created", "created_at", "responseId", "createTime", "request_id")


def _reply_of(row: dict[str, Any]) -> str:
    """What a reply row says (its reply without its id and time), to tell two replies to one request
    apart."""
    body = row.get("body")
    if isinstance(body, dict):
        body = {k: v for k, v in body.items() if k not in REPLY_STAMPS}
    return json.dumps([row.get("status_code"), body], sort_keys=True)


def errors_of(report: BatchReport) -> int:
    return sum(isinstance(r, JudgeError) for r in report.written)
