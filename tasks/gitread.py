"""Reading a git repository that a hostile command controlled, without trusting it.

Running git in the agent's repository would let its ``.git/config`` run programs on
the host (``core.fsmonitor``, ``core.hooksPath``, ``diff.external``, aliases, ...),
and its ``objects/info/alternates`` or ``commondir`` would point git at host paths.
So the validator never does. :func:`snapshot` first refuses a ``.git`` that is not
a real directory or that holds anything other than regular files and directories
(a symlink, a FIFO, a device), then copies only what git needs to read history and
the index (``HEAD``, ``refs/``, ``packed-refs``, ``objects/`` without
``objects/info/``, ``index``) into a fresh temporary directory with a minimal
config of our own. :meth:`Snapshot.git` runs git there with ``GIT_DIR`` set, no
work tree, no system or global config, hooks and fsmonitor off and replace refs
ignored. Only plumbing that needs no work tree is used.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
import threading
from pathlib import Path

from .fixture import git_env, template_repo
from .schema import GitRepo

PARTS = ("HEAD", "refs", "packed-refs", "objects", "index")
SKIP = {("objects", "info")}  # alternates, http-alternates, grafts-like side files: never read
MAX_ENTRIES = 20_000
MAX_BYTES = 256 << 20
CONFIG = (
    "[core]\n\trepositoryformatversion = 0\n\tbare = true\n"
    "\thooksPath = /dev/null\n\tfsmonitor = false\n\tuntrackedCache = false\n"
)
SAFE_FLAGS = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false")


class UnsafeRepo(Exception):
    """The repository cannot be inspected safely (or at all); the message is one line."""


def _kind(mode: int) -> str | None:
    """None for a regular file or a directory, else what the entry is."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISLNK(mode):
        return "a symlink"
    return "a special file (not a regular file or directory)"


def _scan(gitdir: Path) -> None:
    """Refuse ``gitdir`` unless everything in it is a regular file or a real directory."""
    seen = 0
    stack = [gitdir]
    while stack:
        d = stack.pop()
        with os.scandir(d) as it:
            for entry in it:
                seen += 1
                if seen > MAX_ENTRIES:
                    raise UnsafeRepo(f".git holds more than {MAX_ENTRIES} entries; not inspected")
                st = entry.stat(follow_symlinks=False)
                bad = _kind(st.st_mode)
                if bad:
                    rel = os.path.relpath(entry.path, gitdir.parent)
                    raise UnsafeRepo(f"{rel}: is {bad}; the repository is not inspected")
                if stat.S_ISDIR(st.st_mode):
                    stack.append(Path(entry.path))


def _copy_file(src: Path, dst: Path, rel: tuple[str, ...], budget: list[int]) -> None:
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:  # ELOOP: it became a symlink since the scan
        raise UnsafeRepo(f".git/{'/'.join(rel)}: cannot be opened safely ({e.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise UnsafeRepo(f".git/{'/'.join(rel)}: is not a regular file; the repository is not inspected")
        with open(dst, "wb") as out:
            while chunk := fh.read(1 << 16):
                budget[0] -= len(chunk)
                if budget[0] < 0:
                    raise UnsafeRepo(f".git is larger than {MAX_BYTES >> 20} MiB; not inspected")
                out.write(chunk)


def _copy_tree(src: Path, dst: Path, rel: tuple[str, ...], budget: list[int]) -> None:
    st = os.lstat(src)
    if stat.S_ISDIR(st.st_mode):
        if rel in SKIP:
            return
        dst.mkdir()
        with os.scandir(src) as it:
            names = [e.name for e in it]
        for name in names:
            _copy_tree(src / name, dst / name, (*rel, name), budget)
    elif stat.S_ISREG(st.st_mode):
        _copy_file(src, dst, rel, budget)
    else:
        raise UnsafeRepo(f".git/{'/'.join(rel)}: is {_kind(st.st_mode)}; the repository is not inspected")


class Snapshot:
    """A private, read-only-in-spirit copy of a repository's history and index."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.gitdir = tmp / "git"
        self.home = tmp / "home"

    def git(self, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        env = git_env(self.home)
        env.update({
            "GIT_DIR": str(self.gitdir),
            "GIT_NO_REPLACE_OBJECTS": "1",
            "GIT_OPTIONAL_LOCKS": "0",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_CEILING_DIRECTORIES": str(self.tmp),
        })
        return subprocess.run(
            ["git", *SAFE_FLAGS, *args], cwd=self.tmp, env=env, input=stdin,
            capture_output=True, timeout=30,
        )

    def out(self, *args: str) -> bytes | None:
        """stdout of a git command, or None when it failed."""
        done = self.git(*args)
        return done.stdout if done.returncode == 0 else None

    def close(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> "Snapshot":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def snapshot(repo: Path, shown: str = ".") -> Snapshot:
    """A safe copy of ``repo/.git``; :class:`UnsafeRepo` if there is none or it cannot be trusted.

    ``shown`` is how the repository is named in messages.
    """
    gitdir = repo / ".git"
    where = ".git" if shown in (".", "") else f"{shown}/.git"
    try:
        st = os.lstat(gitdir)
    except FileNotFoundError:
        raise UnsafeRepo(f"{shown}: not a git repository any more (no .git)") from None
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeRepo(f"{where}: is {_kind(st.st_mode) or 'not a directory'}; the repository is not inspected")
    _scan(gitdir)
    snap = Snapshot(Path(tempfile.mkdtemp(prefix="qb-git-snapshot-")))
    try:
        snap.gitdir.mkdir()
        snap.home.mkdir()
        budget = [MAX_BYTES]
        for part in PARTS:
            src = gitdir / part
            if os.path.lexists(src):
                _copy_tree(src, snap.gitdir / part, (part,), budget)
        for part in ("refs", "objects"):  # so that a missing one reads as missing history, not "no repository"
            (snap.gitdir / part).mkdir(exist_ok=True)
        (snap.gitdir / "config").write_text(CONFIG)
    except BaseException:
        snap.close()
        raise
    return snap


# ---------------------------------------------------------------- what the fixture's repository was


class FixtureFacts:
    """What a git check compares with: the fixture repository as built (see :mod:`tasks.fixture`)."""

    def __init__(self, branch: str | None, head: str | None, index_tree: str, index_listing: bytes) -> None:
        self.branch = branch            # e.g. "refs/heads/main"
        self.head = head                # the fixture's HEAD commit, None when it had no commit
        self.index_tree = index_tree    # the tree of the fixture's index: the staged change, exactly
        self.index_listing = index_listing  # `ls-tree -r -z` of that tree


_facts: dict[str, FixtureFacts] = {}
_facts_lock = threading.Lock()


def read_facts(snap: Snapshot) -> tuple[str | None, str | None, str | None]:
    """(symbolic HEAD or None when detached, HEAD commit or None, index tree or None) of a snapshot."""
    branch = snap.out("symbolic-ref", "-q", "HEAD")
    head = snap.out("rev-parse", "-q", "--verify", "HEAD^{commit}")
    tree = snap.out("write-tree")
    return (branch.decode().strip() if branch else None, head.decode().strip() if head else None,
            tree.decode().strip() if tree else None)


def fixture_facts(spec: GitRepo) -> FixtureFacts:
    """The facts of ``spec``'s repository, computed once per process from the cached template
    (its hashes are reproducible: fixed identity, fixed dates). The template is read through a
    snapshot too, so computing the index tree never writes into it."""
    key = spec.model_dump_json()
    with _facts_lock:
        if key not in _facts:
            with snapshot(template_repo(spec)) as snap:
                branch, head, tree = read_facts(snap)
                if tree is None:
                    raise RuntimeError("the fixture repository's index has no tree")
                listing = snap.out("ls-tree", "-r", "-z", tree) or b""
            _facts[key] = FixtureFacts(branch, head, tree, listing)
        return _facts[key]
