"""Service settings: one pydantic model, from the environment (FRAMEJUDGE_SERVICE_*) or code."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import platformdirs
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from .. import config
from ..env import cache_off
from ..errors import FramejudgeError
from ..schema.decoding import DecodeMemoryMB, DecodeTimeout, DecodeWorkers



def _data_dir() -> Path:
    return Path(platformdirs.user_data_dir("framejudge"))


def _default_db() -> str:
    return f"sqlite:///{_data_dir() / 'service.db'}"


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


class Settings(BaseModel):
    database_url: str = Field(default_factory=_default_db, description="SQLite file (WAL) or a PostgreSQL URL")
    media_root: Path | None = Field(None, description="server-side video paths must lie inside this folder")
    judges: list[str] = Field(default_factory=lambda: ["reference"], description="judge specs clients may ask for")
    cors_origins: list[str] = Field(default_factory=list, description="closed unless listed")
    requests_per_minute: int = Field(120, ge=1, description="per API key")
    run_worker: bool = Field(True, description="grade submitted jobs in this process")
    upload_dir: Path | None = Field(None, description="server-managed folder for uploaded and fetched videos; "
                                                      "default: 'uploads' beside the SQLite file, else the user data folder")
    max_upload_bytes: int = Field(2 * 1024**3, ge=1, description="per video, uploaded or fetched")
    max_files_per_request: int = Field(64, ge=1)
    upload_quota_mb: float = Field(51_200.0, gt=0, le=1e9, allow_inf_nan=False,
                                   description="MiB of uploaded and fetched videos one API key may keep")
    upload_quota_files: int = Field(10_000, ge=1, le=10_000_000,
                                    description="uploaded and fetched videos one API key may keep")
    upload_retention_days: float | None = Field(None, gt=0, le=36_500, allow_inf_nan=False,
                                                description="uploaded and fetched videos, and cached frames, are "
                                                            "removed this many days after they were stored (a "
                                                            "video an unfinished job or a stored calibration names "
                                                            "is kept); none: kept until deleted")
    url_hosts: list[str] = Field(default_factory=list,
                                 description="hosts video URLs may be fetched from ('*.example.com' for subdomains, "
                                             "'host:port' for a port other than 80/443); empty: URL inputs are off")
    url_allow_private: bool = Field(False, description="allow allow-listed hosts on private addresses "
                                                       "(an internal media server); off by default")
    url_timeout_s: float = Field(30.0, gt=0, allow_inf_nan=False, description="per connect or read of a URL fetch")
    url_deadline_s: float = Field(300.0, gt=0, le=86_400, allow_inf_nan=False,
                                  description="a whole URL fetch (DNS, redirects and body) must finish within this")
    decode_workers: DecodeWorkers = 2
    decode_timeout_s: DecodeTimeout = 120.0
    decode_memory_mb: DecodeMemoryMB = 4096
    max_urls_per_request: int = Field(100, ge=1)
    max_frame_megapixels: float = Field(64.0, gt=0, le=100_000, allow_inf_nan=False,
                                        description="pixels one request may have decoded: frames x max_side x "
                                                    "max_side (and a contact sheet's own), for previews and grading")
    max_frames_response_mb: float = Field(64.0, gt=0, le=100_000, allow_inf_nan=False,
                                          description="the most a /v1/frames answer may hold, estimated before "
                                                      "decoding from frames x pixels x quality")
    max_calibration_draws: int = Field(1_000_000, ge=1, description="labelled turns x bootstrap replicates one "
                                       "/v1/calibrate request may compute (its time grows with both)")
    judges_file: Path | None = Field(None, description="judges file (YAML): each judge's endpoint, key variable, "
                                                       "concurrency, rate limits, timeout, price")
    api_base: str | None = Field(None, description="OpenAI-compatible server for litellm judges without an entry "
                                                   "(http:// or https://)")
    lease_s: float = Field(60.0, le=3600, allow_inf_nan=False, description="how long a worker's claim on an item lasts "
                           "without a heartbeat (a dead worker's items wait this long); at least 3 heartbeats of 1 s")
    review_session_minutes: float = Field(480.0, gt=0, le=60 * 24 * 30, allow_inf_nan=False,
                                          description="how long a signed-in review page stays signed in")
    review_figures_wait_s: float = Field(0.25, ge=0, le=60, allow_inf_nan=False,
                                         description="how long a review queue page waits for its figures to refresh "
                                                     "before it shows the latest ones, marked stale")
    worker_max_in_flight: int = Field(256, ge=1, le=10_000, description="items one worker grades at once, at most")
    review_cookie_secure: Literal["auto", "on", "off"] = Field(
        "auto", description="the review cookies' Secure flag: auto sets it for HTTPS requests (seen by this "
                            "server, or told by a trusted proxy's X-Forwarded-Proto); on always; off never")
    trusted_proxies: list[str] = Field(default_factory=lambda: ["127.0.0.1", "::1"],
                                       description="addresses or networks of the reverse proxies whose "
                                                   "X-Forwarded-For and X-Forwarded-Proto are believed")
    body_timeout_s: float = Field(60.0, gt=0, le=3600, allow_inf_nan=False,
                                  description="the longest a request body may stop arriving (between two of its "
                                              "parts) before the request is answered 408")

    @field_validator("lease_s")
    @classmethod
    def _lease(cls, value: float) -> float:
        from ..runner.worker import lease_problem

        problem = lease_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("upload_dir")
    @classmethod
    def _upload_folder(cls, value: Path | None) -> Path | None:
        if value is not None and value.exists() and not value.is_dir():
            raise ValueError(f"{value} is not a folder")
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies(cls, value: list[str]) -> list[str]:
        import ipaddress

        if value == ["none"]:
            return []
        for entry in value:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(f"{entry!r} is not an IP address or network (give 10.0.0.5, 10.0.0.0/8, ::1, "
                                 "or 'none')") from None
        return value

    @field_validator("judges")
    @classmethod
    def _judge_specs(cls, value: list[str]) -> list[str]:
        from ..backends import check_spec

        for spec in value:
            check_spec(spec)
        return value

    @field_validator("api_base")
    @classmethod
    def _server_address(cls, value: str | None) -> str | None:
        from ..schema import http_base

        return http_base(value)

    @field_validator("url_hosts")
    @classmethod
    def _host_names(cls, value: list[str]) -> list[str]:
        from ..net import host_rule

        return [str(host_rule(host)) for host in value]

    @model_validator(mode="after")
    def _upload_dir(self) -> Settings:
        if self.upload_dir is None:
            if self.database_url.startswith("sqlite:///"):
                self.upload_dir = Path(self.database_url.removeprefix("sqlite:///")).parent / "uploads"
            else:
                self.upload_dir = _data_dir() / "uploads"
        return self

    @classmethod
    def from_env(cls) -> Settings:
        """From FRAMEJUDGE_* variables; a bad value raises SettingsError naming the variable."""
        env = os.environ
        data: dict[str, object] = {}
        for var, name in ENV.items():
            if env.get(var):
                data[name] = _csv(env[var]) if name in LISTS else env[var]  # pydantic converts and checks
        if env.get("FRAMEJUDGE_MAX_UPLOAD_MB"):
            try:
                data["max_upload_bytes"] = int(float(env["FRAMEJUDGE_MAX_UPLOAD_MB"]) * 1024**2)
            except (ValueError, OverflowError):  # nan, inf
                raise SettingsError("FRAMEJUDGE_MAX_UPLOAD_MB: not a number of megabytes") from None
        try:  # the decoding processes read it: a value that is neither on nor off is refused here
            cache_off()
        except ValueError as exc:
            raise SettingsError(str(exc)) from None
        root = env.get("FRAMEJUDGE_MEDIA_ROOT")
        if root and not Path(root).is_dir():  # a server started on it would refuse every path
            why = f"{root} is not a folder" if Path(root).exists() else f"{root}: no such folder"
            raise SettingsError(f"FRAMEJUDGE_MEDIA_ROOT: {why}")
        try:
            return cls(**data)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = str(err["loc"][0]) if err["loc"] else ""
            var = {v: k for k, v in ENV.items()}.get(field, "FRAMEJUDGE_MAX_UPLOAD_MB" if field == "max_upload_bytes"
                                                     else field or "settings")
            raise SettingsError(f"{var}: {err['msg'].removeprefix('Value error, ')}") from None


class SettingsError(FramejudgeError, ValueError):
    """A FRAMEJUDGE_* variable with a value the service cannot use; the message names it."""

    code = "invalid_setting"


# variable -> setting, from the one table of variables (framejudge.config); values are converted and
# checked by the Settings model itself; FRAMEJUDGE_MAX_UPLOAD_MB is given in MiB, converted in from_env
ENV = {var: field for var, field in config.SERVICE_SETTINGS.items() if field != "max_upload_bytes"}
LISTS = {"judges", "cors_origins", "url_hosts", "trusted_proxies"}  # comma-separated
