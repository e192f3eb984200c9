"""Judges that apply a rubric to a video and its responses and return validated verdicts."""
