"""framejudge: LLM-as-judge grading for video question answering."""

from .errors import FramejudgeError

__version__ = "0.1.0"
__all__ = ["FramejudgeError", "__version__"]
