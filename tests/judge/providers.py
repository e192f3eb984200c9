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
                self._record(None)
                self._send(*server.listing(self.path))

            def do_POST(self) -> None:
                seen = self._record(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                if not server.handles(seen.path):
                    self._send(404, server.error_body(404, f"no route {seen.path}"), {})
                    return
                self._send(*server.answer(seen))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

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
    invalid_request_error, as Anthropic answers it."""

    CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")

    def __init__(self, reply: Reply = "{}") -> None:
        super().__init__(reply)
        self.batches: dict[str, dict] = {}
        self.batch_calls: dict[str, Recorded] = {}  # batch id -> the create call (headers, body)
        self.results: dict[str, str] = {}

    def handles(self, path: str) -> bool:
        return path in ("/v1/messages", "/v1/messages/batches")

    def answer(self, seen: Recorded) -> Answer:
        if seen.path != "/v1/messages/batches":
            return super().answer(seen)
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
        batch_id = "msgbatch_" + uuid.uuid4().hex[:24]
        self.batches[batch_id] = {
            "id": batch_id, "type": "message_batch", "processing_status": "in_progress",
            "request_counts": {"processing": len(requests), "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0},
            "ended_at": None, "created_at": "2026-12-02T12:00:00.000000Z", "expires_at": "2026-12-03T12:00:00.000000Z",
            "archived_at": None, "cancel_initiated_at": None, "results_url": None}
        self.batch_calls[batch_id] = seen
        return 200, self.batches[batch_id], {}

    def listing(self, path: str) -> Answer:
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
        would), ("errored", error type, message), or "canceled" / "expired"; by default `reply`."""
        lines, counts = [], {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        for request in self.requests_of(batch_id):
            seen = Recorded("POST", "/v1/messages", {}, request["params"])
            got = answer(request) if answer is not None else (self.reply(seen) if callable(self.reply) else self.reply)
            if got in ("canceled", "expired"):
                result: dict = {"type": got}
            elif isinstance(got, tuple) and got[0] == "errored":
                result = {"type": "errored", "error": {"type": "error", "error": {"type": got[1], "message": got[2]}}}
            else:
                result = {"type": "succeeded", "message": self.success(got, seen)}
            counts[result["type"]] += 1
            lines.append(json.dumps({"custom_id": request["custom_id"], "result": result}) + "\n")
        self.results[batch_id] = "".join(lines)
        self.batches[batch_id].update(processing_status="ended", request_counts=counts,
                                      ended_at="2026-12-02T13:00:00.000000Z",
                                      results_url=f"{self.api_base}/v1/messages/batches/{batch_id}/results")


class OllamaServer(ProviderServer):
    """Ollama's chat API (`ollama_chat/<model>`): POST {api_base}/api/chat, the images of a message
    in its `images` list (base64, no MIME type), the text in its `content`."""

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
        user = [m for m in body["messages"] if m["role"] == "user"][-1]
        return [user["content"], *(Image("", base64.b64decode(i)) for i in user.get("images") or [])]

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
