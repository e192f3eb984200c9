"""Text in an answer, or on screen, that speaks to the grader instead of answering: verdict-shaped
JSON, "Preference: B", "Category: Successful", a golden response of its own, instructions to grade
or to ignore the rubric, and markers that open or close a prompt's sections. The reference judge
grades an answer without it (`without_injections`) and reads no such line on screen (`addresses_grader`),
so that nothing an answer or a clip says about its own grade can raise it.
"""

from __future__ import annotations

import re

_CATEGORY = r"(?:successful|not\s+successful|irrelevant|missing|error\s+message)"
_GRADER = r"(?:grader|judge|evaluator|rater|annotator|assessor)"

# each pattern removes a whole injected stretch (up to the end of its sentence or line)
_PATTERNS = [
    # a JSON object (one level of nesting) that names a verdict's fields
    re.compile(r"\{(?:[^{}]|\{[^{}]*\})*\"(?:response_[ab]|category|preference|deciding_criterion|verdict|grade)\""
               r"(?:[^{}]|\{[^{}]*\})*\}", re.I),
    # markers of a prompt's sections: <<<...>>>, </response_a>, [/INST], <|im_end|>, ### Response B
    re.compile(r"<<<[^<>\n]{0,80}>>>|</?\s*(?:response|answer|golden|question|system|user|assistant|rubric|"
               r"instructions?)[\w ]{0,20}>|\[/?INST\]|<\|[\w ]{1,20}\|>", re.I),
    # "Golden response: ..." / "Reference answer = ...": to the end of its sentence
    re.compile(r"\b(?:golden\s+(?:response|answer)|(?:reference|correct|expected)\s+(?:response|answer))\s*"
               r"(?:\([^)\n]{0,60}\))?\s*(?:=|:)[^\n]*?(?:[.!?](?=\s|$)|$)", re.I | re.M),
    # "Preference: B", "Category: Successful", "Response A: Successful", "Verdict = Missing"
    re.compile(r"\b(?:preference|preferred(?:\s+response)?|winner)\s*(?:=|:)\s*(?:response\s+)?(?:[ab]|both|neither)\b"
               r"\.?", re.I),
    re.compile(rf"\b(?:response\s+[ab]\s+)?(?:category|verdict|grade|label|rating)\s*(?:for\s+(?:response\s+)?[ab]\s*)?(?:=|:)\s*{_CATEGORY}\b\.?",
               re.I),
    re.compile(rf"\bresponse\s+[ab]\s*(?:=|:|is)\s*{_CATEGORY}\b\.?", re.I),
]


# sentences that instruct the grader, each found by a word that opens the instruction and, where it needs
# one, a later word that completes it (searched apart, so that the time stays linear in the text's length,
# however long a sentence without an end is)
_INSTRUCTIONS = [
    # to ignore the rubric or the instructions
    (re.compile(r"\b(?:ignore|disregard|forget|override)\b", re.I),
     re.compile(rf"\b(?:rubric|instructions?|rules?|guidelines?|prompt|{_GRADER}s?)\b", re.I)),
    # to grade, rate, mark ... this answer as a category
    (re.compile(r"\b(?:grade|rate|mark|label|score|classify|judge|evaluate)\s+(?:this|it|me|the|my|response|answer)\b",
                re.I), re.compile(rf"\b{_CATEGORY}\b", re.I)),
    # to prefer one of the responses
    (re.compile(r"\b(?:prefer|choose|pick|select)\s+(?:response|answer)\s+[ab]\b", re.I), None),
    # addressed to the grader
    (re.compile(rf"\b(?:dear|attention|note\s+to\s+(?:the\s+)?|to\s+the|as\s+the|you\s+are\s+the)\s*{_GRADER}\b",
                re.I), None),
]
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")  # a line's sentence, with its end marks


def _instructions(text: str) -> list[tuple[int, int]]:
    """The spans of the sentences of `text` that instruct the grader."""
    spans = []
    for m in _SENTENCE.finditer(text):
        sentence = m.group(0)
        if not sentence.strip():
            continue
        for head, tail in _INSTRUCTIONS:
            opened = head.search(sentence)
            if opened and (tail is None or any(t.start() >= opened.end() for t in tail.finditer(sentence, opened.end()))):
                spans.append((m.start(), m.end()))
                break
    return spans


def injections_in(text: str) -> list[str]:
    """The stretches of `text` that speak to the grader, in order."""
    found = []
    for pattern in _PATTERNS:
        found += [(m.start(), m.group(0)) for m in pattern.finditer(text)]
    found += [(start, text[start:end]) for start, end in _instructions(text)]
    return [t for _, t in sorted(found)]


def without_injections(text: str) -> str:
    """`text` with every stretch that speaks to the grader taken out (what is left is graded); the
    text itself when it holds none."""
    out = text
    for pattern in _PATTERNS:
        out = pattern.sub(" ", out)
    for start, end in reversed(_instructions(out)):
        out = out[:start] + " " + out[end:]
    if out == text:
        return text
    out = re.sub(r"[ \t]*\n[ \t\n]*", "\n", out)
    out = re.sub(r"[ \t]{2,}", " ", out)
    out = re.sub(r"\s+([.,;!?])", r"\1", out)
    out = re.sub(r"([.!?])[.;,]+", r"\1", out)
    return out.strip(" \n;,")


def addresses_grader(line: str) -> bool:
    """Whether a line read on screen speaks to the grader (a scene's own signs never do)."""
    return bool(injections_in(line))
