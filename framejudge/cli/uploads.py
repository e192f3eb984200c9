"""framejudge uploads: the videos the HTTP service keeps."""

from __future__ import annotations

from typing import Annotated

import typer

from .service_config import service_database, service_settings

uploads_app = typer.Typer(help="Videos uploaded to (or fetched by) the HTTP service.", no_args_is_help=True)


@uploads_app.command("prune")
def uploads_prune(
    older_than_days: Annotated[float | None, typer.Option(
        min=0, max=36500, show_default=False,
        help="remove uploads and cached frames older than this many days (at most 36500, a hundred years); "
             "default: FRAMEJUDGE_UPLOAD_RETENTION_DAYS, else 7")] = None,
) -> None:
    """Delete old uploads that no unfinished job and no stored calibration or review queue names,
    and old cached frames (verdicts are kept); say how many of each went, and their size. Run it
    from cron, or set FRAMEJUDGE_UPLOAD_RETENTION_DAYS and the server runs it once an hour."""
    from datetime import timedelta

    from ..frame_sampler.cache import default_cache_dir
    from ..service.maintenance import apply_retention

    settings = service_settings()
    assert settings.upload_dir is not None
    days = older_than_days if older_than_days is not None else settings.upload_retention_days or 7.0
    engine = service_database(settings.database_url)
    pruned = apply_retention(engine, settings.upload_dir, timedelta(days=days), default_cache_dir())
    print(f"{pruned.summary()} (older than {days:g} days)")
    if pruned.kept:
        print(f"kept {len(pruned.kept)} old upload(s) that an unfinished job or a stored calibration (a review "
              "queue's unit pages show its videos) still names")
