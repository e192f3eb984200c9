"""framejudge keys: the HTTP service's API keys."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated

import typer
from rich.table import Table

from .console import fail, out
from .service_config import service_database, service_settings

keys_app = typer.Typer(help="API keys for the HTTP service.", no_args_is_help=True)


DURATION = re.compile(r"(\d+)\s*([smhdw])")
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def duration(text: str) -> timedelta:
    """'90d', '12h', '30m', '2w', '45s', or several together ('1d12h')."""
    given = text.strip().lower()
    parts = DURATION.findall(given)
    if not parts or DURATION.sub("", given).strip():
        raise typer.BadParameter(f"{text!r} is not a duration: give a number and a unit (s, m, h, d or w), "
                                 "such as 90d, 12h or 1d12h")
    total = sum((timedelta(**{UNITS[unit]: int(n)}) for n, unit in parts), timedelta())
    if total <= timedelta(0):
        raise typer.BadParameter(f"{text!r}: a key's lifetime must be longer than nothing")
    if total > timedelta(days=36500):
        raise typer.BadParameter(f"{text!r}: at most 100 years (leave --expires-in out for a key that never expires)")
    return total


@keys_app.command("create")
def keys_create(
    scope: Annotated[list[str], typer.Option("--scope", help="grade, calibrate, review, metrics or admin (repeatable)")] = ["grade"],  # noqa: B006
    name: Annotated[str, typer.Option(help="who or what the key is for")] = "",
    expires_in: Annotated[str | None, typer.Option(
        "--expires-in", metavar="DURATION",
        help="the key expires this long from now (90d, 12h, 30m, 2w, 1d12h): refused from then on, as a revoked key "
             "is, and its unfinished jobs are stopped; default: never")] = None,
) -> None:
    """Create an API key; it is printed once (only its hash is stored)."""
    from ..service.store import create_key

    try:
        lifetime = duration(expires_in) if expires_in is not None else None
    except typer.BadParameter as exc:
        fail(f"--expires-in: {exc}")
    try:
        key = create_key(service_database(service_settings().database_url), scope, name, lifetime)
    except ValueError as exc:
        fail(str(exc))
    print(key)


@keys_app.command("list")
def keys_list() -> None:
    """List API keys (ids, names, scopes, when they expire, state; never secrets)."""
    from ..service.store import aware, key_state, list_keys

    engine = service_database(service_settings().database_url)
    table = Table()
    for col in ("id", "name", "scopes", "created", "expires", "state"):
        table.add_column(col)
    for k in list_keys(engine):
        table.add_row(k.id, k.name, k.scopes, aware(k.created_at).strftime("%Y-%m-%d %H:%M"),
                      aware(k.expires_at).strftime("%Y-%m-%d %H:%M") if k.expires_at else "never", key_state(k))
    out.print(table)


@keys_app.command("revoke")
def keys_revoke(key_id: Annotated[str, typer.Argument(help="the key's id, as `keys list` shows it, or the whole key "
                                                              "(its secret must match)")]) -> None:
    """Revoke an API key: requests with it are refused (401) from then on, and its unfinished jobs
    are cancelled (no worker takes another of their items; those being graded are stopped and not
    recorded). Says how many jobs and items it stopped."""
    from ..service.store import revoke_key

    revoked = revoke_key(service_database(service_settings().database_url), key_id)
    if revoked is None:
        fail(f"no API key with id {key_id.split('_', 2)[1] if key_id.startswith('fj_') else key_id!r}")
    stopped = revoked.stopped
    print(f"revoked {revoked.key_id}: stopped {stopped.jobs} unfinished job(s), cancelling {stopped.pending} item(s) "
          f"not started and {stopped.running} being graded")
