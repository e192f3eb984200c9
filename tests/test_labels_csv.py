"""Human labels in CSV: a row with more or fewer fields than the header, a column named twice, an
open quote or a field beyond the csv module's limit is refused naming the file and line, instead of
a label with values missing or shifted, the last of two columns, or a traceback."""

from __future__ import annotations

import pytest

from framejudge.calibration.inputs import LabelsError, load_human_labels

HEADER = "item_id,annotator,category_a\n"


@pytest.mark.parametrize("text, words", [
    (HEADER + "countdown-last,h1\n", ":2: 2 field(s), but the header (line 1) has 3"),
    (HEADER + "countdown-last,h1,Successful,extra\n", ":2: 4 field(s), but the header (line 1) has 3"),
    ("item_id,item_id,annotator,category_a\na,b,h1,Successful\n", ":1: column 'item_id' is named twice"),
    (HEADER + '"countdown-last,h1,Successful\n', ":2: not CSV (unexpected end of data)"),
    (HEADER + "x" * 200_000 + ",h1,Successful\n", ":2: not CSV (field larger than field limit"),
])
def test_csv_rows_that_cannot_be_read_as_labels(tmp_path, text, words):
    path = tmp_path / "labels.csv"
    path.write_text(text)
    with pytest.raises(LabelsError, match=None) as caught:
        load_human_labels(path)
    assert f"{path}{words}" in str(caught.value)


def test_blank_rows_and_quoted_newlines_are_csv(tmp_path):
    path = tmp_path / "labels.csv"
    path.write_text(HEADER + "\ncountdown-last,h1,Successful\n\"sign-hours\",\"h\n2\",Missing\n")
    labels = load_human_labels(path)
    assert [(x.item_id, x.annotator, x.category_a) for x in labels] == [
        ("countdown-last", "h1", "Successful"), ("sign-hours", "h\n2", "Missing")]
