"""Comparing many models: battle plans over their responses, graded by the ordinary pipeline, and
the tables built on those verdicts (win rates, Bradley-Terry strengths, length control, slices)."""
