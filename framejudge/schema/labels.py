"""Human labels: the labelled fields of a turn, label rows, and how a labelling tool's export maps
onto them."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from .grades import Category, Preference
from .items import Metadata
from .numbers import Flag, Whole

if TYPE_CHECKING:
    from .verdicts import Judgement


class LabelValues(BaseModel):
    """The labelled fields of one turn (those of a verdict). A field left out (or null) is not
    rated; the category "Missing" is a label."""

    model_config = ConfigDict(extra="forbid")

    category_a: Category | None = None
    category_b: Category | None = None
    preference: Preference | None = None
    integrity_a: Flag | None = None
    integrity_b: Flag | None = None
    transcription_error: Flag | None = None
    multiturn: Flag | None = None


LABEL_FIELDS = tuple(LabelValues.model_fields)
FLAG_FIELDS = ("integrity_a", "integrity_b", "transcription_error", "multiturn")  # the label fields that are switches


def text_switch(text: str) -> bool | str:
    """A switch written as text (a CSV cell, a form's select: true/True, false/False) as a boolean;
    any other text as it is, for validation to refuse by name."""
    return text.lower() == "true" if text.lower() in ("true", "false") else text


def judge_values(judgement: Judgement) -> LabelValues:
    """A judgement's (a verdict's) labels in the fields annotators label."""
    a, b = judgement.response_a, judgement.response_b
    return LabelValues(category_a=a.category, category_b=b.category if b else None,
                       preference=judgement.preference, integrity_a=a.integrity_violation,
                       integrity_b=b.integrity_violation if b else None,
                       transcription_error=judgement.transcription_error, multiturn=judgement.multiturn)


class HumanLabel(LabelValues):
    """One annotator's labels for one turn of one item."""

    item_id: str = Field(min_length=1, max_length=200)
    turn: Whole = Field(0, ge=0)
    annotator: str = Field(min_length=1, max_length=200)
    metadata: Metadata = Field(default_factory=dict)


LABEL_ROW_FIELDS = ("item_id", "turn", "annotator", *LABEL_FIELDS, "metadata")


def _dotted(path: str) -> str:
    if not path or any(not part.strip() or part != part.strip() for part in path.split(".")):
        raise ValueError(f"{path!r} is not a dotted path such as data.item_id")
    return path


DottedPath = Annotated[str, Field(max_length=500), AfterValidator(_dotted)]


def _label_choices(field: str) -> list[Any]:
    """The values a label field takes: categories, preferences or booleans."""
    annotation = LabelValues.model_fields[field].annotation
    for kind in (Category, Preference):
        if kind in getattr(annotation, "__args__", ()):
            return [c.value for c in kind]
    return [False, True]


def mapping_value_problem(field: str, value: Any) -> str | None:
    """Why `value` cannot be the framejudge value of label field `field`, if it cannot."""
    choices = _label_choices(field)
    if isinstance(value, bool) != isinstance(choices[0], bool) or value not in choices:
        takes = ", ".join(str(c).lower() if isinstance(c, bool) else c for c in choices)
        return f"{field} does not take {json.dumps(value) if isinstance(value, bool) else repr(value)} (it takes: {takes})"
    return None


class FieldMapping(BaseModel):
    """Where one framejudge label field comes from in a labelling tool's export: the tool's control
    (Label Studio's from_name) or annotation scheme (Potato), and what each of its options means."""

    model_config = ConfigDict(extra="forbid")

    control: str = Field(min_length=1, max_length=200, description="the tool's control or scheme name")
    values: dict[str | int, Any] = Field(
        min_length=1, description="the tool's option -> the framejudge value (a category, A/B/Both/Neither, or "
                                  "true/false for a flag)")
    absent: Any = Field(None, description="the value when an annotation chose none of the mapped options "
                                          "(e.g. false for an unticked check box); left out: not rated")

    @field_validator("values", mode="before")
    @classmethod
    def _keys(cls, values: Any) -> Any:
        if isinstance(values, dict):
            for key in values:
                if isinstance(key, bool):
                    raise ValueError(f"option {key!r} was read as a boolean (YAML reads yes, no, on, off, true "
                                     "and false so): quote the tool's option, e.g. 'yes': true")
                if not isinstance(key, (str, int)):
                    raise ValueError(f"option {key!r}: the tool's options are text or whole numbers")
            shown = [str(k) for k in values]
            twice = next((k for k in shown if shown.count(k) > 1), None)
            if twice is not None:
                raise ValueError(f"option {twice!r} is given twice")
        return values


class LabelMapping(BaseModel):
    """How the records of a labelling tool's export become framejudge label rows. Paths are dotted
    (`data.item_id`, `completed_by.email`); a path part that is a number indexes a list."""

    model_config = ConfigDict(extra="forbid")

    item_id: DottedPath = Field(description="path of the item id")
    turn: DottedPath | None = Field(None, description="path of the turn index; left out: every label is turn 0")
    annotator: DottedPath | None = Field(
        None, description="path of the annotator; left out: Label Studio's completed_by (its email where the export "
                    "has one, else its id), Potato's user folder")
    metadata: dict[str, DottedPath] = Field(
        default_factory=dict, description="metadata name -> path, copied into each label's metadata (when present)")
    labels: dict[str, FieldMapping] = Field(min_length=1, description="framejudge label field -> where it comes from")

    @field_validator("labels")
    @classmethod
    def _fields(cls, labels: dict[str, FieldMapping]) -> dict[str, FieldMapping]:
        for field, spec in labels.items():
            if field not in LABEL_FIELDS:
                raise ValueError(f"{field!r} is not a label field (they are: {', '.join(LABEL_FIELDS)})")
            problem = next(mapping_problems(field, spec), None)
            if problem is not None:
                raise ValueError(f"{field}.{problem[0]}: {problem[1]}")
        return labels

    @field_validator("metadata")
    @classmethod
    def _names(cls, metadata: dict[str, str]) -> dict[str, str]:
        taken = next((name for name in metadata if name in LABEL_ROW_FIELDS), None)
        if taken is not None:
            raise ValueError(f"{taken!r} is a column of the label rows; name the metadata otherwise")
        return metadata


def mapping_problems(field: str, spec: FieldMapping) -> Any:
    """(where under the field, why) for each value of `spec` that label field `field` does not take."""
    for key, value in spec.values.items():
        problem = mapping_value_problem(field, value)
        if problem is not None:
            yield f"values.{key}", f"option {key!r}: {problem}"
    if spec.absent is not None:
        problem = mapping_value_problem(field, spec.absent)
        if problem is not None:
            yield "absent", problem
