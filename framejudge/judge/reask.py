"""Validate and re-ask: a model's reply becomes a Judgement under the rubric's rules, or the
message that asks the model to correct it.

The reply is read as the one JSON object it should be (a code fence or words around it are
tolerated); the validators' messages are phrased so that a model can act on them. The text of
the prompt and the responses is never rewritten on the way (no template engine sees it).
"""

from __future__ import annotations

import copy
import functools
import json
import re
from typing import Any

from pydantic import ValidationError

from ..rubrics.model import Rubric
from ..schema import Judgement, Turn

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


class InvalidReply(Exception):
    """The model gave no valid judgement within its re-asks; the message says why."""


def json_text(reply: str) -> str:
    fenced = _FENCE.search(reply)
    text = fenced.group(1) if fenced else reply
    start, end = text.find("{"), text.rfind("}")
    return text[start:end + 1] if 0 <= start < end else text


def problems(exc: ValidationError | json.JSONDecodeError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"the reply is not one JSON object ({exc.msg} at character {exc.pos})"
    out = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        out.append(f"{where}: {msg}" if where else msg)
    return "; ".join(out)


def parse_judgement(reply: str, rubric: Rubric, turn: Turn) -> Judgement:
    """The reply as a Judgement valid under the rubric for this turn's responses; raises
    ValidationError or json.JSONDecodeError."""
    data = json.loads(json_text(reply))
    return Judgement.model_validate(data, context={"rubric": rubric,
                                                   "responses": {"a": turn.response_a, "b": turn.response_b}})


@functools.cache
def _reply_schema() -> str:
    schema = Judgement.model_json_schema()
    del schema["description"]  # the model's docstring speaks to developers, not to the judge
    defs = schema.pop("$defs", {})

    def inline(node: Any) -> Any:  # each $ref replaced by its definition: no provider has to resolve one
        if isinstance(node, list):
            return [inline(n) for n in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            rest = {k: v for k, v in node.items() if k != "$ref"}
            return {**inline(defs[node["$ref"].removeprefix("#/$defs/")]), **inline(rest)}
        return {k: inline(v) for k, v in node.items()}

    schema = inline(schema)

    def strict(node: Any) -> None:
        if isinstance(node, dict):
            node.pop("default", None)
            if node.get("type") == "object" and "properties" in node:
                node["required"] = list(node["properties"])
            for key, value in node.items():
                if key == "properties":
                    for sub in value.values():
                        strict(sub)
                else:
                    strict(value)
        elif isinstance(node, list):
            for sub in node:
                strict(sub)

    strict(schema)
    return json.dumps(schema)


def reply_schema() -> dict[str, Any]:
    """The JSON schema of a reply that parse_judgement reads as a Judgement, in the strict form
    structured-output APIs take: every property required (the model spells out null, false or []
    where the Judgement has a default), no other property allowed, no $ref (the definitions written
    out where they are used). The rules between fields and the
    rubric's own (one response has no preference, criterion ids, error strings) stay with the
    validator and its re-ask."""
    return copy.deepcopy(json.loads(_reply_schema()))


def reask_messages(messages: list[dict[str, Any]], reply: str, why: str) -> list[dict[str, Any]]:
    """The conversation with the invalid reply and a request to correct it."""
    return [*messages, {"role": "assistant", "content": reply},
            {"role": "user", "content": f"Correct your JSON reply, and reply with the JSON object only. "
                                        f"It broke these rules: {why}"}]
