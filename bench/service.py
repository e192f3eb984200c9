"""HTTP service benchmark: POST /v1/grade through a real uvicorn server against the same grading
called in-process, in the same run.

    python bench/service.py [--requests 10000] [--concurrency 8] [--quick] [--out bench/results]

The server (`framejudge serve`) runs in its own process with a throwaway SQLite database and
cache folder; this process is the load generator, on loopback. Two scenarios:
  reference  the reference judge on a distinct item per request (nothing cached)
  cached     a model judge (litellm) whose verdicts are in the verdict cache: one warm-up request
             fills it, and no measured request reaches the model (checked: the model endpoint's
             call count does not move). The model endpoint is bench/model_server.py on
             loopback (no latency), since no model API is reachable here.
Each scenario is measured twice over HTTP: one client at a time (latency p50/p99, compared with
the in-process call, as overhead in ms and a ratio) and `--concurrency` clients (requests per
second, compared with the in-process calls per second). Half of `--requests` goes to each
scenario. The server's resident memory is read from /proc after start-up, after warm-up, and
after all requests.

    python bench/service.py --stall [--items 100000] [--units 20000] [--postgres] [--out bench/results]

The stall mode asks whether one large request holds the server: while a probe client asks
GET /healthz every 10 ms (a new connection each time), one client submits a job of `--items` items (POST
/v1/jobs, about 150 bytes of JSON per item; 100,000 is the per-job limit) and then a calibration
of `--units` labelled units against as many verdicts (POST /v1/calibrate, 50 bootstrap replicates,
within the default FRAMEJUDGE_MAX_CALIBRATION_DRAWS). The server's own worker is off, so what is
measured is the submission alone. Reported: each request's time, and the /healthz latencies
(worst, p99, count) while it was in flight. `--postgres` uses a throwaway PostgreSQL server
(bench/postgres.py) instead of SQLite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.model_server import ModelServer  # noqa: E402

MODEL = "litellm:openai/bench-judge"


def item(k: int) -> dict:
    return {"id": f"b{k}", "turns": [{"question": "What bird is this?", "golden": "A grey heron.",
                                      "response_a": f"A grey heron, number {k}.", "response_b": "A mallard duck."}]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def http_load(base: str, key: str, bodies: list[dict], concurrency: int) -> tuple[list[float], float]:
    """Latencies (s) of every request and the wall time, `concurrency` clients on keep-alive connections."""
    latencies: list[float] = []
    queue = list(reversed(bodies))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {key}"}, limits=limits,
                                 timeout=60) as client:
        async def one_client() -> None:
            while queue:
                body = queue.pop()
                start = time.perf_counter()
                response = await client.post("/v1/grade", json=body)
                latencies.append(time.perf_counter() - start)
                if response.status_code != 200 or response.json()["records"][0]["record"] != "verdict":
                    raise SystemExit(f"unexpected answer {response.status_code}: {response.text[:300]}")

        start = time.perf_counter()
        await asyncio.gather(*(one_client() for _ in range(concurrency)))
        return latencies, time.perf_counter() - start


def in_process(spec: str, bodies: list[dict]) -> tuple[list[float], float]:
    """The same grading called as a library: one Grader, one call at a time."""
    from framejudge.judge import GradeOptions, Grader, make_judge
    from framejudge.rubrics import get_rubric
    from framejudge.schema import Item, SamplerParams

    grader = Grader(make_judge(spec), get_rubric("video-qa"), GradeOptions(sampler=SamplerParams(n=8)))
    items = [Item.model_validate(b["item"]) for b in bodies]
    latencies = []

    async def run() -> None:
        for it in items:
            start = time.perf_counter()
            records = await grader.grade(it)
            latencies.append(time.perf_counter() - start)
            assert records[0].record == "verdict", records[0]

    start = time.perf_counter()
    asyncio.run(run())
    return latencies, time.perf_counter() - start


def summarize(name: str, http_seq: list[float], http_conc: tuple[list[float], float],
              lib: tuple[list[float], float], concurrency: int) -> dict:
    conc_lat, conc_wall = http_conc
    lib_lat, lib_wall = lib
    p50_http, p50_lib = statistics.median(http_seq) * 1000, statistics.median(lib_lat) * 1000
    rps = len(conc_lat) / conc_wall
    lib_rate = len(lib_lat) / lib_wall
    return {
        "scenario": name, "requests": len(http_seq) + len(conc_lat),
        "http_p50_ms": round(p50_http, 2), "http_p99_ms": round(float(np.percentile(http_seq, 99)) * 1000, 2),
        "library_p50_ms": round(p50_lib, 3), "library_p99_ms": round(float(np.percentile(lib_lat, 99)) * 1000, 3),
        "overhead_ms": round(p50_http - p50_lib, 2), "latency_ratio": round(p50_http / p50_lib, 1),
        "concurrency": concurrency, "http_rps": round(rps, 1),
        "http_p50_ms_concurrent": round(statistics.median(conc_lat) * 1000, 2),
        "http_p99_ms_concurrent": round(float(np.percentile(conc_lat, 99)) * 1000, 2),
        "library_calls_per_s": round(lib_rate, 1), "throughput_ratio": round(rps / lib_rate, 3),
    }


@contextmanager
def running_server(env: dict[str, str]):
    """`framejudge serve` on a free loopback port, answering /healthz; its base URL and its process."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "framejudge.cli", "serve", "--port", str(port)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            try:
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                if server.poll() is not None or time.time() > deadline:
                    raise SystemExit(server.stderr.read().decode()[-2000:]) from None
                time.sleep(0.1)
        yield base, server
    finally:
        server.terminate()
        server.wait(timeout=60)


class HealthProbe:
    """GET /healthz every `every` seconds, in a thread: each latency, with when it was sent."""

    def __init__(self, base: str, every: float = 0.01) -> None:
        self.base, self.every = base, every
        self.samples: list[tuple[float, float]] = []  # (sent at, seconds to answer)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        # a new connection each time, as a load balancer's health check makes (on a kept-alive one the
        # server's second write of an answer waits for the client's delayed ACK: 40 ms of nothing), and
        # plain sockets: what is timed is the server, not a client library's setup
        host, port = self.base.removeprefix("http://").split(":")
        while not self._stop.is_set():
            sent = time.perf_counter()
            with socket.create_connection((host, int(port)), timeout=120) as conn:
                conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n")
                answer = b""
                while chunk := conn.recv(65536):
                    answer += chunk
            if not answer.startswith(b"HTTP/1.1 200"):
                raise SystemExit(f"/healthz answered {answer[:100]!r}")
            self.samples.append((sent, time.perf_counter() - sent))
            self._stop.wait(self.every)

    def __enter__(self) -> HealthProbe:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def during(self, start: float, end: float) -> dict:
        """The latencies of the probes in flight at any time between start and end."""
        found = [lat for sent, lat in self.samples if sent <= end and sent + lat >= start]
        return {"healthz_probes": len(found), "healthz_worst_ms": round(max(found) * 1000, 1) if found else None,
                "healthz_p99_ms": round(float(np.percentile(found, 99)) * 1000, 1) if found else None}


def calibration_body(units: int) -> dict:
    """`units` labelled turns and a verdict for each (the reference judge's on one item, under many ids)."""
    from framejudge.judge import GradeOptions, Grader, make_judge
    from framejudge.rubrics import get_rubric
    from framejudge.schema import Item, SamplerParams

    grader = Grader(make_judge("reference"), get_rubric("video-qa"), GradeOptions(sampler=SamplerParams(n=8)))
    verdict = asyncio.run(grader.grade(Item.model_validate(item(0))))[0].model_dump(mode="json")
    labels, verdicts = [], []
    for k in range(units):
        verdicts.append({**verdict, "item_id": f"b{k}"})
        labels.append({"item_id": f"b{k}", "turn": 0, "annotator": "ann", "category_a": "Successful",
                       "category_b": "Not Successful" if k % 3 else "Successful", "preference": "A"})
    return {"labels": labels, "verdicts": verdicts, "replicates": 50}


def stall(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="framejudge-bench-"))
    postgres = None
    if args.postgres:
        from bench.postgres import PostgresServer, bin_dir

        found = bin_dir()
        if found is None:
            raise SystemExit("--postgres: no PostgreSQL binaries (initdb) here")
        postgres = PostgresServer(found)
    database = postgres.new_database() if postgres else f"sqlite:///{work / 'service.sqlite'}"
    env = {**os.environ, "FRAMEJUDGE_SERVICE_DB": database, "FRAMEJUDGE_RATE_LIMIT": "100000000",
           "FRAMEJUDGE_SERVICE_WORKER": "0", "FRAMEJUDGE_CACHE_DIR": str(work / "cache")}
    try:
        key = subprocess.run([sys.executable, "-m", "framejudge.cli", "keys", "create", "--scope", "grade",
                              "--scope", "calibrate"], env=env, capture_output=True, text=True, check=True).stdout.strip()
        job = json.dumps({"items": [item(k) for k in range(args.items)]}).encode()
        calibration = json.dumps(calibration_body(args.units)).encode()
        spans = []
        with running_server(env) as (base, _), HealthProbe(base) as probe, \
                httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}",
                                                     "Content-Type": "application/json"}, timeout=600) as client:
            time.sleep(2)  # probes before: the idle latency
            for name, path, body, status in (("job", "/v1/jobs", job, 202),
                                             ("calibration", "/v1/calibrate", calibration, 200)):
                start = time.perf_counter()
                response = client.post(path, content=body)
                end = time.perf_counter()
                if response.status_code != status:
                    raise SystemExit(f"{path}: {response.status_code} {response.text[:500]}")
                spans.append((name, len(body), start, end))
                time.sleep(0.3)
        # measured once the probe has stopped: a probe held until after the request is counted too
        idle = [lat for sent, lat in probe.samples if sent + lat < spans[0][2]]  # before the first request
        results = [{"request": name, "size": args.items if name == "job" else args.units,
                    "body_mb": round(size / 1024**2, 1), "request_s": round(end - start, 2),
                    **probe.during(start, end)} for name, size, start, end in spans]
    finally:
        if postgres is not None:
            postgres.stop()
    report = {"cpus": os.cpu_count(), "database": "postgresql" if postgres else "sqlite",
              "idle_healthz_ms": round(statistics.median(idle) * 1000, 1),
              "idle_healthz_worst_ms": round(max(idle) * 1000, 1), "load_average": os.getloadavg()[0],
              "results": results}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"service-stall-{report['database']}.json").write_text(json.dumps(report, indent=2))
    print(f"database: {report['database']}; /healthz idle: {report['idle_healthz_ms']} ms median, "
          f"{report['idle_healthz_worst_ms']} ms worst; load average {report['load_average']:.1f}")
    print("| request | size | body MB | request s | /healthz probes | worst ms | p99 ms |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['request']} | {r['size']} | {r['body_mb']} | {r['request_s']} | {r['healthz_probes']} | "
              f"{r['healthz_worst_ms']} | {r['healthz_p99_ms']} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=10_000, help="HTTP requests in all (half per scenario)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--quick", action="store_true", help="1,000 requests")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--stall", action="store_true", help="whether one large request holds /healthz (see above)")
    parser.add_argument("--items", type=int, default=100_000, help="--stall: items in the job")
    parser.add_argument("--units", type=int, default=20_000, help="--stall: labelled units in the calibration")
    parser.add_argument("--postgres", action="store_true", help="--stall: on PostgreSQL instead of SQLite")
    args = parser.parse_args()
    if args.stall:
        return stall(args)
    total = 1000 if args.quick else args.requests
    per_mode = max(10, total // 4)  # per scenario: sequential and concurrent

    work = Path(tempfile.mkdtemp(prefix="framejudge-bench-"))
    stub = ModelServer().start()  # answers at once; counts what reaches it
    env = {**os.environ, "FRAMEJUDGE_SERVICE_DB": f"sqlite:///{work / 'service.sqlite'}",
           "FRAMEJUDGE_RATE_LIMIT": "100000000", "FRAMEJUDGE_SERVICE_JUDGES": f"reference,{MODEL}",
           "FRAMEJUDGE_CACHE_DIR": str(work / "cache" / "frames"), "OPENAI_BASE_URL": stub.base_url,
           "OPENAI_API_KEY": "bench", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    os.environ.update({k: env[k] for k in ("FRAMEJUDGE_CACHE_DIR", "OPENAI_BASE_URL", "OPENAI_API_KEY",
                                           "LITELLM_LOCAL_MODEL_COST_MAP")})
    key = subprocess.run([sys.executable, "-m", "framejudge.cli", "keys", "create", "--scope", "grade"], env=env,
                         capture_output=True, text=True, check=True).stdout.strip()
    try:
        with running_server(env) as (base, server):
            memory = {"after_start_mb": round(rss_mb(server.pid), 1)}

            ref_bodies = [{"item": item(k), "judge": "reference"} for k in range(2 * per_mode)]
            cached_body = {"item": item(0), "judge": MODEL}
            # warm-up: both judges loaded, the model's verdict (both orders) in the cache
            asyncio.run(http_load(base, key, ref_bodies[:20] + [cached_body] * 5, 1))
            model_calls = stub.stats()["requests"]
            memory["after_warmup_mb"] = round(rss_mb(server.pid), 1)

            results = []
            for name, bodies in (("reference", ref_bodies), ("cached", [cached_body] * (2 * per_mode))):
                sequential, _ = asyncio.run(http_load(base, key, bodies[:per_mode], 1))
                concurrent = asyncio.run(http_load(base, key, bodies[per_mode:], args.concurrency))
                library = in_process(bodies[0]["judge"], bodies[:per_mode])
                results.append(summarize(name, sequential, concurrent, library, args.concurrency))
            reached = stub.stats()["requests"] - model_calls
            if reached:
                raise SystemExit(f"the cached scenario reached the model {reached} times")
            memory["after_all_mb"] = round(rss_mb(server.pid), 1)
            memory["requests_served"] = 25 + sum(r["requests"] for r in results)
    finally:
        calls = stub.stats()["requests"]
        stub.stop()

    report = {"cpus": os.cpu_count(), "model_calls": calls, "results": results, "server_memory": memory}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "service.json").write_text(json.dumps(report, indent=2))
    print(f"| scenario | HTTP p50 / p99 ms (1 client) | library p50 / p99 ms | overhead ms | ratio | "
          f"HTTP req/s ({args.concurrency} clients) | library calls/s | throughput ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['scenario']} | {r['http_p50_ms']} / {r['http_p99_ms']} | {r['library_p50_ms']} / "
              f"{r['library_p99_ms']} | {r['overhead_ms']} | {r['latency_ratio']}x | {r['http_rps']} | "
              f"{r['library_calls_per_s']} | {r['throughput_ratio']} |")
    print(f"server RSS: {memory['after_start_mb']} MB after start, {memory['after_warmup_mb']} MB after warm-up, "
          f"{memory['after_all_mb']} MB after {memory['requests_served']} requests")


if __name__ == "__main__":
    main()
