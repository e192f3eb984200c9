"""The base of every error a user of framejudge can cause."""

from __future__ import annotations


class FramejudgeError(Exception):
    """A user-facing error: `code` is a stable machine-readable name; str(err) is for people."""

    code = "framejudge_error"
