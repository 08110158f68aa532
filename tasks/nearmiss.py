"""Near-miss states: one small corruption of a correct final state each.

``tasks check`` runs a task's reference solution, then applies each near miss
to a copy of the resulting directory and requires the validator to reject it.
The corruptions are the ones quoting bugs cause in practice: a byte appended,
a quote (or another shell-active character) lost, a trailing newline added or
dropped, an extra argument, a changed JSON field, an extra commit; and the ways
a command gets the right-looking result by the wrong route: a file committed
too many or too few, a file staged and left uncommitted, a commit on another
branch, a wrapper bypassed, a stray file left in a subdirectory.
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import forking
from .fixture import git_env
from .schema import (
    Argv, Check, DirListing, EnvValue, FileAbsent, FileBytes, FixtureUnchanged, GitHistory, JsonEqual, Ran, Task,
)

Mutation = tuple[str, Callable[[Path], None]]
LOSABLE = "'\"$`\\!%*?[]"


def lose_one(text: str) -> tuple[str, str] | None:
    """``text`` with its first quote (or other shell-active character) removed, and what was lost."""
    for ch in LOSABLE:
        i = text.find(ch)
        if i >= 0:
            return text[:i] + text[i + 1:], ch
    return None


def toggle_newline(text: str) -> tuple[str, str]:
    if text.endswith("\n"):
        return text[:-1], "final newline dropped"
    return text + "\n", "final newline added"


def _variants(text: str) -> list[tuple[str, str]]:
    """(description, corrupted text) pairs for an exact string."""
    result = [("one byte appended", text + "x"), (toggle_newline(text)[1], toggle_newline(text)[0])]
    lost = lose_one(text)
    if lost:
        result.append((f"{lost[1]!r} lost", lost[0]))
    return result


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _file_bytes(c: FileBytes) -> list[Mutation]:
    return [(f"{c.path}: {d}", lambda root, t=t: _write(root / c.path, t.encode())) for d, t in _variants(c.text)]


def _file_absent(c: FileAbsent) -> list[Mutation]:
    return [(f"{c.path}: created", lambda root: _write(root / c.path, b"x"))]


def _dir_listing(c: DirListing) -> list[Mutation]:
    muts: list[Mutation] = [(f"{c.path}: an extra entry", lambda root: _write(root / c.path / "near-miss-extra", b""))]
    for name in c.names:
        lost = lose_one(name)
        if lost and lost[0]:
            muts.append((f"{c.path}: {name!r} with {lost[1]!r} lost",
                         lambda root, a=name, b=lost[0]: os.rename(root / c.path / a, root / c.path / b)))
            break
    return muts


def _argv(c: Argv) -> list[Mutation]:
    def put(args: list[str]) -> Callable[[Path], None]:
        return lambda root: _write(root / c.record, b"".join(a.encode() + b"\0" for a in args))

    muts: list[Mutation] = [("argv: an extra argument", put(c.args + ["extra"]))]
    if c.args:
        muts.append(("argv: the last argument dropped", put(c.args[:-1])))
        muts.append(("argv: the first two arguments joined" if len(c.args) > 1 else "argv: one byte appended",
                     put([c.args[0] + " " + c.args[1], *c.args[2:]] if len(c.args) > 1 else [c.args[0] + "x"])))
        for i, a in enumerate(c.args):
            lost = lose_one(a)
            if lost:
                muts.append((f"argv: argument {i + 1} with {lost[1]!r} lost", put(c.args[:i] + [lost[0]] + c.args[i + 1:])))
                break
    return muts


def _env(c: EnvValue) -> list[Mutation]:
    def put(value: str | None) -> Callable[[Path], None]:
        def apply(root: Path) -> None:
            entries = [e for e in (root / c.record).read_bytes().split(b"\0") if e and not e.startswith(c.name.encode() + b"=")]
            if value is not None:
                entries.append(f"{c.name}={value}".encode())
            _write(root / c.record, b"".join(e + b"\0" for e in entries))
        return apply

    return [(f"{c.name}: {d}", put(v)) for d, v in _variants(c.value)] + [(f"{c.name}: unset", put(None))]


def _ran(c: Ran) -> list[Mutation]:
    return [(f"{c.program}: never called (record {c.record} removed)", lambda root: os.remove(root / c.record))]


def _first_leaf_changed(value: Any) -> tuple[Any, str] | None:
    """A copy of ``value`` with its first scalar changed (string +x, number +1, bool flipped, null -> 0)."""
    doc = copy.deepcopy(value)

    def walk(node: Any, path: str) -> str | None:
        items = list(node.items()) if isinstance(node, dict) else list(enumerate(node)) if isinstance(node, list) else []
        for k, v in items:
            here = f"{path}.{k}" if isinstance(node, dict) else f"{path}[{k}]"
            if isinstance(v, (dict, list)):
                found = walk(v, here)
                if found:
                    return found
                continue
            if isinstance(v, bool):
                node[k] = not v
            elif isinstance(v, (int, float)):
                node[k] = v + 1
            elif isinstance(v, str):
                node[k] = v + "x"
            else:
                node[k] = 0
            return here
        return None

    where = walk(doc, "$")
    return (doc, where) if where else None


def _json_equal(c: JsonEqual) -> list[Mutation]:
    def put(doc: Any) -> Callable[[Path], None]:
        return lambda root: _write(root / c.path, json.dumps(doc, ensure_ascii=False).encode())

    muts: list[Mutation] = []
    changed = _first_leaf_changed(c.value)
    if changed:
        muts.append((f"{c.path}: field {changed[1]} changed", put(changed[0])))
    if isinstance(c.value, dict):
        muts.append((f"{c.path}: an extra field", put({**c.value, "extra": True})))
        for k, v in c.value.items():
            if isinstance(v, str):
                lost = lose_one(v)
                if lost:
                    muts.append((f"{c.path}: field {k!r} with {lost[1]!r} lost", put({**c.value, k: lost[0]})))
                    break
    return muts


def _git_run(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    """git in a solved state (made by a reference solution, so trusted), with hooks and fsmonitor off anyway."""
    with tempfile.TemporaryDirectory(prefix="qb-git-home-") as home:
        return forking.run(["git", "-c", "safe.directory=*", "-c", "core.hooksPath=/dev/null",
                            "-c", "core.fsmonitor=false", *args], cwd=repo, env=git_env(home), input=stdin,
                           check=True).stdout


def _recommit(repo: Path, parents: list[str] | None = None) -> None:
    """Replace HEAD (on its branch) by a commit of the current index with HEAD's exact message."""
    raw = _git_run(repo, "cat-file", "commit", "HEAD")
    message = raw.split(b"\n\n", 1)[1]
    if parents is None:
        parents = [p.decode() for p in _git_run(repo, "rev-list", "--parents", "-n", "1", "HEAD").split()[1:]]
    tree = _git_run(repo, "write-tree").strip().decode()
    args = ["commit-tree", tree] + [a for p in parents for a in ("-p", p)]
    new = _git_run(repo, *args, stdin=message).strip().decode()
    _git_run(repo, "update-ref", "HEAD", new)


def _git(c: GitHistory) -> list[Mutation]:
    def reword(message: str) -> Callable[[Path], None]:
        def apply(root: Path) -> None:
            repo = root / c.path
            parents = _git_run(repo, "rev-list", "--parents", "-n", "1", "HEAD").split()[1:]
            args = ["commit-tree", "HEAD^{tree}"] + [a for p in parents for a in ("-p", p.decode())]
            new = _git_run(repo, *args, stdin=message.encode()).strip().decode()
            _git_run(repo, "update-ref", "HEAD", new)
        return apply

    def uncommitted(root: Path) -> None:
        repo = root / c.path
        parent = _git_run(repo, "rev-parse", "HEAD^").strip().decode()
        new = _git_run(repo, "commit-tree", f"{parent}^{{tree}}", "-p", parent, stdin=c.message.encode())
        _git_run(repo, "update-ref", "HEAD", new.strip().decode())

    def extra_file(root: Path) -> None:  # `git add -A` with a stray file, then the commit
        repo = root / c.path
        _write(repo / "near-miss-extra.txt", b"stray\n")
        _git_run(repo, "add", "--", "near-miss-extra.txt")
        _recommit(repo)

    def file_deleted(root: Path) -> None:  # another tracked file deleted in the same commit
        repo = root / c.path
        tracked = [n for n in _git_run(repo, "ls-files", "-z").decode().split("\0") if n and n not in c.files]
        _git_run(repo, "rm", "-q", "--", tracked[0])
        _recommit(repo)

    def still_staged(root: Path) -> None:  # the right commit, then another file staged and left uncommitted
        repo = root / c.path
        _write(repo / "near-miss-staged.txt", b"staged\n")
        _git_run(repo, "add", "--", "near-miss-staged.txt")

    def other_branch(root: Path) -> None:  # the right commit, but on a new branch; the old one unmoved
        repo = root / c.path
        branch = _git_run(repo, "symbolic-ref", "HEAD").strip().decode()
        _git_run(repo, "update-ref", "refs/heads/near-miss", "HEAD")
        _git_run(repo, "update-ref", branch, "HEAD^")
        _git_run(repo, "symbolic-ref", "HEAD", "refs/heads/near-miss")

    def extra_parent(root: Path) -> None:  # a merge commit onto the fixture's history: same count, wrong parents
        repo = root / c.path
        parents = [_git_run(repo, "rev-parse", rev).strip().decode() for rev in ("HEAD^", "HEAD^^")]
        _recommit(repo, parents)

    muts = [(f"git: HEAD message {d}", reword(t)) for d, t in _variants(c.message)]
    if c.files and c.count > 1:
        muts.append(("git: right message, but the staged change left out", uncommitted))
    muts.append(("git: an extra commit", lambda root: _git_run(root / c.path, "commit", "--allow-empty", "-q", "-m", "extra")))
    if c.exact_tree:
        muts.append(("git: an extra file committed", extra_file))
        muts.append(("git: another tracked file deleted in the commit", file_deleted))
    if c.clean_index:
        muts.append(("git: another file staged after the commit", still_staged))
    if c.same_branch:
        muts.append(("git: committed on a new branch", other_branch))
    if c.on_fixture_head and c.count > 2:
        muts.append(("git: HEAD is a merge with an extra parent", extra_parent))
    return muts


def _fixture_unchanged(c: FixtureUnchanged, task: Task) -> list[Mutation]:
    muts: list[Mutation] = []
    for f in task.fixture.files:
        if f.path not in c.except_paths:
            muts.append((f"{f.path}: fixture file gained a byte",
                         lambda root, p=f.path: _write(root / p, (root / p).read_bytes() + b"x")))
            break
    if c.new_paths is not None:
        dirs = {os.path.dirname(p) for p in [f.path for f in task.fixture.files] + list(task.fixture.dirs)}
        dirs |= set(task.fixture.dirs)
        deepest = max(sorted(d for d in dirs if d), key=lambda d: d.count("/"), default="")
        where = deepest or "."
        muts.append((f"{where}: a stray hidden file", lambda root: _write(root / deepest / ".near-miss-stray", b"")))
        muts.append((f"{where}: a stray empty directory", lambda root: os.mkdir(root / deepest / "near-miss-dir")))
    return muts


def near_misses(task: Task) -> list[Mutation]:
    """Every near miss of ``task``'s checks, each a (description, apply-to-directory) pair."""
    muts: list[Mutation] = []
    for c in task.checks:
        muts += _for_check(c, task)
    return muts


def _for_check(c: Check, task: Task) -> list[Mutation]:
    if isinstance(c, FileBytes):
        return _file_bytes(c)
    if isinstance(c, FileAbsent):
        return _file_absent(c)
    if isinstance(c, DirListing):
        return _dir_listing(c)
    if isinstance(c, Argv):
        return _argv(c)
    if isinstance(c, EnvValue):
        return _env(c)
    if isinstance(c, Ran):
        return _ran(c)
    if isinstance(c, JsonEqual):
        return _json_equal(c)
    if isinstance(c, GitHistory):
        return _git(c)
    return _fixture_unchanged(c, task)
