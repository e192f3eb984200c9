"""The grading guideline as versioned data, and the verdict rules a judge must obey."""

from .loader import (RubricError, RubricScan, all_rubrics, builtin_rubrics, get_rubric, load_rubric, parse_rubric,
                     require_kind, rubric_by_id, scan_rubrics)
from .model import Rubric
from .rules import check_judgement, error_message_match, normalize, tie_choice

__all__ = [
    "Rubric", "RubricError", "RubricScan", "all_rubrics", "builtin_rubrics", "check_judgement",
    "error_message_match", "get_rubric", "load_rubric", "normalize", "parse_rubric", "require_kind", "rubric_by_id",
    "scan_rubrics",
    "tie_choice",
]
