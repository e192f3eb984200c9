"""Review queue benchmark: the queue page and a unit page of a large calibration, through a real
server, against a static page of the same size served by the same app in the same run.

    python bench/review.py [--units 5000] [--annotators 3] [--repeats 20] [--quick] [--out bench/results]

The server (the app `framejudge serve` runs, on a throwaway SQLite database, one process on
loopback) holds one calibration of `--units` labelled turns, each labelled by `--annotators`
annotators, made through POST /v1/calibrate from simulated verdicts and labels (one short
video for every item, so a unit page decodes its frames). One reviewer signs in and:
  first open   the queue page the first time after the server started (the calibration read
               from the database; its figures not computed yet: the page says so)
  figures      from that first open until the page shows the figures (the bootstrap, in the
               background)
  queue        the queue page again (median of --repeats)
  unit         a unit's page, a different unit each time (frames decoded; median)
  decide       Submit & next on a unit (the decision committed; the redirect; median)
  queue stale  the queue page right after each decision (the figures shown stale while they refresh)
  refresh      from a decision until the queue page shows figures counting it
The ideal is the same app sending a static file of the queue page's size (`static`, median):
each page's ratio to it is printed. --quick: 500 units, 5 repeats.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CATEGORIES = ["Successful", "Not Successful"]
PREFERENCE = {("Successful", "Successful"): "Both", ("Successful", "Not Successful"): "A",
              ("Not Successful", "Successful"): "B", ("Not Successful", "Not Successful"): "Neither"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def calibration_body(units: int, annotators: int, seed: int = 0) -> dict:
    """Verdicts, items and labels: annotators agree with the judge four times in five per field."""
    rng = random.Random(seed)
    now = datetime(2026, 1, 1, tzinfo=timezone.utc).isoformat()
    verdicts, items, labels = [], [], []
    for k in range(units):
        a, b = rng.choice(CATEGORIES), rng.choice(CATEGORIES)
        verdicts.append({
            "item_id": f"u{k:05d}", "response_a": {"category": a, "rationale": "reads the number shown"},
            "response_b": {"category": b, "rationale": "names another number"}, "preference": PREFERENCE[(a, b)],
            "deciding_criterion": "category",
            "provenance": {"rubric_id": "video-qa", "rubric_version": "1.0.0", "rubric_hash": "h",
                           "judge_backend": "bench", "model_id": "bench", "created_at": now}})
        items.append({"id": f"u{k:05d}", "video": "c.mp4", "domain": rng.choice(["text", "garden", "food"]),
                      "turns": [{"question": f"What number is shown ({k})?", "golden": "It shows 3.",
                                 "response_a": "It shows 3.", "response_b": "It shows 7."}]})
        for n in range(annotators):
            la = a if rng.random() < 0.8 else rng.choice(CATEGORIES)
            lb = b if rng.random() < 0.8 else rng.choice(CATEGORIES)
            labels.append({"item_id": f"u{k:05d}", "annotator": f"h{n + 1}", "category_a": la, "category_b": lb,
                           "preference": PREFERENCE[(la, lb)]})
    return {"labels": labels, "verdicts": verdicts, "items": items, "replicates": 10}


def serve(folder: str, port: str) -> None:
    """The server process: the app `framejudge serve` runs, with `folder` served as static files."""
    import uvicorn
    from fastapi.staticfiles import StaticFiles

    from framejudge.service.app import create_app
    from framejudge.service.settings import Settings

    app = create_app(Settings.from_env())
    app.mount("/bench-static", StaticFiles(directory=folder), name="bench-static")
    uvicorn.run(app, host="127.0.0.1", port=int(port), log_level="warning")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def timed(client: httpx.Client, method: str, url: str, **kw) -> tuple[float, httpx.Response]:
    start = time.perf_counter()
    got = client.request(method, url, **kw)
    return time.perf_counter() - start, got


def fresh(page: str) -> bool:
    return 'id="figures"' in page and 'id="figures-stale"' not in page and 'id="figures-pending"' not in page


def wait_fresh(client: httpx.Client, url: str, limit_s: float = 3600) -> float:
    start = time.perf_counter()
    while True:
        got = client.get(url)
        if got.status_code != 200:
            raise SystemExit(f"queue page: {got.status_code} {got.text[:300]}")
        if fresh(got.text):
            return time.perf_counter() - start
        if time.perf_counter() - start > limit_s:
            raise SystemExit("the figures were never refreshed")
        time.sleep(0.1)


def csrf_of(text: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', text).group(1)


def version_of(text: str) -> str:
    """The unit version a unit page's form carries."""
    return re.search(r'name="version" value="([^"]+)"', text).group(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--units", type=int, default=5000)
    parser.add_argument("--annotators", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="500 units, 5 repeats")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--serve", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(*args.serve)
        return
    units, repeats = (500, 5) if args.quick else (args.units, args.repeats)

    from framejudge.examples.clips import countdown
    from framejudge.examples.synth import cfr_times, write_video
    from framejudge.service.store import create_key, engine_for

    work = Path(tempfile.mkdtemp(prefix="framejudge-bench-review-"))
    (work / "media").mkdir()
    (work / "static").mkdir()
    write_video(work / "media" / "c.mp4", countdown, cfr_times(2, 30), gop=30)
    db = f"sqlite:///{work / 'service.sqlite'}"
    env = {**os.environ, "FRAMEJUDGE_SERVICE_DB": db, "FRAMEJUDGE_MEDIA_ROOT": str(work / "media"),
           "FRAMEJUDGE_UPLOAD_DIR": str(work / "uploads"), "FRAMEJUDGE_RATE_LIMIT": "100000000",
           "FRAMEJUDGE_SERVICE_WORKER": "false", "FRAMEJUDGE_CACHE_DIR": str(work / "cache")}
    engine = engine_for(db)
    key = create_key(engine, ["calibrate", "review"], "bench")
    port = free_port()

    def start_server() -> subprocess.Popen:
        server = subprocess.Popen([sys.executable, __file__, "--serve", str(work / "static"), str(port)], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.time() + 120
        while True:
            try:
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    return server
            except httpx.HTTPError:
                if server.poll() is not None or time.time() > deadline:
                    raise SystemExit(server.stderr.read().decode()[-2000:]) from None
                time.sleep(0.1)

    base = f"http://127.0.0.1:{port}"
    server = start_server()
    try:
        with httpx.Client(base_url=base, timeout=3600, headers={"Authorization": f"Bearer {key}"}) as api:
            start = time.perf_counter()
            made = api.post("/v1/calibrate", json=calibration_body(units, args.annotators))
            if made.status_code != 200:
                raise SystemExit(f"calibrate: {made.status_code} {made.text[:500]}")
            run_id, calibrate_s = made.json()["id"], time.perf_counter() - start
        server.terminate()  # the queue is opened first by a server that has not read it
        server.wait(timeout=60)
        server = start_server()
        memory = {"after_start_mb": round(rss_mb(server.pid), 1)}
        with httpx.Client(base_url=base, timeout=3600, follow_redirects=False) as client:
            form = client.get("/review/sign-in")
            client.post("/review/sign-in", data={"api_key": key, "csrf": csrf_of(form.text), "next": "/review"})
            queue_url = f"/review/{run_id}"
            first_s, first = timed(client, "GET", queue_url)
            assert first.status_code == 200 and f"<strong>{units}</strong> units" in first.text, first.text[:500]
            figures_s = first_s + wait_fresh(client, queue_url)
            page = client.get(queue_url).text
            (work / "static" / "queue.html").write_text(page)  # the ideal: these bytes, sent as a file
            static = [timed(client, "GET", "/bench-static/queue.html")[0] for _ in range(repeats)]
            queue = [timed(client, "GET", queue_url)[0] for _ in range(repeats)]
            keys = re.findall(r'unit\?item=(u\d+)&amp;turn=0', page)
            unit_times, decide_times, stale_times, refresh_times, stale_seen = [], [], [], [], 0
            for n in range(repeats):
                took, got = timed(client, "GET", f"/review/{run_id}/unit", params={"item": keys[n], "turn": 0})
                assert got.status_code == 200, got.text[:500]
                unit_times.append(took)
                took, done = timed(client, "POST", f"/review/{run_id}/decide",
                                   data={"csrf": csrf_of(got.text), "item": keys[n], "turn": "0",
                                         "version": version_of(got.text), "action": "adopt_judge",
                                         "cause": "humans_wrong"})
                assert done.status_code == 303, done.text[:500]
                decide_times.append(took)
                start = time.perf_counter()
                took, got = timed(client, "GET", queue_url)
                stale_times.append(took)
                stale_seen += 'id="figures-stale"' in got.text
                if not fresh(got.text):
                    wait_fresh(client, queue_url)
                refresh_times.append(time.perf_counter() - start)
            memory["after_all_mb"] = round(rss_mb(server.pid), 1)
    finally:
        server.terminate()
        server.wait(timeout=60)

    ideal = statistics.median(static)

    def row(name: str, values: list[float]) -> dict:
        med = statistics.median(values)
        return {"page": name, "samples": len(values), "median_s": round(med, 4), "max_s": round(max(values), 4),
                "vs_static": round(med / ideal, 1)}

    rows = [row("static (ideal)", static), row("queue, first open", [first_s]), row("queue", queue),
            row("unit", unit_times), row("decide (Submit & next)", decide_times),
            row("queue right after a decision", stale_times)]
    report = {"units": units, "annotators": args.annotators, "labels": units * args.annotators,
              "queue_page_bytes": len(page.encode()), "cpus": os.cpu_count(), "calibrate_s": round(calibrate_s, 1),
              "figures_first_s": round(figures_s, 2), "refresh_after_decision_median_s":
                  round(statistics.median(refresh_times), 2), "stale_pages_after_decisions": stale_seen,
              "pages": rows, "server_memory": memory}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "review.json").write_text(json.dumps(report, indent=2))
    print(f"{units} units x {args.annotators} annotators; queue page {report['queue_page_bytes'] / 1e6:.2f} MB; "
          f"POST /v1/calibrate {report['calibrate_s']} s")
    print("| page | median s | max s | x static |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r['page']} | {r['median_s']} | {r['max_s']} | {r['vs_static']} |")
    print(f"figures first shown {report['figures_first_s']} s after the first open; after a decision, figures "
          f"counting it in {report['refresh_after_decision_median_s']} s (median; {stale_seen} of {repeats} "
          f"pages right after a decision showed them stale)")
    print(f"server RSS: {memory['after_start_mb']} MB after start, {memory['after_all_mb']} MB at the end")


if __name__ == "__main__":
    main()
