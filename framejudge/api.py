"""The core job from Python: grade items, then measure the grades against people.

    from framejudge import calibrate, grade

    records = grade("items.jsonl", judge="reference", out="verdicts.jsonl")
    result = calibrate("labels.jsonl", "verdicts.jsonl")
    for field in result.fields:
        print(field.field, field.judge_percent.value, field.judge_kappa.value, field.human_alpha.estimate)

They make the library calls the CLI's `grade` and `calibrate` make, with the same options model
(`GradeOptions`) as the CLI and the HTTP API. Bad input raises a `FramejudgeError` (an `ItemsError`,
`JudgeSpecError`, `LabelsError`, ... each with a stable `code`); a turn the judge could not grade is a
`JudgeError` record among the results, never an exception and never a grade.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from .calibration.audit import AuditResult
from .calibration.calibrate import calibration
from .calibration.inputs import LabelsError, human_rows, load_human_labels, unique_labels
from .errors import FramejudgeError
from .files import first_problem
from .frame_sampler.isolate import not_while_starting_a_worker
from .judge import Grader, load_items
from .judge.batch import GradeSummary, check_question_times, check_video_urls, checked_items, summarize
from .judge.base import Stoppable, preflight, unused_options
from .progress import Progress, Reporter, every_seconds
from .records import ItemsError, Record, latest, read_records
from .rubrics import get_rubric
from .rubrics.model import Rubric
from .runner.decode import start_decoders
from .runner.judges import Judges
from .runner.local import planned_turns, run_batch
from .runner.resume import plan_resume
from .schema import DecodeLimits, GradeOptions, HumanLabel, Item, JudgeError, Verdict

PathLike = str | os.PathLike[str]


class InvalidOptions(FramejudgeError, ValueError):
    """Grading options that the models refuse, or that would do nothing with the judge."""

    code = "invalid_options"


def _items(items: PathLike | Sequence[Item | Mapping[str, Any]]) -> tuple[list[Item], Path | None]:
    if isinstance(items, (str, os.PathLike)):
        return load_items(items), Path(items)
    rows = [(f"items[{k}]", it.model_dump() if isinstance(it, Item) else it) for k, it in enumerate(items)]
    checked = checked_items(rows, ItemsError)
    check_video_urls(zip((where for where, _ in rows), checked), ItemsError)
    return checked, None


Settings = TypeVar("Settings", GradeOptions, DecodeLimits)


def _settings(kind: type[Settings], given: Settings | Mapping[str, Any] | None, name: str) -> Settings:
    """`given` as a `kind` (a mapping of its fields, or None: the defaults); InvalidOptions naming the
    argument `name` and its first problem where it is not one."""
    if isinstance(given, kind):
        return given
    try:
        return kind.model_validate(dict(given or {}))
    except ValidationError as exc:
        raise InvalidOptions(first_problem(exc, name)) from None


class Graded(list[Record]):
    """What `grade` and `agrade` return: the standing record of each turn in item order (a list of
    `Verdict`s and `JudgeError`s), with `summary`, the run's counts as `framejudge grade` prints them
    (turns graded, categories, preferences, tokens and cost, and `errors` by kind with
    `error_examples`, each kind's first message). `failed` is the number of turns that could not be
    graded: where it is above 0, `framejudge grade` exits 1."""

    def __init__(self, records: Sequence[Record], items: int) -> None:
        super().__init__(records)
        self.summary: GradeSummary = summarize(list(records), items)

    @property
    def failed(self) -> int:
        return sum(self.summary.errors.values())


async def agrade(
    items: PathLike | Sequence[Item | Mapping[str, Any]],
    *,
    judge: str = "reference",
    rubric: str | Rubric = "video-qa",
    options: GradeOptions | Mapping[str, Any] | None = None,
    decoding: DecodeLimits | Mapping[str, Any] | None = None,
    out: PathLike | None = None,
    media_root: PathLike | None = None,
    judges_file: PathLike | None = None,
    api_base: str | None = None,
    concurrency: int = 4,
    regrade: bool = False,
    batch: bool = False,
    engine: str = "local",
    address: str | None = None,
    progress: Callable[[Progress], None] | None = None,
) -> Graded:
    """`grade`, for code already inside an event loop."""
    not_while_starting_a_worker()  # a script's unguarded grade(), run again as a decoding process starts: not there
    the_items, source = _items(items)
    the_rubric = get_rubric(rubric) if isinstance(rubric, str) else rubric
    the_options = _settings(GradeOptions, options, "options")
    limits = _settings(DecodeLimits, decoding, "decoding")
    if concurrency < 1:
        raise InvalidOptions("concurrency must be at least 1")
    if batch and out is None:
        raise InvalidOptions("batch=True keeps its batches' ledger and replies beside the verdicts file, for the "
                             "next call to collect: give out")
    if engine not in ("local", "ray"):
        raise InvalidOptions(f"engine {engine!r}: local or ray")
    try:
        every_s = every_seconds()  # how often the framejudge.progress log says how far the run is
    except ValueError as exc:
        raise InvalidOptions(str(exc)) from None
    if address is not None and engine != "ray":
        raise InvalidOptions("address is for engine='ray'")
    if batch and engine != "local":
        raise InvalidOptions("batch=True sends the calls through the provider's batch API: it runs on the local engine")
    if engine == "ray":
        from .runner.ray_engine import check_reachable, import_ray, on_loopback

        import_ray(local=on_loopback(address))
        if address is not None:
            check_reachable(address)
    judges = Judges.from_env(Path(judges_file) if judges_file is not None else None)
    judges.api_base = api_base or judges.api_base
    judges.require_listed(judge)
    the_judge = judges.make(judge)
    unused = unused_options(the_judge, judge, the_options.samples, the_options.blind, flag="options.",
                            video_input=the_options.video_input)
    if unused:
        raise InvalidOptions(unused)
    root = Path(media_root) if media_root is not None else (source.resolve().parent if source else Path.cwd())
    if not root.is_dir():
        raise ItemsError(f"media_root {root}: " + ("not a folder" if root.exists() else "no such folder"))
    grader = Grader(the_judge, the_rubric, the_options, media_root=root)
    await asyncio.to_thread(check_question_times, grader, the_items)  # no turn asked after its video ends
    with tempfile.TemporaryDirectory(prefix="framejudge-") as scratch:
        out_path = Path(out) if out is not None else Path(scratch) / "verdicts.jsonl"
        plan = plan_resume(grader, the_items, out_path, regrade=regrade)
        if not batch and any(p.calls for p in planned_turns(grader, plan.work)):
            await preflight(the_judge, judge)  # credentials set, a self-hosted server up: refused before any call
        reporter = Reporter(plan.turns, on_change=progress, every_s=every_s)
        # decoding in killable, memory-capped processes, as the CLI's (a Ray cluster's decoding actors have their
        # own); started in this thread, so that from the main thread they are born deaf to the terminal's Ctrl-C
        decoder = start_decoders(grader, the_items, plan.turns, limits) if engine == "local" else None
        try:
            if batch:  # what `grade --batch` runs: collect, grade what has replies, submit the rest
                from .runner.batch_api import BatchRun

                await BatchRun(grader, judge, out_path).run(the_items, plan, concurrency=concurrency)
            elif engine == "ray":
                from .runner.ray_engine import RaySettings, run_on_ray, setup_of

                await reporter.watch(run_on_ray(grader, the_items, out_path, spec=judge,
                                                setup=setup_of(grader, judges, judge), plan=plan,
                                                settings=RaySettings(address=address), decoding=limits,
                                                on_progress=reporter.update))
            else:
                await reporter.watch(run_batch(grader, the_items, out_path, concurrency=concurrency, plan=plan,
                                               prefetch=(decoder.workers if decoder else 0) + 2,
                                               on_progress=reporter.update))
        except asyncio.CancelledError:  # Ctrl-C in grade(), or the caller's cancel: work in threads stops too
            if isinstance(the_judge, Stoppable):
                the_judge.stop()
            raise
        finally:  # decodes in flight end now (a stopped run's threads waiting on them with it), not after their limit
            if decoder is not None:
                decoder.close(final=True)
        verdicts, errors = latest(read_records(out_path)) if out_path.exists() else ({}, {})
    standing: dict[tuple[str, int], Record] = {**errors, **verdicts}
    return Graded([standing[(it.id, t)] for it in the_items for t in range(len(it.turns)) if (it.id, t) in standing],
                  len(the_items))


def grade(
    items: PathLike | Sequence[Item | Mapping[str, Any]],
    *,
    judge: str = "reference",
    rubric: str | Rubric = "video-qa",
    options: GradeOptions | Mapping[str, Any] | None = None,
    decoding: DecodeLimits | Mapping[str, Any] | None = None,
    out: PathLike | None = None,
    media_root: PathLike | None = None,
    judges_file: PathLike | None = None,
    api_base: str | None = None,
    concurrency: int = 4,
    regrade: bool = False,
    batch: bool = False,
    engine: str = "local",
    address: str | None = None,
    progress: Callable[[Progress], None] | None = None,
) -> Graded:
    """Grade every turn of `items` (an items JSONL file, or Items / dicts) with `judge` under
    `rubric`, and return the standing record of each turn: a `Verdict`, or a `JudgeError` for a turn
    that could not be graded, as a `Graded` list whose `summary` counts them as the CLI's summary does
    (`failed`: the turns not graded, each kind of error in `summary.errors` with its first message in
    `summary.error_examples`).

    `out`: a verdicts file to append to as records finish; a rerun grades only the turns without a
    standing verdict made the same way (`regrade=True` grades those made differently again). Without
    it the records go to a temporary file. `options` are the grading options of the CLI and the API
    (`GradeOptions`: sampler, swap, samples, blind, cache, triage ...). `media_root`: where relative
    video paths are (default: the items file's folder, else the working folder). `judges_file`,
    `api_base`: as `--judges` and `--api-base` (default: FRAMEJUDGE_JUDGES_FILE, FRAMEJUDGE_API_BASE).
    `batch=True` sends the calls through the provider's batch API, as `framejudge grade --batch`
    does (OpenAI's, Anthropic's, the Gemini API's and Vertex AI's, whose bucket is the judges file's
    `batch_bucket`; billed at half the synchronous price, answered
    within 24 hours): each call collects the batches the calls before it submitted into `out`
    (required: the ledger and replies are kept beside it), grades the turns whose calls all have
    replies, and submits the rest; the records returned are those standing so far, and a turn still
    waiting for a batch has none yet: call it again until every turn has one.
    `engine="ray"` grades on a Ray cluster (`address`: the cluster's, "auto" or "ray://HOST:PORT";
    default: a local one on loopback for this call), with the same records and resume rules; it
    needs the `framejudge[ray]` extra (RayUnavailable without it).
    `progress`: called with a `framejudge.Progress` (phase, done, total, errors, rate, ...) at every
    change while the turns are graded (a turn finished, a model begun or done loading), in the
    event loop's thread; the `framejudge.progress` logger says the same at INFO every few seconds
    (FRAMEJUDGE_PROGRESS_SECONDS). Not for `batch=True`, whose turns wait for the provider.
    A KeyboardInterrupt (Ctrl-C) stops the run; the records written to `out` before it are kept.
    Raises a FramejudgeError for bad input before grading anything."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass  # no loop running in this thread: grade runs its own
    else:
        raise InvalidOptions("grade() runs an event loop of its own and was called inside a running one (a "
                             "notebook, an async function): use `await framejudge.agrade(...)` there")
    return asyncio.run(agrade(items, judge=judge, rubric=rubric, options=options, out=out, media_root=media_root,
                              decoding=decoding, judges_file=judges_file, api_base=api_base, concurrency=concurrency,
                              regrade=regrade, batch=batch, engine=engine, address=address, progress=progress))


def _labels(labels: Sequence[HumanLabel | Mapping[str, Any]]) -> list[HumanLabel]:
    """Labels given as HumanLabels or dicts, checked as a labels file's rows are (each named labels[k])."""
    checked: list[tuple[str, HumanLabel]] = []
    for k, label in enumerate(labels):
        try:
            checked.append((f"labels[{k}]", label if isinstance(label, HumanLabel) else HumanLabel.model_validate(label)))
        except ValidationError as exc:
            raise LabelsError(f"labels[{k}]: {first_problem(exc)}") from None
    return unique_labels(checked, LabelsError)


def _records(verdicts: Sequence[Record | Mapping[str, Any]]) -> list[Record]:
    """Records given as Verdicts and JudgeErrors (what `grade` returns) or as the dicts of a verdicts file's lines."""
    out: list[Record] = []
    for k, record in enumerate(verdicts):
        if isinstance(record, (Verdict, JudgeError)):
            out.append(record)
            continue
        try:
            if not isinstance(record, Mapping):
                raise ItemsError(f"verdicts[{k}]: a Verdict, a JudgeError or a dict, not {type(record).__name__}")
            model = JudgeError if record.get("record") == "judge_error" else Verdict
            out.append(model.model_validate(record))
        except ValidationError as exc:
            raise ItemsError(f"verdicts[{k}]: not a verdict or judge error record ({first_problem(exc)})") from None
    return out


def calibrate(
    labels: PathLike | Sequence[HumanLabel | Mapping[str, Any]],
    verdicts: PathLike | Sequence[Record | Mapping[str, Any]],
    *,
    replicates: int = 1000,
    seed: int = 0,
) -> AuditResult:
    """The judge's agreement with people, beside the people's agreement with each other, per label
    field (`result.fields`: percent agreement, Cohen's kappa and Krippendorff's alpha with bootstrap
    intervals, the confusion matrix, ...), as `framejudge calibrate` computes it. `labels`: a human
    labels file (JSONL or CSV), or HumanLabels or dicts of its rows; `verdicts`: a verdicts file, the records
    `grade` returned, or dicts of a verdicts file's lines. Raises LabelsError for a label the labels model
    refuses, a second label by one annotator for one turn, or when no labelled turn has a verdict."""
    human = load_human_labels(Path(labels)) if isinstance(labels, (str, os.PathLike)) else _labels(labels)
    records = read_records(Path(verdicts)) if isinstance(verdicts, (str, os.PathLike)) else _records(verdicts)
    if replicates < 1:
        raise InvalidOptions("replicates must be at least 1")
    where = str(verdicts) if isinstance(verdicts, (str, os.PathLike)) else "the verdicts"
    return calibration(human_rows(human), records, replicates=replicates, seed=seed, where=where)
