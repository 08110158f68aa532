"""Filesystem primitives that stay safe on a tree a hostile command wrote.

The harness reads, lists, copies and removes directories that an agent's command
controlled. Such a tree may hold symlinks to host files, FIFOs that block a naive
``open``, sparse files of many GiB, directories of mode 000, or chains of thousands
of nested directories (``shutil.rmtree`` and recursive copies die with
RecursionError past ~1000 levels). So everything here is

- iterative (no recursion, whatever the depth),
- relative to directory file descriptors (``openat``-style, ``O_NOFOLLOW`` on every
  component), so no symlink is ever followed and a directory swapped for a symlink
  mid-walk is refused rather than entered,
- non-blocking (a FIFO or device is identified through an ``O_PATH`` descriptor and
  never opened for reading), and
- capped (bytes read, entries listed, depth walked); crossing a cap raises
  :class:`UnsafeRead` with a one-line message, which callers turn into a failed check.

Why one module (over 400 lines)
    Every primitive walks the same way (directory descriptors, ``O_NOFOLLOW``, the same caps and the
    same refusals); kept together, a change to that walk is made once and reviewed once.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_PATH = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafeRead(OSError):
    """Something a command wrote cannot be read safely (a link, a special file, over a cap).

    ``str()`` is a one-line message naming the path, ready for a check's detail."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def kind_of(mode: int) -> str:
    """What a non-regular entry is, in words for a one-line detail."""
    if stat.S_ISLNK(mode):
        return "a symlink"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISREG(mode):
        return "a regular file"
    return "a special file"


def _parts(rel: str) -> list[str]:
    """The components of a relative path; '..' and absolute paths are refused."""
    if rel.startswith("/"):
        raise UnsafeRead(f"{rel}: is an absolute path")
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UnsafeRead(f"{rel}: leads out of its directory ('..')")
    return parts


def open_root(root: Path) -> int:
    """A directory fd for ``root`` itself; its last component must not be a symlink."""
    try:
        return os.open(root, _DIR)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafeRead(f"{root.name}: is not a directory (or is a symlink)") from None
        raise


def _open_dir_at(dir_fd: int, name: str, shown: str) -> int:
    """A read fd for the real directory ``name`` in ``dir_fd``; a symlink or non-directory is refused."""
    try:
        return os.open(name, _DIR, dir_fd=dir_fd)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            raise UnsafeRead(f"{shown}: is {kind_of(st.st_mode)}, not a directory") from None
        if e.errno == errno.EACCES:
            raise UnsafeRead(f"{shown}: directory cannot be read (permission denied)") from None
        raise


def _dir_under(root: Path, parts: list[str], rel: str) -> int:
    """An fd for the directory ``root/parts...``, resolved one component at a time without links."""
    fd = open_root(root)
    try:
        for i, name in enumerate(parts):
            nxt = _open_dir_at(fd, name, "/".join(parts[: i + 1]) or rel)
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def _read_fd(fd: int, cap: int, shown: str) -> bytes:
    chunks: list[bytes] = []
    left = cap + 1
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 16))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    data = b"".join(chunks)
    if len(data) > cap:
        raise UnsafeRead(f"{shown}: is larger than {cap} bytes; not read")
    return data


def _open_regular_at(dir_fd: int | None, name: str | os.PathLike[str], cap: int, shown: str,
                     follow: bool = False) -> int:
    """A read fd for the regular file ``name`` (in ``dir_fd``): identified through O_PATH first, so a
    FIFO or a device is never opened for reading (opening one can block, or act), then reopened
    through /proc (the very same inode). ``follow``: a symlink as the last component is followed
    (to a regular file only); otherwise it is refused. Over ``cap`` bytes is refused before reading."""
    pfd = os.open(name, (_PATH & ~os.O_NOFOLLOW) if follow else _PATH,
                  **({"dir_fd": dir_fd} if dir_fd is not None else {}))
    try:
        st = os.fstat(pfd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeRead(f"{shown}: is {kind_of(st.st_mode)}, not a regular file")
        if st.st_size > cap:
            raise UnsafeRead(f"{shown}: is larger than {cap} bytes ({st.st_size}); not read")
        try:
            fd = os.open(f"/proc/self/fd/{pfd}", os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY)
        except FileNotFoundError:  # no /proc: open by name, then make sure it is the same inode
            flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY | (0 if follow else os.O_NOFOLLOW)
            fd = os.open(name, flags, **({"dir_fd": dir_fd} if dir_fd is not None else {}))
        st2 = os.fstat(fd)
        if (st2.st_dev, st2.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISREG(st2.st_mode):
            os.close(fd)
            raise UnsafeRead(f"{shown}: changed while being read")
        return fd
    finally:
        os.close(pfd)


def _read_at(dir_fd: int, name: str, cap: int, shown: str) -> bytes:
    """Read a regular file ``name`` in ``dir_fd`` (see :func:`_open_regular_at`), at most ``cap`` bytes."""
    fd = _open_regular_at(dir_fd, name, cap, shown)
    try:
        return _read_fd(fd, cap, shown)
    finally:
        os.close(fd)


def read_capped(path: Path, cap: int) -> bytes:
    """At most ``cap`` bytes of the regular file ``path``; :class:`UnsafeRead` for a symlink (as the
    last component), FIFO, device, socket, directory or a file over the cap. Never blocks."""
    parent = os.open(path.parent if str(path.parent) else ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return _read_at(parent, path.name, cap, str(path))
    finally:
        os.close(parent)


def open_input(path: Path, cap: int, *, follow: bool = True) -> BinaryIO:
    """``path``, a file given to the harness (a reply store, a results file, a log), open for reading.

    Input files are hostile too: a FIFO would block the reader, ``/dev/zero`` never ends, a file of
    many GiB exhausts memory. So ``path`` must be a regular file of at most ``cap`` bytes, checked
    before anything is read (:class:`UnsafeRead` otherwise, one line naming it). With ``follow`` (a
    path the user named) a symlink as its last component is followed to a regular file; without (a
    file found inside a directory the user named) a symlink is refused, so nothing leads out of that
    directory. A missing file is FileNotFoundError."""
    fd = _open_regular_at(None, path, cap, str(path), follow=follow)
    return os.fdopen(fd, "rb")


def read_input(path: Path, cap: int, *, follow: bool = True) -> bytes:
    """The whole of the input file ``path`` (see :func:`open_input`), at most ``cap`` bytes."""
    with open_input(path, cap, follow=follow) as fh:
        return _read_fd(fh.fileno(), cap, str(path))


def list_regular(directory: Path, pattern: str) -> list[Path]:
    """The entries of ``directory`` whose names match the glob ``pattern``, sorted, each one checked to be
    a regular file (never a symlink, FIFO, device or directory: :class:`UnsafeRead` naming it), without
    opening any of them. The directory's own last component may be a link (the user named it)."""
    import fnmatch

    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        names = sorted(e for e in os.listdir(fd) if fnmatch.fnmatchcase(e, pattern))
        for name in names:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode):
                raise UnsafeRead(f"{directory / name}: is {kind_of(st.st_mode)}, not a regular file")
        return [directory / n for n in names]
    finally:
        os.close(fd)


def read_under(root: Path, rel: str, cap: int) -> bytes:
    """At most ``cap`` bytes of ``root/rel``, resolving every component without following a link.

    FileNotFoundError when it is missing; :class:`UnsafeRead` when any component is a symlink
    or not a directory, or the file is not a regular file or is over the cap."""
    parts = _parts(rel)
    if not parts:
        raise UnsafeRead(f"{rel}: is a directory, not a regular file")
    fd = _dir_under(root, parts[:-1], rel)
    try:
        return _read_at(fd, parts[-1], cap, rel)
    finally:
        os.close(fd)


def lstat_under(root: Path, rel: str) -> os.stat_result:
    """``lstat`` of ``root/rel`` without following a link on the way (FileNotFoundError if missing)."""
    parts = _parts(rel)
    if not parts:
        return os.stat(root, follow_symlinks=False)
    fd = _dir_under(root, parts[:-1], rel)
    try:
        return os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
    finally:
        os.close(fd)


def list_under(root: Path, rel: str, cap: int) -> list[str]:
    """The names in directory ``root/rel`` (unsorted), never following a link; over ``cap``
    entries raises :class:`UnsafeRead`."""
    fd = _dir_under(root, _parts(rel), rel)
    try:
        names: list[str] = []
        with os.scandir(fd) as it:
            for entry in it:
                names.append(entry.name)
                if len(names) > cap:
                    raise UnsafeRead(f"{rel}: holds more than {cap} entries; not listed")
        return names
    finally:
        os.close(fd)


@dataclass
class Entry:
    """One entry met by :func:`walk`. ``dir_fd`` (its parent) is valid only until the walk moves on."""

    rel: str
    name: str
    dir_fd: int
    st: os.stat_result

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.st.st_mode)


def walk(root: Path, *, max_entries: int, max_depth: int, skip: frozenset[str] | set[str] = frozenset(),
         what: str = "the directory") -> Iterator[Entry]:
    """Every entry under ``root``, parents before children, never following a symlink.

    Iterative, relative to directory fds (at most ``max_depth`` open at once). Directories
    whose ``rel`` is in ``skip`` are yielded but not entered. More than ``max_entries``
    entries or more than ``max_depth`` levels raises :class:`UnsafeRead` naming ``what``."""
    seen = 0
    stack: list[tuple[int, str, list[str]]] = []

    def names_of(fd: int, rel: str) -> list[str]:
        out: list[str] = []
        with os.scandir(fd) as it:
            for e in it:
                out.append(e.name)
                if seen + len(out) > max_entries:
                    raise UnsafeRead(f"{what} holds more than {max_entries} entries; not inspected")
        out.reverse()  # popped from the end: yields in directory order
        return out

    top = open_root(root)
    try:
        stack.append((top, "", names_of(top, "")))
    except BaseException:
        os.close(top)
        raise
    try:
        while stack:
            fd, rel, pending = stack[-1]
            if not pending:
                os.close(fd)
                stack.pop()
                continue
            name = pending.pop()
            path = f"{rel}/{name}" if rel else name
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            seen += 1
            if seen > max_entries:
                raise UnsafeRead(f"{what} holds more than {max_entries} entries; not inspected")
            yield Entry(path, name, fd, st)
            if stat.S_ISDIR(st.st_mode) and path not in skip:
                if len(stack) >= max_depth:
                    raise UnsafeRead(f"{what} is nested deeper than {max_depth} levels; not inspected")
                child = _open_dir_at(fd, name, path)
                try:
                    stack.append((child, path, names_of(child, path)))
                except BaseException:
                    os.close(child)
                    raise
    finally:
        for fd, _, _ in stack:
            os.close(fd)


# ---------------------------------------------------------------- removal


def _unlock(fd: int) -> None:
    try:
        os.fchmod(fd, 0o700)
    except OSError:
        pass


def _open_for_removal(dir_fd: int, name: str) -> int | None:
    """A read fd for subdirectory ``name``, making it readable first if needed (mode 000, not root);
    None when it is not a real directory (then it was unlinked) or cannot be opened."""
    try:
        pfd = os.open(name, _PATH | os.O_DIRECTORY, dir_fd=dir_fd)
    except OSError as e:
        if e.errno in (errno.ENOTDIR, errno.ELOOP):  # swapped for a symlink or a file: remove the entry
            try:
                os.unlink(name, dir_fd=dir_fd)
            except OSError:
                pass
        return None
    try:
        try:
            return os.open(".", _DIR, dir_fd=pfd)
        except PermissionError:
            try:
                os.chmod(f"/proc/self/fd/{pfd}", 0o700)  # the very inode of pfd, never a link target
                return os.open(".", _DIR, dir_fd=pfd)
            except OSError:
                return None
        except OSError:
            return None
    finally:
        os.close(pfd)


def _clear(fd: int) -> list[str]:
    """Unlink every non-directory in ``fd``; the names of its subdirectories."""
    _unlock(fd)
    subdirs: list[str] = []
    try:
        with os.scandir(fd) as it:
            for entry in it:
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    is_dir = False
                if is_dir:
                    subdirs.append(entry.name)
                    continue
                try:
                    os.unlink(entry.name, dir_fd=fd)
                except IsADirectoryError:
                    subdirs.append(entry.name)
                except OSError:
                    pass
    except OSError:
        pass
    return subdirs


def _same(fd: int, ident: tuple[int, int]) -> bool:
    st = os.fstat(fd)
    return (st.st_dev, st.st_ino) == ident


def _empty_dir(top: int) -> None:
    """Remove everything inside the directory ``top`` (an fd we keep), depth first, iteratively.

    Each level remembers its ancestors' (dev, inode) and pending subdirectories. Going back up
    opens '..' and checks it is the remembered parent; if a directory was moved meanwhile the
    walk stops instead of deleting somewhere else. At most two fds are open at a time."""
    st = os.fstat(top)
    cur = os.dup(top)
    cur_id = (st.st_dev, st.st_ino)
    pending = _clear(cur)
    frames: list[tuple[tuple[int, int], list[str], str]] = []  # (parent id, parent's pending, child name)
    try:
        while True:
            if pending:
                name = pending.pop()
                child = _open_for_removal(cur, name)
                if child is None:
                    continue
                frames.append((cur_id, pending, name))
                os.close(cur)
                cur = child
                cst = os.fstat(cur)
                cur_id = (cst.st_dev, cst.st_ino)
                pending = _clear(cur)
                continue
            if not frames:
                return
            parent_id, pending, name = frames.pop()
            up = os.open("..", _DIR, dir_fd=cur)
            os.close(cur)
            cur = up
            cur_id = parent_id
            if not _same(cur, parent_id):
                return
            try:
                os.rmdir(name, dir_fd=cur)
            except OSError:
                pass
    finally:
        os.close(cur)


def remove_tree(path: Path) -> None:
    """Remove ``path`` (a directory tree a hostile command wrote, a file, or a symlink) as far as
    possible. Never raises, never follows a symlink, never recurses: 5000+ levels, mode-000
    directories and entries swapped for symlinks mid-walk are handled; what cannot be removed
    (an immutable file, a mount point) is left and skipped."""
    try:
        parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        name = path.name
        try:
            st = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except OSError:
            return
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(name, dir_fd=parent)
            return
        top = _open_for_removal(parent, name)
        if top is None:
            return
        try:
            _empty_dir(top)
        finally:
            os.close(top)
        os.rmdir(name, dir_fd=parent)
    except (OSError, ValueError):
        pass
    finally:
        os.close(parent)
