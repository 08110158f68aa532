"""The two rules every reader of a reply store shares (``quotebench replay`` and ``run --model replay:FILE``).

Lines: a store is read by the rule of :mod:`transports.results.store`. Only an
unterminated last line that is not complete JSON is taken for a write torn by
a kill (skipped, with a note on stderr); any other line that does not parse is
bad input, refused before anything runs, naming the file and the line.

Duplicates: two lines are the same reply when they share a ``reply_id``, or
the same (config, task_id, contract, draw), since a record is keyed by that
and the report would keep only one of them. A line that repeats an earlier one
exactly (the same JSON object: a store concatenated twice) is dropped, with one
note on stderr counting them. A line that shares a key with an earlier line
but differs from it is refused, naming both lines: which of the two is the
reply cannot be guessed; give each its own ``draw`` (or ``reply_id``) or
remove one.

Suite: a store records the suite each reply was made on (``suite``, and the
``userland``). Task ids are the same in every suite, so a store made on a
generated suite and replayed without its ``--suite`` would be scored,
silently, against the public one (0/56 everywhere). A line whose ``suite`` is
not the active suite is refused, naming both ids, unless the user says
``--allow-suite-mismatch`` (then one note counts them). A line without
``suite`` (a store of an older format, or written by hand) is scored on
the active suite, with one note. The userland is not checked: replaying one
reply under another userland is a comparison the design makes on purpose, and
each record says which userland it ran under.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from transports.results.store import StoreError, jsonl_values, torn_note


ALLOW_FLAG = "--allow-suite-mismatch"
_allow: list[bool] = [False]


def allow_suite_mismatch(allow: bool) -> None:
    """``--allow-suite-mismatch``: score replies made on another suite against the active one (process-wide,
    like ``--suite``)."""
    _allow[:] = [allow]


def warn(message: str) -> None:
    print(f"quotebench: warning: {message}", file=sys.stderr)


def store_lines(path: Path, torn: list[int]) -> Iterator[tuple[int, Any]]:
    """(line number, JSON value) per non-blank line. Undecodable bytes survive as lone surrogates, so they
    reach the transport check. A torn last line is skipped and its number appended to ``torn``."""
    return jsonl_values(path, surrogates=True, on_torn=torn.append)


def torn_warning(path: Path | str, torn: list[int]) -> str:
    return torn_note(path, torn[-1])


def no_replies(path: Path | str, torn: list[int]) -> str:
    """The error for a store without a usable line (saying so when a torn line was all it had)."""
    if torn:
        return f"{torn_warning(path, torn)}, and holds no replies"
    return f"{path}: holds no replies"


class Duplicates:
    """Applies the duplicate rule of the module docstring, line by line, in file order."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.dropped: list[tuple[int, int]] = []  # (line dropped, line it repeats)
        self._by_id: dict[str, tuple[int, Any]] = {}
        self._by_key: dict[tuple[str, str, str, int], tuple[int, Any]] = {}

    def keep(self, n: int, obj: Any, reply_id: str | None, key: tuple[str, str, str, int]) -> bool:
        """Whether line ``n`` is new; False for an exact repeat; :class:`StoreError` for a conflicting one.

        ``key`` is (config label, task_id, contract, draw); ``reply_id`` is the line's own id, if any."""
        label, task_id, contract, draw = key
        clash = self._by_id.get(reply_id) if reply_id is not None else None
        what = f"reply_id '{reply_id}'"
        if clash is None:
            clash = self._by_key.get(key)
            what = f"task {task_id}, contract {contract}, draw {draw} of config {label}"
        if clash is not None:
            first, earlier = clash
            if earlier == obj:
                self.dropped.append((n, first))
                return False
            raise StoreError(f"{self.path}: line {n}: a second reply for {what} (line {first} has a different one; "
                             "give each reply its own 'draw', or remove one)")
        if reply_id is not None:
            self._by_id[reply_id] = (n, obj)
        self._by_key[key] = (n, obj)
        return True

    def note(self) -> str | None:
        """The stderr note for the exact repeats dropped, or None."""
        if not self.dropped:
            return None
        shown = ", ".join(f"{n} (= line {first})" for n, first in self.dropped[:5])
        more = " ..." if len(self.dropped) > 5 else ""
        return f"{self.path}: dropped {len(self.dropped)} line(s) repeating an earlier line exactly: {shown}{more}"


class SuiteCheck:
    """Applies the suite rule of the module docstring, line by line."""

    def __init__(self, path: Path, active: str | None = None) -> None:
        if active is None:
            from tasks.load import suite

            active = suite()[0].suite
        self.path = path
        self.active = active
        self.unlabelled = 0
        self.others: dict[str, int] = {}

    def check(self, n: int, obj: dict[str, Any]) -> None:
        """Line ``n`` may be scored on the active suite, or :class:`StoreError` (one line, both suite ids)."""
        made_on = obj.get("suite")
        if made_on is None:
            self.unlabelled += 1
            return
        if not isinstance(made_on, str) or not made_on:
            raise StoreError(f"{self.path}: line {n}: field 'suite' is not a suite id")
        if made_on == self.active:
            return
        if not _allow[0]:
            raise StoreError(f"{self.path}: line {n}: made on suite {made_on}, but the active suite is "
                             f"{self.active}; give --suite with that suite's directory, or {ALLOW_FLAG} to "
                             f"score it on {self.active} anyway")
        self.others[made_on] = self.others.get(made_on, 0) + 1

    def notes(self) -> list[str]:
        """The stderr notes: lines without a suite id; lines scored on another suite (allowed)."""
        out = []
        if self.unlabelled:
            out.append(f"{self.path}: {self.unlabelled} line(s) carry no suite id (written before stores recorded "
                       f"one); scored on the active suite {self.active}")
        if self.others:
            made = ", ".join(f"{k} ({v})" for k, v in sorted(self.others.items()))
            out.append(f"{self.path}: replies made on suite {made} are scored on suite {self.active} "
                       f"({ALLOW_FLAG})")
        return out
