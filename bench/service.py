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
import time
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=10_000, help="HTTP requests in all (half per scenario)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--quick", action="store_true", help="1,000 requests")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
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
        server.terminate()
        server.wait(timeout=60)
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
