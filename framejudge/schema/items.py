"""What is graded: items (a video and its turns), items answered by several models, their limits."""

from __future__ import annotations

import json
from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from .numbers import Number


class TaskType(str, Enum):
    # Named by its public module: the API's OpenAPI document tells it from the rubrics' TaskType by
    # module, as framejudge__schema__TaskType.
    __module__ = "framejudge.schema"

    single_turn = "single_turn"
    multi_turn = "multi_turn"


MAX_TEXT = 20_000
MAX_TURNS = 200

MAX_METADATA_DEPTH = 32  # levels of objects and lists, the metadata object itself included
MAX_METADATA_BYTES = 64 * 1024  # as JSON


def _check_metadata(value: dict[str, Any]) -> dict[str, Any]:
    """Metadata travels with every record: refuse what could not be written back out."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:  # no recursion: the depth is what is being checked
        node, depth = stack.pop()
        if depth > MAX_METADATA_DEPTH:
            raise ValueError(f"nested more than {MAX_METADATA_DEPTH} levels deep")
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    size = len(json.dumps(value, ensure_ascii=False, default=str).encode())
    if size > MAX_METADATA_BYTES:
        raise ValueError(f"{size} bytes as JSON, above the limit of {MAX_METADATA_BYTES}")
    return value


Metadata = Annotated[dict[str, Any], AfterValidator(_check_metadata)]


class Turn(BaseModel):
    """One question and its answers. `time` is when it was asked (multi-turn items)."""

    model_config = ConfigDict(extra="forbid")

    time: Number | None = Field(None, ge=0, allow_inf_nan=False, description=(
        "seconds into the video the question was asked (within the video: a time past its end is refused where "
        "its duration is known, else a bad_input judge error)"))
    question: str = Field(min_length=1, max_length=MAX_TEXT)
    golden: str | None = Field(None, max_length=MAX_TEXT)
    response_a: str = Field(max_length=MAX_TEXT)
    response_b: str | None = Field(None, max_length=MAX_TEXT)


class Item(BaseModel):
    """A grading item: a video and either one turn or a conversation of turns."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=200)
    video: str | None = Field(None, max_length=4096, description=(
        "the video: a path (relative ones under the media root), or an object in storage as s3://bucket/key or "
        "gs://bucket/key (framejudge grade and grade(); needs the storage extra); the HTTP service takes "
        "upload:<id>, a path inside its media root, or an http(s) URL on its allowed hosts"))
    """The video: a file path (a relative one under the items file's folder or the media root; file:///path
    is a path), or an object in storage, s3://bucket/key or gs://bucket/key, read by the decoding process
    into a node-local copy (never joined to the media root; the `storage` extra). The HTTP service takes
    `upload:<id>`, a path inside its media root, or an http(s) URL on its allowed hosts instead."""
    task_type: TaskType = TaskType.single_turn
    turns: list[Turn] = Field(min_length=1, max_length=MAX_TURNS)
    domain: str | None = Field(None, max_length=200)
    expression: Literal["none", "meme_or_caption", "other"] = Field(
        "none", description="creative (expression) task: memes/captions keep conciseness, others skip it"
    )
    metadata: Metadata = Field(default_factory=dict)

    @field_validator("video")
    @classmethod
    def _named(cls, video: str | None) -> str | None:
        if video is not None and not video.strip():
            raise ValueError("video is empty: name the video file, or leave video out (or null) for an item without one")
        if video is not None and "\x00" in video:
            raise ValueError("holds a NUL character, which no file name can")
        return video

    @model_validator(mode="after")
    def _shape(self) -> Item:
        if self.task_type is TaskType.single_turn and len(self.turns) != 1:
            raise ValueError(f"a single_turn item has exactly one turn, got {len(self.turns)}")
        if self.task_type is TaskType.multi_turn:
            times = [t.time for t in self.turns if t.time is not None]
            if len(times) != len(self.turns):
                raise ValueError("every turn of a multi_turn item needs the time it was asked")
            if times != sorted(times):
                raise ValueError("multi_turn turns must be in the order they were asked")
        paired = {t.response_b is not None for t in self.turns}
        if len(paired) > 1:
            raise ValueError("either every turn has a response_b or none does")
        return self

    @property
    def pairwise(self) -> bool:
        return self.turns[0].response_b is not None


def _model_name(name: str) -> str:
    if name != name.strip() or any(c in name for c in "\x00\n\r\t"):
        raise ValueError(f"model name {name!r}: no spaces at either end, no tabs or line breaks")
    return name


ModelName = Annotated[str, Field(min_length=1, max_length=100), AfterValidator(_model_name)]


class ModelTurn(BaseModel):
    """One question answered by several models: `responses` maps each model's name to its answer
    (a model left out, or given null, did not answer this turn)."""

    model_config = ConfigDict(extra="forbid")

    time: Number | None = Field(None, ge=0, allow_inf_nan=False, description=(
        "seconds into the video the question was asked (within the video: a time past its end is refused where "
        "its duration is known, else a bad_input judge error)"))
    question: str = Field(min_length=1, max_length=MAX_TEXT)
    golden: str | None = Field(None, max_length=MAX_TEXT)
    responses: dict[ModelName, Annotated[str, Field(max_length=MAX_TEXT)] | None] = Field(
        min_length=1, description="model name -> its answer")


class ModelItem(BaseModel):
    """An item whose turns carry the answers of several models (a leaderboard's input): the same
    fields as Item, with `responses` in each turn in place of response_a and response_b."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=200)
    video: str | None = Field(None, max_length=4096, description="path (or URL where allowed)")
    task_type: TaskType = TaskType.single_turn
    turns: list[ModelTurn] = Field(min_length=1, max_length=MAX_TURNS)
    domain: str | None = Field(None, max_length=200)
    expression: Literal["none", "meme_or_caption", "other"] = "none"
    metadata: Metadata = Field(default_factory=dict)

    @model_validator(mode="after")
    def _shape(self) -> ModelItem:
        from pydantic import ValidationError

        try:  # the rules of an item's shape (turn count, times, video) are Item's own
            self.item({t: "" for t in range(len(self.turns))}, None, self.id)
        except ValidationError as exc:
            e = exc.errors()[0]
            where = ".".join(str(x) for x in e["loc"])
            raise ValueError((f"{where}: " if where else "") + e["msg"].removeprefix("Value error, ")) from None
        return self

    def models(self) -> list[str]:
        """The models answering any of its turns, in the order they first appear."""
        return list(dict.fromkeys(m for t in self.turns for m, answer in t.responses.items() if answer is not None))

    def answer(self, model: str, turn: int) -> str | None:
        return self.turns[turn].responses.get(model)

    def item(self, answers_a: dict[int, str], answers_b: dict[int, str] | None, item_id: str,
             metadata: dict[str, Any] | None = None) -> Item:
        """An ordinary item of the turns in `answers_a` (turn -> response A; `answers_b` the same
        turns' responses B, or None for one response), in their order."""
        turns = [Turn(time=self.turns[t].time, question=self.turns[t].question, golden=self.turns[t].golden,
                      response_a=a, response_b=None if answers_b is None else answers_b[t])
                 for t, a in sorted(answers_a.items())]
        return Item.model_validate({"id": item_id, "video": self.video, "task_type": self.task_type, "turns": turns,
                                    "domain": self.domain, "expression": self.expression,
                                    "metadata": self.metadata if metadata is None else metadata})
