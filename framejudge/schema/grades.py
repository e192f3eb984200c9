"""The guideline's words for a response and for a pair: shared by verdicts and human labels."""

from __future__ import annotations

from enum import Enum


class Category(str, Enum):
    """The five per-response categories of the video-QA guideline."""

    successful = "Successful"
    not_successful = "Not Successful"
    irrelevant = "Irrelevant"
    missing = "Missing"
    error_message = "Error message"


class Preference(str, Enum):
    A = "A"
    B = "B"
    both = "Both"
    neither = "Neither"
