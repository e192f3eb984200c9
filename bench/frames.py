"""Frame-sampling benchmark: framejudge against named peers, in the same run.

    python bench/frames.py [--quick] [--out bench/results]

Generates its clips with PyAV under the output folder (nothing is committed),
then times each method in a fresh worker process (median of 3 runs; peak RSS
is the worker's VmHWM minus its RSS after imports). Peers:
  decode_all   PyAV, decode every frame from the start up to the last target, keep picks
  opencv_seek  OpenCV VideoCapture, CAP_PROP_POS_MSEC seek + read per target
  decord       decord VideoReader.get_batch (if decord imports)
Floors:
  demux        read every packet, decode nothing
  gop_floor    decode only the GOPs that hold the wanted frames (index built beforehand),
               and convert each wanted frame to RGB at 768 px as framejudge does; the
               faster of slice and frame threading
framejudge returns frames resized to 768 px (its normal output); peers return
full-resolution arrays and do no resizing, which favours them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RUNS = 3


# ----------------------------------------------------------------- clips

def _texture(w: int, h: int):
    y = np.linspace(0, 1, h, dtype=np.float32)[:, None]
    x = np.linspace(0, 1, w, dtype=np.float32)[None, :]
    base = (np.sin(12 * x + 7 * y) * 0.5 + 0.5) * 180 + 40

    def render(k: int, t: float) -> np.ndarray:
        shift = int(t * 80) % w
        img = np.empty((h, w, 3), np.uint8)
        row = np.roll(base, shift, axis=1)
        img[..., 0] = row
        img[..., 1] = np.roll(base, -shift // 2, axis=1)
        img[..., 2] = 255 - row
        s = h // 6
        x0 = int((t * 200) % (w - s))
        img[h // 3 : h // 3 + s, x0 : x0 + s] = (250, 250, 40)
        scene = int(t // 7) % 3
        img[: h // 10] = (scene * 90, 60, 200 - scene * 60)
        return img

    return render


def make_clips(folder: Path, quick: bool) -> dict[str, Path]:
    from framejudge.examples.synth import cfr_times, write_video

    folder.mkdir(parents=True, exist_ok=True)
    specs = {
        "1080p_60s_gop250": dict(size=(1920, 1080), seconds=60, gop=250),
        "720p_1min": dict(size=(1280, 720), seconds=60, gop=None),
        "720p_5min": dict(size=(1280, 720), seconds=60 if quick else 300, gop=None),
    }
    out = {}
    for name, s in specs.items():
        path = folder / f"{name}.mp4"
        if not path.exists():
            w, h = s["size"]
            tmp = path.with_suffix(".part.mp4")
            write_video(tmp, _texture(w, h), cfr_times(s["seconds"], 30), size=(w, h), gop=s["gop"])
            tmp.replace(path)
        out[name] = path
    vfr = folder / "720p_vfr.mp4"
    if not vfr.exists():
        rng = np.random.default_rng(1)
        times, t = [], 0.0
        for rate, secs in [(10, 5), (15, 5), (24, 5), (30, 5), (60, 5)]:
            for _ in range(rate * secs):
                times.append(round(t, 4))
                t += 1 / rate + float(rng.uniform(-0.003, 0.003))
            if rate == 24:
                t += 2.0  # a freeze
        tmp = vfr.with_suffix(".part.mp4")
        write_video(tmp, _texture(1280, 720), times, size=(1280, 720))
        tmp.replace(vfr)
    out["720p_vfr"] = vfr
    return out


# ----------------------------------------------------------------- methods (run in a worker)

def _index(path: str):
    import av

    from framejudge.frame_sampler.index import build_index, scan

    with av.open(path) as c:
        s = c.streams.video[0]
        main, packets, damage = scan(c, [s])
        return build_index(main, packets, damage, 0)


def targets_for(index, scenario: str, n: int) -> list[float]:
    d = index.duration
    if scenario == "window":
        t = 0.75 * d
        return list(np.linspace(max(0.0, t - 30), t, n))
    return [(k + 0.5) * d / n for k in range(n)]


def run_framejudge(path: str, scenario: str, n: int):
    from framejudge.frame_sampler import sample_frames

    if scenario == "window":
        d = _index(path).duration  # not timed separately: cheap demux
        r = sample_frames(path, n=n, end_at=0.75 * d, lookback=30, cache=None)
    elif scenario == "keyframes":
        r = sample_frames(path, n=n, strategy="keyframes", cache=None)
    else:
        r = sample_frames(path, n=n, cache=None)
    return [f.info.pts for f in r.frames]


def run_decode_all(path: str, scenario: str, n: int):
    import av

    index = _index(path)
    picks = []
    with av.open(path) as c:
        s = c.streams.video[0]
        s.thread_type = "AUTO"
        if scenario == "keyframes":
            for f in c.decode(s):
                if f.key_frame:
                    picks.append((f.pts, f.to_ndarray(format="rgb24")))
            keep = np.unique(np.round(np.linspace(0, len(picks) - 1, min(n, len(picks)))).astype(int))
            return [picks[i][0] for i in keep]
        targets = [round(t / float(index.time_base)) + index.start_pts for t in targets_for(index, scenario, n)]
        ti, last = 0, None
        for f in c.decode(s):
            while ti < len(targets) and f.pts > targets[ti]:
                picks.append(last)
                ti += 1
            if ti >= len(targets):
                break
            last = (f.pts, f.to_ndarray(format="rgb24"))
        while ti < len(targets):
            picks.append(last)
            ti += 1
    return [p[0] for p in picks if p]


def run_opencv_seek(path: str, scenario: str, n: int):
    import cv2

    index = _index(path)
    cap = cv2.VideoCapture(path)
    out = []
    for t in targets_for(index, scenario, n):
        cap.set(cv2.CAP_PROP_POS_MSEC, t * 1000)
        ok, img = cap.read()
        if ok:
            out.append(img[..., ::-1].copy())
    cap.release()
    return [None] * len(out)


def run_decord(path: str, scenario: str, n: int):
    import decord

    index = _index(path)
    vr = decord.VideoReader(path, ctx=decord.cpu(0), num_threads=2)
    if scenario == "keyframes":
        keys = list(vr.get_key_indices())
        keep = np.unique(np.round(np.linspace(0, len(keys) - 1, min(n, len(keys)))).astype(int))
        idx = [keys[i] for i in keep]
    else:
        starts = vr.get_frame_timestamp(range(len(vr)))[:, 0]
        idx = [max(0, int(np.searchsorted(starts, t + 1e-6, side="right")) - 1) for t in targets_for(index, scenario, n)]
    batch = vr.get_batch(idx).asnumpy()
    return [None] * len(batch)


def run_demux(path: str, scenario: str, n: int):
    import av

    with av.open(path) as c:
        return [p.pts for p in c.demux(c.streams.video[0]) if p.size][:0]


def run_gop_floor(path: str, scenario: str, n: int, index=None, threads: str = "SLICE"):
    """Decode from the key frame before each wanted frame to it, nothing else (index given)."""
    import av

    from framejudge.frame_sampler.orient import output_size

    index = index or _index(path)
    if scenario == "keyframes":
        keys = np.flatnonzero(index.key)
        picks = keys[np.unique(np.round(np.linspace(0, len(keys) - 1, min(n, len(keys)))).astype(int))]
    else:
        picks = sorted({index.frame_at(t) for t in targets_for(index, scenario, n)})
    groups: dict[int, tuple[int, int]] = {}  # key frame position -> (first pick, last pick pts)
    wanted = {int(index.pts[p]) for p in picks}
    for p in picks:
        k = int(index.seek_pos[p])
        first = groups[k][0] if k in groups else int(p)
        groups[k] = (first, max(groups.get(k, (0, -1))[1], int(index.pts[p])))
    got = []
    with av.open(path) as c:
        s = c.streams.video[0]
        s.thread_type = threads
        if scenario == "keyframes":
            s.codec_context.skip_frame = "NONKEY"
        for k in sorted(groups):
            first, last_pts = groups[k]
            # Seek to just before the frame after the group's first pick, as framejudge does:
            # MP4 demuxers compare with index times a little after a key frame's pts, so
            # seeking to the key frame itself can land a whole GOP early.
            target = int(index.pts[first + 1]) - 1 if first + 1 < len(index) else int(index.pts[first])
            c.seek(target, stream=s, backward=True)
            done = False
            for packet in c.demux(s):
                for f in packet.decode():
                    if f.pts in wanted:
                        # deliver the same output as framejudge: RGB at 768 px, one swscale pass
                        w, h = output_size(f.width, f.height, None, 768)
                        got.append(f.reformat(width=w, height=h, format="rgb24", interpolation="AREA").to_ndarray())
                    if f.pts is not None and f.pts >= last_pts:
                        done = True
                        break
                if done:
                    break
    return got


METHODS = {
    "framejudge": run_framejudge,
    "decode_all": run_decode_all,
    "opencv_seek": run_opencv_seek,
    "decord": run_decord,
    "demux": run_demux,
    "gop_floor": run_gop_floor,  # slice threads (no pipeline to refill after each seek)
    "gop_floor_ft": lambda path, scenario, n, index=None: run_gop_floor(path, scenario, n, index, "AUTO"),
}


def _rss_mb(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) / 1024
    return float("nan")


def worker(method: str, path: str, scenario: str, n: int) -> None:
    # Import what the method needs before the baseline RSS.
    import av  # noqa: F401

    import framejudge.frame_sampler  # noqa: F401

    if method == "opencv_seek":
        import cv2  # noqa: F401
    if method == "decord":
        import decord  # noqa: F401
    extra = {}
    if method.startswith("gop_floor"):
        extra["index"] = _index(path)  # the floor assumes a ready index
    base = _rss_mb("VmRSS")
    t0 = time.perf_counter()
    METHODS[method](path, scenario, n, **extra)
    seconds = time.perf_counter() - t0
    print(json.dumps({"seconds": seconds, "peak_mb": _rss_mb("VmHWM") - base}))


def measure(method: str, path: Path, scenario: str, n: int) -> dict:
    times, peaks = [], []
    for _ in range(RUNS):
        proc = subprocess.run(
            [sys.executable, __file__, "--worker", method, str(path), scenario, str(n)],
            capture_output=True, text=True, timeout=900,
        )
        if proc.returncode != 0:
            return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:80]}
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        times.append(r["seconds"])
        peaks.append(r["peak_mb"])
    return {"seconds": statistics.median(times), "peak_mb": max(peaks)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", nargs=4, metavar=("METHOD", "PATH", "SCENARIO", "N"))
    ap.add_argument("--quick", action="store_true", help="60 s clips only, N=16 only")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    ap.add_argument("--only", default="", help="comma-separated clip names to run")
    ap.add_argument("--real", type=Path, default=ROOT.parent / "shared" / "research-data" / "autoeval-video" / "video")
    args = ap.parse_args()
    if args.worker:
        m, p, s, n = args.worker
        worker(m, p, s, int(n))
        return
    try:
        import decord  # noqa: F401

        peers = ["decode_all", "opencv_seek", "decord"]
    except ImportError:
        peers = ["decode_all", "opencv_seek"]
    clips = make_clips(args.out / "clips", args.quick)
    real = sorted(args.real.glob("*.mp4"))[:2] if args.real.is_dir() else []
    for r in real:
        clips[f"real:{r.name}"] = r
    if args.only:
        clips = {k: v for k, v in clips.items() if k in args.only.split(",")}
    ns = [16] if args.quick else [8, 16, 32]
    scenarios = [("uniform", n) for n in ns] + [("keyframes", 16), ("window", 16)]
    rows = []
    for name, path in clips.items():
        for scenario, n in scenarios:
            if scenario == "window" and name.startswith("real:"):
                continue
            res = {m: measure(m, path, scenario, n) for m in ["framejudge", *peers, "demux", "gop_floor", "gop_floor_ft"]}
            res["gop_floor"] = min(res.pop("gop_floor_ft"), res["gop_floor"], key=lambda r: r.get("seconds", float("inf")))
            if scenario == "keyframes":
                res.pop("opencv_seek", None)
            rows.append({"clip": name, "scenario": scenario, "n": n, **res})
            print(json.dumps(rows[-1]), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "frames.json").write_text(json.dumps(rows, indent=1))
    print(table(rows, peers))


def table(rows: list[dict], peers: list[str]) -> str:
    head = "| clip | scenario | N | framejudge s (MB) | " + " | ".join(f"{p} s" for p in peers) + \
        " | fastest peer / framejudge | framejudge / GOP floor | demux floor s |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        fj = r["framejudge"]
        peer_s = [r[p]["seconds"] for p in peers if p in r and "seconds" in r[p]]
        fastest = min(peer_s) if peer_s else float("nan")
        cells = []
        for p in peers:
            v = r.get(p)
            cells.append("n/a" if v is None else (v.get("error", "err") if "seconds" not in v else f"{v['seconds']:.2f}"))
        lines.append(
            f"| {r['clip']} | {r['scenario']} | {r['n']} | {fj['seconds']:.2f} ({fj['peak_mb']:.0f}) | "
            + " | ".join(cells)
            + f" | {fastest / fj['seconds']:.2f}x | {fj['seconds'] / r['gop_floor']['seconds']:.2f}x | {r['demux']['seconds']:.3f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
