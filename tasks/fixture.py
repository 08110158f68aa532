"""Materializing a task's fixture into a fresh working directory.

Files get their exact bytes and modes. Git repositories are built once per
process with a fixed identity and fixed dates (so every run sees the same
hashes) and then copied, which costs ~3 ms instead of the 10-14 ms of running
git for every execution.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import tempfile
import threading
from pathlib import Path

from . import forking
from .load import MAX_TOOL, TOOLS_DIR
from .safefs import read_under
from .schema import Fixture, FixtureFile, GitRepo, relative_path

GIT_NAME = "QuoteBench Fixture"
GIT_EMAIL = "fixture@quotebench.invalid"
GIT_DATE = "2024-01-01T00:00:00+00:00"

_cache_lock = threading.Lock()
_cache_root: Path | None = None


def git_env(home: str | os.PathLike[str]) -> dict[str, str]:
    """An environment for running git on the host with no user or system config."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TZ": "UTC",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": GIT_NAME,
        "GIT_AUTHOR_EMAIL": GIT_EMAIL,
        "GIT_COMMITTER_NAME": GIT_NAME,
        "GIT_COMMITTER_EMAIL": GIT_EMAIL,
        "GIT_AUTHOR_DATE": GIT_DATE,
        "GIT_COMMITTER_DATE": GIT_DATE,
    }


def file_bytes(f: FixtureFile) -> bytes:
    """The exact bytes a fixture file must hold: a ``source``'s were read when its family file was loaded
    (inside the suite's directory or ``tasks/tools``, checked); a fixture made in code reads ``tasks/tools``."""
    if f.source is not None:
        if f._data is not None:
            return f._data
        return read_under(TOOLS_DIR, relative_path(f.source), MAX_TOOL)
    return (f.text or "").encode("utf-8")


def _write(root: Path, rel: str, data: bytes, mode: int = 0o644) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    if mode & 0o111:  # run by the command: never open for writing during a fork under tasks.forking
        forking.write_executable(p, data, mode)
    else:
        p.write_bytes(data)
        os.chmod(p, mode)


def _cache() -> Path:
    global _cache_root
    if _cache_root is None:
        _cache_root = Path(tempfile.mkdtemp(prefix=f"qb-fixture-cache-{os.getpid()}-"))
        atexit.register(_remove_cache, _cache_root, os.getpid())
    return _cache_root


def _remove_cache(root: Path, owner: int) -> None:
    """At exit, by the process that made it: a forked child inherits the exit handler, not the cache."""
    if os.getpid() == owner:
        shutil.rmtree(root, True)


def _forked() -> None:  # a thread of the parent may have held the lock at the fork; the cache stays the parent's
    global _cache_lock, _cache_root
    _cache_lock, _cache_root = threading.Lock(), None


os.register_at_fork(after_in_child=_forked)
tempfile.gettempdir()  # its first call takes a lock of tempfile's: here, not in a thread a fork may copy mid-call


def _git(repo: Path, home: Path, *args: str) -> None:
    forking.run(["git", *args], cwd=repo, env=git_env(home), check=True)


def _build_repo(spec: GitRepo, dest: Path) -> None:
    home = dest.parent / (dest.name + ".home")
    dest.mkdir(parents=True)
    home.mkdir()
    _git(dest, home, "init", "--quiet", "--template=", "--initial-branch=main")
    _git(dest, home, "config", "user.name", GIT_NAME)
    _git(dest, home, "config", "user.email", GIT_EMAIL)
    _git(dest, home, "config", "commit.gpgsign", "false")
    for commit in spec.commits:
        for rel, text in commit.files.items():
            _write(dest, rel, text.encode())
        _git(dest, home, "add", "--all")
        _git(dest, home, "commit", "--quiet", "--allow-empty", "--cleanup=verbatim", "-m", commit.message)
    for rel, text in spec.staged.items():
        _write(dest, rel, text.encode())
        _git(dest, home, "add", "--", rel)
    shutil.rmtree(home)


def template_repo(spec: GitRepo) -> Path:
    """The cached, never-modified repository every copy of ``spec`` starts from."""
    return _repo_template(spec)


def _repo_template(spec: GitRepo) -> Path:
    key = hashlib.sha256(spec.model_dump_json().encode()).hexdigest()[:16]
    with _cache_lock:
        path = _cache() / key / "repo"
        if not path.exists():
            _build_repo(spec, path)
        return path


def materialize(fixture: Fixture, workdir: Path) -> None:
    """Fill an existing, empty ``workdir`` with the fixture."""
    if fixture.git is not None:
        target = workdir / fixture.git.path
        shutil.copytree(_repo_template(fixture.git), target, symlinks=True, dirs_exist_ok=True)
    for d in fixture.dirs:
        (workdir / d).mkdir(parents=True, exist_ok=True)
    for f in fixture.files:
        _write(workdir, f.path, file_bytes(f), f.mode)
