"""Request limits: per-key rate limits, and body sizes checked before (or while) a body is read."""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request

from .problems import ProblemError, problem


class RateLimiter:
    """A token bucket per API key: `per_minute` requests, refilled continuously."""

    def __init__(self, per_minute: int) -> None:
        self.rate = per_minute / 60.0
        self.capacity = float(per_minute)
        self.buckets: dict[str, tuple[float, float]] = {}
        self.lock = threading.Lock()

    def take(self, key: str) -> float | None:
        """None if allowed, else seconds until a request would be."""
        now = time.monotonic()
        with self.lock:
            tokens, last = self.buckets.get(key, (self.capacity, now))
            tokens = min(self.capacity, tokens + (now - last) * self.rate)
            if tokens >= 1:
                self.buckets[key] = (tokens - 1, now)
                return None
            self.buckets[key] = (tokens, now)
            return (1 - tokens) / self.rate


class BodyLimit:
    """413 for request bodies over `limit` bytes, before the app reads them. Paths in `own_limits`
    stream their bodies and enforce their own limits (uploads, job submissions)."""

    def __init__(self, app: Any, limit: int, own_limits: tuple[str, ...]) -> None:
        self.app, self.limit, self.own_limits = app, limit, own_limits

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] in self.own_limits:
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None:
            if not declared.isdigit() or int(declared) > self.limit:
                return await self._too_large(scope, receive, send)
            return await self.app(scope, receive, send)
        chunks, total, more = [], 0, True  # chunked: buffer up to the limit, then replay
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunks.append(message.get("body", b""))
            total += len(chunks[-1])
            if total > self.limit:
                return await self._too_large(scope, receive, send)
            more = message.get("more_body", False)
        body = b"".join(chunks)

        async def replay() -> dict:
            nonlocal body
            if body is None:
                return await receive()
            message, body = {"type": "http.request", "body": body, "more_body": False}, None
            return message

        return await self.app(scope, replay, send)

    async def _too_large(self, scope: dict, receive: Any, send: Any) -> None:
        response = problem(413, "Body too large", f"request bodies are limited to {self.limit // 1024**2} MiB")
        await response(scope, receive, send)


async def capped_stream(request: Request, limit: int) -> AsyncIterator[bytes]:
    """The request body as it arrives, with 413 once it passes `limit` bytes."""
    too_large = ProblemError(413, "Body too large", f"this request is limited to {limit / 1024**2:.0f} MiB")
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise too_large
    total = 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > limit:
            raise too_large
        yield chunk
