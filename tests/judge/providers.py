"""Loopback HTTP servers that each speak one model provider's wire format, as litellm reaches it
with `api_base`, for contract tests of the litellm judge.

Each server records every request (path, headers, body) and answers a judgement in its
provider's own response format, with token usage; `reply` sets what it answers (a text, or a
function of the request that returns a status, a body and headers). Each also reads back from a
recorded body what a judge sent in that provider's shape: the images in order, the text around
them, the system text, the temperature, the JSON-mode field and the schema field.

    with GeminiServer() as server:
        judge = LiteLLMJudge(server.model("gemini-2.5-flash"), api_base=server.api_base, api_key="k")
        ...
        body = server.requests[0].body

Nothing here imitates a model: the reply is whatever the test sets; what the tests check is what
litellm put on the wire.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = tuple[int, Any, dict[str, str]]  # status, JSON body (or raw text), extra headers
Reply = str | Callable[["Recorded"], Answer | str]
DROP: Answer = (0, None, {})  # no answer: the connection is closed (what a client cut off while it waits sees)

JSON_ONLY = {"type": "json_object"}


@dataclass
class Recorded:
    """One request as it arrived."""

    method: str
    path: str
    headers: dict[str, str]  # names in lower case
    body: Any  # the parsed JSON body (None for a GET)


@dataclass
class Image:
    """A media part (an image, or a video where a provider takes one) as a provider received it:
    its bytes and MIME type."""

    mime: str
    data: bytes


class ProviderServer:
    """A provider's API on 127.0.0.1 at a free port, started on `with` and stopped after it.

    `reply`: the text of every answer (a judgement's JSON), or a function of the request that
    returns that text or a whole (status, body, headers) answer; settable at any time."""

    prefix = ""  # litellm's provider prefix: the judge's model is f"{prefix}/{name}"
    base_path = ""  # what follows host:port in the api_base given to litellm
    served_model = "served-model"  # the model id the server reports

    def __init__(self, reply: Reply = "{}") -> None:
        self.reply: Reply = reply
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _record(self, body: Any) -> Recorded:
                seen = Recorded(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                with server._lock:
                    server.requests.append(seen)
                return seen

            def _send(self, status: int, payload: Any, headers: dict[str, str]) -> None:
                data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send(*server.get(self._record(None)))

            def do_POST(self) -> None:
                seen = self._record(server.parse(self.path, self.rfile.read(int(self.headers["Content-Length"]))))
                if not server.handles(seen.path):
                    self._send(404, server.error_body(404, f"no route {seen.path}"), {})
                    return
                answer = server.answer(seen)
                if answer is DROP:
                    self.close_connection = True
                    return
                self._send(*answer)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    # ---------------------------------------------------------------- running

    def __enter__(self) -> ProviderServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.base_path}"

    def model(self, name: str) -> str:
        return f"{self.prefix}/{name}"

    @property
    def calls(self) -> list[Recorded]:
        """The POSTed requests (a readiness check's GET left out)."""
        return [r for r in self.requests if r.method == "POST"]

    # ---------------------------------------------------------------- answers

    def answer(self, seen: Recorded) -> Answer:
        reply = self.reply(seen) if callable(self.reply) else self.reply
        if isinstance(reply, tuple):
            return reply
        return 200, self.success(reply, seen), {}

    def refuse(self, status: int, message: str) -> Answer:
        """An error answer in this provider's format."""
        return status, self.error_body(status, message), {}

    def listing(self, path: str) -> Answer:
        return 200, {"object": "list", "data": [{"id": self.served_model, "object": "model"}]}, {}

    def get(self, seen: Recorded) -> Answer:
        """The answer to a GET (by default the model listing a readiness check asks for)."""
        return self.listing(seen.path)

    def parse(self, path: str, raw: bytes) -> Any:
        """A POSTed body as recorded: JSON (a server taking other bodies says so)."""
        return json.loads(raw)

    def handles(self, path: str) -> bool:
        raise NotImplementedError

    def success(self, text: str, seen: Recorded) -> Any:
        raise NotImplementedError

    def error_body(self, status: int, message: str) -> Any:
        raise NotImplementedError

    # ---------------------------------------------------------------- reading a request back

    def system_text(self, body: Any) -> str:
        raise NotImplementedError

    def user_parts(self, body: Any) -> list[str | Image | dict]:
        """The last user message's parts in order: text as str, inline media as Image, any other
        part as it arrived (a dict)."""
        raise NotImplementedError

    def temperature(self, body: Any) -> float | None:
        raise NotImplementedError

    def json_mode(self, body: Any) -> Any:
        """The field that asks for JSON (None: not asked)."""
        raise NotImplementedError

    def schema(self, body: Any) -> dict | None:
        """The JSON schema the reply is held to, where one was sent."""
        raise NotImplementedError

    def media(self, body: Any) -> list[Image]:
        return [p for p in self.user_parts(body) if isinstance(p, Image)]

    def images(self, body: Any) -> list[Image]:
        """The image parts (Ollama's carry no MIME type)."""
        return [m for m in self.media(body) if m.mime.startswith("image/") or not m.mime]


def data_url_image(url: str) -> Image:
    head, _, data = url.partition(",")
    assert head.startswith("data:") and head.endswith(";base64"), head
    return Image(head[5:-7], base64.b64decode(data))


class OpenAIServer(ProviderServer):
    """OpenAI chat completions (`openai/<model>`): POST {api_base}/chat/completions."""

    prefix = "openai"
    base_path = "/v1"
    served_model = "gpt-4o-mini-2024-07-18"

    def handles(self, path: str) -> bool:
        return path == "/v1/chat/completions"

    def success(self, text: str, seen: Recorded) -> Any:
        return {"id": "chatcmpl-" + uuid.uuid4().hex[:12], "object": "chat.completion", "created": 1764633600,
                "model": self.served_model, "system_fingerprint": "fp_contract",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                             "logprobs": None, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 2412, "completion_tokens": 96, "total_tokens": 2508}}

    def error_body(self, status: int, message: str) -> Any:
        return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}

    def system_text(self, body: Any) -> str:
        [system] = [m for m in body["messages"] if m["role"] == "system"]
        return system["content"] if isinstance(system["content"], str) else "".join(
            p["text"] for p in system["content"])

    def user_parts(self, body: Any) -> list[str | Image | dict]:
        user = [m for m in body["messages"] if m["role"] == "user"][-1]
        if isinstance(user["content"], str):
            return [user["content"]]
        return [p["text"] if p["type"] == "text" else data_url_image(p["image_url"]["url"])
                if p["type"] == "image_url" else p for p in user["content"]]

    def temperature(self, body: Any) -> float | None:
        return body.get("temperature")

    def json_mode(self, body: Any) -> Any:
        return body.get("response_format")

    def schema(self, body: Any) -> dict | None:
        form = body.get("response_format") or {}
        return form.get("json_schema", {}).get("schema") if form.get("type") == "json_schema" else None


class VLLMServer(OpenAIServer):
    """vLLM's OpenAI-compatible server (`hosted_vllm/<model>`): the same route, vLLM's fields in
    its answers (stop_reason, prompt_logprobs) and its error shape."""

    prefix = "hosted_vllm"
    served_model = "Qwen/Qwen2.5-VL-7B-Instruct"

    def success(self, text: str, seen: Recorded) -> Any:
        body = super().success(text, seen)
        body["choices"][0]["stop_reason"] = None
        body["prompt_logprobs"] = None
        body["kv_transfer_params"] = None
        body.pop("system_fingerprint")
        return body

    def error_body(self, status: int, message: str) -> Any:
        return {"object": "error", "message": message, "type": "BadRequestError", "param": None, "code": status}

    def user_parts(self, body: Any) -> list[str | Image | dict]:
        """As OpenAI's, and a `video_url` part (vLLM's own) as the video it carries."""
        return [data_url_image(p["video_url"]["url"]) if isinstance(p, dict) and p.get("type") == "video_url"
                else p for p in super().user_parts(body)]

    def video_sampling(self, body: Any) -> dict:
        """How vLLM is asked to sample a request's videos: the `video` entry of the request's
        `media_io_kwargs` (fps, num_frames), as its media loader reads it; {} when not asked."""
        return dict((body.get("media_io_kwargs") or {}).get("video") or {})


class GeminiServer(ProviderServer):
    """Google AI Studio's generateContent (`gemini/<model>`): litellm posts to
    {api_base}/models/{model}:generateContent with the key in x-goog-api-key."""

    prefix = "gemini"
    base_path = "/v1beta"
    served_model = "gemini-2.5-flash"

    def handles(self, path: str) -> bool:
        return path.startswith("/v1beta/models/") and path.endswith(":generateContent")

    def success(self, text: str, seen: Recorded) -> Any:
        return {"candidates": [{"content": {"parts": [{"text": text}], "role": "model"}, "finishReason": "STOP",
                                "index": 0}],
                "usageMetadata": {"promptTokenCount": 2412, "candidatesTokenCount": 96, "totalTokenCount": 2508,
                                  "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 2412}]},
                "modelVersion": self.served_model, "responseId": uuid.uuid4().hex[:20]}

    def error_body(self, status: int, message: str) -> Any:
        kind = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED"}.get(status, "INTERNAL")
        return {"error": {"code": status, "message": message, "status": kind}}

    def system_text(self, body: Any) -> str:
        system = body.get("system_instruction") or body.get("systemInstruction")
        return "".join(p["text"] for p in system["parts"])

    def user_parts(self, body: Any) -> list[str | Image | dict]:
        user = [c for c in body["contents"] if c["role"] == "user"][-1]
        out: list[str | Image | dict] = []
        for part in user["parts"]:
            inline = part.get("inline_data") or part.get("inlineData")
            if inline is not None:
                out.append(Image(inline.get("mime_type") or inline["mimeType"], base64.b64decode(inline["data"])))
            elif "text" in part:
                out.append(part["text"])
            else:
                out.append(part)
        return out

    def _config(self, body: Any) -> dict:
        return body.get("generationConfig") or body.get("generation_config") or {}

    def temperature(self, body: Any) -> float | None:
        return self._config(body).get("temperature")

    def json_mode(self, body: Any) -> Any:
        config = self._config(body)
        return config.get("response_mime_type") or config.get("responseMimeType")

    def schema(self, body: Any) -> dict | None:
        config = self._config(body)
        for key in ("response_json_schema", "responseJsonSchema", "response_schema", "responseSchema"):
            if key in config:
                return config[key]
        return None


class GeminiBatchServer(GeminiServer):
    """generateContent, and the Gemini API's Batch Mode beside it, as Google documents it:

    - POST /upload/v1beta/files: the Files API's resumable upload. The start request carries
      `X-Goog-Upload-Protocol: resumable`, `X-Goog-Upload-Command: start`, the file's length and
      type in `X-Goog-Upload-Header-Content-Length` / `-Type` and `{"file": {"display_name"}}`; it is
      answered with the upload URL in `X-Goog-Upload-URL`. The bytes POSTed there with
      `X-Goog-Upload-Command: upload, finalize` and `X-Goog-Upload-Offset: 0` (as many as announced)
      are answered with the file (`{"file": {"name": "files/...", ...}}`).
    - POST /v1beta/models/{model}:batchGenerateContent with `{"batch": {"display_name", "input_config":
      {"file_name"}}}`: the batch's operation (`name` batches/..., `metadata.state`
      BATCH_STATE_PENDING). An input file whose lines are not `{"key", "request"}` with the
      request's `contents`, or with a key twice, is refused 400 INVALID_ARGUMENT.
    - GET /v1beta/batches/{id}: the operation; after `finish`, `done`, BATCH_STATE_SUCCEEDED and the
      responses file in `response.responsesFile` (and `metadata.output`); after `end`, the state given.
    - GET /download/v1beta/files/{id}:download?alt=media: a file's bytes (the responses file: one
      `{"key", "response": GenerateContentResponse}` or `{"key", "error": google.rpc.Status}` a line).
    - GET /v1beta/batches?pageSize=&pageToken=: the batches' operations, newest first
      (`{"operations", "nextPageToken"}`).

    `drop_creates = n`: the next n batchGenerateContent calls make their batch and then close the
    connection without an answer.

    Every call but the upload of the bytes (the upload URL is the credential) needs the key in
    x-goog-api-key: 403 PERMISSION_DENIED without it; where `key` is given, another key is answered
    400 INVALID_ARGUMENT (API_KEY_INVALID), as Gemini answers it."""

    def __init__(self, reply: Reply = "{}", key: str | None = None, states: str = "BATCH_STATE_") -> None:
        super().__init__(reply)
        self.key = key
        self.states = states  # the API's state names; the guide's examples write JOB_STATE_*
        self.files: dict[str, bytes] = {}
        self.uploads: dict[str, dict] = {}  # upload id -> what the start request announced
        self.batches: dict[str, dict] = {}  # batch name -> its operation
        self.batch_calls: dict[str, Recorded] = {}  # batch name -> the create call
        self.lines: dict[str, list[dict]] = {}  # batch name -> its input file's lines
        self.drop_creates = 0

    def handles(self, path: str) -> bool:
        return (super().handles(path) or path.startswith("/upload/v1beta/files")
                or (path.startswith("/v1beta/models/") and path.endswith(":batchGenerateContent")))

    def parse(self, path: str, raw: bytes) -> Any:
        return raw if path.startswith("/upload/v1beta/files?") else super().parse(path, raw)

    def _unkeyed(self, seen: Recorded) -> Answer | None:
        key = seen.headers.get("x-goog-api-key")
        if not key:
            return 403, {"error": {"code": 403, "message": "Method doesn't allow unregistered callers",
                                   "status": "PERMISSION_DENIED"}}, {}
        if self.key is not None and key != self.key:
            return 400, {"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
                                   "status": "INVALID_ARGUMENT",
                                   "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                                "reason": "API_KEY_INVALID", "domain": "googleapis.com"}]}}, {}
        return None

    def answer(self, seen: Recorded) -> Answer:
        if seen.path.startswith("/upload/v1beta/files?"):
            return self._upload(seen)
        refused = self._unkeyed(seen)
        if refused is not None:
            return refused
        if seen.path == "/upload/v1beta/files":
            return self._start(seen)
        if seen.path.endswith(":batchGenerateContent"):
            return self._create(seen)
        return super().answer(seen)

    def _start(self, seen: Recorded) -> Answer:
        h = seen.headers
        if h.get("x-goog-upload-protocol") != "resumable" or h.get("x-goog-upload-command") != "start":
            return self.refuse(400, "a resumable upload starts with X-Goog-Upload-Protocol: resumable and "
                                    "X-Goog-Upload-Command: start")
        length = h.get("x-goog-upload-header-content-length", "")
        if not length.isdigit():
            return self.refuse(400, "X-Goog-Upload-Header-Content-Length is required")
        upload_id = uuid.uuid4().hex
        display = ((seen.body or {}).get("file") or {}).get("display_name") if isinstance(seen.body, dict) else None
        self.uploads[upload_id] = {"length": int(length), "mime": h.get("x-goog-upload-header-content-type", ""),
                                   "display_name": display or upload_id}
        url = f"http://127.0.0.1:{self.port}/upload/v1beta/files?upload_id={upload_id}&upload_protocol=resumable"
        return 200, "", {"X-Goog-Upload-URL": url, "X-Goog-Upload-Status": "active"}

    def _upload(self, seen: Recorded) -> Answer:
        from urllib.parse import parse_qs, urlparse

        upload_id = (parse_qs(urlparse(seen.path).query).get("upload_id") or [""])[0]
        upload = self.uploads.pop(upload_id, None)
        if upload is None:
            return self.refuse(404, "no such upload")
        h = seen.headers
        if h.get("x-goog-upload-command") != "upload, finalize" or h.get("x-goog-upload-offset") != "0":
            return self.refuse(400, "the bytes go with X-Goog-Upload-Command: upload, finalize at offset 0")
        if len(seen.body) != upload["length"]:
            return self.refuse(400, f"{len(seen.body)} bytes sent, {upload['length']} announced")
        name = "files/" + uuid.uuid4().hex[:12]
        self.files[name] = seen.body
        return 200, {"file": {"name": name, "displayName": upload["display_name"], "mimeType": upload["mime"],
                              "sizeBytes": str(len(seen.body)), "createTime": "2026-12-02T12:00:00.000000Z",
                              "updateTime": "2026-12-02T12:00:00.000000Z",
                              "expirationTime": "2026-12-04T12:00:00.000000Z",
                              "sha256Hash": base64.b64encode(uuid.uuid4().bytes).decode(),
                              "uri": f"http://127.0.0.1:{self.port}/v1beta/{name}", "state": "ACTIVE",
                              "source": "UPLOADED"}}, {"X-Goog-Upload-Status": "final"}

    def _create(self, seen: Recorded) -> Answer:
        model = seen.path.removeprefix("/v1beta/models/").removesuffix(":batchGenerateContent")
        batch = seen.body.get("batch") if isinstance(seen.body, dict) else None
        if not isinstance(batch, dict) or not batch.get("display_name"):
            return self.refuse(400, "batch.display_name: required")
        file_name = (batch.get("input_config") or {}).get("file_name")
        if file_name not in self.files:
            return self.refuse(400 if file_name is None else 404, f"input_config.file_name: no file {file_name}")
        lines, keys = [], set()
        for k, text in enumerate(self.files[file_name].decode().splitlines(), 1):
            try:
                line = json.loads(text)
                ok = isinstance(line["key"], str) and isinstance(line["request"]["contents"], list)
            except (ValueError, KeyError, TypeError):
                ok = False
            if not ok:
                return self.refuse(400, f"line {k}: not a {{key, request}} line with a GenerateContentRequest")
            if line["key"] in keys:
                return self.refuse(400, f"line {k}: key {line['key']} is used twice")
            keys.add(line["key"])
            lines.append(line)
        name = "batches/" + uuid.uuid4().hex[:24]
        self.batches[name] = {"name": name, "metadata": {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
            "model": f"models/{model}", "displayName": batch["display_name"], "inputConfig": {"fileName": file_name},
            "createTime": "2026-12-02T12:00:00.000000Z", "updateTime": "2026-12-02T12:00:00.000000Z",
            "batchStats": {"requestCount": str(len(lines)), "pendingRequestCount": str(len(lines))},
            "state": f"{self.states}PENDING", "name": name}}
        self.batch_calls[name] = seen
        self.lines[name] = lines
        if self.drop_creates:
            self.drop_creates -= 1
            return DROP
        return 200, self.batches[name], {}

    def get(self, seen: Recorded) -> Answer:
        from urllib.parse import parse_qs

        batch = re.fullmatch(r"/v1beta/(batches/[^/?:]+)", seen.path)
        download = re.fullmatch(r"/download/v1beta/(files/[^/?:]+):download\?alt=media", seen.path)
        listing = re.fullmatch(r"/v1beta/batches(?:\?(.*))?", seen.path)
        if not batch and not download and not listing:
            return super().get(seen)
        refused = self._unkeyed(seen)
        if refused is not None:
            return refused
        if listing:
            query = parse_qs(listing.group(1) or "")
            start = int((query.get("pageToken") or ["0"])[0])
            size = int((query.get("pageSize") or ["25"])[0])
            newest = list(reversed(self.batches.values()))
            page: dict = {"operations": newest[start:start + size]}
            if start + size < len(newest):
                page["nextPageToken"] = str(start + size)
            return 200, page, {}
        if batch:
            found = self.batches.get(batch.group(1))
            return (200, found, {}) if found else self.refuse(404, f"{batch.group(1)} not found")
        data = self.files.get(download.group(1)) if download else None
        return (200, data.decode(), {}) if data is not None else self.refuse(404, "file not found")

    def requests_of(self, name: str) -> list[dict]:
        """The batch's input file's lines as uploaded: `{"key", "request"}` each."""
        return self.lines[name]

    def finish(self, name: str, answer: Callable[[dict], Any] | None = None) -> None:
        """The batch succeeded: `answer(line)` gives each line's result: a reply text (as `reply`
        would), ("error", gRPC code, message) for a google.rpc.Status, None for no line, or a list of
        those (a line each); by default `reply`. Its responses file is written and named in the
        operation."""
        rows, failed = [], 0
        operation = self.batches[name]
        for line in self.requests_of(name):
            seen = Recorded("POST", f"/v1beta/{operation['metadata']['model']}:generateContent", {}, line["request"])
            got = answer(line) if answer is not None else (self.reply(seen) if callable(self.reply) else self.reply)
            for one in got if isinstance(got, list) else [got]:
                if one is None:
                    continue
                if isinstance(one, tuple) and one[0] == "error":
                    failed += 1
                    rows.append({"key": line["key"], "error": {"code": one[1], "message": one[2]}})
                else:
                    rows.append({"key": line["key"], "response": self.success(one, seen)})
        responses = "files/batch-" + name.removeprefix("batches/")
        self.files[responses] = "".join(json.dumps(r) + "\n" for r in rows).encode()
        n = len(self.requests_of(name))
        operation["metadata"].update(state=f"{self.states}SUCCEEDED", endTime="2026-12-02T13:00:00.000000Z",
                                     output={"responsesFile": responses},
                                     batchStats={"requestCount": str(n), "successfulRequestCount": str(n - failed),
                                                 "failedRequestCount": str(failed)})
        operation["done"] = True
        operation["response"] = {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatchOutput",
            "responsesFile": responses}

    def end(self, name: str, state: str) -> None:
        """The batch ended without results: FAILED, CANCELLED or EXPIRED."""
        operation = self.batches[name]
        operation["metadata"].update(state=f"{self.states}{state}", endTime="2026-12-02T13:00:00.000000Z")
        operation["done"] = True
        if state == "FAILED":
            operation["error"] = {"code": 13, "message": "Internal error encountered."}


class AnthropicServer(ProviderServer):
    """Anthropic messages (`anthropic/<model>`): POST {api_base}/v1/messages. A request that forces
    litellm's JSON tool (`json_tool_call`, its way of holding older models to a schema) is answered
    with that tool's call, as Anthropic would."""

    prefix = "anthropic"
    served_model = "claude-sonnet-4-5-20250929"

    def handles(self, path: str) -> bool:
        return path == "/v1/messages"

    def success(self, text: str, seen: Recorded) -> Any:
        tool = (seen.body.get("tool_choice") or {}).get("name")
        content: list[dict] = ([{"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:20], "name": tool,
                                 "input": json.loads(text)}] if tool else [{"type": "text", "text": text}])
        return {"id": "msg_" + uuid.uuid4().hex[:20], "type": "message", "role": "assistant",
                "model": self.served_model, "content": content, "stop_reason": "tool_use" if tool else "end_turn",
                "stop_sequence": None, "usage": {"input_tokens": 2412, "output_tokens": 96,
                                                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}

    def error_body(self, status: int, message: str) -> Any:
        return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}

    def system_text(self, body: Any) -> str:
        system = body["system"]
        return system if isinstance(system, str) else "".join(p["text"] for p in system)

    def user_parts(self, body: Any) -> list[str | Image | dict]:
        user = [m for m in body["messages"] if m["role"] == "user"][-1]
        if isinstance(user["content"], str):
            return [user["content"]]
        out: list[str | Image | dict] = []
        for part in user["content"]:
            if part["type"] == "image" and part["source"]["type"] == "base64":
                out.append(Image(part["source"]["media_type"], base64.b64decode(part["source"]["data"])))
            elif part["type"] == "text":
                out.append(part["text"])
            else:
                out.append(part)
        return out

    def temperature(self, body: Any) -> float | None:
        return body.get("temperature")

    def json_mode(self, body: Any) -> Any:
        """Anthropic has no JSON mode: what holds the reply to JSON is an output_format, or a tool
        whose call is forced."""
        return body.get("output_format") or body.get("tool_choice")

    def schema(self, body: Any) -> dict | None:
        if body.get("output_format"):
            return body["output_format"]["schema"]
        forced = (body.get("tool_choice") or {}).get("name")
        for tool in body.get("tools") or []:
            if tool["name"] == forced:
                return tool["input_schema"]
        return None


class AnthropicBatchServer(AnthropicServer):
    """Anthropic messages, and Anthropic's Message Batches API beside it: POST
    /v1/messages/batches (`{"requests": [{"custom_id", "params"}]}`, each params a messages body),
    GET /v1/messages/batches/{id} (the batch, `processing_status` in_progress until the test calls
    `finish`, then ended with its `results_url`), GET /v1/messages/batches/{id}/results (JSONL, one
    `{"custom_id", "result": {"type": succeeded|errored|canceled|expired, ...}}` a request). A
    create call whose requests break Anthropic's rules (no requests, a custom_id outside
    ^[a-zA-Z0-9_-]{1,64}$ or twice, params without model, max_tokens or messages) is answered 400
    invalid_request_error, as Anthropic answers it. GET /v1/messages/batches?limit=&after_id=: the
    batches, newest first (`{"data", "has_more", "first_id", "last_id"}`), each stamped with the time
    it was made.

    `drop_creates = n`: the next n create calls make their batch and then close the connection
    without an answer; `lose_creates = n`: the next n close it without making one."""

    CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")

    def __init__(self, reply: Reply = "{}") -> None:
        super().__init__(reply)
        self.batches: dict[str, dict] = {}
        self.batch_calls: dict[str, Recorded] = {}  # batch id -> the create call (headers, body)
        self.results: dict[str, str] = {}
        self.drop_creates = 0
        self.lose_creates = 0

    def handles(self, path: str) -> bool:
        return path in ("/v1/messages", "/v1/messages/batches")

    def answer(self, seen: Recorded) -> Answer:
        if seen.path != "/v1/messages/batches":
            return super().answer(seen)
        if self.lose_creates:
            self.lose_creates -= 1
            return DROP
        requests = seen.body.get("requests") if isinstance(seen.body, dict) else None
        if not isinstance(requests, list) or not requests:
            return self.refuse(400, "requests: a non-empty list is required")
        ids = [r.get("custom_id") for r in requests]
        for k, (custom_id, r) in enumerate(zip(ids, requests)):
            if not isinstance(custom_id, str) or not self.CUSTOM_ID.fullmatch(custom_id):
                return self.refuse(400, f"requests.{k}.custom_id: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'")
            missing = [f for f in ("model", "max_tokens", "messages") if f not in (r.get("params") or {})]
            if missing:
                return self.refuse(400, f"requests.{k}.params.{missing[0]}: Field required")
        if len(set(ids)) != len(ids):
            return self.refuse(400, "requests: custom_id values must be unique within a batch")
        from datetime import datetime, timedelta, timezone

        batch_id = "msgbatch_" + uuid.uuid4().hex[:24]
        now = datetime.now(timezone.utc)
        self.batches[batch_id] = {
            "id": batch_id, "type": "message_batch", "processing_status": "in_progress",
            "request_counts": {"processing": len(requests), "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0},
            "ended_at": None, "created_at": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "expires_at": (now + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "archived_at": None, "cancel_initiated_at": None, "results_url": None}
        self.batch_calls[batch_id] = seen
        if self.drop_creates:
            self.drop_creates -= 1
            return DROP
        return 200, self.batches[batch_id], {}

    def listing(self, path: str) -> Answer:
        from urllib.parse import parse_qs

        every = re.fullmatch(r"/v1/messages/batches(?:\?(.*))?", path)
        if every:
            query = parse_qs(every.group(1) or "")
            newest = list(reversed(self.batches.values()))
            after = (query.get("after_id") or [None])[0]
            if after:
                newest = newest[[b["id"] for b in newest].index(after) + 1:]
            limit = int((query.get("limit") or ["20"])[0])
            page = newest[:limit]
            return 200, {"data": page, "has_more": len(newest) > limit, "first_id": page[0]["id"] if page else None,
                         "last_id": page[-1]["id"] if page else None}, {}
        found = re.fullmatch(r"/v1/messages/batches/([^/?]+)(/results)?", path)
        if not found:
            return super().listing(path)
        batch = self.batches.get(found.group(1))
        if batch is None:
            return 404, {"type": "error", "error": {"type": "not_found_error", "message": "batch not found"}}, {}
        if found.group(2):
            if batch["processing_status"] != "ended":
                return 400, self.error_body(400, "results are not available until the batch ends"), {}
            return 200, self.results[batch["id"]], {}
        return 200, batch, {}

    def requests_of(self, batch_id: str) -> list[dict]:
        """The batch's requests as they arrived: `{"custom_id", "params"}` each."""
        return self.batch_calls[batch_id].body["requests"]

    def finish(self, batch_id: str, answer: Callable[[dict], Any] | None = None) -> None:
        """End the batch: `answer(request)` gives each request's result: a reply text (as `reply`
        would), ("errored", error type, message), "canceled" / "expired", or a list of those (a line
        each); by default `reply`."""
        lines, counts = [], {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        for request in self.requests_of(batch_id):
            seen = Recorded("POST", "/v1/messages", {}, request["params"])
            got = answer(request) if answer is not None else (self.reply(seen) if callable(self.reply) else self.reply)
            for one in got if isinstance(got, list) else [got]:
                if one in ("canceled", "expired"):
                    result: dict = {"type": one}
                elif isinstance(one, tuple) and one[0] == "errored":
                    result = {"type": "errored", "error": {"type": "error", "error": {"type": one[1],
                                                                                      "message": one[2]}}}
                else:
                    result = {"type": "succeeded", "message": self.success(one, seen)}
                counts[result["type"]] += 1
                lines.append(json.dumps({"custom_id": request["custom_id"], "result": result}) + "\n")
        self.results[batch_id] = "".join(lines)
        self.batches[batch_id].update(processing_status="ended", request_counts=counts,
                                      ended_at="2026-12-02T13:00:00.000000Z",
                                      results_url=f"{self.api_base}/v1/messages/batches/{batch_id}/results")


class OllamaServer(ProviderServer):
    """Ollama's chat API (`ollama_chat/<model>`): POST {api_base}/api/chat, the images of a message
    in its `images` list (base64, no MIME type), the text in its `content`; framejudge sends each
    frame as a message of its own, its time label as the text."""

    prefix = "ollama_chat"
    served_model = "qwen2.5vl:7b"

    def handles(self, path: str) -> bool:
        return path == "/api/chat"

    def listing(self, path: str) -> Answer:
        return 200, {"models": [{"name": self.served_model, "model": self.served_model}]}, {}

    def success(self, text: str, seen: Recorded) -> Any:
        return {"model": self.served_model, "created_at": "2026-12-02T12:00:00.000000Z",
                "message": {"role": "assistant", "content": text}, "done": True, "done_reason": "stop",
                "total_duration": 5_000_000_000, "load_duration": 1_000_000, "prompt_eval_count": 2412,
                "prompt_eval_duration": 1_000_000_000, "eval_count": 96, "eval_duration": 3_000_000_000}

    def error_body(self, status: int, message: str) -> Any:
        return {"error": message}

    def system_text(self, body: Any) -> str:
        [system] = [m for m in body["messages"] if m["role"] == "system"]
        return system["content"]

    def user_parts(self, body: Any) -> list[str | Image | dict]:
        """The user messages' texts and images in order (a message's text, then its images)."""
        parts: list[str | Image | dict] = []
        for m in body["messages"]:
            if m["role"] == "user":
                parts += [m["content"], *(Image("", base64.b64decode(i)) for i in m.get("images") or [])]
        return parts

    def temperature(self, body: Any) -> float | None:
        return (body.get("options") or {}).get("temperature")

    def json_mode(self, body: Any) -> Any:
        return body.get("format")

    def schema(self, body: Any) -> dict | None:
        form = body.get("format")
        return form if isinstance(form, dict) else None


PROVIDERS: dict[str, type[ProviderServer]] = {
    "openai": OpenAIServer, "gemini": GeminiServer, "anthropic": AnthropicServer, "hosted_vllm": VLLMServer,
    "ollama_chat": OllamaServer,
}
