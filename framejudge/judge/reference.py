"""The reference judge: the rubric's rules applied to the text, and to the text on screen. Offline,
deterministic, fast.

For questions about on-screen text (signs, labels, prices, numbers, times, screens: see
screen.py) it reads the sampled frames with OCR (eyes.py, the optional `eyes` dependencies) and
checks each answer against what was read: an answer stating what is on screen is Successful, one
stating something else where the screen shows it is Not Successful, whatever the golden response
says; the times where it was read are the grade's evidence. For every other question the
pipeline does not even decode frames for it, so it cannot tell a correct description from a
hallucinated one unless a golden response is there to compare with. What it decides from text:

1. error strings (the rubric's deterministic rules) -> Error message;
2. refusals: for integrity reasons or about unsupported domains -> Successful; with useful
   information after the refusal -> Successful; asking for what it would need when the
   golden response agrees nothing more can be said -> Successful; otherwise -> Missing;
3. (checked before 2) the guideline's rules that need no video (`guideline_rules`): reading
   out personal information, judging people, violent, sexual or hateful requests, medication,
   diagnosis, food safety, calories and weight without a label, product information, false
   presuppositions the golden response rejects, hedges, guesses about motives, creative
   requests answered with facts;
4. the golden response: contradiction (yes/no polarity, negation, numbers, a different named
   thing: names.py) -> Not Successful; a brand or maker asked for and none named, or answers
   sharing nothing with the question or the golden response -> Irrelevant; where the words do
   not settle it, sentence meaning (meaning.py) -> Successful, Not Successful or Irrelevant; a
   bare kind of thing for what the golden response identifies -> Not Successful;
5. an answer of a few generic words to an open "what is this?" -> Not Successful (too generic
   to be useful); a short direct answer to a specific question is an answer;
6. a question expecting a number answered without one, or (when the question names its
   subject instead of pointing at the video) an answer sharing no subject with it -> Irrelevant;
7. otherwise Successful, as the guideline says.

Before rules 2-7, a corrected example of the rubric from another item with the same question
and the same response text (normalised) is a precedent: its right category is given. An item's
own corrected example never is (`corrections_for`, the guard every judge uses). Preferences
follow from the categories as below; a corrected preference is not copied.

Pairs are ranked by the rubric's criteria in order (category, then factual accuracy,
relevancy, not missing, helpfulness, conciseness, creativity for expression tasks).
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Sequence
from typing import NamedTuple

from ..rubrics.corrections import precedent
from ..rubrics.model import Rubric
from ..rubrics.rules import error_message_match, normalize, tie_choice
from ..schema import Category, Confidence, Item, Judgement, Preference, ReadText, ResponseGrade
from . import eyes, guideline_rules, injection, meaning, names, rule_confidence, values
from .base import JudgeBase, JudgeRequest, JudgeResult, JudgeStopped
from .screen import ScreenCheck, check_answer, is_text_question

VERSION = "reference-5"
ROUNDS = 3  # embedding rounds a turn waits for before embedding the rest on demand

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_STOP = set(
    "a an the is are was were be been being of in on at to for with by from and or but if so as "
    "this that these those it its it's there here what which who whom whose when where why how "
    "do does did can could would should will shall may might must i you he she we they me him "
    "her us them my your his our their not no yes any some all about into than then too very "
    "just also more most such only own same other up down out over under again once looks look "
    "like seems appear appears video shown show shows see seen image picture".split()
)
_REFUSAL = re.compile(
    r"\b(i'?m sorry|sorry,? (but )?i|i (can ?not|can't|am unable|'m unable|am not able|'m not able|"
    r"won't|don't have (access|information)|couldn't find|could not find|cannot find|can't find|"
    r"do not have (access|information))|unable to (determine|answer|provide|find|help|tell|say|identify)|"
    r"not able to (determine|answer|provide|find|help|tell|say|identify))",
    re.I,
)
_INTEGRITY = re.compile(
    r"\b(appearance|someone's|somebody|person's|people's|their (age|looks|gender|weight)|identify "
    r"(people|a person|individuals)|personal (information|details)|privacy|private|licen[cs]e plate|"
    r"credit card|phone number|address|weight management|weight loss|calorie(s)? count|calories|"
    r"medical|medication|diagnos\w*|health advice|offensive|violent|violence|sexual|explicit|"
    r"political|religio\w*|integrity|policy|guidelines)\b",
    re.I,
)
# Information that points at what is shown or speaks to the user ("This appears to be a decorative
# skeleton", "please call emergency services"), as against a fact about something else.
_ABOUT_SHOWN = re.compile(r"\b(this|these|that|those|here|you|your|please|"
                          r"the (?:video|image|picture|clip|photo|footage|scene|frame))\b", re.I)
RELATED = 0.25  # the meaning of information after a refusal at least this close to the question's bears on it
_DEICTIC_START = re.compile(r"^(?:it|it's|they|they're|there|its|their|he|she|his|her)\b", re.I)  # goes on about it
_ASK_MORE = re.compile(r"\b(more (information|context|details)|could you (please )?(provide|tell|share)|can you (provide|tell|share))\b", re.I)
_BUT_INFO = re.compile(r"\b(however|but|that said|generally|typically|usually|in general|it is (generally )?recommended)\b", re.I)
_NEGATION = re.compile(r"\b(no|not|none|never|nothing|nobody|neither|nor|without|n't|empty)\b", re.I)
_UNKNOWABLE = re.compile(r"\b(can't|cannot|can not|unable|impossible|not possible|no way|unclear|unknown|not visible)\b", re.I)
_UNSURE = re.compile(
    r"\b(?:(?:i'?m|i am)\s+)?not\s+(?:completely|entirely|totally|fully|quite|really|100%|absolutely)?\s*(?:sure|certain)\b|"
    r"\bi\s+(?:can'?t|cannot|can not)\s+be\s+(?:completely\s+|entirely\s+|totally\s+)?(?:sure|certain)\b|"
    r"\bi\s+don'?t\s+know\s+for\s+(?:sure|certain)\b", re.I)
_DEICTIC = re.compile(r"\b(this|these|that|those|it|here|they)\b", re.I)
_COLOURS = {"red", "orange", "yellow", "green", "blue", "purple", "pink", "brown", "black", "white",
            "grey", "gray", "silver", "gold", "beige", "violet", "turquoise"}
# colour words of the other languages the judge reads, as the English ones
_FOREIGN_COLOURS = {
    "rouge": "red", "rouges": "red", "rojo": "red", "roja": "red", "rot": "red", "rote": "red", "roter": "red",
    "rosso": "red", "rossa": "red", "vermelho": "red", "vermelha": "red", "rood": "red",
    "bleu": "blue", "bleue": "blue", "bleus": "blue", "azul": "blue", "blau": "blue", "blaue": "blue",
    "blauer": "blue", "blu": "blue", "blauw": "blue", "vert": "green", "verte": "green", "verde": "green",
    "grün": "green", "grüne": "green", "grüner": "green", "groen": "green", "jaune": "yellow",
    "amarillo": "yellow", "amarilla": "yellow", "gelb": "yellow", "gelbe": "yellow", "giallo": "yellow",
    "amarelo": "yellow", "geel": "yellow", "noir": "black", "noire": "black", "negro": "black", "negra": "black",
    "schwarz": "black", "schwarze": "black", "nero": "black", "preto": "black", "zwart": "black",
    "blanc": "white", "blanche": "white", "blanco": "white", "blanca": "white", "weiß": "white", "weiss": "white",
    "weiße": "white", "bianco": "white", "branco": "white", "wit": "white", "gris": "grey", "grau": "grey",
    "grigio": "grey", "cinza": "grey", "grijs": "grey", "marron": "brown", "braun": "brown", "marrone": "brown",
    "naranja": "orange", "arancione": "orange", "laranja": "orange", "rosa": "pink", "rose": "pink",
    "violeta": "purple", "lila": "purple",
}
_COUNT_Q = re.compile(r"^\s*how (many|much)\b", re.I)
# Questions asking for a name: a brand, a make, a model, a manufacturer.
_NAME_Q = re.compile(r"^\s*(?:(?:what|which)(?:'s| is)?\s+(?:the\s+)?(?:brand|make|manufacturer|maker|company)\b|"
                     r"who (?:makes|made|manufactures|manufactured)\b)", re.I)
_NONE = re.compile(r"\b(none|no|zero|nobody|nothing)\b", re.I)
# Open requests to identify or describe what is shown: the only questions a few plain words
# can answer too generically ("Tell me what this is?" -> "This is a tree."). A short direct
# answer to a specific question ("What colour is the barn?" -> "The barn is red.") is an answer.
_OPEN_Q = re.compile(
    r"^\s*(?:(?:can you |could you |please )?tell me (?:about|what)|what(?:'s| is| are)\s+(?:this|that|these|those|"
    r"it|here)\b|(?:please )?describe\b|what do you see|what am i (?:looking at|seeing)|"
    r"(?:what|which)\s+(?:(?:kind|type|sort|brand|make|model|breed|species)\s+of\s+)?[a-z]+\s+(?:is|are|was|were)\s+"
    r"(?:this|that|these|those|it|they)\s*\??\s*$)", re.I)
_ASKING = {"tell", "describe", "please", "know", "thing", "something", "stuff"}


_CONTRACTIONS = [(re.compile(p, re.I), r) for p, r in (
    (r"\bcan't\b", "can not"), (r"\bcannot\b", "can not"), (r"\bwon't\b", "will not"), (r"\bshan't\b", "shall not"),
    (r"n't\b", " not"), (r"'re\b", " are"), (r"'m\b", " am"), (r"'ll\b", " will"), (r"'ve\b", " have"),
    (r"'d\b", " would"), (r"\b(it|that|there|what|here|he|she|who|where)'s\b", r"\1 is"))]


def _expanded(text: str) -> str:
    """Contractions written out ("doesn't" -> "does not", "They're" -> "They are"), so that a rule
    reads "isn't" and "is not" alike."""
    t = normalize(text)
    for pattern, full in _CONTRACTIONS:
        t = pattern.sub(full, t)
    return t


def _words(text: str) -> list[str]:
    return _WORD.findall(_expanded(text).lower())


def _content(text: str) -> set[str]:
    return {_stem(w) for w in _words(text) if w not in _STOP and len(w) > 2}


def _stem(w: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(w) > len(suffix) + 3 and w.endswith(suffix):
            return w[: -len(suffix)]
    return w


def _values(text: str, question: str) -> list[values.Value]:
    """The whole values a text states (values.py), less those the question itself gives."""
    return values.excluding(values.values(text), values.values(question))


def _versus_golden(golden: str, response: str, question: str) -> values.Comparison:
    """The response's values against the golden response's (in two languages, whatever nouns they
    count: "cinq voitures" against "three cars")."""
    mine, theirs = _values(response, question), _values(golden, question)
    if values.language(response) != values.language(golden):
        mine, theirs = values.without_units(mine), values.without_units(theirs)
    return values.compare(mine, theirs)


def _negated(text: str) -> bool:
    return bool(_NEGATION.search(normalize(text)))


def _entities(text: str) -> set[str]:
    """Proper names, places and brands (names.py)."""
    return names.names(normalize(text))


# Alternatives offered instead of one answer: "..., or maybe X", "either X or Y", "X or perhaps Y".
_HEDGED_OR = re.compile(r"(?:,\s*|\s)or\s+(?:maybe|perhaps|possibly|probably|it could be|it might be|it may be)\b|"
                        r"\beither\b[^.?!;]{1,80}\bor\b", re.I)
# Questions after one thing (what, which, who, when, how many): a list of guesses does not answer them;
# "where can I buy ...", "how do I ..." may well be answered with options.
_IDENTIFY_Q = re.compile(r"^\s*(?:what|which|who|whose|when|how (?:many|much|old|long|tall|big|far|fast))\b", re.I)
_OR_BETWEEN_NAMES = re.compile(r"^\s*(?:,\s*)?(?:or|,)\s+(?:(?:maybe|perhaps|possibly|even)\s+)?(?:the\s+|a\s+|an\s+)?$", re.I)


def _candidates(text: str) -> str | None:
    """Several candidates offered instead of one answer (named things or hedged alternatives: "the
    Golden Gate, or maybe the Brooklyn Bridge", "either Sony or Bose"), as the words that offer them;
    values offered so ("30, 50 or 70") are the values module's."""
    t = normalize(text)
    hedged = _HEDGED_OR.search(t)
    if hedged:
        start = max(t.rfind(c, 0, hedged.start()) for c in ".!?;:") + 1
        ends = [i for i in (t.find(c, hedged.end()) for c in ".!?;") if i >= 0]
        offered = t[start:min(ends) if ends else len(t)].strip()
        return offered if len(offered) <= 160 else offered[:157].rstrip() + "..."
    found = names.spans(t)
    for (_, end, first), (start, _, second) in zip(found, found[1:]):
        between = t[end:start]
        if " or " in f" {between.lower()} " and _OR_BETWEEN_NAMES.match(between) and first != second:
            return f"{first} or {second}"
    return None


_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'])")


def _colours(text: str) -> list[str]:
    """The colours a text names, in order (other languages' colour words as the English ones)."""
    out = []
    for w in re.findall(r"[^\W\d_]+", text.lower()):
        c = w if w in _COLOURS else _FOREIGN_COLOURS.get(w)
        if c is not None and c not in out:
            out.append(c)
    return out


# between alternatives offered: punctuation, "or", "maybe"
_ALTERNATIVES_GLUE = re.compile(r"^[\s,./?!;]*(?:(?:or|maybe|perhaps|possibly|either)\b[\s,./?!;]*)*$", re.I)


def _colour_candidates(text: str) -> str | None:
    """Several colours offered as alternatives, joined only by punctuation or "or" ("Red or blue.",
    "Red. Blue. Green."), as the words that offer them."""
    words = [(m.start(), m.end(), m.group(0).lower()) for m in re.finditer(r"[^\W\d_]+", text)]
    found = [(s0, e0, w if w in _COLOURS else _FOREIGN_COLOURS.get(w)) for s0, e0, w in words
             if w in _COLOURS or w in _FOREIGN_COLOURS]
    for (_, end, first), (start, _, second) in zip(found, found[1:]):
        if first != second and _ALTERNATIVES_GLUE.match(text[end:start]):
            return f"{first} or {second}"
    return None


# a value or name only mentioned: "People often think it's Canberra, but it's Sydney" claims Sydney.
# The mention is the first sentence up to the "but" that follows its last verb of mentioning with one
# after it; found by word searches apart (one pattern spanning both backtracks over every verb, in time
# quadratic in a long sentence's length).
_MENTION_VERB = re.compile(r"\b(?:think|thinks|thought|believe|believes|assume|assumes|say|says|said|mistake|mistaken|"
                           r"confuse|confused|guess|guesses|expect|expects)\b", re.I)
_BUT = re.compile(r"\b(?:but|however|whereas|yet)\b", re.I)
_AFTER_BUT = re.compile(r"(?:\s+(?:it's|it is))?\s*(?:actually|really|in fact)?", re.I)


def _mention_end(t: str) -> int | None:
    """Where a leading mention ("People think X, but actually") ends in `t`; None without one."""
    stop = re.search(r"[.!?;]", t)
    end = stop.start() if stop else len(t)
    buts = list(_BUT.finditer(t, 0, end))
    if stop and t[end] == ";":  # "people think X; but it's Y"
        rest = t[end + 1:]
        after = _BUT.match(t, end + 1 + len(rest) - len(rest.lstrip()))
        buts += [after] if after else []
    if not buts:
        return None
    verbs = [v for v in _MENTION_VERB.finditer(t, 0, end) if v.end() <= buts[-1].start()]
    if not verbs:
        return None
    but = next(b for b in buts if b.start() >= verbs[-1].end())
    tail = _AFTER_BUT.match(t, but.end())
    return tail.end() if tail else but.end()


# an alternative ruled out after the answer: "Canberra, not Sydney", "red rather than blue"
_RULED_OUT = re.compile(r"(?:,|\s-)\s*(?:and\s+)?(?:not|rather than|instead of)\s+(?:the\s+|a\s+|an\s+)?"
                        r"[^,.;!?]{1,40}(?=[,.;!?]|$)", re.I)


def _claimed(text: str) -> str:
    """The answer's claims: without what it only mentions ("people think X, but ...") or rules out
    after its answer (", not Y")."""
    t = normalize(text)
    end = _mention_end(t)
    if end is not None and end < len(t):
        t = t[end:].strip()
    return _RULED_OUT.sub("", t).strip() or normalize(text)


# states a yes/no question asks about, each pair's sides; "not" before a side turns it into the other
_STATES = (({"open"}, {"closed", "shut"}), ({"empty"}, {"full"}), ({"inside"}, {"outside"}), ({"left"}, {"right"}),
           ({"on"}, {"off"}), ({"lit"}, {"unlit", "dark"}))
_YES_NO_Q = re.compile(r"^\s*(?:is|are|was|were|does|do|did|has|have|had|can|could|will|would)\b", re.I)
_NOT_BEFORE = re.compile(r"\b(?:not|never|isn't|aren't|wasn't|weren't|no longer|n't)\s+(?:\w+\s+)?$", re.I)


def _state(text: str, pair: tuple[set[str], set[str]]) -> int | None:
    """Which side of a pair of states the text asserts (0 or 1; "not closed" is open), None for none
    or both."""
    t = _expanded(normalize(text)).lower()
    sides = set()
    for m in re.finditer(r"[a-z]+", t):
        for i, side in enumerate(pair):
            if m.group(0) in side:
                # the two words before it (a window, so that the look is not back over the whole text)
                sides.add(i ^ bool(_NOT_BEFORE.search(t, max(0, m.start() - 100), m.start())))
    return sides.pop() if len(sides) == 1 else None


def _states_agree(golden: str, response: str, question: str) -> bool | None:
    """The state the question asks about (open or closed ...) as both texts give it, negation read:
    True where both give the same, False where they differ, None where either gives none (or the
    question asks for no yes or no)."""
    if not _YES_NO_Q.match(question):
        return None
    q_words = set(_words(question))
    for pair in _STATES:
        if not (q_words & (pair[0] | pair[1])) and pair[0] != {"on"}:
            continue
        if pair[0] in ({"on"}, {"lit"}) and not (q_words & (pair[0] | pair[1])):
            continue
        g, r = _state(golden, pair), _state(response, pair)
        if g is None and values.polarity(golden) and q_words & (pair[0] | pair[1]):
            side = 0 if q_words & pair[0] else 1
            g = side if values.polarity(golden) == "yes" else 1 - side
        if g is not None and r is not None:
            return g == r
    return None


def _on_topic(question: str, golden: str | None, response: str) -> str:
    """The response without the sentences that bear on nothing asked: after its first sentence, a
    sentence sharing no content word with the question, the golden response or the sentences kept,
    pointing at nothing shown and naming no value the golden response states ("This is a tree. A group
    of flamingos is called a flamboyance." -> "This is a tree."). Unrelated trivia or codes neither
    rescue nor sink an answer; they are not what it says about the question."""
    sentences = _SENTENCE.split(normalize(response))
    if len(sentences) < 2:
        return response
    related = _content(question) | _content(golden or "")
    golden_values = values.values(golden or "")
    kept = [sentences[0]]
    related |= _content(sentences[0])
    for sentence in sentences[1:]:
        words = _content(sentence)
        if (words & related or _ABOUT_SHOWN.search(sentence) or _DEICTIC_START.match(sentence)
                or len(_words(sentence)) <= 2 or re.match(r"^\W*or\b", sentence, re.I)
                or any(values.matches(v, golden_values) for v in values.values(sentence))):
            kept.append(sentence)
            related |= words
    return " ".join(kept)


def _overlap(a: set[str], b: set[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))


def _refusal_span(text: str) -> re.Match[str] | None:
    """A refusal, or a request for more information (declining to answer as asked)."""
    return _REFUSAL.search(normalize(text)) or _ASK_MORE.search(normalize(text))


_REFUSAL_ENDS = re.compile(r"[.;!?]|,\s*(?:but|however|though)\b|\b(?:but|however|though)\b", re.I)


def _without_refusals(text: str) -> str:
    """The text with its refusals taken out: "I couldn't find out who painted it" denies nothing about
    the painting."""
    t = normalize(text)
    while found := _REFUSAL.search(t) or _ASK_MORE.search(t):
        end = _REFUSAL_ENDS.search(t, found.end())
        t = t[:found.start()] + " " + t[end.start() if end else len(t):]
    return t


def _useful_after_refusal(text: str, refusal: re.Match[str], question: str = "", golden: str | None = None) -> bool:
    """A refusal followed by real information: a 'however/but/generally' clause, or further
    sentences, carrying at least a few content words or numbers, that bear on the request (words
    of the question or the golden response, what is shown, advice to the user, or a meaning close to
    the question's): an unrelated fact after a refusal ("Octopuses have three hearts.") is no help."""
    rest = normalize(text)[refusal.end():]
    while again := _REFUSAL.search(rest):  # "I'm sorry, but I can't ...": the refusal goes on; look after it
        rest = normalize(rest)[again.end():]
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", rest) if s.strip()]
    pivot = _BUT_INFO.search(rest)
    info = rest[pivot.end():] if pivot else " ".join(sentences[1:])
    if _REFUSAL.search(info) or _ASK_MORE.search(info):
        return False
    if not (len(_content(info)) >= 5 or (len(_content(info)) >= 3 and bool(re.search(r"\d", info)))):
        return False
    if not question:
        return True
    if _content(info) & (_content(question) | _content(golden or "")) or _ABOUT_SHOWN.search(info):
        return True
    return meaning.available() and meaning.similarity(question, info) >= RELATED


class Decided(NamedTuple):
    """A response's category, the guideline's reason, and the rule that decided it (a stable id such as
    `golden:contradicts` or `guideline:medication`: the key of the judge's calibrated confidence);
    for a decision by similarity, its margin from the nearest threshold (meaning.Meant.margin)."""

    category: Category
    reason: str
    path: str
    margin: float | None = None


def grade_response(rubric: Rubric, item: Item, turn_index: int, response: str) -> Decided:
    """One response's category, the reason, and the path that decided it, from text alone."""
    turn = item.turns[turn_index]
    question, golden = turn.question, turn.golden
    if error_message_match(response, rubric):
        return Decided(Category.error_message, "the response is one of the fixed error strings", "error_string")
    if not normalize(response):
        return Decided(Category.missing, "the response is empty", "empty")
    found = precedent(rubric, item.id, question, response)
    if found is not None:
        c, side = found
        category = c.category_a if side == "a" else c.category_b
        assert category is not None
        return Decided(category, f"as the corrected example from item {c.item_id}: {c.reason.strip()}", "precedent")
    ruled = guideline_rules.first(question, golden, response, item.expression)
    if ruled is not None:
        rule, (category, why) = ruled
        return Decided(category, why, f"guideline:{rule}")

    refusal = _refusal_span(response)
    if refusal:
        if _INTEGRITY.search(response):
            return Decided(Category.successful, "declines on integrity or unsupported-domain grounds", "refusal:integrity")
        if _useful_after_refusal(response, refusal, question, golden):
            if golden and _contradicts(golden, response, question):
                return Decided(Category.not_successful, "says it cannot fully answer, then gives information the "
                               "golden response contradicts", "refusal:contradicts_golden")
            return Decided(Category.successful, "says it cannot fully answer, then gives useful information", "refusal:useful_after")
        if golden and (_refusal_span(golden) or _UNKNOWABLE.search(normalize(golden))):
            return Decided(Category.successful, "the golden response agrees the question cannot be settled", "refusal:golden_agrees")
        if _ASK_MORE.search(response) and not golden:
            return Decided(Category.successful, "explains what it would need to answer", "refusal:asks_what_needed")
        if golden and _contradicts(golden, response, question):
            return Decided(Category.not_successful, "its claim contradicts the golden response", "refusal:contradicts_golden")
        return Decided(Category.missing, "understood the request but declined a supported question", "refusal:missing")

    response = _on_topic(question, golden, response)  # unrelated sentences neither rescue nor sink it
    q_content, r_content = _content(question), _content(response)
    if golden:
        said = response
        response = _claimed(response)
        if _YES_AND_NO.search(said) and values.polarity(golden):
            return Decided(Category.not_successful, "answers both yes and no: no answer", "golden:yes_and_no")
        bare = values.bare_polarity(response)
        if bare is not None and bare == values.polarity(golden) and not _contradicts(golden, response, question):
            return Decided(Category.successful, f"answers {bare} to the question, as the golden response does",
                           "golden:polarity")
        offered = _candidates(response) if _IDENTIFY_Q.search(question) else None
        offered = offered or (_colour_candidates(response) if _IDENTIFY_Q.search(question) and len(_colours(golden)) == 1
                              else None)
        if offered and not _candidates(golden) and not _candidates(question):
            return Decided(Category.not_successful, f'offers several candidates ("{offered}") where the golden '
                           "response gives one answer: a list of guesses is not an answer", "golden:candidates")
        if _contradicts(golden, response, question):
            return Decided(Category.not_successful, "contradicts the golden response", "golden:contradicts")
        if _states_agree(golden, response, question):
            return Decided(Category.successful, "gives the state the golden response gives (its negation read)",
                           "golden:same_state")
        if _NAME_Q.search(question) and _entities(golden) - _entities(question) and not _entities(response):
            return Decided(Category.irrelevant, "the question asks for a brand or maker and the answer names none: it describes instead of answering", "golden:names_none")
        g_col, r_col = _colours(golden), _colours(response)
        if re.search(r"\bcolou?rs?\b", question, re.I) and g_col and set(r_col) == set(g_col):
            return Decided(Category.successful, f"names the colour the golden response gives ({', '.join(g_col)})",
                           "golden:same_colour")
        g_content = _content(golden)
        # a shared number, or most of the response's words in the golden response, keeps the words' decision
        shared = _overlap(r_content, g_content)
        by_value = _versus_golden(golden, response, question)
        meant = None if by_value.agreeing or shared >= 0.75 else meaning.versus_golden(
            question, golden, response, shares_words=shared > 0)
        if meant is not None:
            return Decided(meant.category, meant.reason, f"meaning:{meant.category.value}", meant.margin)
        if shared == 0 and not by_value.agreeing and values.language(response) != values.language(golden):
            # another language shares no words by nature, and the meaning model reads English only:
            # nothing it says contradicts the golden response (values, names, yes or no, colours)
            return Decided(Category.successful, f"answers in another language ({values.language(response)}) "
                           "and contradicts nothing the golden response states", "golden:other_language")
        if shared == 0 and not by_value.agreeing:
            if _overlap(r_content, q_content) == 0 and not _DEICTIC.search(question):
                return Decided(Category.irrelevant, "shares nothing with the question or the golden response", "golden:unrelated")
            return Decided(Category.not_successful, "says something other than the golden response", "golden:other")
        if _too_generic(question, response, q_content, r_content) and (g_content - q_content - _ASKING):
            return Decided(Category.not_successful, "too generic to be useful: names only the kind of thing the golden response identifies", "golden:too_generic")
        return Decided(Category.successful, "agrees with the golden response", "golden:agrees")
    if _COUNT_Q.search(question) and not _values(response, question) and not _NONE.search(response):
        return Decided(Category.irrelevant, "the question asks for a number and the answer gives none", "no_golden:no_number")
    if q_content and r_content and _overlap(r_content, q_content) == 0 and len(r_content) >= 4:
        # Without a golden response, only a question that names its subject (no "this",
        # "it", "here": nothing the video would supply) can be judged off-topic from words.
        if not _DEICTIC.search(question):
            return Decided(Category.irrelevant, "shares no subject with the question", "no_golden:off_topic")
    if _too_generic(question, response, q_content, r_content):
        return Decided(Category.not_successful, "too generic to be useful", "no_golden:too_generic")
    return Decided(Category.successful, "no rule applies, so Successful (the guideline's default)", "default")


def _too_generic(question: str, response: str, q_content: set[str], r_content: set[str]) -> bool:
    """A few plain words answering an open request to identify what is shown, naming nothing
    more specific than the question did: no number, no name, no new noun for a question that
    names its kind ("What is this bird?" -> "A heron." is specific, "A bird." is not)."""
    if not _OPEN_Q.search(question) or len(_words(response)) > 4 or values.values(response) or _entities(response):
        return False
    named = q_content - _ASKING
    return not named or not (r_content - q_content - _ASKING)


_ARTICLE = {"the", "a", "an", "this", "that", "its", "his", "her", "their", "our", "my", "your"}


def _named_slots(text: str, question_names: set[str]) -> list[tuple[str | None, str]]:
    """Each name of a text (not named by the question) with the word that introduces it ("in" for
    "in London", "emperor" for "the Mughal emperor Shah Jahan"), or None at a sentence's start."""
    t = normalize(text)
    out = []
    for start, _, name in names.spans(t):
        if name in question_names:
            continue
        words = re.findall(r"[A-Za-z']+|[^\sA-Za-z']", t[:start])
        while words and words[-1].lower() in _ARTICLE:
            words.pop()
        before = words[-1].lower() if words and words[-1][:1].isalpha() and words[-1].islower() else None
        out.append((before, name))
    return out


def _substituted_name(golden: str, response: str, question: str) -> str | None:
    """A name of the response in the place of a different one of the golden response: introduced by
    the same word, and neither naming anything the other side names."""
    asked = _entities(question)
    g, r = _named_slots(golden, asked), _named_slots(response, asked)
    g_names, r_names = {n for _, n in g}, {n for _, n in r}
    lonely_g = {b for b, n in g if b and not names.same_thing({n}, r_names)}
    for before, name in r:
        if before and before in lonely_g and not names.same_thing({name}, g_names):
            return name
    # one name left on each side once the names both give word for word are set aside, and they name
    # different things ("the Sagrada Familia" where the golden response's "Taj Mahal" was, beside the
    # same Shah Jahan and Mumtaz Mahal)
    left_g, left_r = g_names - r_names, r_names - g_names
    if len(left_g) == 1 and len(left_r) == 1 and g_names & r_names and not names.same_thing(left_g, left_r):
        return next(iter(left_r))
    # the same model under another maker's name ("Apple WH-1000XM4" for "Sony WH-1000XM4")
    shared_codes = {c.lower() for v in values.values(golden) if v.kind == values.CODE for c in v.meanings} & {
        c.lower() for v in values.values(response) if v.kind == values.CODE for c in v.meanings}

    def model(word: str) -> bool:
        return any(c.startswith(word.replace("-", "")) for c in shared_codes)

    for _, name in r:
        r_words = set(name.split())
        for _, theirs in g:
            g_words = set(theirs.split())
            maker_r = {w for w in r_words - g_words if not model(w) and w not in names.GENERIC}
            maker_g = {w for w in g_words - r_words if not model(w) and w not in names.GENERIC}
            if any(model(w) for w in r_words & g_words) and maker_r and maker_g:
                return name
    return None


_YES_AND_NO = re.compile(r"^\W*(?:yes\W+(?:and|or|but)\W+no|no\W+(?:and|or|but)\W+yes)\b", re.I)


def _contradicts(golden: str, response: str, question: str) -> bool:
    gp, rp = values.polarity(golden), values.polarity(response)
    if gp and rp and gp != rp:
        return True
    if _states_agree(golden, response, question) is False:
        return True  # "It's not closed." where the golden response says it is closed
    if _versus_golden(golden, response, question).wrong:
        return True  # a value the golden response contradicts: 06:41:46 for 06:41:49, "2 strollers" for one
    if _substituted_name(golden, response, question):
        return True  # "Big Ben in New York" for "... in London": another name where the golden response has one
    g_ent = _entities(golden) - _entities(question)
    r_ent = _entities(response) - _entities(question)
    if len(g_ent) >= 1 and len(r_ent) >= 1 and not names.same_thing(g_ent, r_ent):
        return True
    g_col = set(_colours(golden)) - set(_words(question))
    r_col = set(_colours(response)) - set(_words(question))
    if g_col and r_col and not (g_col & r_col):
        return True  # "the barn is red" vs "the barn is blue"
    for pair in (("left", "right"), ("open", "closed"), ("empty", "full"), ("inside", "outside")):
        g_side = {w for w in _words(golden) if w in pair}
        r_side = {w for w in _words(response) if w in pair}
        if len(g_side) == 1 and len(r_side) == 1 and g_side != r_side:
            return True
    # Negation mismatch on the same subject: "no trains ... still" vs "trains moving". Doubt about
    # the answer ("I'm not completely sure, but ...") negates nothing in it.
    if gp and gp == rp:
        return False  # the same yes or no: a "not" further on ("it doesn't remove it") is detail, not denial
    # nor does a refusal ("I can't look up prices, but ...") deny anything about what is shown
    golden = _UNSURE.sub(" ", _expanded(_without_refusals(golden)))
    response = _UNSURE.sub(" ", _expanded(_without_refusals(response)))
    shared = _content(golden) & _content(response)
    if shared and _negated(golden) != _negated(response):
        g_neg = bool(re.search(r"\b(no|none|nothing|empty|not)\b", golden, re.I))
        r_neg = bool(re.search(r"\b(no|none|nothing|empty|not)\b", response, re.I))
        if g_neg != r_neg:
            return True
    return False


# ----------------------------------------------------------------------------- ranking
#
# Pairs are ranked order-free: the verdict is computed once for the pair in a canonical order
# (by category, then text) and mirrored back, and every criterion compares two scores through a
# symmetric margin, so grading (B, A) gives exactly the mirror of (A, B). A tie takes the rubric's
# tie choice (`tie_choice`: Both for two Successful answers, Neither for two failing ones).

# Words that sit between a value and what it is about ("built in 1889", "opens at 9"): skipped
# when looking for the word a value belongs to.
_LINK = _STOP | set("between around about approximately roughly nearly almost over under since until till after "
                    "before during per each every for from at on in by to of am pm a.m p.m o'clock".split())
_TOKEN = re.compile(r"[$£€]?[\w'.:/,-]*\w|[$£€]?\w")
# Questions asking for a value: a number, a time, a date, a price, a size, a code.
_ASKS_VALUE = re.compile(
    r"\b(how (many|much|old|long|far|tall|big|high|wide|deep|heavy|often|fast|late|early|soon)|when|what time|"
    r"what year|what date|which (year|day|date|number|platform|gate|room|floor|bus|line|route|exit|seat|row|page)|"
    r"(price|cost|costs|number|code|time|date|year|temperature|speed|size|weight|height|length|distance|percent\w*|"
    r"calories|protein|dose|age|score))\b", re.I)
# Questions asking for suggestions: several options there are alternatives offered, not a hedge.
_ASKS_OPTIONS = re.compile(r"\b(would|could|should|can i|recommend\w*|suggest\w*|go (well )?with|pair\w*|ideas?|"
                           r"options?|alternatives?|else|examples?|some)\b", re.I)
# Between two candidates of a hedge: a comma, "or", a slash ("30, 50, 70 or 12345").
_BETWEEN_CANDIDATES = re.compile(r"^\s*(?:,|/|,?\s*(?:or|either)\b)?\s*(?:maybe|perhaps|possibly|even)?\s*"
                                 r"(?:a|an|the)?\s*$", re.I)
# Where to find the answer, or how to get it, said by an answer that cannot give it itself: a
# source ("the leaflet", "a price-comparison site", "a garden centre") with a way to use it ("check",
# "ask", "search for"; "... can tell you"), or "you can find ...".
_SOURCE = (r"(?:label|leaflet|insert|packag\w*|box|website|site|online|web|internet|manual|app|pharmacist|doctor|gp|"
           r"vet|expert|specialist|staff|shop|store|retailer|seller|manufacturer|maker|services?|guide|map|timetable|"
           r"schedule|sign|menu|counter|desk|office|library|model (?:name|number)|professional|nursery|"
           r"garden (?:centre|center)|florist|museum|ranger|guidebook|encyclopedia)s?")
_POINTER = re.compile(
    r"\b(?:check|ask(?:ing)?|search(?:ing)?|look(?:ing)?(?: it)? up|look(?:ing)? (?:at|for|on|in)|consult|visit|"
    rf"contact|call|read(?:ing)?|refer to|try(?:ing)?|compar(?:e|ing))\b[^.!?]{{0,80}}?\b{_SOURCE}\b|"
    r"\byou (?:can|could|might|may|'ll|will) (?:find|get|check|ask|look|search|see)\b|"
    rf"\b{_SOURCE}(?: [a-z]+)? (?:can|could|will|would|should|may|might) (?:tell|help|advise|show|say|confirm|"
    r"answer|know)\b", re.I)
# The marks of creative writing (a story, a poem, a caption, a toast): exclamations, quotes, an
# ellipsis, line breaks, story and greeting openers, a meme's set-up.
_CREATIVE_FORM = re.compile(r"[!?\"…]|\.\.\.|\n| / |\b(once upon|ahoy|arr+|happy|here'?s to|dear|oh|hey|"
                            r"one day|there once)\b|^\s*(when|if|me|my|that moment|nobody|pov)\b", re.I)


class _Detail(NamedTuple):
    """A concrete detail of an answer: a whole value (values.py) or a name, where it stands in the
    text as `values.canonical` gives it."""

    key: str  # what identifies it: the value's kind and meanings, or the name lower-cased
    kind: str  # "value" or "name"
    start: int
    end: int
    value: values.Value | None = None


_NOT_NAMES = frozenset({"am", "pm", "a.m", "p.m", "ok", "okay"})
_NUMERIC = re.compile(r"[$£€]?\d[\w$£€:./,-]*")  # a token that is (part of) a value, skipped as a word


def _details(t: str) -> list[_Detail]:
    """The values and names of a canonical text (`values.canonical`), in order of appearance."""
    found = [_Detail(f"{v.kind}:{sorted(map(str, v.meanings))}", "value", v.start, v.end, v) for v in values.values(t)]
    wanted = sorted((n for n in _entities(t) if n not in _NOT_NAMES
                     and not (any(ch.isdigit() for ch in n) and len(n.split()) == 1)),  # a code alone is a value
                    key=len, reverse=True)
    if wanted:  # where each name first stands, in one pass over the text
        seen: set[str] = set()
        for m in re.finditer(r"(?<!\w)(?:" + "|".join(map(re.escape, wanted)) + r")(?!\w)", t.lower()):
            if m.group(0) not in seen and not any(d.start <= m.start() < d.end for d in found):
                seen.add(m.group(0))
                found.append(_Detail(m.group(0), "name", m.start(), m.end()))
    return sorted(found, key=lambda d: d.start)


_CLAUSE_END = re.compile(r"[.;!?](?:\s|$)")


def _attached(text: str, d: _Detail) -> set[str]:
    """The words a value is said of: the nearest word before it and after it in its clause that is
    neither a small linking word nor another value ("built in 1889" -> built; "Reference codes:
    17, 42" -> codes; "eight legs" -> leg). Looks a few words either way, never further (linear in
    the text however many values it holds)."""
    before_text = text[max(0, d.start - 80):d.start]
    ends = list(_CLAUSE_END.finditer(before_text))
    before_text = before_text[ends[-1].end():] if ends else before_text
    after_text = text[d.end:d.end + 60]
    end = _CLAUSE_END.search(after_text)
    after_text = after_text[:end.start()] if end else after_text
    out: set[str] = set()
    for side in (_TOKEN.findall(before_text)[::-1][:4], _TOKEN.findall(after_text)[:3]):
        for w in side:
            w = w.lower().strip("'.,:/-")
            if not w or w in _LINK or _NUMERIC.fullmatch(w) or w in ("or", "and", "either"):
                continue
            out.add(_stem(w))
            break
    return out


_NAME_ASKED = re.compile(r"^\s*(who|whose|which|where|what(?:'s| is| are| was)?\s+(?:the\s+)?(?:name|brand|make|model|"
                         r"breed|species|kind|type|variety|title|painting|song|film|movie|book|city|country|town|"
                         r"place|company|team|language|wine|cheese|dish)|what (?:is|are) (?:this|that|these|those|it))\b",
                         re.I)


class _Asked(NamedTuple):
    """What an answer's details are weighed against: the question and golden response's subject
    words, the values and names each holds."""

    question: str
    golden: str | None
    subjects: set[str]
    q_values: list[values.Value]
    g_values: list[values.Value]
    q_names: set[str]
    g_names: set[str]
    wants_value: bool  # the question asks for a value ("when", "how many", "what time")
    wants_name: bool  # or for a name ("who", "what brand", "which breed")
    wants_options: bool  # or for suggestions ("what would go with it"): an "or" there offers, not hedges


def _asked(question: str, golden: str | None) -> _Asked:
    q, g = normalize(question), normalize(golden) if golden else ""
    given = [list(values.values(t)) for t in (q, g)]
    return _Asked(question, golden, _content(q) | _content(g), given[0], given[1], _entities(q), _entities(g),
                  bool(_ASKS_VALUE.search(q)), bool(_NAME_ASKED.search(q)), bool(_ASKS_OPTIONS.search(q)))


def _bears_on(d: _Detail, text: str, asked: _Asked) -> bool:
    """Whether a detail of an answer bears on the question or the golden response and tells the
    listener something the question did not. A value does when the golden response holds it, when it
    is said of a thing they name ("eight legs" for "how many legs"), or, said of nothing ("1989."),
    when the question asks for a value; a value said of something else ("Reference codes: 17, 42")
    does not. A name does when it names a thing the golden response names or shares a word with the
    question or golden response, or, without a golden response, when the question asks for a name.
    What the question itself gives (its own values and names, repeated) tells nothing. (The one place
    that decides relevance: a typed values module can take it over.)"""
    if d.value is not None:
        if values.matches(d.value, asked.q_values):
            return False
        if values.matches(d.value, asked.g_values):
            return True
        said_of = _attached(text, d)
        if said_of:
            return bool(said_of & asked.subjects)
        return asked.wants_value
    if asked.q_names and names.same_thing({d.key}, asked.q_names):
        return False
    if asked.g_names and names.same_thing({d.key}, asked.g_names):
        return True
    if {_stem(w) for w in _WORD.findall(d.key)} & asked.subjects:
        return True
    return not asked.golden and asked.wants_name


def _weight(d: _Detail, asked: _Asked) -> float:
    """A relevant detail of the kind the question asks for (a value for "when", "how many"; a name
    for "who", "what brand"; a code such as "KLF03" or "B32" for either) is the answer's substance:
    1. One of another kind supports it ("the Eiffel Tower" for when it was built): 1/2. A question
    asking for neither weighs every detail 1."""
    if not (asked.wants_value or asked.wants_name):
        return 1.0
    if d.value is not None and d.value.kind == values.CODE:
        return 1.0  # a code
    return 1.0 if (asked.wants_value and d.kind == "value") or (asked.wants_name and d.kind == "name") else 0.5


def _helpfulness(asked: _Asked, text: str) -> float:
    """Concrete details bearing on the question or the golden response, each counted once and
    weighed by `_weight`. A hedge over candidates ("1987, 1988, 1989, 1990 or 1991", or three values
    or more in a bare run) counts nothing: it commits to no value the listener can act on (options
    offered for a request of suggestions are not a hedge: "a Pinot Noir or a Sauvignon Blanc" for
    what would go with it; a list of names is a list: "Honda, Toyota and Lexus"). An answer that
    declines and says where to find the answer, or how to get it, gets one more."""
    t = values.canonical(normalize(text))  # the positions of its values are in this text
    groups: list[list[_Detail]] = []
    for d in _details(t):
        prev = groups[-1][-1] if groups else None
        if prev is not None and not asked.wants_options and prev.kind == d.kind and d.start >= prev.end and \
                _BETWEEN_CANDIDATES.match(t[prev.end:d.start]):
            groups[-1].append(d)
        else:
            groups.append([d])
    score, counted = 0.0, set()
    for g in groups:
        if len(g) > 1 and any(re.search(r"\bor\b|/", t[x.end:y.start], re.I) for x, y in zip(g, g[1:])) or \
                len(g) > 2 and g[0].kind == "value":
            continue  # a hedge: candidates joined by "or", or a bare run of values ("1987, 1988, 1989")
        for d in g:
            if (d.kind, d.key) not in counted and _bears_on(d, t, asked):
                counted.add((d.kind, d.key))
                score += _weight(d, asked)
    if _refusal_span(text) and _POINTER.search(t):
        score += 1.0
    return score


def _creativity(question: str, text: str) -> float:
    """What a creative answer invents: its distinct content words not taken from the question. A
    flat statement, without the marks of a story, poem or caption, invents nothing."""
    if not (_CREATIVE_FORM.search(normalize(text)) or "\n" in text.strip()):
        return 0.0
    return float(len(_content(text) - _content(question)))


def _criterion_scores(asked: _Asked, text: str, category: Category) -> dict[str, float]:
    wrong = category in (Category.not_successful, Category.error_message)
    focus = _on_topic(asked.question, asked.golden, text)  # unrelated trivia helps no one and invents nothing asked
    return {
        # an error string states nothing true: it never outranks an answer on the topic
        "factual_accuracy": 0.0 if wrong else 1.0,
        "relevancy": 0.0 if category in (Category.irrelevant, Category.error_message) else 1.0,
        "not_missing": 0.0 if category in (Category.missing, Category.error_message) else 1.0,
        # wrong details help no one
        "helpfulness": 0.0 if wrong else _helpfulness(asked, focus),
        "conciseness": -float(len(_words(text))),
        "creativity": _creativity(asked.question, focus),
    }


def _margin(criterion: str, x: float, y: float) -> float:
    """How far apart two scores must be for the criterion to separate the answers (symmetric in x, y)."""
    if criterion == "conciseness":
        return max(3.0, 0.2 * max(-x, -y))
    return {"helpfulness": 1.0, "creativity": 3.0}.get(criterion, 0.5)


_CATEGORY_ORDER = {c: k for k, c in enumerate(Category)}


def _prefer(rubric: Rubric, item: Item, turn_index: int, first: tuple[str, Category],
            second: tuple[str, Category]) -> tuple[int | None, str | None]:
    """0 if the first answer is preferred, 1 if the second, None for a tie; with the deciding criterion."""
    succ = Category.successful
    if (first[1] == succ) != (second[1] == succ):
        return (0 if first[1] == succ else 1), "category"
    turn = item.turns[turn_index]
    asked = _asked(turn.question, turn.golden)
    x, y = _criterion_scores(asked, *first), _criterion_scores(asked, *second)
    assert rubric.preference is not None
    for criterion in rubric.preference.criteria:
        if criterion.applies_to == "expression" and item.expression == "none":
            continue
        if criterion.applies_to == "all_but_long_expression" and item.expression == "other":
            continue
        if criterion.compares == "successful" and not (first[1] == second[1] == succ):
            continue  # how well an answer delivers what it says: two failing answers deliver nothing
        if criterion.id not in x:
            continue  # a criterion of a user's rubric this judge cannot score
        sx, sy = x[criterion.id], y[criterion.id]
        if abs(sx - sy) >= _margin(criterion.id, sx, sy):
            return (0 if sx > sy else 1), criterion.id
    return None, None


def rank_pair(rubric: Rubric, item: Item, turn_index: int, cat_a: Category, cat_b: Category) -> tuple[Preference, str | None]:
    """Preference by the rubric's rules and criteria, in rank order; a tie is the rubric's tie choice.
    Order-free by construction: the pair is compared in one canonical order (category, then text)
    and the verdict mirrored back, so (B, A) always gets the mirror of (A, B)."""
    turn = item.turns[turn_index]
    assert turn.response_b is not None
    a, b = (turn.response_a, cat_a), (turn.response_b, cat_b)
    a_first = (_CATEGORY_ORDER[cat_a], turn.response_a) <= (_CATEGORY_ORDER[cat_b], turn.response_b)
    winner, criterion = _prefer(rubric, item, turn_index, *((a, b) if a_first else (b, a)))
    if winner is None:
        return tie_choice(rubric, cat_a, cat_b), None
    return (Preference.A if (winner == 0) == a_first else Preference.B), criterion


class Decision(NamedTuple):
    """What the reference judge decided for one turn, and how."""

    judgement: Judgement
    checks: list[ScreenCheck]  # the screen checks that decided grades (none without reads)
    paths: dict[str, str]  # label field (category_a, category_b, preference) -> the path that decided it
    margins: dict[str, float] = {}  # label field -> the similarity margin of a decision by meaning


class ReferenceJudge(JudgeBase):
    backend = "reference"
    model_id = VERSION
    needs_frames = False  # only the turns it asks for (wants_frames) are decoded
    sees_images = False
    reads_pixels = True  # its OCR reads the decoded pixels, not a JPEG of them
    deterministic = True

    stop_note = "reading on-screen text stops at its next frame"

    def __init__(self, read_text: bool = True) -> None:
        """`read_text`: read on-screen text for questions about it (when the OCR package is there)."""
        self.read_text = read_text
        self._stop = threading.Event()

    def stop(self) -> None:
        """End the on-screen text reads in flight at their next frame and refuse later calls
        (JudgeStopped): the reads run in threads, which cancelling the awaiting task cannot stop."""
        self._stop.set()

    def _check(self) -> None:
        if self._stop.is_set():
            raise JudgeStopped("the judge was stopped")

    def reads_no_frames(self) -> str | None:
        """Why no turn's frames would be read in this process (None: questions about on-screen text are)."""
        if not self.read_text:
            return "reading on-screen text is off"
        return eyes.unavailable()

    def wants_frames(self, item: Item, turn: int) -> bool:
        """Frames for a question about on-screen text, when they can be read; none otherwise."""
        return (self.read_text and bool(item.video) and is_text_question(item.turns[turn].question)
                and eyes.unavailable() is None)

    async def judge(self, request: JudgeRequest) -> JudgeResult:
        self._check()
        item, turn = request.item, request.turn
        notes: list[str] = []
        reads: list[ReadText] | None = None
        if self.read_text and item.video and is_text_question(item.turns[turn].question):
            missing = eyes.unavailable()
            if missing is not None:
                notes.append(f"on-screen text not read, graded from the text alone: {missing}")
            elif request.sampled:
                reads = await asyncio.to_thread(eyes.read_frames, request.sampled, self._check)
        decision = await self._decided(request.rubric, item, turn, reads or ())
        judgement, checks = decision.judgement, decision.checks
        read_text = None
        if reads is not None:
            used = {(r.timestamp, r.text) for c in checks for r in c.seen}
            read_text = eyes.distinct([r.model_copy(update={"used": (r.timestamp, r.text) in used}) for r in reads])
            notes.append(f"read on-screen text on {len(request.sampled)} frame(s) with RapidOCR: "
                         f"{len(read_text)} distinct line(s)" + (f", {len(checks)} grade(s) decided by it" if checks else ""))
        return JudgeResult(judgement, notes=[*notes, meaning.note()], read_text=read_text,
                           confidence=self.confidence(decision))

    def confidence(self, decision: Decision) -> Confidence:
        """Per field, how often the path that decided it agreed with people on the judge's development
        data (rule_confidence.py)."""
        return rule_confidence.confidence(VERSION, decision.paths, decision.margins,
                                          decision.judgement.deciding_criterion == "category")

    def ruled_confidence(self, judgement: Judgement) -> Confidence:
        """The confidence of a verdict the pipeline's error-string rules decided before asking the judge."""
        fields = ["category_a"] + (["category_b", "preference"] if judgement.response_b is not None else [])
        return rule_confidence.confidence(VERSION, {f: rule_confidence.RULED_PATHS[f] for f in fields}, {}, False)

    async def _decided(self, rubric: Rubric, item: Item, turn_index: int,
                       reads: Sequence[ReadText]) -> Decision:
        """`decide_with`, with the sentences it needs embedded together with those of the other
        turns being graded (the decision is pure: it is made again once they are)."""
        for _ in range(ROUNDS):
            try:
                with meaning.deferred():
                    return self.decide_with(rubric, item, turn_index, reads)
            except meaning.NeedVectors as need:
                await meaning.ensure(need.texts)
        return self.decide_with(rubric, item, turn_index, reads)  # embedding what is left on demand

    def decide(self, rubric: Rubric, item: Item, turn_index: int, reads: Sequence[ReadText] = ()) -> Judgement:
        return self.decide_with(rubric, item, turn_index, reads)[0]

    def decide_with(self, rubric: Rubric, item: Item, turn_index: int,
                    reads: Sequence[ReadText] = ()) -> Decision:
        """The judgement, the screen checks that decided its grades (none without reads), and the
        path that decided each label field. Text that speaks to the grader (injection.py) is not
        graded: neither in a response nor read on screen."""
        given = item.turns[turn_index]
        item = _without_injections(item, turn_index)
        reads = [r for r in reads if not injection.addresses_grader(r.text)]
        turn = item.turns[turn_index]
        checks: list[ScreenCheck] = []
        grades: dict[str, ResponseGrade] = {}
        paths: dict[str, str] = {}
        margins: dict[str, float] = {}
        need: list[str] = []
        for key, response in (("response_a", turn.response_a), ("response_b", turn.response_b)):
            if response is None:
                continue
            field = key.replace("response", "category")
            try:
                grades[key], check, paths[field], margin = _grade(rubric, item, turn_index, response, reads)
            except meaning.NeedVectors as more:  # deferred: ask for both responses' sentences at once
                need += more.texts
                continue
            checks += [check] if check else []
            if margin is not None:
                margins[field] = margin
        if need:
            raise meaning.NeedVectors(need)
        pref = crit = None
        if turn.response_b is not None:
            pref, crit = rank_pair(rubric, item, turn_index, grades["response_a"].category,
                                   grades["response_b"].category)
            paths["preference"] = f"rank:{crit or 'tie'}"
        for key in grades:
            if getattr(turn, key) != getattr(given, key):
                grades[key] = grades[key].model_copy(update={"rationale": (
                    "Text addressed to the grader was not graded. " + grades[key].rationale)[:2000]})
        context = {"rubric": rubric, "responses": {"a": given.response_a, "b": given.response_b}}
        judgement = Judgement.model_validate(
            {**{k: v.model_dump() for k, v in grades.items()}, "preference": pref, "deciding_criterion": crit,
             "multiturn": turn_index > 0},
            context=context,
        )
        return Decision(judgement, checks, paths, margins)


def _without_injections(item: Item, turn_index: int) -> Item:
    """The item with the responses of its turns up to `turn_index` rid of text that speaks to the
    grader; the item itself when none holds any."""
    turns = list(item.turns)
    changed = False
    for i, t in enumerate(turns[: turn_index + 1]):
        a = injection.without_injections(t.response_a)
        b = injection.without_injections(t.response_b) if t.response_b is not None else None
        if a != t.response_a or b != t.response_b:
            turns[i] = t.model_copy(update={"response_a": a, "response_b": b})
            changed = True
    return item.model_copy(update={"turns": turns}) if changed else item


def _grade(rubric: Rubric, item: Item, turn_index: int, response: str,
           reads: Sequence[ReadText]) -> tuple[ResponseGrade, ScreenCheck | None, str, float | None]:
    """A response's grade: by the text on screen where it settles the answer, else by the text rules;
    with the screen check that decided it, the path that did (`Decided.path`, or `screen:…`) and its
    margin (`Decided.margin`)."""
    category, why, path, margin = grade_response(rubric, item, turn_index, response)
    # reading out personal information, judging a person's looks, violent or hateful content: the
    # response itself violates integrity, whatever else decides its category
    violates = guideline_rules.violates_integrity(path.removeprefix("guideline:"), category)
    if not reads or category in (Category.error_message, Category.missing) or not normalize(response):
        return (ResponseGrade(category=category, rationale=why[:2000], integrity_violation=violates), None, path,
                margin)  # a refusal to read claims nothing
    turn = item.turns[turn_index]
    check = check_answer(turn.question, response, reads, turn.golden)
    if check is None:
        return ResponseGrade(category=category, rationale=why[:2000], integrity_violation=violates), None, path, margin
    by_screen = Category.successful if check.states_screen else Category.not_successful
    rationale = check.reason()
    if by_screen is not category:
        rationale += f"; from the text alone it would be {category.value} ({why})"
    grade = ResponseGrade(category=by_screen, rationale=rationale[:2000], evidence_timestamps=check.timestamps[:64],
                          integrity_violation=violates)
    return grade, check, "screen:stated" if check.states_screen else "screen:contradicted", None
