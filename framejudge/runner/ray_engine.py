"""Grading on a Ray cluster (`framejudge grade --engine ray`): the same records, resume rules and
endpoint limits as a local run, with decoding and grading spread over the cluster's machines.

How a run goes:

- the driver (this process) plans the run exactly as a local one (`resume.plan_resume` and
  `apply_plan`: the turns without a standing verdict, superseded verdicts moved apart) and cuts
  the work into shards of items;
- a pool of **decoding actors** (one CPU each) samples frames and cuts clips, each through its own
  `IsolatedSampler` (killable decoding processes with a time limit and a memory cap); Ray restarts
  a decoding actor that dies, and the decode it had in hand is asked again;
- a pool of **grading actors** (async, no CPU reserved: they wait on the model) grades shard after
  shard with the local engine itself (`local.run_batch` over the ordinary `Grader`), so a
  verdict is made by the same judge and pipeline code as locally; each finished item's records
  stream back to the driver;
- one **endpoint controller** per model endpoint (an async actor holding the endpoint's
  `Endpoint`: the AIMD limit, pacing, Retry-After, requests and tokens per minute) gives every
  grading actor's calls their places, so the whole cluster stays within the judges file's
  maximum and backs off together;
- the driver alone writes the output: each record is appended (one line, flushed) as it arrives,
  and a turn already recorded by this run is never written twice. A grading actor that dies hands
  its shard back: the turns it had not recorded are graded by a fresh actor. Judge errors are
  records, as locally, and a rerun grades only what has no standing verdict.

Objects in storage (s3://, gs://) are read by the actors with the driver's object storage settings
(FRAMEJUDGE_S3_ENDPOINT and the rest, handed to each actor), never with a node's own nor an item's.

Ray is an optional extra (`pip install '.[ray]'`), imported only when a run asks for it.
A local cluster started here listens on loopback only.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import os
import socket
import threading
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..endpoint import Endpoint, EndpointBusy, EndpointState, Slot
from ..errors import FramejudgeError
from ..frame_sampler.objects import storage_settings
from ..judge.batch import GradeSummary
from ..judge.pipeline import Grader
from ..records import Record
from ..rubrics.model import Rubric
from ..schema import DecodeLimits, GradeOptions, Item, JudgeConfig, SamplerParams
from .judges import Judges
from .resume import ResumePlan, apply_plan

INSTALL = "pip install '.[ray]'"
MAX_REPLACED = 3  # grading actors replaced per actor of the run before it gives up
LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # "0": Ray's own processes take 127.0.0.1 as the node's address


class RayUnavailable(FramejudgeError, RuntimeError):
    """`--engine ray` without Ray installed, or a cluster that cannot be reached."""

    code = "ray_unavailable"


def on_loopback(address: str | None) -> bool:
    """Whether a run at `address` stays on this machine's loopback: a local cluster started by the
    run (None), or one joined at 127.x, localhost or ::1 (Ray would otherwise take the machine's
    address for the loopback one it was given)."""
    if address is None:
        return True
    host = urlsplit(address if "://" in address else "//" + address).hostname or ""
    return host == "localhost" or host == "::1" or host.startswith("127.")


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """RayUnavailable at once where nothing listens at a HOST:PORT or ray://HOST:PORT address (Ray
    itself retries for minutes); "auto" is left to Ray."""
    if address == "auto":
        return
    parts = urlsplit(address if "://" in address else "//" + address)
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if not host or not port:
        raise RayUnavailable(f"--address {address}: not auto, HOST:PORT or ray://HOST:PORT")
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as exc:
        raise RayUnavailable(f"--address {address}: no Ray cluster answers there ({exc.strerror or exc})") from None


def import_ray(local: bool = False) -> Any:
    """The ray module, or RayUnavailable saying how to install it. `local`: the run starts a local
    cluster, which is then to listen on loopback only (decided when ray is first imported)."""
    if local:
        loopback_only()
    try:
        import ray
    except ImportError:
        raise RayUnavailable(f"the ray engine needs Ray, which is not installed: {INSTALL}") from None
    return ray


@dataclass
class RaySettings:
    """Where and how wide a run goes on Ray."""

    address: str | None = None  # None: a local cluster on loopback; "auto", "HOST:PORT" or "ray://HOST:PORT"
    graders: int = 2  # grading actors
    decoders: int | None = None  # decoding actors (None: one per CPU of a local cluster, else 2)
    shard_items: int | None = None  # items per shard (None: chosen from the run's size)
    local_cpus: int | None = None  # CPUs of a local cluster started here (None: the machine's)


@dataclass
class GraderSetup:
    """What a grading actor needs to make the run's Grader in its own process."""

    spec: str
    configs: list[JudgeConfig]
    api_base: str | None
    defaults: JudgeConfig | None
    rubric: Rubric
    options: GradeOptions
    media_root: Path | None


@dataclass
class RayProgress:
    """Where a Ray run stands (the CLI's progress line)."""

    done: int = 0
    in_flight: int = 0  # shards in hand
    errors: int = 0
    restarted: int = 0  # grading actors that died and were replaced
    limit: int | None = None
    calls: int | None = None
    pace: float | None = None


def setup_of(grader: Grader, judges: Judges, spec: str) -> GraderSetup:
    """What the grading actors need to make `grader` again (its judge from `judges`)."""
    return GraderSetup(spec=spec, configs=[judges.config(spec)], api_base=judges.api_base, defaults=judges.defaults,
                       rubric=grader.rubric, options=grader.options, media_root=grader.media_root)


# ---------------------------------------------------------------- the endpoint, cluster-wide


class EndpointController:
    """The Endpoint of one model endpoint, for the whole cluster (run as one async Ray actor).

    A grading actor's call asks `acquire` for a place (held until `release` reports the attempt's
    outcome), so the limit, the pause and the pace are the endpoint's, not each actor's. Places
    are named by the caller's request id: a request given up before its place came (`release`
    first) gives the place back when it comes, and `drop_owner` gives back every place of an
    actor that died."""

    def __init__(self, name: str, initial: int, maximum: int, requests_per_minute: float | None,
                 tokens_per_minute: float | None) -> None:
        self.endpoint = Endpoint(name, initial=initial, maximum=maximum, requests_per_minute=requests_per_minute,
                                 tokens_per_minute=tokens_per_minute)
        self._held: dict[str, tuple[Any, Slot, str]] = {}  # request id -> (context, slot, owner)
        self._given_up: set[str] = set()
        self.peak = 0

    def _news(self) -> dict[str, Any]:
        e = self.endpoint
        return {"limit": e.limit, "paused_for": e.state().paused_for_s, "in_flight": e.in_flight, "pace": e.pace}

    async def acquire(self, request: str, owner: str, tokens: int, wait_s: float) -> dict[str, Any]:
        place = self.endpoint.slot(tokens, wait_s)
        try:
            slot = await place.__aenter__()
        except EndpointBusy as exc:
            self._given_up.discard(request)
            return {"busy": str(exc), "limited": exc.limited, **self._news()}
        self.peak = max(self.peak, self.endpoint.in_flight)
        if request in self._given_up:  # the caller stopped waiting before the place came
            self._given_up.discard(request)
            await place.__aexit__(asyncio.CancelledError, asyncio.CancelledError(), None)
            return {"busy": "given up", "limited": False, **self._news()}
        self._held[request] = (place, slot, owner)
        return self._news()

    async def release(self, request: str, outcome: str | None, retry_after: float | None = None,
                      rate_limited: bool = False) -> dict[str, Any]:
        """`outcome`: success, overload or failure; None: the call was cancelled (no signal)."""
        held = self._held.pop(request, None)
        if held is None:
            self._given_up.add(request)
            return self._news()
        place, slot, _ = held
        if outcome is None:
            await place.__aexit__(asyncio.CancelledError, asyncio.CancelledError(), None)
        else:
            slot.outcome, slot.retry_after, slot.rate_limited = outcome, retry_after, rate_limited
            await place.__aexit__(None, None, None)
        return self._news()

    async def drop_owner(self, owner: str) -> int:
        """Give back the places held by `owner` (a grading actor that died); how many."""
        mine = [r for r, (_, _, o) in self._held.items() if o == owner]
        for request in mine:
            await self.release(request, None)
        return len(mine)

    async def state(self) -> tuple[EndpointState, int]:
        return self.endpoint.state(), self.peak


class EndpointProxy:
    """The gate a grading actor's judge calls through: each place comes from the endpoint's
    controller. `limit` is the share of the endpoint's limit this actor keeps items in flight for."""

    def __init__(self, controller: Any, name: str, owner: str, share: int) -> None:
        self.controller = controller
        self.name = name
        self.owner = owner
        self.share = max(1, share)
        self._limit = 1
        self._paused_until = 0.0
        self.in_flight = 0
        self.pace: float | None = None

    @property
    def limit(self) -> int:
        return max(1, math.ceil(self._limit / self.share))

    def _learn(self, news: dict[str, Any]) -> None:
        loop = asyncio.get_running_loop()
        self._limit = news["limit"]
        self._paused_until = loop.time() + news["paused_for"]
        self.pace = news["pace"]

    def paused(self) -> bool:
        return self._paused_until > asyncio.get_running_loop().time()

    @asynccontextmanager
    async def slot(self, tokens: int = 0, wait_s: float = float("inf")) -> AsyncIterator[Slot]:
        request = uuid.uuid4().hex
        try:
            news = await self.controller.acquire.remote(request, self.owner, tokens, wait_s)
        except asyncio.CancelledError:
            self.controller.release.remote(request, None)  # the place, if it comes, goes back
            raise
        self._learn(news)
        if "busy" in news:
            raise EndpointBusy(news["busy"], limited=news["limited"])
        slot = Slot()
        self.in_flight += 1
        try:
            yield slot
        except asyncio.CancelledError:
            self.controller.release.remote(request, None)
            raise
        except BaseException:
            if slot.outcome == "success":  # an exception nobody classified
                slot.failed()
            self._learn(await self.controller.release.remote(request, slot.outcome, slot.retry_after,
                                                             slot.rate_limited))
            raise
        finally:
            self.in_flight -= 1
        self._learn(await self.controller.release.remote(request, slot.outcome, slot.retry_after, slot.rate_limited))


# ---------------------------------------------------------------- decoding


class DecodeWorker:
    """One decoding actor: an IsolatedSampler (killable decoding processes, time limit, memory cap).
    A sampler error comes back as a value, so the grading actor raises it as itself."""

    def __init__(self, limits: DecodeLimits, storage: dict[str, str] | None = None) -> None:
        from ..frame_sampler import IsolatedSampler
        from ..frame_sampler.objects import use_storage_settings

        if storage is not None:  # the driver's object storage settings, before any decoding process starts
            use_storage_settings(storage)
        self.sampler = IsolatedSampler(workers=1, timeout_s=limits.timeout_s, max_memory_mb=limits.memory_mb)

    def sample(self, path: str, params: SamplerParams, jpeg_quality: int | None = None) -> Any:
        """The turn's frames; as JPEG at `jpeg_quality` (what the model call sends) where given."""
        from ..frame_sampler import FrameSamplerError

        try:
            result = self.sampler.sample(path, params)
        except FrameSamplerError as exc:
            return exc
        return result.encoded(jpeg_quality) if jpeg_quality is not None else result

    def cut(self, path: str, params: SamplerParams, fps: float, max_bytes: int) -> Any:
        from ..frame_sampler import FrameSamplerError

        try:
            return self.sampler.cut(path, params, fps, max_bytes)
        except FrameSamplerError as exc:
            return exc

    def pid(self) -> int:
        return os.getpid()


class RemoteDecodes:
    """A grader's sample and cut functions that decode on the decoding actors, in turn. With a
    `jpeg_quality` the frames come back as the JPEG a model call sends (EncodedFrame, a tenth of
    the pixels' size or less to carry between machines), else as pixels."""

    def __init__(self, decoders: list[Any], jpeg_quality: int | None = None) -> None:
        self._turns = itertools.cycle(decoders)
        self._lock = threading.Lock()
        self.jpeg_quality = jpeg_quality

    def _next(self) -> Any:
        with self._lock:
            return next(self._turns)

    def _get(self, ref: Any) -> Any:
        import ray

        result = ray.get(ref)
        if isinstance(result, Exception):
            raise result
        return result

    def sample(self, path: str | Path, params: SamplerParams) -> Any:
        return self._get(self._next().sample.remote(os.fspath(path), params, self.jpeg_quality))

    def cut(self, path: str | Path, params: SamplerParams, fps: float, max_bytes: int) -> Any:
        return self._get(self._next().cut.remote(os.fspath(path), params, fps, max_bytes))


# ---------------------------------------------------------------- grading


class GradeWorker:
    """One grading actor: the run's Grader, its judge's calls through the endpoint's controller and
    its decodes on the decoding actors; grades shards with the local engine (`run_batch`)."""

    def __init__(self, setup: GraderSetup, decoders: list[Any], controller: Any, owner: str, share: int,
                 prefetch: int, storage: dict[str, str] | None = None) -> None:
        from ..frame_sampler.objects import use_storage_settings
        from .decode import SharedDecodes

        if storage is not None:  # the driver's: an object's metadata is read here
            use_storage_settings(storage)

        judges = Judges(setup.configs, api_base=setup.api_base, defaults=setup.defaults)
        judge = judges.make(setup.spec)
        if controller is not None and isinstance(getattr(judge, "gate", None), Endpoint):
            setattr(judge, "gate", EndpointProxy(controller, setup.spec, owner, share))  # noqa: B010
        # frames as JPEG, unless the judge reads their pixels (the reference judge's OCR): a model
        # call sends exactly the JPEG a local run makes, so verdicts are the same
        self.decodes = RemoteDecodes(decoders, None if getattr(judge, "reads_pixels", False)
                                     else setup.options.jpeg_quality)
        self.grader = Grader(judge, setup.rubric, setup.options, media_root=setup.media_root,
                             sample=SharedDecodes(self.decodes.sample), cut=self.decodes.cut)
        self.prefetch = prefetch

    def pid(self) -> int:
        return os.getpid()

    async def grade(self, shard: list[tuple[Item, set[int]]]) -> AsyncIterator[list[Record]]:
        """Grade the shard's turns; yields each item's records as the item finishes."""
        from .local import run_batch

        finished: asyncio.Queue[list[Record] | None] = asyncio.Queue()

        async def run() -> None:
            try:  # no file: the records go to the driver, which alone writes the run's output
                await run_batch(self.grader, [it for it, _ in shard], None, plan=ResumePlan(work=shard),
                                prefetch=self.prefetch, on_done=lambda _, records: finished.put_nowait(records))
            finally:
                finished.put_nowait(None)

        task = asyncio.create_task(run())
        try:
            while (records := await finished.get()) is not None:
                yield records
            await task  # a failure the pipeline did not turn into a record ends the shard with it
        finally:
            if not task.done():
                task.cancel()


# ---------------------------------------------------------------- the driver


def connect(ray: Any, settings: RaySettings) -> bool:
    """Join the cluster at `settings.address`, or start a local one on loopback; whether this
    process started it (and so shuts it down)."""
    if ray.is_initialized():
        return False
    if settings.address:
        check_reachable(settings.address)
        try:
            ray.init(address=settings.address, include_dashboard=False, configure_logging=False,
                     log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise RayUnavailable(f"--address {settings.address}: no Ray cluster could be reached ({exc})") from None
        return True
    ray.init(num_cpus=settings.local_cpus or os.cpu_count() or 1, include_dashboard=False,
             _node_ip_address="127.0.0.1", configure_logging=False, log_to_driver=False)
    return True


def loopback_only() -> None:
    """Before `import ray`: a local cluster's processes listen on 127.0.0.1 only (Ray otherwise
    takes the machine's address and listens on every interface)."""
    os.environ.setdefault(LOOPBACK_ENV, "0")


def shard_size(settings: RaySettings, items: int) -> int:
    if settings.shard_items:
        return settings.shard_items
    # about eight shards per grading actor: a dead actor hands little back, and the last shards
    # leave little tail; never more than 256 items in one
    return max(1, min(256, math.ceil(items / (8 * max(1, settings.graders)))))


@dataclass
class _Shard:
    work: list[tuple[Item, set[int]]]
    recorded: dict[str, set[int]] = field(default_factory=dict)  # turns this run wrote, by item


async def run_on_ray(grader: Grader, items: list[Item], out: Path, *, spec: str, setup: GraderSetup,
                     plan: ResumePlan, settings: RaySettings, decoding: DecodeLimits,
                     mark: Callable[[Record], Record] | None = None,
                     on_progress: Callable[[RayProgress], None] | None = None,
                     on_actors: Callable[[dict[str, list[Any]]], None] | None = None) -> GradeSummary:
    """Grade `plan.work` on Ray into `out` (see the module's docstring); the run's summary.
    `on_actors` is told the actors once they exist ({"graders": [...], "decoders": [...]})."""
    from ..judge.base import wants_frames
    from .local import summary_of, write_record

    ray = import_ray(local=on_loopback(settings.address))
    from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError

    out.parent.mkdir(parents=True, exist_ok=True)
    apply_plan(plan, out)
    if not plan.work:  # nothing to grade: no cluster to start
        return summary_of(items, out)
    started = connect(ray, settings)
    progress = RayProgress()
    actors: list[Any] = []
    try:
        cpus = int(ray.cluster_resources().get("CPU", 1))
        n_decoders = settings.decoders or (max(1, cpus) if settings.address is None else 2)
        wants = any(wants_frames(grader.judge, it, t) for it, skip in plan.work for t in range(len(it.turns))
                    if t not in skip)
        decoder_cls = ray.remote(num_cpus=1, max_restarts=-1, max_task_retries=2, max_concurrency=2)(DecodeWorker)
        # object storage is read on the nodes with the driver's settings (its endpoint, region), never the node's
        storage = storage_settings()
        decoders = [decoder_cls.remote(decoding, storage) for _ in range(n_decoders if wants else 0)]
        actors += decoders
        controller = None
        gate = getattr(grader.judge, "gate", None)
        if isinstance(gate, Endpoint):
            config = next((c for c in setup.configs if c.spec == spec), None)
            controller = ray.remote(num_cpus=0, max_concurrency=100_000)(EndpointController).remote(
                spec, gate.limit, gate.maximum, config.requests_per_minute if config else None,
                config.tokens_per_minute if config else None)
            actors.append(controller)
        grader_cls = ray.remote(num_cpus=0, max_concurrency=100_000)(GradeWorker)
        prefetch = 2

        def new_grader(k: int) -> tuple[Any, str]:
            owner = f"grader-{k}-{uuid.uuid4().hex[:8]}"
            actor = grader_cls.remote(setup, decoders, controller, owner, max(1, settings.graders), prefetch, storage)
            actors.append(actor)
            return actor, owner

        graders = [new_grader(k) for k in range(max(1, settings.graders))]
        if on_actors is not None:
            on_actors({"graders": [a for a, _ in graders], "decoders": decoders, "controller": [controller]})
        size = shard_size(settings, len(plan.work))
        shards = deque(_Shard(plan.work[i:i + size]) for i in range(0, len(plan.work), size))
        written: set[tuple[str, int]] = set()

        async def report() -> None:
            if controller is not None:
                state, _ = await controller.state.remote()
                progress.limit, progress.calls, progress.pace = state.limit, state.in_flight, state.pace_per_s
            if on_progress is not None:
                on_progress(progress)

        async def watch() -> None:
            while True:
                await report()
                await asyncio.sleep(0.5)

        with open(out, "a", encoding="utf-8") as f:

            def record(shard: _Shard, records: list[Record]) -> None:
                for r in records:
                    key = (r.item_id, r.turn)
                    shard.recorded.setdefault(r.item_id, set()).add(r.turn)
                    if key in written:  # a shard handed back after its actor died may finish a turn twice
                        continue
                    write_record(f, r, mark, progress)
                    written.add(key)

            async def feed(k: int) -> None:
                while shards:
                    shard = shards.popleft()
                    progress.in_flight += 1
                    actor, owner = graders[k]
                    try:
                        async for ref in actor.grade.remote(shard.work):
                            record(shard, await ref)
                    except (ActorDiedError, ActorUnavailableError, RayActorError) as exc:
                        # the actor is gone: the turns it had not recorded are graded again, its
                        # places at the endpoint go back, and a fresh actor takes its turn
                        rest = [(it, skip | shard.recorded.get(it.id, set())) for it, skip in shard.work]
                        rest = [(it, skip) for it, skip in rest if len(skip) < len(it.turns)]
                        if rest:
                            shards.appendleft(_Shard(rest))
                        if graders[k][0] is actor:  # the first of its shards to learn of it
                            if progress.restarted >= MAX_REPLACED * len(graders):
                                raise RayUnavailable(f"the grading actors died {progress.restarted + 1} times; is "
                                                     f"framejudge installed on every node? The last: {exc}") from None
                            if controller is not None:
                                await controller.drop_owner.remote(owner)
                            graders[k] = new_grader(k)
                            progress.restarted += 1
                    finally:
                        progress.in_flight -= 1

            watching = asyncio.create_task(watch())
            try:  # two shards per grading actor: the next one's items start while the last ones finish
                await asyncio.gather(*(feed(k) for k in range(len(graders)) for _ in range(2)))
            finally:
                watching.cancel()
            await report()
    finally:
        for actor in actors:
            try:
                ray.kill(actor)
            except Exception:  # already gone
                pass
        if started:
            ray.shutdown()
    return summary_of(items, out)
