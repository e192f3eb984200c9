"""Switches read from the environment the same way everywhere: a value is on (1, true, yes, on),
off (unset, empty, 0, false, no, off) or an error naming the variable, never a guess (so
`FRAMEJUDGE_NO_CACHE=0` keeps the caches)."""

from __future__ import annotations

import os

from . import config

NO_CACHE_ENV = config.name("FRAMEJUDGE_NO_CACHE")
TRUE_WORDS, FALSE_WORDS = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


def env_switch(name: str) -> bool:
    """Whether the variable `name` is on; a ValueError naming it for a value that is neither."""
    value = os.environ.get(name, "").strip().lower()
    if value in TRUE_WORDS:
        return True
    if value in FALSE_WORDS:
        return False
    raise ValueError(f"{name}={value[:50]!r}: set it to 1 (true, yes, on) or to 0 (false, no, off), or leave it unset")


def cache_off() -> bool:
    """Whether FRAMEJUDGE_NO_CACHE turns the on-disk caches (frames, screen reads) off."""
    return env_switch(NO_CACHE_ENV)
