"""The queue page's figures (the judge's agreement per field before and after review, with
bootstrap intervals), computed away from the requests: a page shows the latest figures at once,
marked stale while a refresh for the decisions made since runs in the background.

The gold, and so the figures, depend only on the calibration's inputs (never changed) and its
decisions (only ever added), so how many decisions there are says which figures are current.
One refresh runs at a time per calibration; decisions made meanwhile are taken up by one more
refresh after it, however many they are. A refresh whose gold is the one already measured (a
skip, a decision repeated) only moves the figures' decision count on."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ...calibration.adjudication import standing_labels
from ...calibration.audit import gold_shift
from ...calibration.inputs import human_rows, judge_rows, video_qa_fields
from ...schema import ReviewDecision
from .store import ReviewInputs

log = logging.getLogger("framejudge.service.review")
FIGURE_REPLICATES = 200  # the page's before/after intervals; framejudge calibrate --gold for more


def gold_of(inputs: ReviewInputs, decisions: Sequence[ReviewDecision], unlabelled: list[tuple[str, int]],
            withdrawn: Sequence[ReviewDecision] = ()) -> list[Any]:
    """The labels as they stand: the human majority where no reviewer decided, the decisions elsewhere
    (`withdrawn` ones, by reviewers since removed, decide nothing and are named on their units)."""
    return standing_labels(inputs.labels, list(decisions), unlabelled=unlabelled, withdrawn=withdrawn)


def gold_digest(gold: Sequence[Any]) -> str:
    return hashlib.sha256(json.dumps([g.model_dump(mode="json") for g in gold]).encode()).hexdigest()


def shifts(inputs: ReviewInputs, gold: list[Any]) -> list[Any]:
    """Judge agreement per field before (human majority) and after (the standing gold); none
    without human labels (a triage's queue)."""
    if not inputs.labels:
        return []
    rows_j, _ = judge_rows(inputs.records)
    return gold_shift(human_rows(inputs.labels), rows_j, human_rows(gold), video_qa_fields(),
                      replicates=FIGURE_REPLICATES, seed=0)


@dataclass
class Shown:
    """What a queue page shows: the latest figures (None before the first are ready), how many
    decisions they count, and whether decisions were made since (a refresh is running)."""

    figures: list[Any] | None
    decisions: int  # the decisions the figures count
    behind: int  # decisions made since, not yet in the figures
    error: str | None = None

    @property
    def stale(self) -> bool:
        return self.behind > 0


@dataclass
class _Slot:
    version: int = -1  # the decisions counted by `figures`
    digest: str = ""
    figures: list[Any] | None = None
    error: str | None = None
    wanted: tuple[int, ReviewInputs, list[ReviewDecision], list[tuple[str, int]]] | None = None
    running: bool = False
    waiting: list[tuple[int, Future[None]]] = field(default_factory=list)
    took: float | None = None  # seconds the latest computation of the figures took


class FigureKeeper:
    """Figures per calibration (the latest `kept` calibrations), refreshed on a background thread."""

    def __init__(self, kept: int = 64) -> None:
        self._kept = kept
        self._slots: OrderedDict[str, _Slot] = OrderedDict()
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def close(self) -> None:
        """Refreshes not started are dropped; one running finishes on its thread."""
        with self._lock:
            pool, self._pool = self._pool, None
            for slot in self._slots.values():
                slot.wanted, slot.running = None, False
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def _slot(self, run_id: str) -> _Slot:
        slot = self._slots.get(run_id)
        if slot is None:
            slot = self._slots[run_id] = _Slot()
            while len(self._slots) > self._kept:  # the oldest idle calibration goes
                old = next((k for k, s in self._slots.items() if not s.running and not s.waiting), None)
                if old is None:
                    break
                del self._slots[old]
        self._slots.move_to_end(run_id)
        return slot

    def shown(self, run_id: str, version: int) -> Shown:
        with self._lock:
            slot = self._slots.get(run_id) or _Slot()
            return Shown(slot.figures, max(slot.version, 0), max(version - max(slot.version, 0), 0), slot.error)

    def refresh(self, run_id: str, version: int, inputs: ReviewInputs, decisions: list[ReviewDecision],
                unlabelled: list[tuple[str, int]]) -> Future[None]:
        """Figures for `version` decisions (`decisions` as they are then): done at once when they are
        current, else after the refresh that takes them up."""
        done: Future[None] = Future()
        with self._lock:
            slot = self._slot(run_id)
            if slot.version >= version:
                done.set_result(None)
                return done
            slot.waiting.append((version, done))
            if slot.wanted is None or slot.wanted[0] < version:
                slot.wanted = (version, inputs, decisions, unlabelled)
            if not slot.running:
                slot.running = True
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="framejudge-figures")
                self._pool.submit(self._run, run_id, slot)
        return done

    def _run(self, run_id: str, slot: _Slot) -> None:
        while True:
            with self._lock:
                if slot.wanted is None:
                    slot.running = False
                    return
                version, inputs, decisions, unlabelled = slot.wanted
                slot.wanted = None
            figures, digest, error = slot.figures, slot.digest, None
            try:
                start = time.perf_counter()
                gold = gold_of(inputs, decisions, unlabelled)
                digest = gold_digest(gold)
                if digest != slot.digest or slot.version < 0:
                    figures = shifts(inputs, gold)
                    slot.took = time.perf_counter() - start
            except Exception as exc:  # shown on the page, logged with its trace
                log.error("the review figures of calibration %s could not be computed", run_id, exc_info=exc)
                error = f"the figures could not be computed ({type(exc).__name__}: {exc})"
                figures, digest = None, ""  # none rather than those of an earlier gold; tried again next decision
            del inputs, decisions, unlabelled  # the calibration's texts are not kept here
            with self._lock:
                if version > slot.version:
                    slot.version, slot.digest, slot.figures, slot.error = version, digest, figures, error
                ready = [f for v, f in slot.waiting if v <= slot.version]
                slot.waiting = [(v, f) for v, f in slot.waiting if v > slot.version]
            for f in ready:
                if not f.done():
                    f.set_result(None)

    async def current(self, run_id: str, version: int, inputs: ReviewInputs, decisions: list[ReviewDecision],
                      unlabelled: list[tuple[str, int]], wait_s: float) -> Shown:
        """The figures to show now: refreshed first when that takes at most `wait_s` (not waited
        for where the calibration's last computation took longer), else the latest ones, stale,
        while the refresh goes on."""
        done = self.refresh(run_id, version, inputs, decisions, unlabelled)
        with self._lock:
            took = self._slots[run_id].took if run_id in self._slots else None
        if not done.done() and wait_s > 0 and (took is None or took <= wait_s):
            try:
                await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(done)), wait_s)
            except TimeoutError:
                pass
        return self.shown(run_id, version)
