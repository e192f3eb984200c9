"""The one base of the errors a user can cause: a bad file, option, setting or request.

Each class has a stable machine-readable `code` (the HTTP service answers it in its problem
documents); str(err) is the plain message for people. The command line catches FramejudgeError
in one place and prints it as an `error:` line (exit 2); the service answers it as a problem
document. Classes that are also a built-in kind of error keep that base too (`ItemsError` is a
ValueError), so code catching the built-in one goes on working.

Exceptions that carry control flow inside the library (a judge told to stop, a run interrupted,
a reply to ask again for) are not FramejudgeErrors: no user sees them as errors."""

from __future__ import annotations


class FramejudgeError(Exception):
    """Base class. `code` is a stable machine-readable name; str(err) is for people."""

    code = "framejudge_error"
