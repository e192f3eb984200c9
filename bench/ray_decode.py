"""Frame decoding throughput on Ray's decoding actors against the local engine's decoding processes.

    python bench/ray_decode.py [--turns 120] [--frames 8] [--workers 1 2] [--out bench/results]

The frames of `--turns` turns (each `--frames` frames from a real clip of ../shared/research-data/
video-assets, at a question time spread over the clip, so no two turns ask the same frames) are
decoded by:

- local: one `IsolatedSampler` with N decoding processes (what `framejudge grade` uses), called from
  2N threads;
- ray: N of the Ray engine's decoding actors (`runner.ray_engine.DecodeWorker`, one CPU and one
  decoding process each, two calls at a time) on a local cluster of 2 CPUs on loopback, called as
  the grading actors call them.

The frame cache is off (FRAMEJUDGE_NO_CACHE), so every turn is decoded. Reported: turns and frames
a second for each engine and N, Ray's throughput as a ratio to the local engine's at the same N,
and each engine's ratio of N workers to 1 (the ideal is N on a machine with N free cores). The
cluster's start-up and each worker's first call are left out of the timings (the Ray engine
benchmark, bench/ray_engine.py, reports the fixed cost of a whole run).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["FRAMEJUDGE_NO_CACHE"] = "1"  # before framejudge is imported, and inherited by Ray's workers
CLIPS = ROOT.parent / "shared" / "research-data" / "video-assets"
BROKEN = {"corrupted.mp4"}  # a clip whose stream is broken on purpose (the folder's README)


def _clips() -> list[Path]:
    found = sorted(p for p in CLIPS.rglob("*") if p.suffix in (".mp4", ".mkv", ".mov", ".avi") and p.name not in BROKEN)
    if not found:
        sys.exit(f"error: no clips under {CLIPS} (the real clips this benchmark decodes)")
    return found


def _turns(clips: list[Path], turns: int, frames: int) -> list[tuple[str, object]]:
    """(path, params) for each turn: the clips in turn, the question time stepped through each clip."""
    from framejudge.frame_sampler import SamplerParams, sample_frames

    durations = {p: sample_frames(p, SamplerParams(n=1)).video.duration for p in clips}
    work = []
    for k in range(turns):
        clip = clips[k % len(clips)]
        rounds = turns // len(clips) + 1
        end_at = round(durations[clip] * (0.3 + 0.7 * (k // len(clips) + 1) / (rounds + 1)), 3)
        work.append((str(clip), SamplerParams(end_at=end_at, lookback=durations[clip], n=frames)))
    return work


def _timed(call, work, threads: int) -> float:
    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(lambda w: call(*w), work))
    wall = time.perf_counter() - start
    bad = [r for r in results if isinstance(r, Exception)]
    if bad:
        sys.exit(f"error: {len(bad)} turn(s) failed to decode, first: {bad[0]!r}")
    return wall


def _local(work, workers: int) -> float:
    from framejudge.frame_sampler import IsolatedSampler

    with IsolatedSampler(workers=workers, timeout_s=120, cache_dir=None) as sampler:
        _timed(sampler.sample, work[:workers * 2], workers * 2)  # the processes started and warm
        return _timed(sampler.sample, work, workers * 2)


def _ray(work, workers: int) -> float:
    import ray

    from framejudge.runner.ray_engine import DecodeWorker
    from framejudge.schema import DecodeLimits

    cls = ray.remote(num_cpus=1, max_concurrency=2)(DecodeWorker)
    actors = [cls.remote(DecodeLimits()) for _ in range(workers)]
    turn = iter(range(10**9))

    def call(path, params):
        return ray.get(actors[next(turn) % workers].sample.remote(path, params))

    _timed(call, work[:workers * 2], workers * 2)
    wall = _timed(call, work, workers * 2)
    for a in actors:
        ray.kill(a)
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=120)
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()

    from framejudge.runner.ray_engine import loopback_only

    clips = _clips()
    work = _turns(clips, args.turns, args.frames)
    loopback_only()
    import ray

    rows = []
    for n in args.workers:
        rows.append({"engine": "local", "workers": n, "wall_s": _local(work, n)})
    ray.init(num_cpus=max(args.workers), include_dashboard=False, _node_ip_address="127.0.0.1",
             configure_logging=False, log_to_driver=False)
    try:
        for n in args.workers:
            rows.append({"engine": "ray", "workers": n, "wall_s": _ray(work, n)})
    finally:
        ray.shutdown()

    by = {(r["engine"], r["workers"]): r for r in rows}
    for r in rows:
        r["turns_per_s"] = round(args.turns / r["wall_s"], 2)
        r["frames_per_s"] = round(args.turns * args.frames / r["wall_s"], 1)
        one = by.get((r["engine"], min(args.workers)))
        r["vs_fewest_workers"] = round(one["wall_s"] / r["wall_s"], 2) if one else None
        local = by.get(("local", r["workers"]))
        r["vs_local"] = round(local["wall_s"] / r["wall_s"], 2) if local else None
        r["wall_s"] = round(r["wall_s"], 2)
    result = {"turns": args.turns, "frames_per_turn": args.frames, "clips": [p.name for p in clips],
              "cpus": os.cpu_count(), "rows": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ray_decode.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"{args.turns} turns x {args.frames} frames from {len(clips)} real clips, frame cache off")
    print("| engine | workers | wall s | turns/s | frames/s | vs fewest workers | throughput vs local |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['engine']} | {r['workers']} | {r['wall_s']} | {r['turns_per_s']} | {r['frames_per_s']} | "
              f"{r['vs_fewest_workers']}x | {r['vs_local']}x |")


if __name__ == "__main__":
    main()
