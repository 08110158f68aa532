"""Append-only JSONL files that survive a kill.

Each record is written as one line with a single ``write`` call, flushed and
fsynced before the call returns, so a killed process loses at most the line it
was writing, and that line is always the *last* one and lacks its newline.

The rule every reader of these files follows (results, reply stores, resume):

* an unterminated last line (no trailing newline) that is not complete JSON is
  a write torn by a kill: it is skipped, and the reader says so on stderr;
* any other line that is not a JSON object is bad input: :class:`StoreError`,
  one line naming the file and the line, raised before anything runs.

A writer reopening a file repairs a torn tail first: an unterminated last line
that is a complete JSON object just gets its newline; anything else is cut off
(with a note on stderr), so the work it held is done again and a torn line
never ends up in the middle of a file, where it would be bad input.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

_BLOCK = 1 << 16


class StoreError(ValueError):
    """A JSONL file is unreadable; the message names the file and line."""


def parse_line(raw: bytes, *, surrogates: bool = False) -> Any:
    """One line's JSON value; ``ValueError`` (a one-line reason) when it is not JSON.

    With ``surrogates`` undecodable bytes survive as lone surrogates (a reply that was not UTF-8 still
    reaches the transport check); otherwise they are an error."""
    if raw.endswith(b"\n"):
        raw = raw[:-1]  # the terminator is not part of the value (an error then points inside it)
    try:
        return json.loads(raw.decode("utf-8", errors="surrogateescape" if surrogates else "strict"))
    except UnicodeDecodeError as e:
        raise ValueError(f"not valid UTF-8 at byte {e.start}") from None
    except ValueError as e:
        raise ValueError(str(e).splitlines()[0]) from None


def is_torn(raw: bytes) -> bool:
    """Whether a line that did not parse may be a torn write: only the unterminated last line can be."""
    return not raw.endswith(b"\n")


def torn_note(path: str | os.PathLike[str], line: int) -> str:
    """The stderr note of a reader that skipped a torn last line."""
    return (f"{os.fspath(path)}: skipped the torn last line {line} (no newline, not complete JSON: "
            "a write cut short by a kill)")


def bad_line(path: str | os.PathLike[str], line: int, reason: str) -> str:
    """The one-line error for a line that is not JSON and is not a torn last line."""
    return f"{os.fspath(path)}: line {line}: not valid JSON ({reason})"


def torn_tail(path: Path) -> tuple[int, int, bool] | None:
    """``(line number, byte offset where it starts, complete)`` of an unterminated last line, or None.

    ``complete``: it is a whole JSON object (only the newline was lost). A blank tail counts as torn."""
    size = path.stat().st_size
    if not size:
        return None
    with open(path, "rb") as fh:
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return None
        pos, start = size, 0
        while pos > 0:  # find the last newline, reading backwards a block at a time
            step = min(_BLOCK, pos)
            pos -= step
            fh.seek(pos)
            k = fh.read(step).rfind(b"\n")
            if k >= 0:
                start = pos + k + 1
                break
        fh.seek(start)
        tail = fh.read()
        fh.seek(0)
        line, left = 1, start
        while left > 0:
            chunk = fh.read(min(_BLOCK, left))
            left -= len(chunk)
            line += chunk.count(b"\n")
    try:
        complete = isinstance(parse_line(tail), dict)
    except ValueError:
        complete = False
    return line, start, complete


class JsonlWriter:
    """Thread-safe appender; one line per record, durable on return."""

    def __init__(self, path: str | os.PathLike[str], fsync: bool = True) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._fsync = fsync
        fix = torn_tail(self.path) if self.path.exists() else None
        if fix is not None and not fix[2]:
            self._cut(*fix[:2])
        self._fh = open(self.path, "ab")
        if fix is not None and fix[2]:  # the record is whole, only its newline was lost
            self._fh.write(b"\n")
            self._fh.flush()

    def _cut(self, line: int, start: int) -> None:
        """Remove a torn last line (see the module docstring), saying so."""
        os.truncate(self.path, start)
        print(f"quotebench: warning: {self.path}: removed the torn last line {line} (no newline, not complete "
              "JSON: a write cut short by a kill); what it held is done again", file=sys.stderr)

    def write(self, record: BaseModel | dict[str, Any]) -> None:
        data = record.model_dump(mode="json") if isinstance(record, BaseModel) else record
        try:
            line = (json.dumps(data, ensure_ascii=False) + "\n").encode("utf-8")
        except UnicodeEncodeError:
            # a lone surrogate (a reply that was not valid UTF-8) stays readable as a \udcXX escape
            line = (json.dumps(data, ensure_ascii=True) + "\n").encode("ascii")
        with self._lock:
            self._fh.write(line)
            self._fh.flush()
            if self._fsync:
                os.fsync(self._fh.fileno())

    def close(self) -> None:
        with self._lock:
            self._fh.close()

    def __enter__(self) -> "JsonlWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _stderr(message: str) -> None:
    print(f"quotebench: warning: {message}", file=sys.stderr)


def jsonl_values(path: str | os.PathLike[str], *, surrogates: bool = False,
                 on_torn: Callable[[int], None] | None = None) -> Iterator[tuple[int, Any]]:
    """(line number, JSON value) per non-blank line, by the rule of the module docstring: a torn last line
    is skipped (``on_torn`` gets its number); any other line that is not JSON raises :class:`StoreError`.
    With ``surrogates``, undecodable bytes survive as lone surrogates (a reply store's commands keep them)."""
    p = Path(path)
    try:
        fh = open(p, "rb")
    except OSError as e:
        raise StoreError(f"{p}: cannot read: {e.strerror or e}") from None
    with fh:
        for n, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                value = parse_line(raw, surrogates=True) if surrogates else parse_line(raw)
            except ValueError as e:
                if is_torn(raw):
                    if on_torn is not None:
                        on_torn(n)
                    continue
                raise StoreError(bad_line(p, n, str(e))) from None
            yield n, value


def read_jsonl(path: str | os.PathLike[str], *,
               warn: Callable[[str], None] | None = _stderr) -> Iterator[dict[str, Any]]:
    """Yield each object (:func:`jsonl_values`); a torn last line is skipped (``warn`` is told, unless None)."""
    p = Path(path)
    for n, obj in jsonl_values(p, on_torn=(lambda k: warn(torn_note(p, k))) if warn is not None else None):
        if not isinstance(obj, dict):
            raise StoreError(f"{p}: line {n}: not a JSON object")
        yield obj
