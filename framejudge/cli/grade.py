"""framejudge grade: an items file graded into a verdicts file (resumed on a rerun), with a
summary; optionally each verdict marked for automatic use or review."""

from __future__ import annotations

import asyncio
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from .. import config
from ..env import cache_off
from ..schema import ServiceTier, Strategy, VideoInput
from .console import err, fail, out
from .options import (ApiBase, Fps, Frames, JudgeSpec, MediaRoot, NoCache, RubricRef, StrategyOption, Yes,
                      check_media_root, confirm_spending)
from .outputs import check_cache_folder, check_outputs, exit_for_errors, report_problems, warn_unknown_usage, write_output


class Engine(str, Enum):
    local = "local"
    ray = "ray"


def grade(
    items: Annotated[Path, typer.Argument(help="items JSONL (one item per line)")],
    out_path: Annotated[Path, typer.Option("--out", help="verdicts JSONL; a rerun resumes it")] = Path("verdicts.jsonl"),
    judge: JudgeSpec = "reference",
    api_base: ApiBase = None,
    judges_file: Annotated[Optional[Path], typer.Option(
        "--judges", help="judges file (YAML): API base, key variable, concurrency, rate limits, timeout, price "
                         "per judge", envvar=config.name("FRAMEJUDGE_JUDGES_FILE"))] = None,
    rubric: RubricRef = "video-qa",
    n: Frames = 8,
    strategy: StrategyOption = Strategy.uniform,
    fps: Fps = None,
    lookback: Annotated[float, typer.Option(help="seconds before a multi-turn question to show")] = 30.0,
    max_side: Annotated[int, typer.Option(help="longest side of frames sent to the judge")] = 768,
    swap: Annotated[Optional[bool], typer.Option("--swap/--no-swap", help="also grade B/A (default: on for model judges)")] = None,
    samples: Annotated[int, typer.Option(help="k samples with majority vote", min=1)] = 1,
    sample_temperature: Annotated[float, typer.Option(
        help="temperature of each of k > 1 samples (sample i has seed i); one sample is drawn at 0")] = 0.7,
    blind: Annotated[bool, typer.Option(help="blind control: grade again without frames")] = False,
    video_input: Annotated[Optional[VideoInput], typer.Option(
        help="what of the video a model judge is shown: frames, or clip (the turn's window as an MP4, for "
             "gemini/ and hosted_vllm/ judges) (default: the judges file's video_input, else frames)")] = None,
    clip_fps: Annotated[float, typer.Option(help="with --video-input clip: frames per second the judge samples "
                                                 "the clip at")] = 1.0,
    service_tier: Annotated[Optional[ServiceTier], typer.Option(
        help="the provider's service tier the judge's calls ask for: flex is slower, may be shed and costs half; "
             "priority costs more (default: the judges file's service_tier, else none asked)")] = None,
    concurrency: Annotated[Optional[int], typer.Option(
        help="model calls in flight at the start (then adapted to the endpoint); items at once for judges "
             "without an endpoint (default: the judges file's, else 8; 4 items)")] = None,
    max_concurrency: Annotated[Optional[int], typer.Option(
        help="model calls in flight never above this (default: the judges file's, else 32)")] = None,
    media_root: MediaRoot = None,
    no_cache: NoCache = False,
    regrade: Annotated[bool, typer.Option(
        "--regrade", help="grade again the turns whose verdicts in --out were graded differently (another rubric, "
                          "judge, options or content); the old records move to <out>.superseded.jsonl")] = False,
    yes: Yes = False,
    summary_json: Annotated[Optional[Path], typer.Option(help="also write the summary as JSON here")] = None,
    decode_timeout: Annotated[float, typer.Option(
        help="each video's sampling is limited to this many seconds in its decoding process")] = 600.0,
    decode_memory_mb: Annotated[int, typer.Option(help="memory cap per decoding process, MB (at least 256)")] = 4096,
    decode_workers: Annotated[Optional[int], typer.Option(
        help="decoding processes, working while model calls wait (default: the CPU count)")] = None,
    batch: Annotated[bool, typer.Option(
        "--batch", help="send the calls through the provider's batch API (half price, answered within 24 hours; "
                        "OpenAI's, Anthropic's, the Gemini API's and Vertex AI's batch APIs): collects the "
                        "batches a run before submitted, grades what has replies, submits the rest; run it again until nothing waits")] = False,
    batch_bucket: Annotated[Optional[str], typer.Option(
        "--batch-bucket", help="with --batch, for Vertex AI judges (litellm:vertex_ai/...): the Cloud Storage "
                               "location (gs://BUCKET or gs://BUCKET/PREFIX) batch prediction reads its requests "
                               "from and writes its results to (default: the judges file's batch_bucket)",
        envvar=config.name("FRAMEJUDGE_BATCH_BUCKET"))] = None,
    triage_path: Annotated[Optional[Path], typer.Option(
        "--triage", help="a thresholds file from framejudge triage, or 'default': the reference judge's own, "
                         "earned on its development data (refused for other judges): mark every verdict auto or "
                         "to_review")] = None,
    review_out: Annotated[Optional[Path], typer.Option(
        help="with --triage: write the to_review turns as JSONL label rows to fill in (and feed back with --human)")] = None,
    engine: Annotated[Engine, typer.Option(
        help="where the run goes: local (this process and its decoding processes) or ray (decoding and grading "
             "actors on a Ray cluster, the endpoint's limits held cluster-wide; needs the extra named ray)")] = Engine.local,
    address: Annotated[Optional[str], typer.Option(
        help="with --engine ray: the cluster to join (auto, HOST:PORT or ray://HOST:PORT; default: start a local "
             "one on loopback for this run)")] = None,
    grading_actors: Annotated[int, typer.Option(
        help="with --engine ray: grading actors (async; each keeps its share of the endpoint's calls in flight)",
        min=1, max=1024)] = 2,
) -> None:
    """Grade ITEMS and append verdicts to --out as they finish, then print a summary.

    Exit status: 0 every turn has a verdict; 1 some turns could not be graded (their judge error
    records are in --out, and each kind of error is named on stderr with its first message); 2 refused
    before grading (bad input, or a judge that cannot be called); 130 interrupted (what was graded is
    kept)."""
    from pydantic import ValidationError

    from ..files import check_output, first_problem, write_problem
    from ..frame_sampler import make_params
    from ..judge import Grader, ItemsError, load_items
    from ..judge.batch import check_question_times
    from ..judge.base import preflight, unused_options
    from ..rubrics import get_rubric
    from ..runner.judges import Judges
    from ..runner.local import planned_turns
    from ..calibration.triage import marker, mismatch, review_rows
    from ..runner.resume import mark_kept, plan_resume, superseded_path
    from ..schema import DecodeLimits, GradeOptions
    from .triage import load_thresholds

    if engine is not Engine.ray and (address is not None or grading_actors != 2):
        fail(f"--{'address' if address is not None else 'grading-actors'} is for --engine ray")
    if engine is Engine.ray:
        from ..runner.ray_engine import RayUnavailable, check_reachable, import_ray, on_loopback

        if batch:
            fail("--batch sends the calls through the provider's batch API from this machine; use it without "
                 "--engine ray")

        try:
            import_ray(local=on_loopback(address))
            if address is not None:
                check_reachable(address)
        except RayUnavailable as exc:
            fail(str(exc))
    try:
        the_items = load_items(items)
        check_output(out_path, "verdicts", inputs=[items], read_back=True)
        if summary_json is not None and str(summary_json) != "-":
            check_output(summary_json, "summary", inputs=[items, out_path])
        if review_out is not None:
            if triage_path is None:
                raise ItemsError("--review-out writes the turns --triage sends to review: give --triage too")
            check_outputs({"summary": summary_json if str(summary_json) != "-" else None, "review rows": review_out},
                          inputs=[items, out_path, triage_path])
        thresholds = load_thresholds(triage_path) if triage_path is not None else None
        the_rubric = get_rubric(rubric)
        judges = Judges.from_env(judges_file)
        judges.api_base = api_base or judges.api_base
        judges.require_listed(judge)
        judges.override(judge, concurrency, max_concurrency, service_tier=service_tier,
                        batch_bucket=batch_bucket if batch else None)
        the_judge = judges.make(judge)
        params = make_params(n=n, strategy=strategy, fps=fps, lookback=lookback, max_side=max_side)
        options = GradeOptions(sampler=params, swap=swap, samples=samples, sample_temperature=sample_temperature,
                               blind=blind, cache=not no_cache, video_input=video_input, clip_fps=clip_fps)
        unused = unused_options(the_judge, judge, samples, blind, video_input=video_input)
        if unused:
            raise ItemsError(unused)
        check_media_root(media_root)
        try:
            decoding = DecodeLimits(workers=decode_workers, timeout_s=decode_timeout, memory_mb=decode_memory_mb)
        except ValidationError as exc:
            fail(first_problem(exc, "option", names={"workers": "--decode-workers", "timeout_s": "--decode-timeout",
                                                     "memory_mb": "--decode-memory-mb"}))
        if the_judge.backend != "reference" and not (no_cache and cache_off()):
            # the verdict cache (--no-cache: none), the frame cache of the decodes (FRAMEJUDGE_NO_CACHE: none)
            check_cache_folder("pass --no-cache and set FRAMEJUDGE_NO_CACHE=1 to use neither cache")
        grader = Grader(the_judge, the_rubric, options, media_root=media_root or items.resolve().parent)
        check_question_times(grader, the_items)  # no turn asked after the end of its video
        if thresholds is not None:
            problem = mismatch(thresholds, the_judge.backend, the_judge.model_id, grader.rubric_hash)
            if problem:
                raise ItemsError(f"--triage {triage_path}: {problem}")
        billed = None  # a batch run's calls: its batch API's title and share of the synchronous price
        if batch:
            from ..runner.batch_api import batch_api, ledger_path

            api = batch_api(the_judge, judge)  # refused here where framejudge speaks none
            billed = (api.title, api.price)
            check_output(ledger_path(out_path), "batch ledger", inputs=[items], read_back=True)
        plan = plan_resume(grader, the_items, out_path, regrade=regrade)
        mark = marker(thresholds) if thresholds is not None else None
        if mark is not None:
            mark_kept(plan, out_path, the_items, mark)
        if plan.superseded:
            check_output(superseded_path(out_path), "superseded verdicts", inputs=[items], read_back=True)
    except ValidationError as exc:  # an option the shared models refuse, named as the model names it
        fail(first_problem(exc, "option"))
    todo = plan.turns
    planned = planned_turns(grader, plan.work)
    calls = sum(p.calls for p in planned)
    if calls and not batch:  # a batch run checks the provider's credentials at its first step, before any upload
        asyncio.run(preflight(the_judge, judge))  # credentials set, a self-hosted server up: before any estimate
    estimate = getattr(the_judge, "estimate", None)
    if estimate is None:
        est_text = "no tokens, no cost (runs locally)"
    else:
        est_text = estimate(the_rubric, planned, params.n, **({"batch": billed} if billed else {}))
    kept = f", {plan.kept} already graded in {out_path}" if plan.kept else ""
    err.print(f"{len(the_items)} items, {todo} turn(s) to grade{kept}, about {calls} judge call(s): {est_text}",
              highlight=False)
    if plan.superseded:
        err.print(f"regrading: {len(plan.superseded)} verdict(s) graded differently move to "
                  f"{superseded_path(out_path)}", highlight=False)
    confirm_spending(the_judge, yes)
    if batch:
        from .batch_run import run_through_batches

        summary = run_through_batches(grader, the_items, out_path, spec=judge, plan=plan, decoding=decoding,
                                      concurrency=concurrency, mark=mark)
    elif engine is Engine.ray:
        from ..runner.ray_engine import RaySettings
        from .batch_run import run_on_cluster

        summary = run_on_cluster(grader, the_items, out_path, spec=judge, judges=judges, plan=plan, mark=mark,
                                 decoding=decoding, settings=RaySettings(address=address, graders=grading_actors,
                                                                         decoders=decode_workers))
    else:
        from .batch_run import run_graded

        summary = run_graded(grader, the_items, out_path, todo=todo, concurrency=concurrency, plan=plan, mark=mark,
                             decoding=decoding)
    problems = []
    if review_out is not None:
        from ..records import latest, read_records

        keys = {(it.id, t) for it in the_items for t in range(len(it.turns))}
        standing = [v for k, v in sorted(latest(read_records(out_path))[0].items()) if k in keys]
        problems.append(write_output(review_out, "review rows", "".join(
            row.model_dump_json(exclude_none=True) + "\n" for row in review_rows(standing))))
    if summary_json is not None and str(summary_json) != "-":
        try:
            summary_json.write_text(summary.model_dump_json(indent=1), encoding="utf-8")
        except OSError as exc:
            out.print_json(summary.model_dump_json())
            fail(write_problem(summary_json, "summary", exc))
    out.print_json(summary.model_dump_json())
    warn_unknown_usage(summary.usage_unknown)
    report_problems(problems)
    exit_for_errors(summary.errors, summary.error_examples)
