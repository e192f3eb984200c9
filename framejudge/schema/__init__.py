"""The framejudge domain, shared by the library, the CLI and the HTTP API.

One set of pydantic models: anything that crosses a boundary (a file, the
terminal, the network, a verdict's provenance) is defined here once.

The package stands on the ground floor: pydantic, the standard library and, of framejudge, only
the table of judge backends (`framejudge.backends`, which a judges file's specs are checked
against and which imports nothing else of framejudge). One module per subject, each importing
only those below it:

- `numbers`: numbers and switches as JSON has them (Number, Whole, Flag, Share, Count)
- `sampling`: SamplerParams and what the sampler reports (FrameInfo, VideoInfo)
- `decoding`: the decoding processes' limits (DecodeLimits)
- `grades`: the guideline's Category and Preference
- `items`: what is graded (Item, Turn, ModelItem, ModelTurn) and its limits
- `labels`: human labels (LabelValues, HumanLabel) and labelling tools' mappings
- `triage`: thresholds files and the marks they put on verdicts
- `options`: GradeOptions
- `verdicts`: Judgement, Verdict, JudgeError, their provenance and confidence, RecordIn
- `review`: the review queue's decisions
- `judges_file`: judges files (JudgeConfig, JudgesFile)

A Judgement checks the rules that hold under any rubric itself; the rubric's own rules come in
with the rubric passed in the validation context (see `verdicts`). A grading option's
`triage: "default"` reads the reference judge's packaged thresholds as data (`triage`).
"""

from .decoding import MAX_DECODE_MEMORY_MB, MAX_DECODE_WORKERS, DecodeLimits
from .grades import Category, Preference
from .items import (MAX_METADATA_BYTES, MAX_METADATA_DEPTH, MAX_TEXT, MAX_TURNS, Item, Metadata, ModelItem, ModelName,
                    ModelTurn, TaskType, Turn)
from .judges_file import JudgeConfig, JudgesFile, ServiceTier, TokenPrice, http_base
from .labels import (FLAG_FIELDS, LABEL_FIELDS, LABEL_ROW_FIELDS, DottedPath, FieldMapping, HumanLabel, LabelMapping,
                     LabelValues, judge_values, mapping_problems, mapping_value_problem, text_switch)
from .numbers import Count, Flag, Number, Share, Whole
from .options import GradeOptions
from .review import Cause, ReviewDecision, Standing
from .sampling import (MAX_BUDGET, MAX_CLIP_FPS, MAX_SIDE, MIN_SIDE, ClipInfo, FrameInfo, SamplerParams, Strategy,
                       VideoInfo, VideoInput)
from .triage import FieldThreshold, Thresholds, TriageFigures, TriageMark, packaged_thresholds
from .verdicts import (RECORD_KINDS, Confidence, ConfidenceMethod, JudgeError, JudgeErrorKind, Judgement,
                       Provenance, ReadText, RecordIn, ResponseGrade, RubricRules, SwapCheck, Usage, Verdict,
                       judgement_problems, pair_problems)

__all__ = [
    # numbers
    "Count", "Flag", "Number", "Share", "Whole",
    # sampling
    "MAX_BUDGET", "MAX_CLIP_FPS", "MAX_SIDE", "MIN_SIDE", "ClipInfo", "FrameInfo", "SamplerParams", "Strategy",
    "VideoInfo", "VideoInput",
    # decoding
    "MAX_DECODE_MEMORY_MB", "MAX_DECODE_WORKERS", "DecodeLimits",
    # grades
    "Category", "Preference",
    # items
    "MAX_METADATA_BYTES", "MAX_METADATA_DEPTH", "MAX_TEXT", "MAX_TURNS", "Item", "Metadata", "ModelItem", "ModelName",
    "ModelTurn", "TaskType", "Turn",
    # labels
    "FLAG_FIELDS", "LABEL_FIELDS", "LABEL_ROW_FIELDS", "DottedPath", "FieldMapping", "HumanLabel", "LabelMapping",
    "LabelValues", "judge_values", "mapping_problems", "mapping_value_problem", "text_switch",
    # triage
    "FieldThreshold", "Thresholds", "TriageFigures", "TriageMark", "packaged_thresholds",
    # options
    "GradeOptions",
    # verdicts
    "RECORD_KINDS", "Confidence", "ConfidenceMethod", "JudgeError", "JudgeErrorKind", "Judgement",
    "Provenance", "ReadText", "RecordIn", "ResponseGrade", "RubricRules", "SwapCheck", "Usage", "Verdict",
    "judgement_problems", "pair_problems",
    # review
    "Cause", "ReviewDecision", "Standing",
    # judges files
    "JudgeConfig", "JudgesFile", "ServiceTier", "TokenPrice", "http_base",
]
