"""Append-only JSONL files that survive a kill.

Each record is written as one line with a single ``write`` call, flushed and
fsynced before the call returns, so a killed process loses at most the line it
was writing. Readers skip a torn final line (and report it) instead of failing,
which is what makes ``--out`` resumable.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel


class StoreError(ValueError):
    """A JSONL file is unreadable; the message names the file and line."""


class JsonlWriter:
    """Thread-safe appender; one line per record, durable on return."""

    def __init__(self, path: str | os.PathLike[str], fsync: bool = True) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._fsync = fsync
        self._fh = open(self.path, "ab")
        self._repair_tail()

    def _repair_tail(self) -> None:
        """A torn last line (a kill mid-write) gets its newline so the next record starts clean."""
        size = self.path.stat().st_size
        if size:
            with open(self.path, "rb") as fh:
                fh.seek(size - 1)
                if fh.read(1) != b"\n":
                    self._fh.write(b"\n")
                    self._fh.flush()

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


def read_jsonl(path: str | os.PathLike[str], *, strict: bool = False) -> Iterator[dict[str, Any]]:
    """Yield each object; a line that is not a JSON object is skipped (or, with ``strict``, refused)."""
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
                obj = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as e:
                if strict:
                    raise StoreError(f"{p}: line {n}: not valid JSON ({str(e).splitlines()[0]})") from None
                continue
            if not isinstance(obj, dict):
                if strict:
                    raise StoreError(f"{p}: line {n}: not a JSON object")
                continue
            yield obj
