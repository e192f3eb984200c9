"""Signing a browser in: the API key is given once, on the sign-in form; the browser then holds an
HttpOnly, SameSite=Strict session cookie whose token the database knows only by its hash. Every
form that changes something carries the session's CSRF token; sessions expire."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta
from posixpath import normpath
from urllib.parse import quote, unquote, urlsplit

from fastapi import Request, Response
from sqlalchemy.engine import Engine

from ..forwarded import over_https
from ..problems import ProblemError
from ..store import ApiKey, holds, key_by_id
from .store import SessionRow, close_session, find_session, open_session

COOKIE = "framejudge_review"
SIGN_IN_COOKIE = "framejudge_signin"  # the sign-in form's own CSRF token (double submit)
PATH = "/review"
REVIEW_SCOPES = ("review", "admin")


@dataclass
class Reviewer:
    key: ApiKey
    session: SessionRow

    @property
    def csrf(self) -> str:
        return self.session.csrf


class SignInNeeded(Exception):
    """No session, an expired one, or one whose key was revoked: the browser goes to sign in."""

    def __init__(self, next_path: str, expired: bool) -> None:
        super().__init__(next_path)
        self.next_path, self.expired = next_path, expired


class CsrfRefused(Exception):
    """A form that changes something came without this session's CSRF token."""


def may_review(key: ApiKey) -> bool:
    return any(s in key.scopes.split(",") for s in REVIEW_SCOPES)


def reviewers_problem(engine: Engine, key_ids: list[str]) -> str | None:
    """Why these key ids cannot be named as a calibration's reviewers (None when they can): each
    must be a valid key that may review, named once."""
    for i, key_id in enumerate(key_ids):
        if key_id in key_ids[:i]:
            return (f"reviewers.{i}: key id {key_id[:100]!r} is already named (reviewers.{key_ids.index(key_id)}); "
                    "name each reviewer once")
        key = key_by_id(engine, key_id)
        if key is None:
            return (f"reviewers: no valid API key with id {key_id[:100]!r} "
                    "(give key ids as `framejudge keys list` shows them)")
        if not may_review(key):
            return f"reviewers: API key {key_id} lacks the 'review' scope (it could not sign in to review)"
    return None


def reviewer(request: Request) -> Reviewer:
    """The signed-in reviewer of this request (a dependency of every review page)."""
    svc = request.app.state.service
    token = request.cookies.get(COOKIE)
    next_path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    if request.method != "GET":
        next_path = PATH
    if not token:
        raise SignInNeeded(next_path, expired=False)
    row = find_session(svc.engine, token)
    key = key_by_id(svc.engine, row.key_id) if row is not None else None
    if row is None or key is None or not may_review(key):
        raise SignInNeeded(next_path, expired=True)
    return Reviewer(key=key, session=row)


class SignedIn:
    """A dependency of every review page that needs a reviewer: the signed-in reviewer (a session
    of a live key with the review scope, or admin), whose key must also hold each of `also` (403,
    saying `why`). `scopes` and `also` are what the API reference's table says, checked by a test."""

    scopes = ("review",)

    def __init__(self, *also: str, why: str = "") -> None:
        self.also, self.why = also, why

    def __call__(self, request: Request) -> Reviewer:
        who = reviewer(request)
        for scope in self.also:
            if not holds(who.key, scope):
                raise ProblemError(403, "Forbidden", self.why or f"this API key lacks the '{scope}' scope")
        return who


def check_csrf(who: Reviewer, given: str | None) -> None:
    if not given or not secrets.compare_digest(given, who.csrf):
        raise CsrfRefused()


def secure_cookies(request: Request) -> bool:
    """Whether the review cookies carry Secure (FRAMEJUDGE_REVIEW_COOKIE_SECURE: auto, on, off); auto:
    for a request over HTTPS, as this server sees it or as a trusted proxy says."""
    svc = request.app.state.service
    setting = svc.settings.review_cookie_secure
    return setting == "on" or (setting == "auto" and over_https(request, svc.trusted_proxies))


def start_session(request: Request, response: Response, key: ApiKey) -> None:
    svc = request.app.state.service
    minutes = svc.settings.review_session_minutes
    if request.cookies.get(COOKIE):  # a new token on every sign-in, and the one the browser held ends
        close_session(svc.engine, request.cookies[COOKIE])
    token = open_session(svc.engine, key.id, timedelta(minutes=minutes))
    secure = secure_cookies(request)
    response.set_cookie(COOKIE, token, max_age=int(minutes * 60), path=PATH, httponly=True, samesite="strict",
                        secure=secure)
    response.delete_cookie(SIGN_IN_COOKIE, path=PATH, secure=secure, httponly=True, samesite="strict")


def new_sign_in_token() -> str:
    return secrets.token_urlsafe(24)


def set_sign_in_cookie(request: Request, response: Response, token: str) -> None:
    """The sign-in form's token is also set as a short-lived cookie the form's post must match."""
    response.set_cookie(SIGN_IN_COOKIE, token, max_age=3600, path=PATH, httponly=True, samesite="strict",
                        secure=secure_cookies(request))


def sign_in_url(next_path: str, expired: bool) -> str:
    return f"{PATH}/sign-in?next={quote(next_path, safe='')}" + ("&expired=1" if expired else "")


def safe_next(next_path: str | None) -> str:
    """Where to go after signing in: only a path of the review pages (never another site, nor a
    path that leaves them by '..' or that a browser would read otherwise: backslashes, control
    characters)."""
    if not next_path or "\\" in next_path or any(ord(c) < 32 or ord(c) == 127 for c in next_path):
        return PATH
    parts = urlsplit(next_path)
    path = unquote(parts.path)
    if parts.scheme or parts.netloc or normpath(path) != path.rstrip("/") or path.startswith("//") \
            or not (path == PATH or path.startswith(PATH + "/")):
        return PATH
    return next_path
