"""Execution benchmark: the queue's cost as jobs grow, grading at a slow model's speed through the
CLI, one service process and two workers, and the adaptive controller under a rate limit.

    python bench/runner.py [--quick] [--out bench/results]

1. Queue cost. One `framejudge serve` process (SQLite, its own worker) grades jobs of 2,000,
   10,000 and 100,000 items with the reference judge (no model: what is measured is the queue);
   items per second from the 202 to the job's last item, against the same items graded in this
   process by the library with no queue (the ideal), and against the smallest job (flatness).
2. A slow model. bench/model_server.py answers every call after 0.5 s; 1,000 two-response items,
   swap on (2,000 calls), 32 calls in flight (the judges file's concurrency and maximum). Wall
   time of `framejudge grade`, of one service process, and of two `framejudge worker` processes
   (16 in flight each) on PostgreSQL, each against the ideal: calls x latency / 32. Reported
   twice: the whole command or job (start-up included) and the model server's busy period
   (first call received to last answered).
3. A rate limit. The model server answers 429 (with retry-after-ms) above R requests per second
   (a token bucket holding a quarter second's worth);
   the judge starts at 8 in flight with a maximum of 64 and must find the rate itself. Reported:
   the share of R it sustained over the busy period, the 429s it drew, and items that failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PY = sys.executable
JUDGE = "litellm:openai/bench"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _items(n: int, prefix: str = "i") -> list[dict]:
    return [{"id": f"{prefix}{k}", "turns": [{"question": f"[item {prefix}{k}] How many people are on the bench?",
                                               "golden": f"{k % 5} people.", "response_a": f"There are {k % 5} people.",
                                               "response_b": f"I see {(k + 1) % 5} people."}]} for k in range(n)]


class Proc:
    """A framejudge (or model server) process on loopback, stopped at the end."""

    def __init__(self, args: list[str], env: dict[str, str], ready_url: str | None = None,
                 ready_line: bool = False) -> None:
        self.proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE if ready_line else subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        if ready_line:
            line = self.proc.stdout.readline()  # type: ignore[union-attr]
            if not line.startswith("ready"):
                raise SystemExit(f"{args[1]} did not start: {self.proc.stderr.read()[-2000:]}")  # type: ignore[union-attr]
            self.url = line.split()[1]
        if ready_url:
            deadline = time.time() + 90
            while True:
                try:
                    httpx.get(ready_url, timeout=1)
                    break
                except httpx.HTTPError:
                    if self.proc.poll() is not None or time.time() > deadline:
                        raise SystemExit(f"{args} did not start: {self.proc.stderr.read()[-2000:]}") from None  # type: ignore[union-attr]
                    time.sleep(0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def _key(env: dict[str, str]) -> str:
    return subprocess.run([PY, "-m", "framejudge.cli", "keys", "create", "--scope", "grade"], env=env,
                          capture_output=True, text=True, check=True).stdout.strip()


def _serve(env: dict[str, str]) -> tuple[Proc, str]:
    port = _port()
    server = Proc([PY, "-m", "framejudge.cli", "serve", "--port", str(port)], env, f"http://127.0.0.1:{port}/healthz")
    return server, f"http://127.0.0.1:{port}"


def _run_job(base: str, key: str, items: list[dict], judge: str, options: dict | None = None,
             poll: float = 0.25) -> tuple[float, dict]:
    """Submit a job and wait for it: (seconds from the 202 to done, final status)."""
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/x-ndjson"}
    body = "\n".join(json.dumps(it) for it in items)
    params = {"judge": judge, **({"options": json.dumps(options)} if options else {})}
    r = httpx.post(f"{base}/v1/jobs", params=params, content=body, headers=headers, timeout=600)
    r.raise_for_status()
    started = time.perf_counter()
    job = r.json()["id"]
    while True:
        status = httpx.get(f"{base}/v1/jobs/{job}", headers=headers, timeout=60).json()
        if status["state"] in ("done", "cancelled"):
            return time.perf_counter() - started, status
        time.sleep(poll)


# ------------------------------------------------------------------ 1. queue cost


def library_rate(n: int) -> float:
    """The reference judge grading n items in this process, no queue: items per second."""
    from framejudge.judge import Grader, ReferenceJudge
    from framejudge.rubrics import get_rubric
    from framejudge.schema import Item

    grader = Grader(ReferenceJudge(), get_rubric("video-qa"))
    items = [Item.model_validate(it) for it in _items(n, "lib")]

    async def run() -> None:
        for it in items:
            await grader.grade(it)

    started = time.perf_counter()
    asyncio.run(run())
    return n / (time.perf_counter() - started)


def queue_cost(sizes: list[int], tmp: Path) -> list[dict]:
    env = {**os.environ, "FRAMEJUDGE_SERVICE_DB": f"sqlite:///{tmp / 'queue.sqlite'}",
           "FRAMEJUDGE_UPLOAD_DIR": str(tmp / "uploads"), "FRAMEJUDGE_RATE_LIMIT": "100000",
           "FRAMEJUDGE_CACHE_DIR": str(tmp / "cache")}
    key = _key(env)
    server, base = _serve(env)
    ideal = library_rate(2000)
    rows = []
    try:
        for n in sizes:
            seconds, status = _run_job(base, key, _items(n, f"q{n}-"), "reference")
            assert status["done"] == n and status["judge_errors"] == 0, status
            rate = n / seconds
            rows.append({"items": n, "seconds": seconds, "items_per_s": rate, "library_items_per_s": ideal})
            print(f"queue: {n} items in {seconds:.1f} s = {rate:.0f} items/s (library {ideal:.0f}/s)", flush=True)
    finally:
        server.stop()
    for row in rows:
        row["vs_smallest"] = row["items_per_s"] / rows[0]["items_per_s"]
        row["vs_library"] = row["items_per_s"] / ideal
    return rows


# ------------------------------------------------------------------ 2. a slow model


def _judges_file(path: Path, base_url: str, concurrency: int, maximum: int) -> Path:
    path.write_text(f"judges:\n  - spec: {JUDGE}\n    api_base: {base_url}\n    concurrency: {concurrency}\n"
                    f"    max_concurrency: {maximum}\n    timeout_s: 60\n"
                    "    price: {prompt_usd_per_token: 0, completion_usd_per_token: 0}\n")
    return path


def _stats(model: Proc) -> dict:
    return httpx.get(model.url.removesuffix("/v1") + "/admin/stats", timeout=10).json()


def _reset(model: Proc, **settings: object) -> None:
    admin = model.url.removesuffix("/v1")
    if settings:
        httpx.post(admin + "/admin/configure", json=settings, timeout=10).raise_for_status()
    httpx.post(admin + "/admin/reset", timeout=10).raise_for_status()


def _busy(stats: dict) -> float:
    return stats["last_completed_at"] - stats["first_request_at"]


def _cli(tmp: Path, model: Proc, items: list[dict], judges: Path, name: str) -> tuple[float, Path]:
    items_path = tmp / f"{name}.jsonl"
    items_path.write_text("".join(json.dumps(it) + "\n" for it in items))
    out = tmp / f"{name}-verdicts.jsonl"
    env = {**os.environ, "FRAMEJUDGE_CACHE_DIR": str(tmp / "cache")}
    started = time.perf_counter()
    subprocess.run([PY, "-m", "framejudge.cli", "grade", str(items_path), "--out", str(out), "--judge", JUDGE,
                    "--judges", str(judges), "--yes", "--no-cache"], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started, out


def slow_model(n: int, latency: float, in_flight: int, tmp: Path, postgres_url: str | None) -> list[dict]:
    items = _items(n, "s")
    calls = 2 * n
    ideal = calls * latency / in_flight
    model = Proc([PY, str(ROOT / "bench" / "model_server.py"), "--port", "0", "--latency", str(latency)],
                 dict(os.environ), ready_line=True)
    rows = []
    try:
        judges = _judges_file(tmp / "judges-32.yaml", model.url, in_flight, in_flight)
        _reset(model)
        wall, _ = _cli(tmp, model, items, judges, "slow")
        stats = _stats(model)
        rows.append(_slow_row("framejudge grade (one process)", wall, stats, calls, ideal))

        env = {**os.environ, "FRAMEJUDGE_SERVICE_DB": f"sqlite:///{tmp / 'slow.sqlite'}",
               "FRAMEJUDGE_UPLOAD_DIR": str(tmp / "uploads"), "FRAMEJUDGE_RATE_LIMIT": "100000",
               "FRAMEJUDGE_JUDGES_FILE": str(judges), "FRAMEJUDGE_CACHE_DIR": str(tmp / "cache")}
        key = _key(env)
        server, base = _serve(env)
        try:
            _reset(model)
            wall, status = _run_job(base, key, items, JUDGE, {"swap": True, "cache": False})
            assert status["done"] == n, status
            rows.append(_slow_row("one service process (SQLite)", wall, _stats(model), calls, ideal, status))
        finally:
            server.stop()

        if postgres_url is not None:
            half = _judges_file(tmp / "judges-16.yaml", model.url, in_flight // 2, in_flight // 2)
            env = {**env, "FRAMEJUDGE_SERVICE_DB": postgres_url, "FRAMEJUDGE_JUDGES_FILE": str(half),
                   "FRAMEJUDGE_SERVICE_WORKER": "0"}
            key = _key(env)
            server, base = _serve(env)  # takes the job; grades nothing itself
            workers = [Proc([PY, "-m", "framejudge.cli", "worker"], env) for _ in range(2)]
            try:
                time.sleep(5)  # the workers' start-up (imports) is not the queue's cost
                _reset(model)
                wall, status = _run_job(base, key, items, JUDGE, {"swap": True, "cache": False})
                assert status["done"] == n, status
                rows.append(_slow_row(f"two workers x {in_flight // 2} (PostgreSQL)", wall, _stats(model), calls,
                                      ideal, status))
            finally:
                for w in workers:
                    w.stop()
                server.stop()
    finally:
        model.stop()
    return rows


def _slow_row(door: str, wall: float, stats: dict, calls: int, ideal: float, status: dict | None = None) -> dict:
    row = {"door": door, "calls": stats["completed"], "expected_calls": calls, "wall_s": wall, "ideal_s": ideal,
           "wall_ratio": wall / ideal, "busy_s": _busy(stats), "busy_ratio": _busy(stats) / ideal,
           "peak_in_flight": stats["peak_in_flight"], "judge_errors": (status or {}).get("judge_errors")}
    print(f"slow model: {door}: {wall:.1f} s (busy {row['busy_s']:.1f} s) vs ideal {ideal:.1f} s; "
          f"{stats['completed']} calls, peak {stats['peak_in_flight']} in flight", flush=True)
    return row


# ------------------------------------------------------------------ 3. a rate limit


def rate_limited(n: int, rate: float, latency: float, tmp: Path) -> dict:
    from framejudge.judge import read_records
    from framejudge.schema import JudgeError

    model = Proc([PY, str(ROOT / "bench" / "model_server.py"), "--port", "0", "--latency", str(latency),
                  "--rate-limit", str(rate), "--rate-burst", str(max(1.0, rate / 4))], dict(os.environ),
                 ready_line=True)
    try:
        judges = _judges_file(tmp / "judges-adaptive.yaml", model.url, 8, 64)
        _reset(model)
        wall, out = _cli(tmp, model, _items(n, "r"), judges, "rate")
        stats = _stats(model)
    finally:
        model.stop()
    records = read_records(out)
    failed = sorted({r.item_id for r in records if isinstance(r, JudgeError)})
    sustained = stats["completed"] / _busy(stats)
    row = {"items": n, "rate_limit_rps": rate, "latency_s": latency, "completed": stats["completed"],
           "rejected_429": stats["status_counts"].get("429", 0), "busy_s": _busy(stats), "sustained_rps": sustained,
           "share_of_limit": sustained / rate, "failed_items": len(failed), "wall_s": wall}
    print(f"rate limit {rate:g}/s: sustained {sustained:.2f}/s ({sustained / rate:.0%}), "
          f"{row['rejected_429']} 429s, {len(failed)} failed items", flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller jobs (minutes, not a quarter of an hour)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--only", choices=("queue", "slow_model", "rate_limit"),
                        help="one part (results of the others are kept from the last run)")
    args = parser.parse_args()
    sizes = [2000, 5000, 10000] if args.quick else [2000, 10000, 100000]
    slow_items = 300 if args.quick else 1000
    rate_items = 150 if args.quick else 400
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="framejudge-bench-") as folder:
        tmp = Path(folder)
        postgres = None
        try:
            if args.only not in (None, "slow_model"):
                raise RuntimeError("not needed for this part")
            from bench.postgres import PostgresServer, bin_dir

            found = bin_dir()
            if found is not None:
                import psycopg  # noqa: F401

                postgres = PostgresServer(found)
        except Exception as exc:
            print(f"PostgreSQL unavailable ({exc}); the two-worker row is skipped", flush=True)
        saved = args.out / "runner.json"
        results = json.loads(saved.read_text()) if args.only and saved.exists() else {}
        try:
            if args.only in (None, "queue"):
                results["queue"] = queue_cost(sizes, tmp)
            if args.only in (None, "slow_model"):
                results["slow_model"] = slow_model(slow_items, 0.5, 32, tmp,
                                                   postgres.new_database() if postgres else None)
            if args.only in (None, "rate_limit"):
                results["rate_limit"] = rate_limited(rate_items, 20.0, 0.5, tmp)
        finally:
            if postgres is not None:
                postgres.stop()
    (args.out / "runner.json").write_text(json.dumps(results, indent=1))
    print(table(results))


def table(results: dict) -> str:
    """The tables of the parts measured (an --only run reads the others' last figures, if any)."""
    lines: list[str] = []
    if "queue" in results:
        lines += ["| job items | seconds | items/s | vs 2,000-item job | vs library, no queue |", "|---|---|---|---|---|"]
        for r in results["queue"]:
            lines.append(f"| {r['items']:,} | {r['seconds']:.1f} | {r['items_per_s']:,.0f} | {r['vs_smallest']:.2f} | "
                         f"{r['vs_library']:.2f} |")
    if "slow_model" in results:
        lines += ["", "| door | calls | wall s | ideal s | wall / ideal | busy s | busy / ideal | peak in flight |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in results["slow_model"]:
            lines.append(f"| {r['door']} | {r['calls']:,} | {r['wall_s']:.1f} | {r['ideal_s']:.2f} | "
                         f"{r['wall_ratio']:.2f}x | {r['busy_s']:.1f} | {r['busy_ratio']:.2f}x | {r['peak_in_flight']} |")
    if "rate_limit" in results:
        r = results["rate_limit"]
        lines += ["", "| rate limit | calls answered | 429s | busy s | sustained/s | share of limit | failed items |",
                  "|---|---|---|---|---|---|---|",
                  f"| {r['rate_limit_rps']:g}/s | {r['completed']:,} | {r['rejected_429']:,} | {r['busy_s']:.1f} | "
                  f"{r['sustained_rps']:.2f} | {r['share_of_limit']:.0%} | {r['failed_items']} |"]
    return "\n".join(lines).strip("\n")


if __name__ == "__main__":
    main()
