"""Bounds on an Inspect log, checked before Inspect's own reader is given it.

Why
    ``import-inspect`` reads logs from elsewhere, and a log is a zip whose members
    Inspect inflates whole and parses (``json.load``). A 1.5 MB ``.eval`` whose
    zstd-compressed sample inflates to 1.5 GiB took 3.27 GB of memory. So,
    before Inspect opens it, the log must be a regular file (not a FIFO, not a
    device) of at most :data:`MAX_LOG` bytes, and each member

    * uses a method we can bound (stored, deflate, zstd) and is not encrypted;
    * declares at most :data:`MAX_MEMBER` bytes inflated, and all of them
      together at most :data:`MAX_TOTAL`;
    * really inflates to no more than it declares: it is inflated here in
      chunks of :data:`CHUNK` bytes with a running total, and refused as soon as
      the total passes the declared size (so Inspect's own read, which the zip
      reader stops at the declared size, is bounded too).

    A plain JSON log (``.json``) is held to :data:`MAX_MEMBER` bytes. Any breach
    is :class:`LogTooLarge`, one line naming the file and the member.
"""

from __future__ import annotations

import struct
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from tasks.safefs import UnsafeRead, open_input

MAX_LOG = 1 << 30
"""The largest log file opened (compressed size)."""
MAX_MEMBER = 64 << 20
"""The most one member (a sample, the header) may inflate to; a QuoteBench sample is well under 2 MiB."""
MAX_TOTAL = 512 << 20
"""The most all members of one log together may inflate to."""
MAX_MEMBERS = 100_000
CHUNK = 1 << 20
"""Inflated bytes produced at a time while checking a member."""
_ZSTD = 93
_LOCAL = struct.Struct("<4s22xHH")  # signature, ..., file name length, extra field length


class LogTooLarge(ValueError):
    """A log breaks a bound; the message is one line naming the file (and the member)."""


def check_log(path: Path) -> None:
    """Refuse ``path`` (:class:`LogTooLarge`, FileNotFoundError) unless it is within every bound above."""
    try:
        fh = open_input(path, MAX_LOG)
    except UnsafeRead as e:
        raise LogTooLarge(str(e)) from None
    with fh:
        if fh.read(4) != b"PK\x03\x04":
            size = fh.seek(0, 2)
            if size > MAX_MEMBER:
                raise LogTooLarge(f"{path}: a JSON log larger than {MAX_MEMBER} bytes ({size}); not read")
            return  # not a zip: Inspect's reader says what it is
        fh.seek(0)
        try:
            zf = zipfile.ZipFile(fh)
        except (zipfile.BadZipFile, OSError, ValueError):
            return  # Inspect's reader refuses it, naming why
        with zf:
            _check_members(path, fh, zf.infolist())


def _check_members(path: Path, fh: BinaryIO, infos: list[zipfile.ZipInfo]) -> None:
    if len(infos) > MAX_MEMBERS:
        raise LogTooLarge(f"{path}: holds more than {MAX_MEMBERS} members; not read")
    total = 0
    for info in infos:
        where = f"{path}: {info.filename}"
        if info.flag_bits & 0x1:
            raise LogTooLarge(f"{where}: is encrypted; not read")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, _ZSTD):
            raise LogTooLarge(f"{where}: compression method {info.compress_type} is not one Inspect writes; not read")
        if info.file_size > MAX_MEMBER:
            raise LogTooLarge(f"{where}: inflates to more than {MAX_MEMBER} bytes (it declares {info.file_size}); "
                              "not read")
        total += info.file_size
        if total > MAX_TOTAL:
            raise LogTooLarge(f"{path}: its members inflate to more than {MAX_TOTAL} bytes together; not read")
        got = 0
        for chunk in _inflate(fh, info):
            got += len(chunk)
            if got > info.file_size:
                raise LogTooLarge(f"{where}: inflates to more than its declared {info.file_size} bytes; not read")


def _raw(fh: BinaryIO, info: zipfile.ZipInfo) -> Iterator[bytes]:
    """The member's compressed bytes, a block at a time, from just after its local header."""
    fh.seek(info.header_offset)
    sig, name_len, extra_len = _LOCAL.unpack(fh.read(_LOCAL.size))
    if sig != b"PK\x03\x04":
        raise LogTooLarge(f"{fh.name if isinstance(fh.name, str) else 'log'}: {info.filename}: bad local header")
    fh.seek(info.header_offset + _LOCAL.size + name_len + extra_len)
    left = info.compress_size
    while left > 0:
        block = fh.read(min(left, 1 << 16))
        if not block:
            return
        left -= len(block)
        yield block


class _Blocks:
    """The compressed bytes as a file-like object, for zstandard's stream reader."""

    def __init__(self, blocks: Iterator[bytes]) -> None:
        self._blocks = blocks
        self._buf = b""

    def read(self, n: int = -1) -> bytes:
        while n < 0 or len(self._buf) < n:
            block = next(self._blocks, b"")
            if not block:
                break
            self._buf += block
        if n < 0:
            n = len(self._buf)
        out, self._buf = self._buf[:n], self._buf[n:]
        return out


def _inflate(fh: BinaryIO, info: zipfile.ZipInfo) -> Iterator[bytes]:
    """The member inflated, at most :data:`CHUNK` bytes at a time, whatever its compression ratio."""
    blocks = _raw(fh, info)
    if info.compress_type == zipfile.ZIP_STORED:
        yield from blocks
    elif info.compress_type == zipfile.ZIP_DEFLATED:
        d = zlib.decompressobj(-15)
        for block in blocks:
            data = block
            while data:
                yield d.decompress(data, CHUNK)
                data = d.unconsumed_tail
        yield d.flush()  # what zlib still holds once every input byte is consumed: under its 32 KiB window
    else:
        import zstandard

        reader = zstandard.ZstdDecompressor(max_window_size=1 << 27).stream_reader(
            _Blocks(blocks), read_size=1 << 16, read_across_frames=True)
        try:
            while chunk := reader.read(CHUNK):
                yield chunk
        except zstandard.ZstdError:
            return  # corrupt: Inspect's reader refuses it, naming why
