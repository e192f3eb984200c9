"""framejudge: LLM-as-judge grading for video question answering."""

__version__ = "0.1.0"
