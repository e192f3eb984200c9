"""Workflows that drive the judge, the runner and calibration together, above all three: aligning a
rubric from the judge's corrected mistakes (grade, measure, correct, grade again)."""
