"""Questions about on-screen text, and answers checked against the text read from the frames.

`text_kinds(question)` says whether a question asks about text, numbers, prices, times, signs,
labels or screens (and which of times, numbers and words to compare); `check_answer` compares
an answer's claims of those kinds with the lines read (`ReadText`): times in 12- or 24-hour
form, numbers and prices whatever the currency sign or decimal comma, words of a sign or label
with a small edit-distance tolerance for OCR slips. An answer states what is on screen when one
of its claims was read; it states something else when it makes claims of a kind the screen
shows and none of them was read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..schema import ReadText
from .eyes import normalise

TIME, NUMBER, WORDS = "time", "number", "words"

_PRIVATE = re.compile(
    r"\b(licen[cs]e plate|number plate|plate number|card number|credit card|debit card|phone number|"
    r"id number|passport|social security|password|pin code)\b", re.I)
_TIME_Q = re.compile(
    r"\bwhat time\b|\bwhen (does|do|is|will|did|are)\b.*\b(open|clos|leav|depart|arriv|start|begin|end|finish|"
    r"due|run)\w*|\b(opening|closing|business|office|store|shop) hours\b|\bhours\b|\bdepart\w*|\barriv\w*|"
    r"\bschedule\b|\btimetable\b|\bclock\b", re.I)
_NUMBER_Q = re.compile(
    r"\bhow much (does|do|is|are|did|would|will|for)\b(?!.*\bweigh)|\bprices?\b|\bcosts?\b|\bpriced\b|\bfare\b|"
    r"\bhow expensive\b|\b(what|which) (number|digit|score|code|channel|platform|gate|floor|page|exit|route|bus|"
    r"line|track|room|speed|temperature|percentage|year|date)\b|\b(last|first|final) number\b|"
    r"\bcountdown\b|\bcounted down\b|\bhow many (calories|kcal|grams|mg|milligrams|servings|points)\b|"
    r"\bhow much (sugar|protein|fat|salt|sodium|caffeine|fibre|fiber|carbs?)\b|"
    r"\bwhat(?:'s| is| was) the (score|speed|temperature|reading|total|balance|number)\b|\bcalories\b|"
    r"\bnumbers? (on|shown|displayed|written)\b", re.I)
_WORDS_Q = re.compile(
    r"\bwhat (does|do|did) (the |this |that |it |these |those |my )?(\w+ )?(\w+ )?(say|read|show|state|spell)\b|"
    r"\bwhat(?:'s| is| are| was) (written|printed|displayed|shown)\b|^\s*(please |can you |could you )?read\b|"
    r"\b(sign|signs|signage|label|labels|screen|display|monitor|menu|poster|banner|billboard|caption|subtitles?|"
    r"placard|scoreboard|whiteboard|text|writing|written|wording|headline)\b|"
    r"\bname of (this|the|that) (place|shop|store|restaurant|cafe|bar|pub|street|road|station|stop|brand|product|"
    r"book|business|company|hotel|building|band|game|app|website|channel|film|movie|show)\b|"
    r"\bwhat (brand|street|station|store|shop)\b|\bspell\w*\b", re.I)
_LAST = re.compile(r"\b(last|final|finally|ended|ends|end|now|currently|at the moment)\b", re.I)
_FIRST = re.compile(r"\b(first|started|starts|start|began|begin|initially)\b", re.I)


def text_kinds(question: str) -> set[str]:
    """What of the screen a question asks about: {"time"}, {"number"}, {"words", "time", "number"}
    (a sign or label to read), or nothing (not a question about on-screen text). Questions
    after personal information (card, phone or plate numbers) are not read out."""
    q = normalise(question)
    if _PRIVATE.search(q):
        return set()
    kinds: set[str] = set()
    if _TIME_Q.search(q):
        kinds.add(TIME)
    if _NUMBER_Q.search(q):
        kinds.add(NUMBER)
    if _WORDS_Q.search(q):
        kinds |= {WORDS, TIME, NUMBER}
    return kinds


def is_text_question(question: str) -> bool:
    return bool(text_kinds(question))


# ----------------------------------------------------------------------------- values

def _spaced(text: str) -> str:
    """Normalised, with digits and letters apart ("OPEN8AM-6PM" -> "OPEN 8 AM-6 PM") and a
    number run into a clock time apart from it ("PLATFORM 414:20" -> "PLATFORM 4 14:20")."""
    t = normalise(text).replace("\u2013", "-").replace("\u2014", "-")
    t = re.sub(r"(?<=\d)(?=[A-Za-z])|(?<=[A-Za-z])(?=\d)", " ", t)
    return re.sub(r"(\d)(?=[01]\d:[0-5]\d\b|2[0-3]:[0-5]\d\b)", r"\1 ", t)


_AMPM = re.compile(r"(?<![\d.:])(\d{1,2})(?:\s*[:.]\s*(\d{2}))?\s*([ap])\.?\s*m\b\.?", re.I)
_CLOCK = re.compile(r"(?<![\d.:])(\d{1,2})\s*:\s*(\d{2})(?![\d:])", re.I)
_NAMED_TIMES = {"noon": 720, "midday": 720, "midnight": 0}


def times(text: str) -> list[tuple[str, frozenset[int]]]:
    """Clock times as (as written, minutes of the day it can mean): "2:35 PM" and "14:35" both
    mean 875; "2:35" without am/pm means 155 or 875."""
    t = _spaced(text)
    out: list[tuple[str, frozenset[int]]] = []
    for m in _AMPM.finditer(t):
        h, mins = int(m.group(1)), int(m.group(2) or 0)
        if 1 <= h <= 12 and mins < 60:
            out.append((m.group(0).strip(), frozenset({(h % 12 + (12 if m.group(3).lower() == "p" else 0)) * 60 + mins})))
    rest = _AMPM.sub(" ", t)
    for m in _CLOCK.finditer(rest):
        h, mins = int(m.group(1)), int(m.group(2))
        if h > 23 or mins > 59:
            continue
        values = {h * 60 + mins} if h > 12 or h == 0 else {h % 12 * 60 + mins, (h % 12 + 12) * 60 + mins}
        out.append((m.group(0).strip(), frozenset(values)))
    for word, value in _NAMED_TIMES.items():
        if re.search(rf"\b{word}\b", t, re.I):
            out.append((word, frozenset({value})))
    return out


_NUM = re.compile(r"(?<![\d.,])(\d{1,3}(?:,\d{3})+|\d+)(?:[.,](\d{1,2}))?(?!\d)")
_NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}


def numbers(text: str) -> list[tuple[str, float]]:
    """Numbers and prices as (as written, value): "$3.49", "3,49 €" and "3.49 dollars" are 3.49,
    "1,200" is 1200; number words up to twenty count too."""
    t = _spaced(text)
    out = []
    for m in _NUM.finditer(t):
        whole = float(m.group(1).replace(",", ""))
        frac = m.group(2)
        value = whole + (int(frac) / (10 ** len(frac)) if frac else 0.0)
        out.append((m.group(0), round(value, 2)))
    for m in re.finditer(r"\b(" + "|".join(_NUMBER_WORDS) + r")\b", t, re.I):
        out.append((m.group(0), float(_NUMBER_WORDS[m.group(1).lower()])))
    return out


_STOP = set(
    "the and for with that this these those there here its it's are was were has have had from into onto "
    "says said reads read shows showing show displays displayed written printed labelled labeled called named "
    "sign signs label screen display text word words letters you your they them their what which who when "
    "where how does did can could would should will just also very about like looks look seems only some "
    "any all one not but then than".split())
_QUOTED = re.compile(r"[\"\u201c\u201d]([^\"\u201c\u201d]{2,80})[\"\u201c\u201d]|(?:^|\s)[\u2018']([^'\u2018\u2019]{2,80})[\u2019'](?=[\s.,!?;:]|$)")
_SAYS = re.compile(r"\b(?:says|said|reads|reading|shows|showing|displays|displaying|written|printed|labell?ed|"
                   r"called|named|spells?)\b[:,]?\s+(?:that\s+|the words?\s+)?([^.;!?]{2,80})", re.I)
_LEAD = _STOP | {"it", "its", "a", "an", "i", "we", "he", "she", "this", "that", "there", "here", "of", "and", "&"}
_CAPS = re.compile(r"\b[A-Z][\w&'-]*(?:\s+(?:[A-Z][\w&'-]*|of|the|and|&))*\b")


def _alpha(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z]+", _spaced(text).lower()) if len(w) >= 3 and w not in _STOP]


def word_claims(text: str) -> list[tuple[str, list[str]]]:
    """What an answer says is written: quoted text, what follows "says/reads/called ...", and
    capitalised names (not a sentence's first word alone), each with its content words."""
    t = normalise(text)
    spans: list[str] = [a or b for a, b in _QUOTED.findall(t)]
    spans += [m.group(1) for m in _SAYS.finditer(t)]
    for m in _CAPS.finditer(t):
        words = m.group(0).split()
        before = t[: m.start()].rstrip()
        if not before or before[-1] in ".!?:":  # a sentence's first word is capitalised anyway
            while words and (words[0].lower().removesuffix("'s") in _LEAD or not words[0][:1].isupper()):
                words = words[1:]
        if words:
            spans.append(" ".join(words))
    out = []
    for span in spans:
        for part in re.split(r",|;|\s+(?:and|or|&)\s+", span):  # "PgDn and PrtSc": two labels
            words = _alpha(part)
            if words:
                out.append((part.strip(), words))
    return out


def _distance(a: str, b: str, cap: int) -> int:
    """Levenshtein distance, stopped early above `cap`."""
    if abs(len(a) - len(b)) > cap:
        return cap + 1
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        if min(cur) > cap:
            return cap + 1
        prev = cur
    return prev[-1]


def close(word: str, seen: str) -> bool:
    """The same word allowing for an OCR slip or an ending: one edit from 4 letters, two from 8;
    "opens" is "open"."""
    if word == seen:
        return True
    short = min(len(word), len(seen))
    if short >= 4 and (word.startswith(seen) or seen.startswith(word)) and abs(len(word) - len(seen)) <= 2:
        return True
    cap = 2 if short >= 8 else 1 if short >= 4 else 0
    return cap > 0 and _distance(word, seen, cap) <= cap


# ----------------------------------------------------------------------------- checking

@dataclass(frozen=True)
class ScreenCheck:
    """One answer against the screen: it states what was read (`states_screen`) or something else."""

    states_screen: bool
    claim: str  # the answer's words that were checked
    seen: tuple[ReadText, ...]  # the lines read that it matched, or that show otherwise

    @property
    def timestamps(self) -> list[float]:
        return sorted({r.timestamp for r in self.seen})

    def reason(self) -> str:
        where = ", ".join(f"{t:.1f} s" for t in self.timestamps[:4])
        shown = "; ".join(dict.fromkeys(f'"{r.text}"' for r in self.seen[:3]))
        if self.states_screen:
            return f'states what the screen shows: "{self.claim}" read as {shown} at {where}'
        return f'says "{self.claim}" where the screen shows {shown} (read at {where})'


def _values(kind: str, text: str) -> list[tuple[str, Any]]:
    if kind == TIME:
        return list(times(text))
    if kind == NUMBER:
        return list(numbers(text))
    return [(span, words) for span, words in word_claims(text)]


def _matches(kind: str, claim: Any, read: ReadText) -> bool:
    if kind == TIME:
        return any(claim & v for _, v in times(read.text))
    if kind == NUMBER:
        return any(abs(claim - v) < 0.005 for _, v in numbers(read.text))
    seen = re.findall(r"[a-z]+", _spaced(read.text).lower())
    # OCR may run a sign's words together ("GREENLEAF CAFE")
    return all(_seen(w, seen) for w in claim) or "".join(claim) in "".join(seen)


def _seen(word: str, tokens: Sequence[str]) -> bool:
    """The word among the tokens read, allowing an OCR slip, or inside a run-together token."""
    return any(close(word, t) or (len(word) >= 4 and word in t) for t in tokens)


def _shows(kind: str, read: ReadText) -> bool:
    """The line holds something of this kind."""
    if kind == TIME:
        return bool(times(read.text))
    if kind == NUMBER:
        return bool(numbers(read.text))
    return bool(_alpha(read.text))


def _about(question: str, lines: list[ReadText]) -> list[ReadText]:
    """The lines sharing a word with the question ("Calories 150 per 2 cookies" for "how many
    calories ..."), or all of them where none does."""
    asked = set(_alpha(question))
    near = [r for r in lines if any(close(w, s) for w in asked for s in _alpha(r.text))]
    return near or lines


def check_answer(question: str, answer: str, reads: Sequence[ReadText]) -> ScreenCheck | None:
    """The answer against the text read, for a question about on-screen text; None when the
    question is not about text, nothing relevant was read, or the answer claims nothing the
    screen could settle.

    For a question about the last (or first) value shown ("what number did it end on?") only
    the latest (earliest) frame showing a value counts; a claim read on another frame is an
    earlier value, one never read may lie between or after the sampled frames (unsettled)."""
    kinds = text_kinds(question)
    if not kinds or not reads:
        return None
    last, first = bool(_LAST.search(question)), bool(_FIRST.search(question))
    stated: ScreenCheck | None = None
    other: ScreenCheck | None = None
    for kind in (TIME, NUMBER, WORDS):
        if kind not in kinds:
            continue
        asked = {_key(kind, v) for _, v in _values(kind, question)}
        claims = [(shown, v) for shown, v in _values(kind, answer) if _key(kind, v) not in asked]
        if kind == WORDS:
            q_words = set(_alpha(question))
            claims = [(shown, [w for w in v if w not in q_words]) for shown, v in claims]
            claims = [(shown, v) for shown, v in claims if v]
        showing = [r for r in reads if _shows(kind, r)]
        if not claims or not showing:
            continue
        view = showing
        if last or first:
            when = (max if last else min)(r.timestamp for r in showing)
            view = [r for r in showing if r.timestamp == when]
        for shown, value in claims:
            hits = [r for r in view if _matches(kind, value, r)]
            if hits:
                stated = stated or ScreenCheck(True, shown, tuple(hits))
                continue
            if other is not None:
                continue
            if last or first:
                earlier = [r for r in showing if _matches(kind, value, r)]
                if earlier:  # on screen, but not at the end (start) of what was read
                    other = ScreenCheck(False, shown, tuple(_about(question, view)))
            elif kind != WORDS or not _partly(value, view):
                other = ScreenCheck(False, shown, tuple(_about(question, view)))
    return stated or other


def _key(kind: str, value: Any) -> Any:
    return tuple(value) if kind == WORDS else value


def _partly(words: list[str], view: Sequence[ReadText]) -> bool:
    """Some of a claim's words were read: neither stated nor contradicted."""
    seen = [s for r in view for s in re.findall(r"[a-z]+", _spaced(r.text).lower())]
    return any(_seen(w, seen) for w in words)
