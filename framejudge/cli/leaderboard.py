"""framejudge leaderboard and framejudge compare: models' answers to the same turns meet in
battles, each an ordinary pairwise grading (rules first, both orders, cache, resumable)."""

from __future__ import annotations

import asyncio
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from ..env import cache_off
from .console import err, fail, flagged, out
from .options import ApiBase, Frames, JudgeSpec, JudgesPath, NoCache, RubricRef, Yes, check_media_root, confirm_spending
from .outputs import check_cache_folder, check_outputs, exit_for_errors, report_problems, write_output


class Pairs(str, Enum):
    baseline = "baseline"
    all = "all"


Battles = Annotated[Path, typer.Option("--battles", help="battle verdicts JSONL; a rerun into it grades only the "
                                                         "battles it lacks")]
Swap = Annotated[Optional[bool], typer.Option("--swap/--no-swap", help="grade every battle in both orders (on "
                                                                      "unless --no-swap, as for a job of battle items)",
                                             show_default=False)]
MediaRoot = Annotated[Optional[Path], typer.Option(help="relative video paths are under here (default: the first "
                                                        "items file's folder)")]
Concurrency = Annotated[Optional[int], typer.Option(help="model calls in flight at the start (default: the judges "
                                                         "file's, else 8; 4 items)", min=1)]
Regrade = Annotated[bool, typer.Option("--regrade", help="grade again the battles in --battles graded differently; "
                                                         "the old records move to <battles>.superseded.jsonl")]


def parse_named(named: Optional[list[str]]) -> list[tuple[str, Path]]:
    """--model NAME=FILE values as (name, file)."""
    pairs = []
    for value in named or []:
        name, eq, path = value.partition("=")
        if not eq or not name or not path:
            fail(f"--model {value}: give NAME=FILE (a model's name and its items file)")
        pairs.append((name, Path(path)))
    return pairs


def grade_battles(plan: Any, battles: Path, inputs: list[Path], judge: str, api_base: Optional[str],
                  judges_file: Optional[Path], rubric: str, frames: int, swap: Optional[bool], no_cache: bool,
                  media_root: Optional[Path], concurrency: Optional[int], regrade: bool, yes: bool) -> list[Any]:
    """Grade the plan's battles into `battles` as `framejudge grade` grades items (resuming it),
    with its progress; the file's records afterwards."""
    from pydantic import ValidationError

    from ..files import check_output, first_problem
    from ..frame_sampler import make_params
    from ..judge import Grader
    from ..judge.base import preflight
    from ..judge.batch import check_question_times
    from ..records import read_records
    from ..leaderboard.plan import battle_options
    from ..rubrics import get_rubric
    from ..runner.judges import Judges
    from ..runner.local import planned_turns
    from ..runner.resume import plan_resume, superseded_path
    from ..schema import DecodeLimits, GradeOptions
    from .batch_run import Words, run_graded

    items = plan.items
    try:
        the_rubric = get_rubric(rubric)
        judges = Judges.from_env(judges_file)
        judges.api_base = api_base or judges.api_base
        judges.require_listed(judge)
        judges.override(judge, concurrency, None)
        the_judge = judges.make(judge)
        params = make_params(n=frames)
        check_media_root(media_root)
        if the_judge.backend != "reference" and not (no_cache and cache_off()):
            check_cache_folder("pass --no-cache and set FRAMEJUDGE_NO_CACHE=1 to use neither cache")
        grader = Grader(the_judge, the_rubric, battle_options(GradeOptions(sampler=params, swap=swap,
                                                                          cache=not no_cache)),
                        media_root=media_root or inputs[0].resolve().parent)
        check_question_times(grader, items)  # no turn asked after the end of its video
        resume = plan.restrict(plan_resume(grader, items, battles, regrade=regrade))
        if resume.superseded:
            check_output(superseded_path(battles), "superseded verdicts", inputs=inputs, read_back=True)
    except ValidationError as exc:
        fail(first_problem(exc, "option"))
    planned = planned_turns(grader, resume.work)
    todo, calls = resume.turns, sum(p.calls for p in planned)
    if calls:
        asyncio.run(preflight(the_judge, judge))  # credentials set, a self-hosted server up: before any estimate
    estimate = getattr(the_judge, "estimate", None)
    est_text = estimate(the_rubric, planned, params.n) if estimate else "no tokens, no cost (runs locally)"
    kept = f", {plan.size - todo} already graded in {battles}" if plan.size - todo else ""
    err.print(f"{plan.size} battle(s) of {len(plan.pairs)} pair(s) of models, {todo} to grade{kept}, about {calls} "
              f"judge call(s): {est_text}", highlight=False)
    if resume.superseded:
        err.print(f"regrading: {len(resume.superseded)} verdict(s) graded differently move to "
                  f"{superseded_path(battles)}", highlight=False)
    if todo:
        confirm_spending(the_judge, yes)
    run_graded(grader, items, battles, todo=todo, concurrency=concurrency, plan=resume, decoding=DecodeLimits(),
               words=Words(label="battles", finished="battle(s)", in_hand="battle item(s)", kind="battles"),
               empty_bar=False)
    return read_records(battles)


def warn_unanswered(lineup: Any) -> None:
    for m in lineup.models:
        missing = lineup.unanswered(m)
        if missing:
            shown = ", ".join(f"{i!r} turn {t}" for i, t in missing[:3]) + (", ..." if len(missing) > 3 else "")
            err.print(flagged("note:", "yellow", f"model {m!r} ({lineup.sources[m]}) answered {lineup.turns - len(missing)} "
                              f"of {lineup.turns} turn(s) (not {shown}): it is compared on those it answered"),
                      highlight=False, soft_wrap=True)


def load_inputs(paths: list[Path], named: list[tuple[str, Path]]) -> Any:
    from ..leaderboard.inputs import load_lineup

    return load_lineup(paths, named)


def leaderboard(
    items: Annotated[Optional[list[Path]], typer.Argument(
        help="items files: one whose turns carry responses (model -> answer), or one per model (its answers as "
             "response_a, the model named by the file's stem)")] = None,
    battles: Battles = Path("battles.jsonl"),
    model: Annotated[Optional[list[str]], typer.Option(
        "--model", help="NAME=FILE: FILE holds model NAME's answers as response_a (repeatable)")] = None,
    baseline: Annotated[Optional[str], typer.Option(help="the model every other one meets (default: the first)")] = None,
    pairs: Annotated[Pairs, typer.Option(help="baseline: every model against the baseline; all: every pair")] = Pairs.baseline,
    budget: Annotated[Optional[int], typer.Option(help="at most this many battles, spread evenly over the pairs and "
                                                       "the items")] = None,
    seed: Annotated[int, typer.Option(help="seed of the battle plan and the bootstrap", min=0, max=2**32 - 1)] = 0,
    replicates: Annotated[int, typer.Option(help="bootstrap replicates", min=1)] = 1000,
    by: Annotated[Optional[list[str]], typer.Option("--by", help="also a table per value of: domain, task_type, or a "
                                                                 "metadata field (repeatable)")] = None,
    out_path: Annotated[Optional[Path], typer.Option("--out", help="write the board as JSON here")] = None,
    html: Annotated[Optional[Path], typer.Option(help="write the board as a self-contained HTML page here")] = None,
    items_out: Annotated[Optional[Path], typer.Option(
        "--items-out", help="write the battle items (JSONL) here and grade nothing: submit them as a job, then "
                            "POST /v1/leaderboards")] = None,
    judge: JudgeSpec = "reference",
    api_base: ApiBase = None,
    judges_file: JudgesPath = None,
    rubric: RubricRef = "video-qa",
    frames: Frames = 8,
    swap: Swap = None,
    no_cache: NoCache = False,
    media_root: MediaRoot = None,
    concurrency: Concurrency = None,
    regrade: Regrade = False,
    yes: Yes = False,
) -> None:
    """Grade battles between models' answers to the same turns, then print their leaderboard.

    Exit status: 0 every battle has a verdict; 1 some battles could not be graded (their judge error
    records are in --battles, left out of the board, and each kind of error is named on stderr with
    its first message); 2 refused before grading (bad input, or a judge that cannot be called)."""
    from ..files import check_output
    from ..leaderboard.plan import model_pairs, outcomes, plan_battles
    from ..leaderboard.stats import check_slice_keys

    named = parse_named(model)
    paths = list(items or [])
    inputs = paths + [p for _, p in named]
    if not inputs:
        fail("name the models' items files (ITEMS... or --model NAME=FILE)")
    check_output(battles, "battles", inputs=inputs, read_back=True)
    check_outputs({"board": out_path, "page": html, "battle items": items_out}, inputs=[*inputs, battles])
    lineup = load_inputs(paths, named)
    warn_unanswered(lineup)
    try:  # before anything is graded: a slice key the battles cannot have
        check_slice_keys(by or [], {k for it in lineup.items for k in it.metadata})
    except ValueError as exc:
        fail(f"--{exc}")
    the_pairs = model_pairs(lineup.models, baseline, all_pairs=pairs is Pairs.all)
    plan = plan_battles(lineup, the_pairs, budget=budget, seed=seed, baseline=baseline or lineup.models[0])
    if budget is not None and plan.size < plan.possible:
        err.print(f"budget: {plan.size} of the {plan.possible} possible battle(s)", highlight=False)
    if items_out is not None:
        report_problems([write_output(items_out, "battle items", "".join(
            it.model_dump_json(exclude_none=True) + "\n" for it in plan.items))])
        err.print(f"wrote {len(plan.items)} battle item(s) ({plan.size} battle(s)) to {items_out}", highlight=False)
        return
    records = grade_battles(plan, battles, inputs, judge, api_base, judges_file, rubric, frames, swap, no_cache,
                            media_root, concurrency, regrade, yes)
    results = outcomes(records, plan)
    failed = sum(o.error is not None for o in results)
    err.print(f"{len(results)} battle(s) graded, {failed} judge error(s)", highlight=False)
    report_problems(board_outputs(results, plan.baseline, replicates, seed, by or [], out_path, html,
                                  graded_under(rubric)))
    exit_for_battle_errors(records, plan, battles, "board")


def exit_for_battle_errors(records: list[Any], plan: Any, battles: Path, what: str) -> None:
    """Exit 1 where some of the plan's battles could not be graded, with each kind of error, how many
    and its first message (as `grade` does); else go on to exit 0."""
    from ..judge.batch import errors_by_kind
    from ..leaderboard.plan import standing
    from ..schema import JudgeError

    failed = [r for _, _, r in standing(records, plan) if isinstance(r, JudgeError)]
    exit_for_errors(*errors_by_kind(failed),
                    f"judge error records in {battles}, left out of the {what}; a rerun grades them again")


def graded_under(rubric: str) -> Any:
    """The rubric the battles were just graded under (grade_battles has read it once already)."""
    from ..rubrics import get_rubric

    return get_rubric(rubric)


def board_outputs(results: list[Any], baseline: Optional[str], replicates: int, seed: int, by: list[str],
                  out_path: Optional[Path], html: Optional[Path], rubric: Any = None) -> list[Optional[str]]:
    """Build the board from the battles' outcomes, print it, write its JSON and page; the outputs
    that could not be written. `rubric`: the one they were graded under (the tie columns' words)."""
    from ..leaderboard.stats import build_board

    try:
        board = build_board(results, baseline=baseline, replicates=replicates, seed=seed, by=by, rubric=rubric)
    except ValueError as exc:
        fail(str(exc))
    show_board(board)
    for key, groups in board.slices.items():
        for value, sub in groups.items():
            show_board(sub, title=f"by {key}: {value} ({sub.battles} battle(s), {sub.errors} judge error(s); "
                                  f"against {sub.baseline})")
    problems: list[Optional[str]] = []
    if out_path is not None:
        problems.append(write_output(out_path, "board", board.model_dump_json(indent=1) + "\n"))
    if html is not None:
        from ..leaderboard.page import render_board_html

        problems.append(write_output(html, "page", render_board_html(board)))
    return problems


def interval(x: Any, digits: int = 3) -> str:
    """'estimate [low, high]', or the reason it is undefined."""
    if x is None:
        return ""
    if x.estimate is None:
        return "undefined"  # the reason is in the board's JSON
    if x.low is None or x.high is None:
        return f"{x.estimate:.{digits}f}"
    return f"{x.estimate:.{digits}f} [{x.low:.{digits}f}, {x.high:.{digits}f}]"


def show_board(board: Any, title: Optional[str] = None) -> None:
    """The board's table: per model its battles (and the turns they cover), wins / ties (Both,
    Neither: in the rubric's words, "both good" and "both bad" for video-qa) / losses against the
    baseline, win rate and strength with their intervals."""
    level = f"{board.level:.0%}"
    table = Table(title=title or f"leaderboard: {board.battles} battle(s), {board.errors} judge error(s); "
                                 f"against {board.baseline}")
    both, neither = (board.ties[c].label if c in board.ties else c for c in ("Both", "Neither"))
    for col in ("rank", "model", "battles (turns)", f"W/{both}/{neither}/L", f"win rate [{level}]",
                "length-controlled", f"Successful [{level}]", f"strength [{level}]"):
        table.add_column(col, overflow="fold")
    for row in board.models:
        vs = row.vs_baseline
        wtl = "baseline" if row.model == board.baseline else "" if vs is None else \
            f"{vs.wins}/{vs.both}/{vs.neither}/{vs.losses}"
        table.add_row("" if row.rank is None else str(row.rank), row.model, f"{row.battles} ({row.turns})", wtl,
                      "" if vs is None else interval(vs.win_rate), "" if vs is None else interval(vs.length_controlled),
                      interval(row.successful), interval(row.strength, 2))
    out.print(table)
    for note in board.notes:
        out.print(f"note: {note}", highlight=False, soft_wrap=True)
    out.print(f"judge biases on this run: {bias_line(board.bias)}", highlight=False, soft_wrap=True)


def bias_line(bias: Any) -> str:
    """The footnote: position consistency (both orders) and the length effect."""
    position = (f"position consistency {bias.position_consistency:.1%} ({bias.swap_consistent} of "
                f"{bias.swap_graded} battles graded in both orders agreed)" if bias.position_consistency is not None
                else "position consistency not measured (no battle graded in both orders)")
    longer = (f"the longer answer won {bias.longer_won_share:.1%} of {bias.length_decided} decided battles"
              if bias.longer_won_share is not None else "no decided battle between answers of different lengths")
    return f"{position}; {longer}; length coefficient {interval(bias.length_coefficient, 2) or 'undefined'}"


def compare(
    new: Annotated[Path, typer.Argument(help="items file of the new version's answers (response_a)")],
    baseline: Annotated[Path, typer.Argument(help="items file of the baseline's answers to the same turns")],
    battles: Battles = Path("compare.jsonl"),
    flipped: Annotated[Optional[Path], typer.Option(
        help="write the turns that flipped (Successful in the baseline, not in the new version) as JSONL here")] = None,
    out_path: Annotated[Optional[Path], typer.Option("--out", help="write the comparison as JSON here")] = None,
    seed: Annotated[int, typer.Option(help="seed of which version answers as A", min=0, max=2**32 - 1)] = 0,
    judge: JudgeSpec = "reference",
    api_base: ApiBase = None,
    judges_file: JudgesPath = None,
    rubric: RubricRef = "video-qa",
    frames: Frames = 8,
    swap: Swap = None,
    no_cache: NoCache = False,
    media_root: MediaRoot = None,
    concurrency: Concurrency = None,
    regrade: Regrade = False,
    yes: Yes = False,
) -> None:
    """Grade NEW against BASELINE turn by turn: wins, ties and losses, an exact paired test on
    Successful, and the turns that flipped.

    Exit status: 0 every turn's battle has a verdict; 1 some could not be graded (their judge error
    records are in --battles, left out of the comparison, and each kind of error is named on stderr
    with its first message); 2 refused before grading (bad input, or a judge that cannot be called)."""
    from ..files import check_output
    from ..leaderboard.compare import compare as compare_runs
    from ..leaderboard.plan import plan_battles

    check_output(battles, "battles", inputs=[new, baseline], read_back=True)
    check_outputs({"flipped turns": flipped, "comparison": out_path}, inputs=[new, baseline, battles])
    names = (new.stem, baseline.stem) if new.stem != baseline.stem else ("new", "baseline")
    lineup = load_inputs([], [(names[0], new), (names[1], baseline)])
    warn_unanswered(lineup)
    plan = plan_battles(lineup, [names], seed=seed, baseline=names[1])
    records = grade_battles(plan, battles, [new, baseline], judge, api_base, judges_file, rubric, frames, swap,
                            no_cache, media_root, concurrency, regrade, yes)
    result = compare_runs(records, plan, *names, rubric=graded_under(rubric))
    problems = []
    if flipped is not None:
        problems.append(write_output(flipped, "flipped turns", "".join(f.model_dump_json() + "\n"
                                                                       for f in result.flipped)))
    if out_path is not None:
        problems.append(write_output(out_path, "comparison", result.model_dump_json(indent=1) + "\n"))
    show_comparison(result)
    report_problems(problems)
    exit_for_battle_errors(records, plan, battles, "comparison")


def show_comparison(c: Any) -> None:
    table = Table(title=f"{c.new} (new) against {c.baseline} (baseline): {c.turns} turn(s)"
                        + (f", {c.errors} judge error(s) left out" if c.errors else ""))
    for col in ("", "turns"):
        table.add_column(col)
    both, neither = (c.ties[x].label if x in c.ties else x for x in ("Both", "Neither"))
    for label, value in (("new preferred (wins)", c.wins), (f"ties: {both} (Both)", c.ties_both),
                         (f"ties: {neither} (Neither)", c.ties_neither), ("baseline preferred (losses)", c.losses),
                         (f"Successful: {c.new}", c.successful_new), (f"Successful: {c.baseline}", c.successful_baseline),
                         ("Successful in the new version only", c.gained),
                         ("Successful in the baseline only (flipped)", c.lost)):
        table.add_row(label, str(value))
    out.print(table)
    if c.p_value is None:
        out.print("exact McNemar test on Successful: no turn changed, nothing to test", highlight=False)
    else:
        out.print(f"exact McNemar test on Successful: {c.gained} gained, {c.lost} lost, two-sided p = "
                  f"{c.p_value:.4g}", highlight=False)
