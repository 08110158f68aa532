"""The lookup every component check goes through, and what it answers: a program found (or not) in the
directories sandboxed commands get, a one-line status, a one-line error.

Why its own module
    :mod:`transports.components` (the catalogue: what each path needs) and the npm installer of
    :mod:`transports.paths.npm_cache` (which the catalogue calls for npm packages) both use these, and
    neither may import the other both ways. A test points :data:`SEARCH_PATH` at an empty directory to see
    doctor, and the records, report a program as missing.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"  # as transports.sandbox.SYSTEM_PATH (not imported: no cycle)
SEARCH_PATH = SYSTEM_PATH
"""Where program components are looked up (the directories sandboxed commands get)."""

class MissingComponent(RuntimeError):
    """A program or package a path needs is not available; the message is one line naming it."""


def find_program(name: str) -> str | None:
    """The one lookup of a program component: its path in :data:`SEARCH_PATH`, or None."""
    return shutil.which(name, path=SEARCH_PATH)


@dataclass(frozen=True)
class Status:
    """Whether a component is usable here, and one line: where it was found, or why not and how to get it."""

    present: bool
    detail: str
