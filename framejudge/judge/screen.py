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

import bisect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from ..schema import ReadText
from . import names, values
from .eyes import normalise

TIME, NUMBER, WORDS = "time", "number", "words"
T = TypeVar("T")

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

_LABEL_RUN = re.compile(r"\b(" + "|".join(sorted(values.LABELS, key=len, reverse=True)) + r")(?=[A-Za-z]?\d)", re.I)
_SIGN_RUN = re.compile(r"(?<=[A-Za-z])(?=[-\u2212]\d+(?:[.,]\d+)?\s?°)")


def _unglued(text: str) -> str:
    """A line read with the spaces OCR lost put back where a value depends on them: a label run
    into its code ("GATEB12" -> "GATE B12", "SEAT14C" -> "SEAT 14C") and a word run into a signed
    temperature ("OUTSIDE-12°C" -> "OUTSIDE -12°C": minus twelve, not a code "OUTSIDE-12")."""
    t = _LABEL_RUN.sub(r"\1 ", normalise(text))
    return _SIGN_RUN.sub(" ", t)


def _spaced(text: str) -> str:
    """Normalised, with digits and letters apart ("OPEN8AM-6PM" -> "OPEN 8 AM-6 PM") and a
    number run into a clock time apart from it ("PLATFORM 414:20" -> "PLATFORM 4 14:20"); a code of
    one letter and its digits ("B12") stays whole."""
    t = _unglued(text).replace("\u2013", "-").replace("\u2014", "-")
    t = re.sub(r"(?<=\d)(?=[A-Za-z])|(?<=[A-Za-z])(?<!\b[A-Za-z])(?=\d)", " ", t)
    return re.sub(r"(\d)(?=[01]\d:[0-5]\d\b|2[0-3]:[0-5]\d\b)", r"\1 ", t)


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


# "it does not say ...", "it isn't written ...": what follows is denied to be written
_DENY = re.compile(r"\b(?:(?:does|do|did)\s+not|doesn't|don't|didn't|never)\s+(?:say|read|show|display|spell)\b|"
                   r"\b(?:(?:is|was|are|were)\s+not|isn't|wasn't|aren't|weren't)\s+(?:written|printed|displayed|shown)\b",
                   re.I)
_DENIED = re.compile(r"[:,]?\s+(?:that\s+|the words?\s+)?([^.;!?]{2,80})")  # what a denial denies
_NOT_END = re.compile(r"\bnot$", re.I)  # "... , not FREE PARKING"
_NOT_PART = re.compile(r"^\s*(?:but\s+|and\s+)?(?:not|never)\b", re.I)


@dataclass(frozen=True)
class WordClaim:
    """Words an answer says are written (or, `denied`, says are not)."""

    text: str  # as the answer puts it
    words: list[str]  # its content words
    said: bool  # quoted or said to be written ("says ..."), not only a capitalised name
    denied: bool = False  # "it does not say no parking", "... , not FREE PARKING"


def word_claims(text: str) -> list[WordClaim]:
    """What an answer says is written, each with its content words and whether it is quoted or said
    to be written ("says ...") rather than a capitalised name: quoted text, what follows
    "says/reads/called ...", and capitalised names (a sentence's first word only where it is not
    an ordinary word: "Sorry, I can't read it" claims nothing). What the answer says is not
    written ("it does not say no parking", "it says free parking, not no parking") is a denied
    claim, never a claim that it is written."""
    t = normalise(text)
    denials = [d.span(1) for m in _DENY.finditer(t) if (d := _DENIED.match(t, m.end()))]
    starts = [a for a, _ in denials]  # in order; each denial at most 80 long, so only those near are looked at
    denied_at = lambda at: any(a <= at < b for a, b in denials[bisect.bisect_left(starts, at - 80):  # noqa: E731
                                                                 bisect.bisect_right(starts, at)])
    spans: list[tuple[str, bool, bool]] = [(t[a:b].strip(), True, True) for a, b in denials]
    spans += [(a or b, True, denied_at(m.start())) for m in _QUOTED.finditer(t) for a, b in [m.groups()]]
    spans += [(m.group(1), True, False) for m in _SAYS.finditer(t) if not denied_at(m.start())]
    for m in _CAPS.finditer(t):
        if denied_at(m.start()):
            continue  # "it does not say NO PARKING": the denial above
        words = m.group(0).split()
        j = m.start()  # where the text before it ends, its spaces left out (read back by index: the
        while j and t[j - 1].isspace():  # text's every capitalised word looks back, so never over it all)
            j -= 1
        if not j or t[j - 1] in ".!?:":  # a sentence's first word is capitalised anyway
            while words and (words[0].lower().removesuffix("'s") in _LEAD or not words[0][:1].isupper()
                             or names.is_ordinary_word(words[0].rstrip(",;:"))):
                words = words[1:]
        if words:
            spans.append((" ".join(words), False, j < m.start() and bool(_NOT_END.search(t[max(0, j - 4):j]))))
    out = []
    for span, said, denied in spans:
        for part in re.split(r",|;|\s+(?:and|or|&)\s+", span):  # "PgDn and PrtSc": two labels
            words = _alpha(values.digits_for_words(part))  # "fifty" is a value, compared as one
            if words:
                out.append(WordClaim(part.strip(), words, said, denied or bool(_NOT_PART.match(part))))
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
    why: str | None = None  # how it states something else, where more than a claim not read
    quoted: bool = False  # a claim of words said to be written ("it says ..."), not a name

    @property
    def timestamps(self) -> list[float]:
        return sorted({r.timestamp for r in self.seen})

    def reason(self) -> str:
        where = ", ".join(f"{t:.1f} s" for t in self.timestamps[:4])
        shown = "; ".join(dict.fromkeys(f'"{r.text}"' for r in self.seen[:3]))
        if self.states_screen:
            return f'states what the screen shows: "{self.claim}" read as {shown} at {where}'
        how = f" ({self.why})" if self.why else ""
        return f'says "{self.claim}"{how} where the screen shows {shown} (read at {where})'


_KINDS_FOR = {  # the typed values (values.py) each kind of question is about
    TIME: {values.TIME, values.DATE},
    NUMBER: {values.NUMBER, values.PRICE, values.CODE, values.PHONE, values.DATE},
}


def read_values(text: str) -> list[values.Value]:
    """The whole values on a line read off the screen: as read (with a label or a sign that OCR ran
    into a value set apart: "GATEB12", "OUTSIDE-12°C"), and with digits and letters that OCR ran
    together apart ("OPEN8AM-6PM", "PLATFORM 414:20")."""
    unglued = _unglued(text)
    found = list(values.values(unglued))
    spaced = _spaced(text)
    if spaced != unglued:
        found += [v for v in values.values(spaced)  # codes are read as written: "7HX-429" is no "HX-429"
                  if v.kind != values.CODE and not any(v.kind == f.kind and values.agree(v, f) for f in found)]
    return found


def _matches_words(claim: list[str], read: ReadText) -> bool:
    seen = re.findall(r"[a-z]+", _spaced(read.text).lower())
    # OCR may run a sign's words together ("GREENLEAF CAFE")
    return all(_seen(w, seen) for w in claim) or "".join(claim) in "".join(seen)


def _seen(word: str, tokens: Sequence[str]) -> bool:
    """The word among the tokens read, allowing an OCR slip, or inside a run-together token."""
    return any(close(word, t) or (len(word) >= 4 and word in t) for t in tokens)


def _about(question: str, lines: list[ReadText]) -> list[ReadText]:
    """The lines sharing a word with the question ("Calories 150 per 2 cookies" for "how many
    calories ..."), or all of them where none does."""
    asked = set(_alpha(question))
    near = [r for r in lines if any(close(w, s) for w in asked for s in _alpha(r.text))]
    return near or lines


def check_answer(question: str, answer: str, reads: Sequence[ReadText], golden: str | None = None) -> ScreenCheck | None:
    """The answer against the text read, for a question about on-screen text; None when the
    question is not about text, nothing relevant was read, or the answer claims nothing the
    screen could settle.

    Every claim of the asked kinds is checked, as a whole value (values.py): the answer states the
    screen when what it claims was read and nothing it claims contradicts what was read. A claim of
    a kind the screen shows that was never read (a hallucinated value), a claim stated as not so
    where it is ("30, not 50"), or several incompatible candidates ("30, 50, 70 or 12345") make it
    state something else. Where the golden response's values of the asked kinds are themselves read
    on screen, they stand: a value read elsewhere ("555" of a phone number for the room, where the
    golden "Room 404" is read on the door) does not answer the question.

    For a question about the last (or first) value shown ("what number did it end on?") only
    the latest (earliest) frame showing a value counts; a claim read on another frame is an
    earlier value, one never read may lie between or after the sampled frames (unsettled)."""
    kinds = text_kinds(question)
    if not kinds or not reads:
        return None
    last, first = bool(_LAST.search(question)), bool(_FIRST.search(question))
    typed = set().union(*(_KINDS_FOR.get(k, set()) for k in kinds)) | (
        set(values.KINDS) if WORDS in kinds else set())
    asked = values.values(question)
    claims = [v for v in values.excluding(values.values(answer), asked) if v.kind in typed]
    # a multi-buy read on screen ("2 FOR €20") prices one thing only where the question asks the
    # price of that many ("how much are two coffees?")
    counts = {int(x) for v in asked if v.kind == values.NUMBER for x in v.meanings
              if isinstance(x, float) and x.is_integer() and x >= 2}
    per_line = [(r, [replace(v, unit=None) if values.per(v) in counts else v
                     for v in read_values(r.text) if v.kind in typed]) for r in reads]
    showing = [(r, vs) for r, vs in per_line if vs]
    stated: ScreenCheck | None = None
    other: ScreenCheck | None = None
    if claims and showing:
        view = _at_the_edge(showing, lambda line: line[0].timestamp, last, first)
        on_view = [v for _, vs in view for v in vs]
        result = values.compare(claims, on_view, exhaustive=True)
        if last or first:  # a claim never read may lie between the frames: only an earlier value is wrong
            everywhere = [v for _, vs in showing for v in vs]
            kept = tuple(c for c in result.contradicted if values.matches(c, everywhere))
            result = values.Comparison(result.agreeing, kept, result.denied, result.candidates)
        confirmed = [g for g in values.excluding(values.values(golden or ""), asked)
                     if g.kind in typed and values.matches(g, on_view)]
        if confirmed and not result.wrong:
            # the golden response's values, read on screen, are the answer: a claim must agree with
            # one of them; one read elsewhere ("Room 555" where 555 is in a phone number, "7" of the
            # exit sign for the speed limit) answers something else, and so does a value of another
            # kind ("Call 555-0199" for the room number)
            by_golden = values.compare(claims, confirmed)
            if not by_golden.settles:
                by_golden = values.Comparison((), tuple(claims[:1]), (), ())
            result = by_golden
        lines_of = {id(v): r for r, vs in view for v in vs}
        if result.wrong:
            bad = (result.denied or result.candidates or result.contradicted)[0]
            shown = [lines_of[id(v)] for v in on_view if values.compatible(bad, v)] or [r for r, _ in view]
            other = ScreenCheck(False, bad.text, _distinct(shown), result.why())
        elif result.agreeing:
            hits = [lines_of[id(v)] for c in result.agreeing for v in values.matches(c, on_view)]
            stated = ScreenCheck(True, result.agreeing[0].text, _distinct(hits))
    if WORDS in kinds and other is None:
        words_stated, words_other = _check_words(question, answer, reads, last, first)
        if words_other is not None and (stated is None or words_other.quoted):
            return words_other
        stated = stated or words_stated
    return other or stated


def _at_the_edge(lines: list[T], when: Callable[[T], float], last: bool, first: bool) -> list[T]:
    """For a question about the last (first) value shown, the lines of the latest (earliest) frame
    that shows one; otherwise all of them."""
    if not (last or first):
        return lines
    edge = (max if last else min)(when(line) for line in lines)
    return [line for line in lines if when(line) == edge]


def _distinct(lines: Sequence[ReadText]) -> tuple[ReadText, ...]:
    return tuple({id(r): r for r in lines}.values())


def _check_words(question: str, answer: str, reads: Sequence[ReadText], last: bool,
                 first: bool) -> tuple[ScreenCheck | None, ScreenCheck | None]:
    """The answer's words claimed to be written (quoted, after "says", names) against the lines read:
    the first claim read, and the first claim that shows otherwise: nothing of it read, a line
    read with other words in their place ("free parking" where "NO PARKING" is read), or a denied
    claim that was read ("it does not say no parking")."""
    q_words = set(_alpha(question))
    claims = [replace(c, words=[w for w in c.words if w not in q_words]) for c in word_claims(answer)]
    claims = [c for c in claims if c.words]
    showing = [r for r in reads if _alpha(r.text)]
    if not claims or not showing:
        return None, None
    view = _at_the_edge(showing, lambda r: r.timestamp, last, first)
    stated = other = None
    for c in claims:
        hits = [r for r in view if _matches_words(c.words, r)]
        if c.denied:
            if hits and other is None:
                other = ScreenCheck(False, c.text, tuple(hits), f'says "{c.text}" is not written where it is',
                                    quoted=True)
            continue
        if hits:
            stated = stated or ScreenCheck(True, c.text, tuple(hits))
        elif other is None:
            if last or first:
                if any(_matches_words(c.words, r) for r in showing):
                    other = ScreenCheck(False, c.text, tuple(_about(question, view)), quoted=c.said)
            elif not _partly(c.words, view):
                other = ScreenCheck(False, c.text, tuple(_about(question, view)), quoted=c.said)
            elif c.said and (instead := _in_place(c.text, view)):
                other = ScreenCheck(False, c.text, instead, "other words where the screen's are", quoted=True)
    return stated, other


def _in_place(claim: str, view: Sequence[ReadText]) -> tuple[ReadText, ...]:
    """The lines read that say, word for word, what the claim says except for words of its own
    that are nowhere on screen ("FREE PARKING" against "NO PARKING"): the claim puts other words
    where the screen's are."""
    said = re.findall(r"[a-z]+", _spaced(claim).lower())
    seen = [s for r in view for s in re.findall(r"[a-z]+", _spaced(r.text).lower())]
    out = []
    for r in view:
        line = re.findall(r"[a-z]+", _spaced(r.text).lower())
        if len(line) != len(said) or len(said) < 2:
            continue
        pairs = list(zip(said, line, strict=True))
        same = [a for a, b in pairs if close(a, b) or a == b]
        differ = [a for a, b in pairs if not (close(a, b) or a == b)]
        if same and differ and not any(_seen(a, seen) for a in differ):
            out.append(r)
    return tuple(out)


def _partly(words: list[str], view: Sequence[ReadText]) -> bool:
    """Some of a claim's words were read: neither stated nor contradicted."""
    seen = [s for r in view for s in re.findall(r"[a-z]+", _spaced(r.text).lower())]
    return any(_seen(w, seen) for w in words)
