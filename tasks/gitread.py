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

Everything is capped, since the repository may also be a trap for the reader: the
copy is one iterative walk over directory fds (no symlink followed, at most
MAX_DEPTH levels, MAX_ENTRIES entries, MAX_BYTES bytes), git's stdout is read
incrementally and git killed past a cap, ``GIT_ALLOC_LIMIT`` bounds every
allocation git makes and an address-space rlimit (GIT_MEMORY) its total, so a
zlib bomb (a small loose object that inflates to GiBs) becomes a failed check
instead of memory. Every refusal is a one-line
:class:`UnsafeRepo`.
"""

from __future__ import annotations

import os
import resource
import selectors
import stat
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from . import forking
from .fixture import git_env, template_repo
from .safefs import UnsafeRead, kind_of, remove_tree, walk
from .schema import GitRepo

PARTS = ("HEAD", "refs", "packed-refs", "objects", "index")
SKIP = "objects/info"  # alternates, http-alternates, grafts-like side files: never read
MAX_ENTRIES = 20_000
MAX_DEPTH = 64           # a real .git is a few levels deep (objects/ab/cdef..., refs/heads/a/b)
MAX_BYTES = 256 << 20    # what is copied out of .git
MAX_OUTPUT = 8 << 20     # what is read from one git command's stdout
MAX_STDERR = 64 << 10
ALLOC_LIMIT = 64 << 20   # GIT_ALLOC_LIMIT: git dies rather than make any single allocation above this
GIT_MEMORY = 512 << 20   # RLIMIT_AS of each git process: its total memory, mappings included
TIMEOUT = 30.0
CONFIG = (
    "[core]\n\trepositoryformatversion = 0\n\tbare = true\n"
    "\thooksPath = /dev/null\n\tfsmonitor = false\n\tuntrackedCache = false\n"
    "\tpackedGitWindowSize = 32m\n\tpackedGitLimit = 128m\n\tdeltaBaseCacheLimit = 32m\n"
)
SAFE_FLAGS = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false")


class UnsafeRepo(Exception):
    """The repository cannot be inspected safely (or at all); the message is one line."""


class TooMuchOutput(UnsafeRepo):
    """A git command printed more than its cap (a huge or decompression-bomb object); it was killed."""


def _copy_file(dir_fd: int, name: str, dst: Path, shown: str, budget: list[int]) -> None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY, dir_fd=dir_fd)
    except OSError as e:  # ELOOP: it became a symlink since it was listed
        raise UnsafeRepo(f"{shown}: cannot be opened safely ({e.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise UnsafeRepo(f"{shown}: is not a regular file; the repository is not inspected")
        with open(dst, "wb") as out:
            while chunk := fh.read(1 << 16):
                budget[0] -= len(chunk)
                if budget[0] < 0:
                    raise UnsafeRepo(f".git is larger than {MAX_BYTES >> 20} MiB; not inspected")
                out.write(chunk)


def _copy(gitdir: Path, dst: Path, where: str) -> None:
    """Refuse ``gitdir`` unless everything in it is a regular file or a real directory, and copy the
    parts git needs into ``dst``: one iterative walk over directory fds, capped in entries and depth."""
    budget = [MAX_BYTES]
    try:
        for e in walk(gitdir, max_entries=MAX_ENTRIES, max_depth=MAX_DEPTH, what=where):
            mode = e.st.st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise UnsafeRepo(f"{where}/{e.rel}: is {kind_of(mode)}; the repository is not inspected")
            if e.rel.split("/", 1)[0] not in PARTS or e.rel == SKIP or e.rel.startswith(SKIP + "/"):
                continue
            if stat.S_ISDIR(mode):
                (dst / e.rel).mkdir()
            else:
                _copy_file(e.dir_fd, e.name, dst / e.rel, f"{where}/{e.rel}", budget)
    except UnsafeRead as e:
        raise UnsafeRepo(str(e)) from None
    except OSError as e:
        raise UnsafeRepo(f"{where}: cannot be copied for inspection ({e.strerror})") from None


def _drain(proc: subprocess.Popen[bytes], cap: int, what: str) -> tuple[bytes, bytes]:
    """stdout (at most ``cap`` bytes, else :class:`TooMuchOutput`) and the head of stderr of ``proc``,
    read as they come so that git never holds a pipe full and we never hold more than the cap."""
    assert proc.stdout is not None and proc.stderr is not None
    deadline = time.monotonic() + TIMEOUT
    out: list[bytes] = []
    err: list[bytes] = []
    sizes = {"out": 0, "err": 0}
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ, "out")
        sel.register(proc.stderr, selectors.EVENT_READ, "err")
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise UnsafeRepo(f"{what}: took longer than {TIMEOUT:.0f} s; not inspected")
            for key, _ in sel.select(left):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                sizes[key.data] += len(chunk)
                if key.data == "out":
                    if sizes["out"] > cap:
                        raise TooMuchOutput(f"{what}: printed more than {cap} bytes; not read")
                    out.append(chunk)
                elif sizes["err"] <= MAX_STDERR:
                    err.append(chunk)
    return b"".join(out), b"".join(err)[:MAX_STDERR]


class Snapshot:
    """A private, read-only-in-spirit copy of a repository's history and index."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.gitdir = tmp / "git"
        self.home = tmp / "home"

    def git(self, *args: str, cap: int = MAX_OUTPUT) -> subprocess.CompletedProcess[bytes]:
        """Run git on the snapshot. Its stdout is read incrementally up to ``cap`` bytes (past it git
        is killed and :class:`TooMuchOutput` raised), and GIT_ALLOC_LIMIT makes git die rather than
        inflate an object bigger than ALLOC_LIMIT in one allocation (a zlib bomb: a 1 MiB loose object
        that inflates to 1 GiB), so neither the validator nor git holds a bomb in memory."""
        env = git_env(self.home)
        env.update({
            "GIT_DIR": str(self.gitdir),
            "GIT_NO_REPLACE_OBJECTS": "1",
            "GIT_OPTIONAL_LOCKS": "0",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_CEILING_DIRECTORIES": str(self.tmp),
            "GIT_ALLOC_LIMIT": str(ALLOC_LIMIT),
        })
        argv = ["git", *SAFE_FLAGS, *args]
        proc = forking.popen(argv, cwd=self.tmp, env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            # The total bound, set from outside right after exec (a preexec_fn is unsafe with threads,
            # and a `sh -c 'ulimit -v'` wrapper doubles the cost of every call). Before it lands git
            # has had microseconds, and GIT_ALLOC_LIMIT already caps each of its allocations.
            resource.prlimit(proc.pid, resource.RLIMIT_AS, (GIT_MEMORY, GIT_MEMORY))
        except OSError:  # it has already exited
            pass
        try:
            out, err = _drain(proc, cap, f"git {args[0]}")
            code = proc.wait(timeout=max(0.1, TIMEOUT))
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()  # type: ignore[union-attr]
            proc.stderr.close()  # type: ignore[union-attr]
        return subprocess.CompletedProcess(argv, code, out, err)

    def out(self, *args: str) -> bytes | None:
        """stdout of a git command, or None when it failed."""
        done = self.git(*args)
        return done.stdout if done.returncode == 0 else None

    def close(self) -> None:
        remove_tree(self.tmp)

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
        what = kind_of(st.st_mode) if not stat.S_ISREG(st.st_mode) else "not a directory"
        raise UnsafeRepo(f"{where}: is {what}; the repository is not inspected")
    snap = Snapshot(Path(tempfile.mkdtemp(prefix="qb-git-snapshot-")))
    try:
        snap.gitdir.mkdir()
        snap.home.mkdir()
        _copy(gitdir, snap.gitdir, where)
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
forking.new_locks_in_child(globals(), "_facts_lock")


def read_facts(snap: Snapshot) -> tuple[str | None, str | None, str | None]:
    """(symbolic HEAD or None when detached, HEAD commit or None, index tree or None) of a snapshot."""
    branch = snap.out("symbolic-ref", "-q", "HEAD")
    head = snap.out("rev-parse", "-q", "--verify", "HEAD^{commit}")
    tree = snap.out("write-tree")
    def text(raw: bytes | None) -> str | None:  # a ref name may be any bytes git accepts, e.g. \xff
        return raw.decode(errors="backslashreplace").strip() if raw else None

    return text(branch), text(head), text(tree)


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
