"""framejudge align: a rubric version aligned from corrected examples."""
