"""framejudge uploads: the videos the HTTP service keeps."""

from __future__ import annotations

from typing import Annotated

import typer

from .service_config import service_database, service_settings

uploads_app = typer.Typer(help="Videos uploaded to (or fetched by) the HTTP service.", no_args_is_help=True)


@uploads_app.command("prune")
def uploads_prune(
    older_than_days: Annotated[float, typer.Option(min=0, max=36500, help="delete uploads older than this many days "
                                                                          "(at most 36500, a hundred years)")] = 7.0,
) -> None:
    """Delete old uploads that no unfinished job and no stored calibration or review queue names
    (run it from cron)."""
    from datetime import timedelta

    from ..service.maintenance import prune_uploads

    settings = service_settings()
    assert settings.upload_dir is not None
    engine = service_database(settings.database_url)
    pruned = prune_uploads(engine, settings.upload_dir, timedelta(days=older_than_days))
    deleted = pruned.deleted
    print(f"deleted {len(deleted)} upload(s), {sum(u.bytes for u in deleted) / 1024**2:.1f} MiB")
    if pruned.kept:
        print(f"kept {len(pruned.kept)} old upload(s) that an unfinished job or a stored calibration (a review "
              "queue's unit pages show its videos) still names")
