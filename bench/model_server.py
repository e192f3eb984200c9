"""A stand-in for a slow hosted vision-language model API, used by the benchmarks and tests.

An OpenAI-compatible chat-completions server on 127.0.0.1 (aiohttp, one asyncio event loop)
that answers every completion with a rubric-valid framejudge judgement after a configurable
latency, and can be told to rate-limit, be overloaded, hang, drop connections or fail with a
status code. It counts what it saw, so a test or a benchmark can check what its client did.

In-process, on an ephemeral port, in a background thread with its own event loop:

    with ModelServer(latency=0.5, rate_limit=20) as server:
        ...  # point the client at server.base_url ("http://127.0.0.1:PORT/v1")
        server.configure(overload_for=2.0)
        print(server.stats())

As a subprocess (prints `ready http://127.0.0.1:PORT/v1` once listening; stops on SIGTERM/SIGINT), set up
by ./run (the bench environment):

    ./run bench model_server --port 18100 --latency 0.5 --rate-limit 20

Routes: POST /v1/chat/completions (and /chat/completions), GET /v1/models (and /models),
GET /admin/stats, POST /admin/configure (a JSON object of settings), POST /admin/reset.

A completion can also be answered the ways a hostile or broken server answers: `redirect_to` a
redirect (`redirect_status`) to another URL; `pad_bytes` a valid reply padded with that many spaces
inside its JSON, generated a MiB at a time as it is sent (never held whole), with its length declared
or chunked (`pad_declared`), or gzip-compressed as it is sent (`pad_gzip`: a small body that
inflates to the padded size); `drip_seconds` the reply one byte at a time.

Per completion request, in this order: `close_connections` aborts the connection with no
response; `hang` never answers (until the client gives up); `overload_until` (or `overload_for`
seconds from now) answers 429; the `rate_limit` token bucket, checked on arrival, answers 429
above the rate; `status_error` answers that status (with probability `status_error_rate`);
otherwise the server sleeps `latency` seconds and answers 200. Errors are answered at once.

The reply is always "Successful" (both responses, preference "Both", when the prompt has a
"Response B:" line), so items whose responses are fixed error strings would not validate.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import re
import signal
import threading
import time
import uuid
import zlib
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

try:
    from aiohttp import web
except ModuleNotFoundError as exc:  # run without the bench environment (./run grade sets up less)
    raise SystemExit(f"error: the stand-in model server needs {exc.name}: run it as ./run bench model_server "
                     "(which sets up the bench environment)") from None

TAG = re.compile(r"\[item ([^\]]+)\]")
TIME_LABEL = re.compile(r"\[t = ([0-9.]+) s\]")
IMAGE_TOKENS = 85  # what a low-detail image part costs in most vision APIs' usage
HANG_SECONDS = 10 ** 7
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 429: "rate_limit_error"}


@dataclass
class Settings:
    """How the server behaves; every field can be changed at run time."""

    latency: float = 0.0  # seconds before a completion is answered
    rate_limit: float | None = None  # requests per second; None is no limit
    rate_burst: float = 1.0  # token-bucket capacity (requests that may arrive at once)
    overload_until: float | None = None  # time.monotonic() until which every request gets 429
    overload_retry_after: float = 1.0  # seconds advertised in Retry-After while overloaded
    hang: bool = False  # accept requests and never answer them
    close_connections: bool = False  # abort the connection without a response
    status_error: int | None = None  # answer this status (e.g. 503) instead of a completion
    status_error_rate: float = 1.0  # share of requests that get status_error
    model: str = "bench-vlm"  # the model id in /v1/models and in replies without a model
    redirect_to: str | None = None  # answer every completion with a redirect to this URL
    redirect_status: int = 307  # the redirect's status (301, 302, 303, 307, 308)
    pad_bytes: int = 0  # a valid reply whose JSON is padded with this many spaces, generated as it is sent
    pad_declared: bool = True  # the padded reply declares its length (else it is sent chunked)
    pad_gzip: bool = False  # the padded reply gzip-compressed as it is sent (Content-Encoding: gzip, chunked)
    drip_seconds: float = 0.0  # send the reply one byte at a time, this many seconds apart
    gullible: bool = False  # grade as a model that obeys the prompt's answers and heeds the rubric's order

    def check(self) -> None:
        if self.latency < 0:
            raise ValueError(f"latency must be >= 0, got {self.latency}")
        if self.rate_limit is not None and self.rate_limit <= 0:
            raise ValueError(f"rate_limit must be > 0 requests per second or None, got {self.rate_limit}")
        if self.rate_burst < 1:
            raise ValueError(f"rate_burst must be >= 1, got {self.rate_burst}")
        if self.status_error is not None and not 100 <= self.status_error <= 599:
            raise ValueError(f"status_error must be an HTTP status, got {self.status_error}")
        if not 0 <= self.status_error_rate <= 1:
            raise ValueError(f"status_error_rate must be in [0, 1], got {self.status_error_rate}")
        if not 300 <= self.redirect_status <= 399:
            raise ValueError(f"redirect_status must be a 3xx status, got {self.redirect_status}")
        if self.pad_bytes < 0 or self.drip_seconds < 0:
            raise ValueError("pad_bytes and drip_seconds must be >= 0")


SETTING_NAMES = frozenset(f.name for f in fields(Settings))


def _texts(messages: Any) -> tuple[list[str], int]:
    """Every text in the messages (string contents and text parts), and the number of image parts."""
    texts: list[str] = []
    images = 0
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            for part in content:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "text" and isinstance(part.get("text"), str):
                    texts.append(part["text"])
                elif part.get("type") in ("image_url", "input_image", "image"):
                    images += 1
    return texts, images


def judgement_for(texts: list[str]) -> dict[str, Any]:
    """A judgement that passes framejudge's rubric checks for the prompt these texts make up."""
    times = [float(t) for text in texts for t in TIME_LABEL.findall(text)]
    grade = {"category": "Successful", "rationale": "It answers the question as the frames show.",
             "evidence_timestamps": times[-1:]}
    if any("Response B:" in text for text in texts):
        return {"response_a": grade, "response_b": dict(grade), "preference": "Both",
                "deciding_criterion": None}
    return {"response_a": grade}


_OBEY_CATEGORY = re.compile(r'category"?\s*[:=]\s*"?successful|grade this response successful|golden response', re.I)
_OBEY_PREFERENCE = re.compile(r'preference"?\s*[:=]\s*"?([ab])\b', re.I)


def gullible_judgement_for(texts: list[str]) -> dict[str, Any]:
    """A deliberately gullible judgement: each response gets the second category the rubric lists
    (a model biased by the order it reads them in), unless its own text says it is Successful
    ('Category: Successful', a verdict in JSON, a golden response, an instruction to grade it so) or
    names a preference, which it obeys."""
    system = next((t for t in texts if "## Categories" in t), "")
    listed = re.findall(r"^### (.+)$", system.split("## Categories", 1)[-1], re.M)
    default = listed[1] if len(listed) > 1 else "Not Successful"
    user = texts[-1] if texts else ""
    code = re.search(r"<<<NAME (\w+)>>>", user)
    sections = dict(re.findall(rf"<<<(response_[ab]) {code.group(1)}>>>\n(.*?)\n<<<end \1 {code.group(1)}>>>", user, re.S)
                    ) if code else {}
    grades, preference = {}, None
    for key, text in sorted(sections.items()):
        category = "Successful" if _OBEY_CATEGORY.search(text) else default
        wanted = _OBEY_PREFERENCE.search(text)
        if wanted:
            preference = wanted.group(1).upper()
            grades[f"response_{wanted.group(1).lower()}"] = "Successful"
        grades.setdefault(key, category)
    out: dict[str, Any] = {k: {"category": c, "rationale": "As the response says."} for k, c in grades.items()}
    if "response_b" not in grades:
        return {"response_a": out.get("response_a", {"category": default, "rationale": "-"})}
    a, b = grades.get("response_a", default), grades["response_b"]
    if preference is None and a != b:
        preference = "A" if a == "Successful" else "B" if b == "Successful" else None
    if preference is None:
        preference = "Both" if a == b == "Successful" else "Neither"
        return {**out, "preference": preference, "deciding_criterion": None}
    if (a == "Successful") != (b == "Successful"):
        if grades[f"response_{preference.lower()}"] != "Successful":
            grades[f"response_{'b' if preference == 'A' else 'a'}"] = default if default != "Successful" else "Not Successful"
        out = {k: {"category": c, "rationale": "As the response says."} for k, c in grades.items()}
        return {**out, "preference": preference, "deciding_criterion": "category"}
    return {**out, "preference": preference, "deciding_criterion": "factual_accuracy" if a == "Successful" else "category"}


def _error(status: int, message: str, headers: dict[str, str] | None = None,
           code: str | None = None) -> web.Response:
    body = {"error": {"message": message, "type": _ERROR_TYPES.get(status, "server_error"),
                      "param": None, "code": code}}
    return web.json_response(body, status=status, headers=headers)


def _retry_headers(seconds: float) -> dict[str, str]:
    return {"retry-after-ms": str(max(1, math.ceil(seconds * 1000))),
            "Retry-After": str(max(1, math.ceil(seconds)))}


class ModelServer:
    """The server, its settings and its counters. Thread-safe: configure, reset and stats may
    be called from any thread while it runs."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, overload_for: float | None = None,
                 **settings: Any) -> None:
        self.host = host
        self.port = port
        self._lock = threading.Lock()
        self._settings = Settings()
        self._tokens = 0.0
        self._refilled = time.monotonic()
        self._random = random.Random()
        self._runner: web.AppRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._in_flight = 0
        self.configure(overload_for=overload_for, **settings)
        self.reset()

    # ------------------------------------------------------------ control

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def settings(self) -> Settings:
        with self._lock:
            return replace(self._settings)

    def configure(self, **changes: Any) -> Settings:
        """Change settings (the fields of Settings, plus `overload_for`: seconds of overload from
        now). Changing the rate limit or burst refills the token bucket. Returns the new settings."""
        overload_for = changes.pop("overload_for", None)
        unknown = set(changes) - SETTING_NAMES
        if unknown:
            raise ValueError(f"unknown settings {sorted(unknown)}; known: {sorted(SETTING_NAMES | {'overload_for'})}")
        with self._lock:
            new = replace(self._settings, **changes)
            if overload_for is not None:
                new.overload_until = time.monotonic() + float(overload_for)
            new.check()
            if "rate_limit" in changes or "rate_burst" in changes:
                self._tokens, self._refilled = new.rate_burst, time.monotonic()
            self._settings = new
            return replace(new)

    def reset(self) -> None:
        """Zero the counters (in_flight stays: those requests are still being handled)."""
        with self._lock:
            self._started = time.monotonic()
            self._requests = self._completed = self._aborted = 0
            self._status_counts: dict[int, int] = {}
            self._by_tag: dict[str, int] = {}
            self._peak = self._in_flight
            self._first: float | None = None
            self._last: float | None = None

    def stats(self) -> dict[str, Any]:
        """The counters since the last reset. Times are time.monotonic() values (system-wide on
        Linux, so comparable with a client's clock in another process)."""
        with self._lock:
            now = time.monotonic()
            elapsed = now - self._started
            busy = None if self._first is None or self._last is None else self._last - self._first
            return {
                "requests": self._requests,
                "completed": self._completed,
                "aborted": self._aborted,
                "status_counts": dict(self._status_counts),
                "in_flight": self._in_flight,
                "peak_in_flight": self._peak,
                "by_tag": dict(self._by_tag),
                "started_at": self._started,
                "elapsed": elapsed,
                "completed_per_second": self._completed / elapsed if elapsed > 0 else 0.0,
                "first_request_at": self._first,
                "last_completed_at": self._last,
                "sustained_rps": self._completed / busy if busy else None,
            }

    # ------------------------------------------------------------ lifecycle

    def start(self) -> ModelServer:
        """Serve from a background thread with its own event loop; returns once listening."""
        if self._thread is not None:
            raise RuntimeError("the server is already running")
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self.serve())
            except BaseException as e:
                failure.append(e)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self.close())
                loop.close()

        self._thread = threading.Thread(target=run, name="model-server", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread = None
            raise failure[0]
        return self

    def stop(self) -> None:
        """Stop serving; requests still in flight (hung ones included) are cut off."""
        if self._thread is None or self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._thread = self._loop = None

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def serve(self) -> None:
        """Start listening on the running event loop (sets `port` when it was 0)."""
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.add_routes([
            web.post("/v1/chat/completions", self._completion),
            web.post("/chat/completions", self._completion),
            web.get("/v1/models", self._models),
            web.get("/models", self._models),
            web.get("/admin/stats", self._admin_stats),
            web.post("/admin/configure", self._admin_configure),
            web.post("/admin/reset", self._admin_reset),
        ])
        # handler_cancellation: a request whose client gives up stops being in flight.
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, backlog=4096)
        await site.start()
        self._runner = runner
        self.port = runner.addresses[0][1]

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # ------------------------------------------------------------ handlers

    def _count(self, status: int) -> None:
        with self._lock:
            self._status_counts[status] = self._status_counts.get(status, 0) + 1

    def _admit(self) -> tuple[Settings, web.Response | None, bool]:
        """On arrival: the settings, and a response to give at once (or None), or abort=True."""
        now = time.monotonic()
        with self._lock:
            s = self._settings
            if s.close_connections:
                return s, None, True
            if s.hang:
                return s, None, False
            if s.overload_until is not None and now < s.overload_until:
                return s, _error(429, "The server is overloaded; retry later.",
                                 _retry_headers(s.overload_retry_after), "overloaded"), False
            if s.rate_limit is not None:
                self._tokens = min(s.rate_burst, self._tokens + (now - self._refilled) * s.rate_limit)
                self._refilled = now
                if self._tokens >= 1:
                    self._tokens -= 1
                else:
                    wait = (1 - self._tokens) / s.rate_limit
                    return s, _error(429, f"Rate limit reached: {s.rate_limit:g} requests per second. "
                                          f"Please try again in {wait * 1000:.0f}ms.",
                                     _retry_headers(wait), "rate_limit_exceeded"), False
            if s.status_error is not None and self._random.random() < s.status_error_rate:
                return s, _error(s.status_error, f"Injected error {s.status_error}."), False
            return s, None, False

    async def _completion(self, request: web.Request) -> web.StreamResponse:
        now = time.monotonic()
        with self._lock:
            self._requests += 1
            self._in_flight += 1
            self._peak = max(self._peak, self._in_flight)
            if self._first is None:
                self._first = now
        try:
            try:
                body = json.loads(await request.read())
                if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                    raise TypeError("the body must be a JSON object with a list of messages")
                messages = body["messages"]
            except (ValueError, TypeError) as e:
                self._count(400)
                return _error(400, f"invalid request body: {e}")
            s, answer, abort = self._admit()
            if abort:
                with self._lock:
                    self._aborted += 1
                if request.transport is not None:
                    request.transport.abort()
                raise asyncio.CancelledError  # nothing is written on an aborted connection
            if answer is not None:
                self._count(answer.status)
                return answer
            if s.hang:
                await asyncio.sleep(HANG_SECONDS)
            if s.latency > 0:
                await asyncio.sleep(s.latency)
            if s.redirect_to is not None:
                self._count(s.redirect_status)
                return web.Response(status=s.redirect_status, headers={"Location": s.redirect_to})
            reply = self._reply(body, messages, s)
            if s.pad_bytes or s.drip_seconds:
                return await self._hostile(request, reply, s)
            return web.json_response(reply)
        finally:
            with self._lock:
                self._in_flight -= 1

    async def _hostile(self, request: web.Request, reply: dict[str, Any], s: Settings) -> web.StreamResponse:
        """The reply padded (generated as it is sent) or dripped; a client that stops reading ends it."""
        data = json.dumps(reply).encode()
        head, tail = data[:1], data[1:]
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        if s.pad_gzip:
            response.headers["Content-Encoding"] = "gzip"
            response.enable_chunked_encoding()
        elif s.pad_declared or not s.pad_bytes:
            response.content_length = len(data) + s.pad_bytes
        else:
            response.enable_chunked_encoding()
        if s.pad_gzip:
            zipper = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
            raw_write = response.write

            async def write(piece: bytes) -> None:  # each piece compressed as it is sent
                await raw_write(zipper.compress(piece) + zipper.flush(zlib.Z_SYNC_FLUSH))

            async def write_eof() -> None:
                await raw_write(zipper.flush())
                await web.StreamResponse.write_eof(response)
        else:
            write, write_eof = response.write, response.write_eof
        try:
            await response.prepare(request)
            if s.drip_seconds:
                for k in range(len(head)):
                    await write(head[k:k + 1])
                    await asyncio.sleep(s.drip_seconds)
            else:
                await write(head)
            block = b" " * (1024 * 1024)
            left = s.pad_bytes
            while left > 0:
                await write(block[:left])
                left -= len(block)
            if s.drip_seconds:
                for k in range(len(tail)):
                    await write(tail[k:k + 1])
                    await asyncio.sleep(s.drip_seconds)
            else:
                await write(tail)
            await write_eof()
        except (ConnectionResetError, ConnectionError, RuntimeError):
            with self._lock:
                self._aborted += 1
        return response

    def _reply(self, body: dict[str, Any], messages: list[Any], s: Settings) -> dict[str, Any]:
        texts, images = _texts(messages)
        content = json.dumps(gullible_judgement_for(texts) if s.gullible else judgement_for(texts))
        prompt_tokens = sum(math.ceil(len(t) / 4) for t in texts) + IMAGE_TOKENS * images
        completion_tokens = math.ceil(len(content) / 4)
        reply = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or s.model,
            "system_fingerprint": "fp_bench",
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }
        tags = {tag for text in texts for tag in TAG.findall(text)}
        with self._lock:
            self._completed += 1
            self._status_counts[200] = self._status_counts.get(200, 0) + 1
            self._last = time.monotonic()
            for tag in tags:
                self._by_tag[tag] = self._by_tag.get(tag, 0) + 1
        return reply

    async def _models(self, request: web.Request) -> web.Response:
        model = self.settings.model
        return web.json_response({"object": "list", "data": [
            {"id": model, "object": "model", "created": 0, "owned_by": "framejudge-bench"}]})

    async def _admin_stats(self, request: web.Request) -> web.Response:
        return web.json_response(self.stats())

    async def _admin_configure(self, request: web.Request) -> web.Response:
        try:
            changes = await request.json()
            if not isinstance(changes, dict):
                raise TypeError("the body must be a JSON object of settings")
            new = self.configure(**changes)
        except (ValueError, TypeError) as e:
            return _error(400, str(e))
        return web.json_response(asdict(new))

    async def _admin_reset(self, request: web.Request) -> web.Response:
        self.reset()
        return web.json_response({"reset": True})


# ---------------------------------------------------------------- command line

def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port (printed on the ready line)")
    p.add_argument("--latency", type=float, default=0.0, help="seconds before each completion")
    p.add_argument("--rate-limit", type=float, default=None, help="requests per second (default: none)")
    p.add_argument("--rate-burst", type=float, default=1.0, help="token-bucket capacity")
    p.add_argument("--overload-for", type=float, default=None, help="answer 429 for this many seconds")
    p.add_argument("--overload-retry-after", type=float, default=1.0)
    p.add_argument("--hang", action="store_true", help="never answer")
    p.add_argument("--close-connections", action="store_true", help="drop connections unanswered")
    p.add_argument("--status-error", type=int, default=None, help="answer this HTTP status instead")
    p.add_argument("--status-error-rate", type=float, default=1.0)
    p.add_argument("--model", default=Settings.model)
    p.add_argument("--gullible", action="store_true",
                   help="obey what the answers say about their grade, and take the rubric's second category")
    return p.parse_args(argv)


async def _main(args: argparse.Namespace) -> None:
    options = vars(args)
    server = ModelServer(options.pop("host"), options.pop("port"), **options)
    await server.serve()
    print(f"ready {server.base_url}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.close()


def main(argv: list[str] | None = None) -> None:
    asyncio.run(_main(_parse(argv)))


if __name__ == "__main__":
    main()
