"""Numbers and switches as JSON has them, for every model of the schema."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, Strict


# Numbers (and switches) as JSON has them: the string "3" is not read as 3, nor true as 1, in a
# file, a request body or an options part (the CLI's own options are typed before they get here).
Number = Annotated[float, Strict()]
Whole = Annotated[int, Strict()]
Flag = Annotated[bool, Strict()]
Share = Annotated[float, Strict(), Field(ge=0, le=1)]  # a confidence, a coverage, an agreement
Count = Annotated[int, Strict(), Field(ge=0)]
