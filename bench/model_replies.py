"""What a huge model reply costs a grading process: peak resident memory (ru_maxrss) of a child
process that grades one item against bench/model_server.py answering normally, then against one
answering with a valid reply padded to SIZE MiB (chunked, so only reading tells its size), on both
routes a litellm judge sends by (straight to the server over aiohttp, and through litellm and the
OpenAI SDK over httpx).

    python bench/model_replies.py [--mib 300] [--cap-mib N]

Each figure is the process's peak after that call (ru_maxrss only grows); the padded calls' growth
over the normal ones is what the reply cost. With the cap (FRAMEJUDGE_MAX_REPLY_MB, 8 MiB by
default), each padded call ends as `backend_error: reply larger than 8 MB`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.model_server import ModelServer  # noqa: E402

CHILD = textwrap.dedent("""
    import asyncio, json, resource, sys
    from framejudge.judge import GradeOptions, Grader
    from framejudge.judge.litellm_backend import LiteLLMJudge
    from framejudge.rubrics import get_rubric
    from framejudge.schema import Item

    ITEM = Item(id="pair", turns=[{"question": "What bird is this?", "golden": "A heron.",
                                   "response_a": "A grey heron.", "response_b": "A duck."}])

    def peak_mib():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    out = []
    for name, base in (("normal", sys.argv[1]), ("padded", sys.argv[2])):
        for direct in (True, False):
            j = LiteLLMJudge("openai/bench-vlm", api_base=base, api_key="k", max_retries=1)
            j.direct = direct
            [record] = asyncio.run(Grader(j, get_rubric("video-qa"), GradeOptions(cache=False, swap=False)).grade(ITEM))
            out.append({"reply": name, "route": "direct" if direct else "litellm",
                        "record": type(record).__name__, "kind": getattr(getattr(record, "kind", None), "value", ""),
                        "message": getattr(record, "message", None), "peak_mib": round(peak_mib(), 1)})
    print(json.dumps(out))
""")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mib", type=int, default=300, help="the padded reply's size")
    p.add_argument("--cap-mib", type=float, default=None, help="FRAMEJUDGE_MAX_REPLY_MB for the child")
    args = p.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("FRAMEJUDGE_MAX_REPLY_MB", None)
    if args.cap_mib is not None:
        env["FRAMEJUDGE_MAX_REPLY_MB"] = str(args.cap_mib)
    with ModelServer() as normal, ModelServer(pad_bytes=args.mib * 1024 * 1024, pad_declared=False) as padded:
        done = subprocess.run([sys.executable, "-c", CHILD, normal.base_url, padded.base_url], env=env,
                              capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        sys.exit(done.stderr[-3000:])
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{'reply':8} {'route':8} {'peak MiB':>9}  record")
    for r in rows:
        print(f"{r['reply']:8} {r['route']:8} {r['peak_mib']:9.1f}  {r['record']} {r['kind']} {r['message'] or ''}")
    before = max(r["peak_mib"] for r in rows if r["reply"] == "normal")
    after = max(r["peak_mib"] for r in rows)
    print(f"a {args.mib} MiB reply on both routes grew the process's peak by {after - before:.1f} MiB")


if __name__ == "__main__":
    main()
