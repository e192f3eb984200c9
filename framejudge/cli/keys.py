"""framejudge keys: the HTTP service's API keys."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from .console import fail, out
from .service_config import service_database, service_settings

keys_app = typer.Typer(help="API keys for the HTTP service.", no_args_is_help=True)


@keys_app.command("create")
def keys_create(
    scope: Annotated[list[str], typer.Option("--scope", help="grade, calibrate, review, metrics or admin (repeatable)")] = ["grade"],  # noqa: B006
    name: Annotated[str, typer.Option(help="who or what the key is for")] = "",
) -> None:
    """Create an API key; it is printed once (only its hash is stored)."""
    from ..service.store import create_key

    try:
        key = create_key(service_database(service_settings().database_url), scope, name)
    except ValueError as exc:
        fail(str(exc))
    print(key)


@keys_app.command("list")
def keys_list() -> None:
    """List API keys (ids, names, scopes; never secrets)."""
    from ..service.store import list_keys

    engine = service_database(service_settings().database_url)
    table = Table()
    for col in ("id", "name", "scopes", "created", "state"):
        table.add_column(col)
    for k in list_keys(engine):
        table.add_row(k.id, k.name, k.scopes, k.created_at.strftime("%Y-%m-%d %H:%M"),
                      "revoked" if k.revoked else "active")
    out.print(table)


@keys_app.command("revoke")
def keys_revoke(key_id: Annotated[str, typer.Argument(help="the key's id, as `keys list` shows it, or the whole key "
                                                              "(its secret must match)")]) -> None:
    """Revoke an API key: requests with it are refused (401) from then on."""
    from ..service.store import revoke_key

    revoked = revoke_key(service_database(service_settings().database_url), key_id)
    if revoked is None:
        fail(f"no API key with id {key_id.split('_', 2)[1] if key_id.startswith('fj_') else key_id!r}")
    print(f"revoked {revoked}")
