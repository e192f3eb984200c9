"""What a reviewer's decision must say before it is taken (the page's form and the API's body alike)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from framejudge.service.review.decide import DecisionRequest


def test_adopting_an_annotator_names_the_annotator():
    with pytest.raises(ValidationError, match="source: name the annotator whose labels adopt_annotator adopts"):
        DecisionRequest(item_id="x", unit_version="v", action="adopt_annotator")
    assert DecisionRequest(item_id="x", unit_version="v", action="adopt_annotator", source="h2").source == "h2"


def test_a_source_goes_with_adopt_annotator_only():
    with pytest.raises(ValidationError, match="only adopt_annotator names an annotator"):
        DecisionRequest(item_id="x", unit_version="v", action="adopt_judge", source="h2")
