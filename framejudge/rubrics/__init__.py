"""The grading guideline as versioned data, and the verdict rules a judge must obey."""
