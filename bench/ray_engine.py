"""The Ray engine against the local engine and the ideal, at a slow model's speed.

    python bench/ray_engine.py [--items 10000] [--latency 0.5] [--in-flight 32] [--video] [--out bench/results]

bench/model_server.py answers every call after `--latency` seconds; N two-response items, swap on
(2N calls), `--in-flight` calls at most (the judges file's concurrency and maximum). The same
command, `framejudge grade`, runs once with `--engine local` and once with `--engine ray` (a local
Ray cluster on loopback, started by the run: its start-up is part of the wall time). Reported for
each: the wall time of the whole command, the model server's busy period (first call received to
last answered), both as ratios to the ideal (calls x latency / in flight), the peak of calls in
flight, and the fixed cost (wall minus busy). `--video` gives every item one of the bundled
example clips, so frames are decoded (4 a turn) on the decoding processes or actors.

`--overload-for S`: the model server answers every call with 429 (Retry-After 1 s) for the first S
seconds of each run, as a provider refusing a whole cluster for a while does; the run must still end
with one verdict a turn and no error record. Reported as well: the 429s answered, the error records,
and the wall time less S against the ideal.
"""

from __future__ import annotations

import argparse
import json
import os
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


def _items(n: int, videos: list[Path]) -> list[dict]:
    items = []
    for k in range(n):
        item: dict = {"id": f"r{k}", "turns": [{"question": f"[item r{k}] How many people are on the bench?",
                                                "golden": f"{k % 5} people.", "response_a": f"There are {k % 5} people.",
                                                "response_b": f"I see {(k + 1) % 5} people."}]}
        if videos:
            item["video"] = str(videos[k % len(videos)])
        items.append(item)
    return items


def _model_server(latency: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([PY, str(ROOT / "bench" / "model_server.py"), "--port", "0", "--latency", str(latency)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("ready "):
        proc.kill()
        raise RuntimeError(f"the model server did not start: {line!r}")
    return proc, line.split()[1]


def _admin(base: str, what: str) -> dict:
    url = base.removesuffix("/v1") + "/admin/" + what
    return (httpx.get(url, timeout=10) if what == "stats" else httpx.post(url, timeout=10)).json()


def _run(tmp: Path, name: str, items: Path, judges: Path, engine: list[str]) -> tuple[float, int]:
    out = tmp / f"{name}.jsonl"
    env = {**os.environ, "FRAMEJUDGE_CACHE_DIR": str(tmp / f"cache-{name}"), "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    subprocess.run([PY, "-m", "framejudge.cli", "grade", str(items), "--out", str(out), "--judge", JUDGE,
                    "--judges", str(judges), "--yes", "--no-cache", "-n", "4", *engine], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    wall = time.perf_counter() - started
    records = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(records) == len({(r["item_id"], r["turn"]) for r in records}), name
    return wall, sum(r["record"] == "judge_error" for r in records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--in-flight", type=int, default=32)
    parser.add_argument("--grading-actors", type=int, default=2)
    parser.add_argument("--video", action="store_true", help="each item with a bundled example clip (4 frames)")
    parser.add_argument("--overload-for", type=float, default=0.0,
                        help="seconds of 429s from the model server at the start of each run")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-ray-") as scratch:
        tmp = Path(scratch)
        videos: list[Path] = []
        if args.video:
            subprocess.run([PY, "-m", "framejudge.cli", "examples", "make", str(tmp / "videos")], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT)})
            videos = sorted((tmp / "videos").glob("*.mp4"))
        items = tmp / "items.jsonl"
        items.write_text("".join(json.dumps(it) + "\n" for it in _items(args.items, videos)))
        model, base = _model_server(args.latency)
        try:
            judges = tmp / "judges.yaml"
            judges.write_text(f"judges:\n  - spec: {JUDGE}\n    api_base: {base}\n    concurrency: {args.in_flight}\n"
                              f"    max_concurrency: {args.in_flight}\n    timeout_s: 60\n"
                              "    price: {prompt_usd_per_token: 0, completion_usd_per_token: 0}\n")
            calls = 2 * args.items
            ideal = calls * args.latency / args.in_flight
            rows = []
            for name, engine in (("local", ["--engine", "local"]),
                                 ("ray", ["--engine", "ray", "--grading-actors", str(args.grading_actors)])):
                _admin(base, "reset")
                if args.overload_for:
                    httpx.post(base.removesuffix("/v1") + "/admin/configure", timeout=10,
                               json={"overload_for": args.overload_for, "overload_retry_after": 1.0})
                wall, errors = _run(tmp, name, items, judges, engine)
                stats = _admin(base, "stats")
                busy = stats["last_completed_at"] - stats["first_request_at"]
                assert stats["completed"] == calls, stats
                rows.append({"engine": name, "wall_s": round(wall, 2), "busy_s": round(busy, 2),
                             "ideal_s": round(ideal, 2), "wall_ratio": round(wall / ideal, 3),
                             "busy_ratio": round(busy / ideal, 3), "fixed_s": round(wall - busy, 2),
                             "peak_in_flight": stats["peak_in_flight"], "error_records": errors,
                             "answered_429": stats["status_counts"].get("429", 0)})
                if args.overload_for:
                    rows[-1]["past_overload_ratio"] = round((wall - args.overload_for) / ideal, 3)
                print(f"{name}: {wall:.1f} s wall (busy {busy:.1f} s, fixed {wall - busy:.1f} s) vs ideal {ideal:.1f} s;"
                      f" peak {stats['peak_in_flight']} in flight", flush=True)
        finally:
            model.terminate()
            model.wait(10)
    local, ray = rows
    result = {"items": args.items, "latency_s": args.latency, "in_flight": args.in_flight, "video": args.video,
              "overload_for_s": args.overload_for,
              "grading_actors": args.grading_actors, "cpus": os.cpu_count(), "rows": rows,
              "ray_over_local_wall": round(ray["wall_s"] / local["wall_s"], 3),
              "ray_over_local_busy": round(ray["busy_s"] / local["busy_s"], 3)}
    print(json.dumps(result, indent=1))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ray_engine.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
