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

These files come from elsewhere too (another team's store, a campaign
directory copied over), so they are hostile input: a file must be a regular
file (a FIFO would block, ``/dev/zero`` never ends) of at most
:data:`MAX_FILE` bytes, checked before it is opened for reading; a line may
hold at most :data:`MAX_LINE` bytes and nest at most :data:`MAX_DEPTH` levels
(``json`` recurses, so 200,000 ``[`` were a RecursionError). Files found in a
directory (a campaign's) are never reached through a symlink.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import BaseModel

from tasks.safefs import UnsafeRead, kind_of, open_input

_BLOCK = 1 << 16

MAX_DEPTH = 128
"""The deepest nesting of arrays and objects a JSON value read from a file may have. Our records nest
a few levels; ``json`` and pydantic recurse, so a value nested 200,000 deep would be a RecursionError."""
MAX_LINE = 16 << 20
"""The longest line read from a JSONL file. A record keeps at most 64 KiB of each output stream."""
MAX_FILE = 4 << 30
"""The largest JSONL file read (checked before reading): far over any campaign, far under a disk."""


class StoreError(ValueError):
    """A JSONL file is unreadable; the message names the file and line."""


_STRING_B = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_STRING_S = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET_S = re.compile(r"[^\[\]{}]+")
_NOT_BRACKETS_B = bytes(b for b in range(256) if b not in b"[]{}")


def too_deep(text: bytes | str, limit: int = MAX_DEPTH) -> bool:
    """Whether the JSON text nests arrays and objects deeper than ``limit``, found without recursion.

    Cheap first: a text with at most ``limit`` opening brackets cannot be deeper. Otherwise strings are
    cut out (a ``[`` inside one does not nest) and the brackets left are counted, in C but for one pass
    over the brackets alone. Exact for valid JSON; for text that is not JSON it may say too deep where
    ``json`` would have said something else, which is bad input either way."""
    if isinstance(text, bytes):
        if text.count(b"[") + text.count(b"{") <= limit:
            return False
        brackets = _STRING_B.sub(b"", text).translate(None, _NOT_BRACKETS_B).decode("ascii")
    else:
        if text.count("[") + text.count("{") <= limit:
            return False
        brackets = _NOT_BRACKET_S.sub("", _STRING_S.sub("", text))
    depth = 0
    for ch in brackets:
        if ch in "[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def loads(text: bytes | str) -> Any:
    """``json.loads`` for text from a file or a reply: ``ValueError`` (one line) when it is not JSON or is
    nested deeper than :data:`MAX_DEPTH`, never a RecursionError. Every JSON read of input goes here."""
    if too_deep(text):
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
    return _json(text)


def _json(text: bytes | str) -> Any:
    """``json.loads`` of text whose depth was checked; any failure is a one-line ``ValueError``."""
    try:
        return json.loads(text)
    except RecursionError:  # a limit lower than ours (a deep stack already): still one line
        raise ValueError(f"nested too deep for this reader (over {MAX_DEPTH} levels?)") from None
    except ValueError as e:
        raise ValueError(str(e).splitlines()[0] if str(e) else type(e).__name__) from None


def parse_line(raw: bytes, *, surrogates: bool = False) -> Any:
    """One line's JSON value; ``ValueError`` (a one-line reason) when it is not JSON or nests deeper than
    :data:`MAX_DEPTH`.

    With ``surrogates`` undecodable bytes survive as lone surrogates (a reply that was not UTF-8 still
    reaches the transport check); otherwise they are an error."""
    if raw.endswith(b"\n"):
        raw = raw[:-1]  # the terminator is not part of the value (an error then points inside it)
    if too_deep(raw):
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
    try:
        text = raw.decode("utf-8", errors="surrogateescape" if surrogates else "strict")
    except UnicodeDecodeError as e:
        raise ValueError(f"not valid UTF-8 at byte {e.start}") from None
    return _json(text)


def open_jsonl(path: str | os.PathLike[str], *, follow: bool = True) -> BinaryIO:
    """``path`` open for reading by the input rule (module docstring); :class:`StoreError` naming it otherwise.

    ``follow``: the user named this file, so a symlink to a regular file is followed; a file found in a
    directory the user named (a campaign's) is never reached through a symlink."""
    p = Path(path)
    try:
        return open_input(p, MAX_FILE, follow=follow)
    except UnsafeRead as e:
        raise StoreError(str(e)) from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise StoreError(f"{p}: is a symlink, not a regular file") from None
        raise StoreError(f"{p}: cannot read: {e.strerror or e}") from None


def raw_lines(fh: BinaryIO, path: str | os.PathLike[str]) -> Iterator[tuple[int, bytes]]:
    """(line number, raw line with its newline) per line of ``fh``; a line over :data:`MAX_LINE` bytes is
    :class:`StoreError`, found after reading at most that much of it."""
    n = 0
    while True:
        raw = fh.readline(MAX_LINE + 1)
        if not raw:
            return
        n += 1
        if len(raw) > MAX_LINE:
            raise StoreError(f"{os.fspath(path)}: line {n}: longer than {MAX_LINE} bytes; not read")
        yield n, raw


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
    with open_jsonl(path) as fh:
        return _torn_tail(fh.fileno())


def _torn_tail(fd: int) -> tuple[int, int, bool] | None:
    """:func:`torn_tail` of an open file, read with ``pread`` (the file offset is left alone). A tail longer
    than :data:`MAX_LINE` is no torn record of ours: None, left for a reader to refuse."""
    size = os.fstat(fd).st_size
    if not size or os.pread(fd, 1, size - 1) == b"\n":
        return None
    pos, start = size, 0
    while pos > 0:  # find the last newline, reading backwards a block at a time
        if size - pos > MAX_LINE:
            return None
        step = min(_BLOCK, pos)
        pos -= step
        k = os.pread(fd, step, pos).rfind(b"\n")
        if k >= 0:
            start = pos + k + 1
            break
    if size - start > MAX_LINE:
        return None
    tail = os.pread(fd, size - start, start)
    line, off = 1, 0
    while off < start:
        chunk = os.pread(fd, min(_BLOCK, start - off), off)
        if not chunk:
            break
        off += len(chunk)
        line += chunk.count(b"\n")
    try:
        complete = isinstance(parse_line(tail), dict)
    except ValueError:
        complete = False
    return line, start, complete


class JsonlWriter:
    """Thread-safe appender; one line per record, durable on return."""

    def __init__(self, path: str | os.PathLike[str], fsync: bool = True, *, follow: bool = True) -> None:
        """``follow``: whether a symlink as the file's last component may be followed (the user named the
        file) or is refused (a file in a directory the user named: appending through a link would write
        outside it). Either way only a regular file is appended to (a FIFO would block or swallow)."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._fsync = fsync
        fd = _open_append(self.path, follow)
        try:
            fix = _torn_tail(fd)
            if fix is not None and not fix[2]:
                self._cut(fd, *fix[:2])
        except BaseException:
            os.close(fd)
            raise
        self._fh = os.fdopen(fd, "ab")
        if fix is not None and fix[2]:  # the record is whole, only its newline was lost
            self._fh.write(b"\n")
            self._fh.flush()

    def _cut(self, fd: int, line: int, start: int) -> None:
        """Remove a torn last line (see the module docstring), saying so."""
        os.ftruncate(fd, start)
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


def _open_append(path: Path, follow: bool) -> int:
    """An fd of ``path`` for reading and appending, made if missing: a regular file only (:class:`StoreError`).

    An existing file is identified through ``O_PATH`` first, so a FIFO or a device is never opened (opening
    one can block or act), then reopened through /proc: the very inode that was checked."""
    nofollow = 0 if follow else os.O_NOFOLLOW
    flags = os.O_RDWR | os.O_APPEND | os.O_CLOEXEC | os.O_NOCTTY
    try:
        pfd = os.open(path, os.O_PATH | os.O_CLOEXEC | nofollow)
    except FileNotFoundError:
        pfd = None
    except OSError as e:
        raise StoreError(f"{path}: cannot write: {e.strerror or e}") from None
    try:
        if pfd is None:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        else:
            st = os.fstat(pfd)
            if not stat.S_ISREG(st.st_mode):
                raise StoreError(f"{path}: is {kind_of(st.st_mode)}, not a regular file; not written to")
            fd = os.open(f"/proc/self/fd/{pfd}", flags)
    except OSError as e:
        raise StoreError(f"{path}: cannot write: {e.strerror or e}") from None
    finally:
        if pfd is not None:
            os.close(pfd)
    return fd


def _stderr(message: str) -> None:
    print(f"quotebench: warning: {message}", file=sys.stderr)


def jsonl_values(path: str | os.PathLike[str], *, surrogates: bool = False,
                 on_torn: Callable[[int], None] | None = None, follow: bool = True) -> Iterator[tuple[int, Any]]:
    """(line number, JSON value) per non-blank line, by the rule of the module docstring: a torn last line
    is skipped (``on_torn`` gets its number); any other line that is not JSON raises :class:`StoreError`.
    With ``surrogates``, undecodable bytes survive as lone surrogates (a reply store's commands keep them).
    The file is opened by :func:`open_jsonl` (``follow`` as there); a line over :data:`MAX_LINE` is refused."""
    p = Path(path)
    with open_jsonl(p, follow=follow) as fh:
        for n, raw in raw_lines(fh, p):
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


def read_jsonl(path: str | os.PathLike[str], *, warn: Callable[[str], None] | None = _stderr,
               follow: bool = True) -> Iterator[dict[str, Any]]:
    """Yield each object (:func:`jsonl_values`); a torn last line is skipped (``warn`` is told, unless None)."""
    p = Path(path)
    for n, obj in jsonl_values(p, on_torn=(lambda k: warn(torn_note(p, k))) if warn is not None else None,
                               follow=follow):
        if not isinstance(obj, dict):
            raise StoreError(f"{p}: line {n}: not a JSON object")
        yield obj
