"""The judges a process may use, from a judges file (or defaults), each built with the gate of
its model endpoint. One `Judges` per event loop: the CLI's run, an API server, a worker."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import yaml
from pydantic import ValidationError

from .. import config
from ..backends import calls_server, parse
from ..endpoint import Endpoint, EndpointState
from ..errors import FramejudgeError
from ..files import first_problem, line_of, parse_yaml_model, plain_problem, read_text
from ..judge import Judge, JudgeSpecError, make_judge
from ..schema import JudgeConfig, JudgesFile, ServiceTier

JUDGES_FILE_ENV = config.name("FRAMEJUDGE_JUDGES_FILE")


class JudgesFileError(FramejudgeError, ValueError):
    """A judges file that cannot be used; the message names the file, line and field."""

    code = "invalid_judges_file"


def load_judges_file(path: str | os.PathLike[str]) -> list[JudgeConfig]:
    text = read_text(path, "judges", JudgesFileError)
    source = str(path)

    def entries_apart(data: dict, root: yaml.Node) -> None:
        """A judge listed twice, named at its second entry's line (the model's own check of the
        same rule cannot say where in the file it is), and options that would do nothing: a judge
        that runs in this process (reference, transformers) has no endpoint, key, pace or price."""
        entries = data.get("judges")
        seen: dict[str, int] = {}
        for i, entry in enumerate(entries if isinstance(entries, list) else []):
            spec = entry.get("spec") if isinstance(entry, dict) else None
            if not isinstance(spec, str):
                continue
            if spec in seen:
                raise JudgesFileError(f"{source}:{line_of(root, ('judges', i, 'spec'))}: judges.{i}.spec: judge "
                                      f"{spec!r} is listed twice (first as judges.{seen[spec]})")
            seen[spec] = i
            try:
                backend, _ = parse(spec)
            except JudgeSpecError:
                continue  # the model's own check names it
            unused = [k for k in entry if k != "spec" and k in JudgeConfig.model_fields]
            if not backend.capabilities.calls_server and unused:
                raise JudgesFileError(f"{source}:{line_of(root, ('judges', i, unused[0]))}: judges.{i}.{unused[0]}: "
                                      f"does nothing for {spec!r}: the {backend.name} judge runs in this process "
                                      "and calls no model server (no endpoint, key, pace or price); remove it")

    return parse_yaml_model(text, source, JudgesFile, JudgesFileError,
                            "a judges file is a mapping with a 'judges' list", check=entries_apart).judges


def judge_endpoint(spec: str, bases: dict[str, str | None], default_base: str | None) -> str:
    """Where a judge's calls go, as a process configures it: a litellm judge's entry's api_base,
    else the default (FRAMEJUDGE_API_BASE, --api-base), else '' (the provider's own endpoint);
    '' for a judge that calls no endpoint (the reference judge, a local model)."""
    if not calls_server(spec):
        return ""
    base = bases.get(spec) or default_base or ""
    if not base:
        return ""
    # one endpoint however it is written: the scheme and host in any case, a trailing slash or not
    parts = urlsplit(base)
    user, at, host = parts.netloc.rpartition("@")
    return urlunsplit((parts.scheme.lower(), user + at + host.lower(), parts.path.rstrip("/"), parts.query, ""))


class Judges:
    """Judge configurations by spec, and one adaptive Endpoint per model endpoint."""

    def __init__(self, configs: list[JudgeConfig] | None = None, api_base: str | None = None,
                 defaults: JudgeConfig | None = None) -> None:
        """`api_base` (FRAMEJUDGE_API_BASE, --api-base) is used by a litellm judge without an entry;
        `defaults` are the endpoint settings of judges without an entry."""
        self.configs = {c.spec: c for c in configs or []}
        self.api_base = api_base
        self.defaults = defaults
        self._endpoints: dict[tuple[str, str | None], Endpoint] = {}
        self._made: dict[str, Judge] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, path: str | os.PathLike[str] | None = None) -> Judges:
        """From `path`, else the file named by FRAMEJUDGE_JUDGES_FILE (if any), with FRAMEJUDGE_API_BASE."""
        path = path or config.get(JUDGES_FILE_ENV) or None
        configs = load_judges_file(Path(path)) if path else []
        return cls(configs, api_base=config.get("FRAMEJUDGE_API_BASE") or None)

    def require_listed(self, spec: str) -> None:
        """A run given a judges file uses only the judges it lists (and the reference judge, which
        needs no entry); JudgeSpecError naming the ones it has otherwise."""
        if self.configs and spec not in self.configs and spec != "reference":
            raise JudgeSpecError(f"judge {spec!r} is not in the judges file (it has: {', '.join(self.configs)})")

    def config(self, spec: str) -> JudgeConfig:
        found = self.configs.get(spec)
        if found is not None:
            return found
        base = self.defaults.model_dump(exclude={"spec", "api_base"}) if self.defaults else {}
        try:  # the common base is for litellm judges (the others call no server)
            return JudgeConfig(spec=spec, api_base=self.api_base if calls_server(spec) else None, **base)
        except ValidationError as exc:
            where = "api_base (--api-base, FRAMEJUDGE_API_BASE): " if exc.errors()[0]["loc"] == ("api_base",) else ""
            raise JudgeSpecError(where + plain_problem(exc)) from None

    def override(self, spec: str, concurrency: int | None, max_concurrency: int | None,
                 service_tier: ServiceTier | None = None, batch_bucket: str | None = None) -> None:
        """One run's --concurrency / --max-concurrency (and --service-tier, --batch-bucket) over the
        file's (or the default) values; one given alone moves the other as far as needed to stay
        consistent."""
        config = self.config(spec)
        update: dict[str, object] = {} if batch_bucket is None else {"batch_bucket": batch_bucket}
        if service_tier is not None:
            if not calls_server(spec):
                raise JudgeSpecError(f"--service-tier {service_tier.value}: the {spec} judge calls no model server")
            config = config.model_copy(update={"service_tier": service_tier})
        start = config.concurrency if concurrency is None else concurrency
        top = config.max_concurrency if max_concurrency is None else max_concurrency
        if max_concurrency is None:
            top = max(top, start)
        elif concurrency is None:
            start = min(start, top)
        try:
            self.configs[spec] = JudgeConfig.model_validate({**config.model_dump(), "concurrency": start,
                                                             "max_concurrency": top, **update})
        except ValidationError as exc:
            raise JudgeSpecError(first_problem(exc, "concurrency" if batch_bucket is None else "--batch-bucket", names={
                "concurrency": "--concurrency", "max_concurrency": "--max-concurrency",
                "batch_bucket": "--batch-bucket"})) from None

    def described(self) -> dict[str, object]:
        """What decides where this process's judges send their calls (no keys, no limits): the
        judges file's endpoints by spec and the default one. judge_endpoint reads it back."""
        return {"api_base": self.api_base, "judges": {spec: c.api_base for spec, c in self.configs.items()}}

    def endpoint_of(self, spec: str) -> str:
        """Where this process's judge for `spec` sends its calls (judge_endpoint): a job records the
        server's, and a worker grades it only where its own is the same."""
        return judge_endpoint(spec, {s: c.api_base for s, c in self.configs.items()}, self.api_base)

    def endpoint(self, config: JudgeConfig) -> Endpoint:
        key = (config.spec, config.api_base or self.api_base)
        found = self._endpoints.get(key)
        if found is None:
            found = Endpoint(config.spec, initial=config.concurrency, maximum=config.max_concurrency,
                             requests_per_minute=config.requests_per_minute,
                             tokens_per_minute=config.tokens_per_minute)
            self._endpoints[key] = found
        return found

    def make(self, spec: str) -> Judge:
        """The judge for `spec`, made once per process (a local model loads once); a judge that
        calls a server gets its endpoint's gate."""
        with self._lock:
            judge = self._made.get(spec)
            if judge is None:
                config = self.config(spec)
                judge = make_judge(spec, self.api_base, config)
                if hasattr(judge, "gate"):
                    judge.gate = self.endpoint(config)
                self._made[spec] = judge
            return judge

    def warm(self) -> list[str]:
        """Make every judge of the judges file now (imports, model loads), before any work is
        taken; the problems of those that cannot be made, as 'spec: why'."""
        problems = []
        for spec in self.configs:
            try:
                self.make(spec)
            except JudgeSpecError as exc:
                problems.append(f"{spec}: {exc}")
        return problems

    def endpoints(self) -> list[Endpoint]:
        return list(self._endpoints.values())

    def states(self) -> list[EndpointState]:
        return [e.state() for e in self._endpoints.values()]
