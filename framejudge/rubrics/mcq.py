"""Honest multiple-choice scoring: read the letter a reply states, or the option it quotes.

A reply that identifies no single option gets no letter and scores incorrect. No
letter is ever made up from a leading article ("A dog ...") or from the first
character of a word ("Definitely" is not D).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ..errors import FramejudgeError

LETTERS = "ABCD"
Method = Literal["letter", "option_text", "stated", "none"]

_SPECIAL_TOKENS = re.compile(r"(</s>|<\|[a-z_]+\|>|<eos>|<end_of_turn>|\[/?INST\])", re.I)
_WRAP = re.compile(r"^[\s*_`'\"“”‘’>#-]+|[\s*_`'\"“”‘’]+$")
_LIST_MARK = re.compile(r"^(?:[-•>]|\d+[.)])\s+")
_BARE = re.compile(r"^\(?\[?([A-Da-d])\]?\)?[.:)]?$")
_LEADING = re.compile(r"^\(([A-Da-d])\)|^([A-D])[.):](?:\s|$)")
_PATTERNS = [
    re.compile(r"\b(?:final\s+)?answer\s*(?:is\s*:?|:|=|-)?\s*(?:option\s+)?\(?\[?\**([A-D])\b", re.I),
    re.compile(r"\b(?:option|choice)\s*\(?([A-D])\)?(?![\w'])", re.I),
]
_STANDALONE = re.compile(r"(?<![\w'])\(?([A-D])\)?(?![\w'])")
# Words that may follow a stated "A" ("A or B", "A is right"); any other lower-case word
# after "A" makes it the article.
_AFTER_LETTER = {"or", "and", "nor", "is", "was", "seems", "looks", "would", "should", "vs",
                 "versus", "because", "since", "then", "but", "as", "fits", "matches", "option"}


def _is_article(text: str, m: re.Match[str]) -> bool:
    """Whether the matched letter is really a word: "a"/"A" followed by a lower-case word
    ("a bench", "A dog"), or any lower-case letter followed by a word."""
    letter = m.group(1)
    if m.group(0).rstrip().endswith(")") or m.group(0).lstrip("*[ ").startswith("("):
        return False
    word = re.match(r"\s+([a-z]+)", text[m.end():])
    if letter.islower():
        return word is not None or letter == "a" and bool(re.match(r"\s*\w", text[m.end():]))
    return letter == "A" and word is not None and word.group(1) not in _AFTER_LETTER


class MCQAnswer(BaseModel):
    """A reply as given, and the option letter it identifies (None: it identifies none)."""

    model_config = ConfigDict(frozen=True)

    given: str
    letter: str | None
    method: Method


class MCQScore(BaseModel):
    model_config = ConfigDict(frozen=True)

    answer: MCQAnswer
    gold: str
    correct: bool


def split_options(options: str | Sequence[str] | Mapping[str, str] | None) -> dict[str, str]:
    """Options as letter -> text, from "A. x B. y C. z D. w", a list, or a mapping."""
    if not options:
        return {}
    if isinstance(options, Mapping):
        return {k.strip().upper(): v for k, v in options.items()}
    if isinstance(options, str):
        found: dict[str, str] = {}
        starts = []
        pos = 0
        for letter in LETTERS:
            m = re.compile(rf"(?:^|\s){letter}[.)]\s").search(options, pos)
            if not m:
                break
            starts.append((letter, m.start(), m.end()))
            pos = m.end()
        for i, (letter, _, end) in enumerate(starts):
            stop = starts[i + 1][1] if i + 1 < len(starts) else len(options)
            found[letter] = options[end:stop].strip()
        return found
    return {LETTERS[i]: text for i, text in enumerate(options) if i < len(LETTERS)}


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^0-9a-z]+", " ", text.lower()).split())


def match_option_text(reply: str, options: Mapping[str, str]) -> str | None:
    """The option whose text the reply quotes: exact, then unique containment, where an
    option nested inside a longer matching sibling gives way to the longer one."""
    r = _norm(reply)
    if not r:
        return None
    normed = {k: _norm(v) for k, v in options.items() if _norm(v)}
    exact = [k for k, v in normed.items() if v == r]
    if len(exact) == 1:
        return exact[0]
    contained = [k for k, v in normed.items() if f" {v} " in f" {r} "]
    if not contained:
        return None
    longest = max(contained, key=lambda k: len(normed[k]))
    if all(normed[k] in normed[longest] for k in contained):
        return longest
    return None


def _clean(reply: str) -> str:
    text = _SPECIAL_TOKENS.sub(" ", reply)
    text = " ".join(text.split())
    prev = None
    while prev != text:
        prev = text
        text = _WRAP.sub("", text)
        text = _LIST_MARK.sub("", text)
    return text.strip()


def normalize_answer(reply: str, options: str | Sequence[str] | Mapping[str, str] | None = None) -> MCQAnswer:
    """Read the option a reply names. The ladder stops at the first rung that matches."""
    opts = split_options(options)
    allowed = set(opts) if opts else set(LETTERS)
    text = _clean(reply)

    def found(letter: str | None, method: Method) -> MCQAnswer | None:
        if letter and letter.upper() in allowed:
            return MCQAnswer(given=reply, letter=letter.upper(), method=method)
        return None

    # 1. a bare or decorated letter: A, a., (B), C), [D], **A**, 'D', `A`
    m = _BARE.match(text)
    if m and (hit := found(m.group(1), "letter")):
        return hit
    # 2. "Answer: C", "The answer is (A).", "Option D" (but "the answer is a bench" is prose)
    for pattern in _PATTERNS:
        letters = {m.group(1).upper() for m in pattern.finditer(text) if not _is_article(text, m)}
        if len(letters) == 1 and (hit := found(letters.pop(), "letter")):
            return hit
    # 3. a leading letter label followed by the option text: "B. A brown trash can ..."
    m = _LEADING.match(text)
    if m:
        letter = (m.group(1) or m.group(2)).upper()
        rest = _norm(text[m.end():])
        if letter in opts and (not rest or rest in _norm(opts[letter]) or _norm(opts[letter]) in rest):
            return MCQAnswer(given=reply, letter=letter, method="letter")
        if not opts and (hit := found(letter, "letter")):
            return hit
    # 4. the reply quotes an option's text
    if opts:
        letter = match_option_text(text, opts)
        if letter:
            return MCQAnswer(given=reply, letter=letter, method="option_text")
    # 5. a capital letter standing alone in prose ("I think D", "(C) is right"); "A" followed by
    #    a lower-case word is the article, never the option.
    letters = set()
    for m in _STANDALONE.finditer(text):
        if not _is_article(text, m):
            letters.add(m.group(1))
    if len(letters) == 1 and (hit := found(letters.pop(), "stated")):
        return hit
    return MCQAnswer(given=reply, letter=None, method="none")


def score_mcq(
    prediction: str, options: str | Sequence[str] | Mapping[str, str] | None, gold: str
) -> MCQScore:
    """Correct only when the reply identifies exactly the gold option."""
    answer = normalize_answer(prediction, options)
    g = gold.strip().upper()
    return MCQScore(answer=answer, gold=g, correct=answer.letter == g)


class MCQScoreError(FramejudgeError, ValueError):
    """A predictions or gold file that cannot be scored; the message names file and line."""

    code = "invalid_mcq_files"


class MCQRow(BaseModel):
    key: str
    given: str
    letter: str | None
    method: Method
    gold: str
    correct: bool


class MCQReport(BaseModel):
    """Accuracy over all gold rows; a missing or unparseable prediction counts as wrong."""

    total: int
    correct: int
    accuracy: float
    unparseable: int
    missing_predictions: int
    accuracy_on_parsed: float | None
    by_method: dict[str, int]
    rows: list[MCQRow] = []


def _read_jsonl(path: Path) -> list[tuple[int, dict]]:
    from ..files import jsonl_objects, read_text

    return jsonl_objects(path, read_text(path, "predictions or gold", MCQScoreError), MCQScoreError)


def _options_shape(options: object) -> bool:
    if options is None or isinstance(options, str):
        return True
    if isinstance(options, list):
        return all(isinstance(o, str) for o in options)
    return isinstance(options, dict) and all(isinstance(v, str) for v in options.values())


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    return {str: "string", int: "number", float: "number", list: "list", dict: "object"}.get(type(value), "value")


def _shape(value: object) -> str:
    """What a JSON value is, in JSON's words: 'a number', 'a list holding number, object'."""
    if isinstance(value, (list, dict)):
        inner = sorted({_json_kind(v) for v in (value.values() if isinstance(value, dict) else value)})
        return f"{'a list' if isinstance(value, list) else 'an object'} holding {', '.join(inner)}"
    return f"a {_json_kind(value)}"


def score_files(predictions: Path, gold: Path, key: str = "video_path", prediction_field: str = "mcq_answer",
                gold_field: str = "mcq_answer", options_field: str = "mcq_options") -> MCQReport:
    gold_rows: dict[str, tuple[str, object]] = {}
    for n, row in _read_jsonl(gold):
        for f in (key, gold_field):
            if f not in row:
                raise MCQScoreError(f"{gold}:{n}: missing field {f!r}")
        k = str(row[key])
        if k in gold_rows:
            raise MCQScoreError(f"{gold}:{n}: duplicate {key} {k!r}")
        letter, options = str(row[gold_field]), row.get(options_field)
        if not _options_shape(options):
            raise MCQScoreError(f"{gold}:{n}: {options_field} must be one string (\"A. ... B. ...\"), a list of "
                                f"option texts or a mapping of letters to texts, not {_shape(options)}")
        allowed = sorted(split_options(options)) or list(LETTERS)
        if letter.strip().upper() not in allowed:  # no reply could ever be right
            raise MCQScoreError(f"{gold}:{n}: {gold_field} {letter!r} is not an option letter "
                                f"({', '.join(allowed)})")
        gold_rows[k] = (letter, options)
    preds: dict[str, str] = {}
    prediction_rows = _read_jsonl(predictions)
    if not prediction_rows:
        raise MCQScoreError(f"{predictions}: no predictions")
    for n, row in prediction_rows:
        if key not in row or prediction_field not in row:
            raise MCQScoreError(f"{predictions}:{n}: needs fields {key!r} and {prediction_field!r}")
        k = str(row[key])
        if k not in gold_rows:
            raise MCQScoreError(f"{predictions}:{n}: {key} {k!r} is not in the gold file")
        if k in preds:
            raise MCQScoreError(f"{predictions}:{n}: duplicate {key} {k!r}")
        value = row[prediction_field]
        preds[k] = "" if value is None else str(value)
    if not gold_rows:
        raise MCQScoreError(f"{gold}: no rows")
    rows: list[MCQRow] = []
    by_method: dict[str, int] = {}
    for k, (g, options) in gold_rows.items():
        if k not in preds:
            continue
        s = score_mcq(preds[k], options, g)  # type: ignore[arg-type]
        by_method[s.answer.method] = by_method.get(s.answer.method, 0) + 1
        rows.append(MCQRow(key=k, given=s.answer.given, letter=s.answer.letter, method=s.answer.method,
                           gold=s.gold, correct=s.correct))
    correct = sum(r.correct for r in rows)
    parsed = [r for r in rows if r.letter is not None]
    return MCQReport(
        total=len(gold_rows),
        correct=correct,
        accuracy=correct / len(gold_rows),
        unparseable=len(rows) - len(parsed),
        missing_predictions=len(gold_rows) - len(rows),
        accuracy_on_parsed=(sum(r.correct for r in parsed) / len(parsed)) if parsed else None,
        by_method=by_method,
        rows=rows,
    )
