"""Every FRAMEJUDGE_* environment variable, declared once: its name, what it holds, its default, what
it does and which commands read it. The CLI's options take their `envvar` from here, the service's
settings take their variables from here, the few reads elsewhere go through `get`, and the
documentation's table of variables is `markdown()`. A variable that is not declared here cannot be
read (`get` and `name` raise KeyError), and a test checks that the package names no other."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Variable:
    name: str
    holds: str  # what its value is: a path, a URL, a number of seconds, a switch, a comma-separated list
    default: str  # as the user sees it
    does: str
    read_by: tuple[str, ...]  # commands (`grade`, `serve`, ...) and `library` for any use of the package
    setting: str | None = None  # the service's setting it sets (framejudge.service.settings.Settings)


SERVICE = ("serve", "worker", "keys", "uploads")  # the commands that open the service's database and settings
GRADING = ("grade", "leaderboard", "align")

VARIABLES: tuple[Variable, ...] = (
    # what grading reads, from the CLI or the service
    Variable("FRAMEJUDGE_JUDGE", "a judge spec", "reference", "the judge of a run, as --judge", GRADING),
    Variable("FRAMEJUDGE_RUBRIC", "a rubric id or file", "video-qa", "the rubric of a run, as --rubric", GRADING),
    Variable("FRAMEJUDGE_JUDGES_FILE", "a path", "none",
             "the judges file (YAML): each judge's endpoint, key variable, concurrency, rate limits, timeout and "
             "price; as --judges, and the service's judges", (*GRADING, *SERVICE), "judges_file"),
    Variable("FRAMEJUDGE_API_BASE", "a URL (http:// or https://)", "none",
             "the OpenAI-compatible server of litellm judges without a judges-file entry; as --api-base",
             (*GRADING, *SERVICE), "api_base"),
    Variable("FRAMEJUDGE_BATCH_BUCKET", "a Cloud Storage location (gs://BUCKET[/PREFIX])", "none",
             "where a Vertex AI judge's batch run (grade --batch) keeps its requests and results; as --batch-bucket",
             ("grade",)),
    Variable("FRAMEJUDGE_MAX_REPLY_MB", "a number of MiB", "8",
             "the largest body a model server's reply may have (counted as it is read, decompressed): a larger one "
             "fails the call as backend_error; a batch run's results file may hold this much per request",
             ("library",)),
    Variable("FRAMEJUDGE_PROGRESS_SECONDS", "a number of seconds", "5",
             "how often a run that grades says how far it is (phase, turns done, rate, errors), and only when "
             "something changed: a plain line on standard error where it is not a terminal (a file, a CI log; a "
             "terminal keeps its live bar), and an INFO record of the `framejudge.progress` logger from the Python "
             "API; 0: no such lines", (*GRADING, "library")),
    Variable("FRAMEJUDGE_RUBRICS", "folders, separated by the path separator", "none",
             "extra folders of rubric files", ("library",)),
    Variable("FRAMEJUDGE_CACHE_DIR", "a path", "the user cache folder",
             "where the frame, screen-read and verdict caches and the copies of objects (s3://, gs://) live", ("library",)),
    Variable("FRAMEJUDGE_NO_CACHE", "a switch (1/0, true/false, yes/no, on/off)", "off",
             "turns the on-disk frame and screen-read caches off, and keeps a copy of an object only while it is decoded", ("library",)),
    Variable("FRAMEJUDGE_OBJECT_CACHE_MB", "a number of MiB", "10240",
             "the most the node-local copies of videos read from s3:// and gs:// URLs may take (in the cache "
             "folder's `objects`; least recently used removed first)", ("library",)),
    Variable("FRAMEJUDGE_S3_ENDPOINT", "a URL (https://host[:port]; http:// only to a loopback address)",
             "AWS S3", "the S3-compatible endpoint s3:// videos are read from (an item's URL names only the bucket "
             "and key); its host must resolve to public or loopback addresses", ("library",)),
    Variable("FRAMEJUDGE_S3_REGION", "an S3 region", "the bucket's own (looked up), or AWS's configuration's",
             "the region s3:// videos are read in", ("library",)),
    Variable("FRAMEJUDGE_GCS_ENDPOINT", "a URL (https://host[:port]; http:// only to a loopback address)",
             "Google Cloud Storage", "the Cloud Storage endpoint gs:// videos are read from; its host must "
             "resolve to public or loopback addresses", ("library",)),
    Variable("FRAMEJUDGE_STORAGE_ALLOW_PRIVATE", "a switch", "off",
             "allow FRAMEJUDGE_S3_ENDPOINT and FRAMEJUDGE_GCS_ENDPOINT on private and link-local addresses "
             "(an internal object store; plain http stays loopback only)", ("library",)),
    Variable("FRAMEJUDGE_SHARED", "a path", "../shared beside the checkout",
             "the folder of the guideline examples and reference data (`bench/`, `--shared`)", ("bench",)),
    # the service
    Variable("FRAMEJUDGE_SERVICE_DB", "a database URL", "SQLite in the user data folder",
             "the service's database: a SQLite file (sqlite:///path) or PostgreSQL (postgresql://...)",
             SERVICE, "database_url"),
    Variable("FRAMEJUDGE_SERVICE_JUDGES", "a comma-separated list of judge specs", "reference",
             "the judges clients may ask for (with those of the judges file)", ("serve", "worker"), "judges"),
    Variable("FRAMEJUDGE_SERVICE_WORKER", "a switch", "on",
             "grade submitted jobs in the server's own process (off: only `framejudge worker` processes do)",
             ("serve",), "run_worker"),
    Variable("FRAMEJUDGE_MEDIA_ROOT", "a path", "none", "server-side video paths must lie inside this folder",
             SERVICE, "media_root"),
    Variable("FRAMEJUDGE_UPLOAD_DIR", "a path", "'uploads' beside the SQLite file, else the user data folder",
             "where uploaded and fetched videos are kept", SERVICE, "upload_dir"),
    Variable("FRAMEJUDGE_MAX_UPLOAD_MB", "a number of MiB", "2048", "the largest video one upload or fetch may be",
             ("serve",), "max_upload_bytes"),
    Variable("FRAMEJUDGE_UPLOAD_QUOTA_MB", "a number of MiB", "51200",
             "how much of uploaded and fetched videos one API key may keep (then 413)", ("serve",), "upload_quota_mb"),
    Variable("FRAMEJUDGE_UPLOAD_QUOTA_FILES", "a whole number", "10000",
             "how many uploaded and fetched videos one API key may keep (then 413)", ("serve",), "upload_quota_files"),
    Variable("FRAMEJUDGE_UPLOAD_RETENTION_DAYS", "a number of days", "none (kept until deleted)",
             "uploaded and fetched videos and cached frames older than this are removed (by the server once an "
             "hour, and by `uploads prune`); verdicts are kept", ("serve", "uploads"), "upload_retention_days"),
    Variable("FRAMEJUDGE_CORS_ORIGINS", "a comma-separated list of origins", "none (closed)",
             "browser origins allowed to call the API", ("serve",), "cors_origins"),
    Variable("FRAMEJUDGE_RATE_LIMIT", "a whole number", "120", "requests per minute per API key", ("serve",),
             "requests_per_minute"),
    Variable("FRAMEJUDGE_URL_HOSTS", "a comma-separated list of hosts ('*.example.com' for subdomains, "
             "'host:port' for another port than 80/443)", "none (URL inputs are off)",
             "hosts video URLs may be fetched from; a host without a port allows only ports 80 (http) and 443 "
             "(https)", SERVICE, "url_hosts"),
    Variable("FRAMEJUDGE_URL_ALLOW_PRIVATE", "a switch", "off",
             "allow allow-listed hosts on private addresses (an internal media server)", SERVICE,
             "url_allow_private"),
    Variable("FRAMEJUDGE_URL_DEADLINE", "seconds", "300",
             "a whole URL fetch (DNS, redirects and body) must finish within this", SERVICE, "url_deadline_s"),
    Variable("FRAMEJUDGE_DECODE_WORKERS", "a whole number", "2",
             "processes that decode videos (killable, memory-capped)", SERVICE, "decode_workers"),
    Variable("FRAMEJUDGE_DECODE_TIMEOUT", "seconds", "120", "per video sampling, in a decoding process", SERVICE,
             "decode_timeout_s"),
    Variable("FRAMEJUDGE_DECODE_MEMORY_MB", "a number of MiB", "4096", "resident-memory cap per decoding process",
             SERVICE, "decode_memory_mb"),
    Variable("FRAMEJUDGE_MAX_FRAME_MEGAPIXELS", "a number", "64",
             "pixels one request may have decoded (frames x max_side x max_side)", ("serve",),
             "max_frame_megapixels"),
    Variable("FRAMEJUDGE_MAX_FRAMES_RESPONSE_MB", "a number of MiB", "64", "the most a /v1/frames answer may hold",
             ("serve",), "max_frames_response_mb"),
    Variable("FRAMEJUDGE_MAX_CALIBRATION_DRAWS", "a whole number", "1000000",
             "labelled turns x bootstrap replicates one /v1/calibrate request may compute", ("serve",),
             "max_calibration_draws"),
    Variable("FRAMEJUDGE_BODY_TIMEOUT", "seconds", "60", "how long a request's body may take to arrive (then 408)",
             ("serve",), "body_timeout_s"),
    Variable("FRAMEJUDGE_LEASE_SECONDS", "seconds", "60",
             "how long a worker's claim on an item lasts without a heartbeat", ("serve", "worker"), "lease_s"),
    Variable("FRAMEJUDGE_WORKER_IN_FLIGHT", "a whole number", "256", "items one worker grades at once, at most",
             ("serve", "worker"), "worker_max_in_flight"),
    Variable("FRAMEJUDGE_REVIEW_SESSION_MINUTES", "minutes", "480", "how long a signed-in review page stays signed in",
             ("serve",), "review_session_minutes"),
    Variable("FRAMEJUDGE_REVIEW_COOKIE_SECURE", "auto, on or off", "auto",
             "the review cookies' Secure flag: auto sets it for HTTPS requests (seen by this server, or told by a "
             "trusted proxy)", ("serve",), "review_cookie_secure"),
    Variable("FRAMEJUDGE_REVIEW_FIGURES_WAIT", "seconds", "0.25",
             "how long a review queue page waits for its figures to refresh before showing the latest, marked stale",
             ("serve",), "review_figures_wait_s"),
    Variable("FRAMEJUDGE_LOG_LEVEL", "debug, info, warning or error", "warning",
             "the events `serve` and `worker` log on standard error; info adds jobs taken up and finished to the "
             "warnings (endpoint cuts and Retry-After pauses, leases lost); as --log-level", ("serve", "worker")),
    Variable("FRAMEJUDGE_LOG_JSON", "a switch", "off", "log JSON lines (one object per event); as --log-json",
             ("serve", "worker")),
    Variable("FRAMEJUDGE_TRUSTED_PROXIES", "a comma-separated list of addresses or networks, or 'none'",
             "127.0.0.1,::1", "the reverse proxies whose X-Forwarded-For and X-Forwarded-Proto are believed",
             ("serve",), "trusted_proxies"),
)

BY_NAME = {v.name: v for v in VARIABLES}
SERVICE_SETTINGS = {v.name: v.setting for v in VARIABLES if v.setting}  # variable -> the service's setting


def name(variable: str) -> str:
    """`variable`, which must be declared here (for Typer's `envvar=` and messages)."""
    return BY_NAME[variable].name


def get(variable: str, default: str | None = None) -> str | None:
    """The value of a declared variable (KeyError for one that is not declared)."""
    return os.environ.get(name(variable), default)


def markdown() -> str:
    """The table of variables for the documentation."""
    rows = ["| Variable | Value | Default | What it does | Read by |", "|---|---|---|---|---|"]
    for v in VARIABLES:
        rows.append(f"| `{v.name}` | {v.holds} | {v.default} | {v.does} | {', '.join(v.read_by)} |")
    return "\n".join(rows) + "\n"
