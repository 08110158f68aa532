"""The two rules every reader of a reply store shares (``quotebench replay`` and ``run --model replay:FILE``).

Lines: a store is read by the rule of :mod:`transports.store`. Only an
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
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from transports.store import StoreError, jsonl_values, torn_note


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
