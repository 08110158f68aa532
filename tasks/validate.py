"""The final-state validator: judges a working directory, never an exit code.

Every check compares exact bytes or parsed structure and explains a failure in
one line: what was expected, what was found, and where they first differ. The
validator runs on the host against a directory written by hostile commands, so
every read goes through :mod:`tasks.safefs`: paths are resolved one component at
a time without following a symlink, a FIFO or device is never opened, and
reads, listings and walks are capped; each refusal is a failed check with a
one-line detail. The working directory itself must still be the real directory
the sandbox created (a command can replace it with a symlink to a host
directory). Git is never run in the command's repository: see
:mod:`tasks.gitread`. Every detail is capped at MAX_DETAIL characters, with an
explicit "... (N more ...)" marker, since it goes into every record.

Why one module (over 400 lines)
    One check kind per function, all sharing the path resolution, the caps and the one-line detail
    format; mutation testing (docs/mutation.md) selects this module whole.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

from pydantic import BaseModel, field_validator

from .fixture import file_bytes
from .gitread import Snapshot, TooMuchOutput, UnsafeRepo, fixture_facts, read_facts, snapshot
from .safefs import UnsafeRead, kind_of, list_under, lstat_under, read_under, walk
from .schema import (
    Argv, Check, DirListing, EnvValue, FileAbsent, FileBytes, FixtureUnchanged, GitHistory,
    JsonEqual, Ran, Task,
)

MAX_READ = 1 << 20       # bytes read from one file
MAX_TREE = 10_000        # entries walked for fixture-unchanged
MAX_DEPTH = 100          # levels walked for fixture-unchanged
MAX_LIST = 100_000       # entries listed for dir-listing
SHOW = 60                # characters of content shown in a detail
SHOW_NAMES = 10          # names shown from a list in a detail
MAX_DETAIL = 2000        # characters of any detail


def cap_detail(detail: str) -> str:
    """``detail`` on one line and at most MAX_DETAIL characters: past that its middle is replaced by
    '... (N more characters) ...', so both what is judged (the start) and why (the end) stay readable."""
    detail = detail.replace("\r", "\\r").replace("\n", "\\n")
    if len(detail) <= MAX_DETAIL:
        return detail
    keep = MAX_DETAIL - 50
    head, tail = keep * 3 // 4, keep - keep * 3 // 4
    return f"{detail[:head]} ... ({len(detail) - keep} more characters) ... {detail[-tail:]}"


def names(items: list[str], limit: int = SHOW_NAMES) -> str:
    """A list's repr with at most ``limit`` items and an explicit '... (N more)' marker."""
    if len(items) <= limit:
        return repr(items)
    return repr(items[:limit])[:-1] + f", ... ({len(items) - limit} more)]"


class CheckResult(BaseModel):
    check: str
    ok: bool
    detail: str

    @field_validator("detail")
    @classmethod
    def _capped(cls, v: str) -> str:
        return cap_detail(v)


class Verdict(BaseModel):
    passed: bool
    checks: list[CheckResult]

    @classmethod
    def failed(cls, check: str, detail: str) -> "Verdict":
        return cls(passed=False, checks=[CheckResult(check=check, ok=False, detail=detail)])


# ---------------------------------------------------------------- helpers


def _show(data: bytes, start: int = 0) -> str:
    """A short, unambiguous rendering of bytes from ``start`` (repr of the text)."""
    piece = data[start:start + SHOW]
    text = repr(piece.decode("utf-8", errors="backslashreplace"))
    return text + ("..." if len(data) > start + SHOW else "")


def diff_bytes(expected: bytes, found: bytes) -> str:
    """'expected N bytes X, found M bytes Y; first difference at byte K'."""
    k = next((i for i, (a, b) in enumerate(zip(expected, found)) if a != b), min(len(expected), len(found)))
    ctx = max(0, k - 10)
    return (
        f"expected {len(expected)} bytes, found {len(found)}; first difference at byte {k}: "
        f"expected {_show(expected, ctx)}, found {_show(found, ctx)}"
    )


def _read(root: Path, rel: str) -> bytes:
    """At most MAX_READ bytes of the regular file ``root/rel``, never through a link (see safefs)."""
    return read_under(root, rel, MAX_READ)


# ---------------------------------------------------------------- checks


def _file_bytes(c: FileBytes, root: Path, task: Task) -> tuple[bool, str]:
    expected = c.text.encode()
    try:
        found = _read(root, c.path)
    except FileNotFoundError:
        return False, f"{c.path}: missing (expected {len(expected)} bytes)"
    if found == expected:
        return True, f"{c.path}: {len(expected)} bytes as expected"
    return False, f"{c.path}: {diff_bytes(expected, found)}"


def _file_absent(c: FileAbsent, root: Path, task: Task) -> tuple[bool, str]:
    try:
        lstat_under(root, c.path)
    except FileNotFoundError:
        return True, f"{c.path}: absent as expected"
    else:
        return False, f"{c.path}: exists, expected absent"


def _dir_listing(c: DirListing, root: Path, task: Task) -> tuple[bool, str]:
    try:
        found = sorted(list_under(root, c.path, MAX_LIST))
    except FileNotFoundError:
        return False, f"{c.path}: directory missing"
    expected = sorted(c.names)
    if found == expected:
        return True, f"{c.path}: {len(found)} entries as expected"
    want, have = set(expected), set(found)
    missing = [n for n in expected if n not in have]
    extra = [n for n in found if n not in want]
    return False, f"{c.path}: entries differ; missing {names(missing)}, unexpected {names(extra)}"


def _argv(c: Argv, root: Path, task: Task) -> tuple[bool, str]:
    try:
        data = _read(root, c.record)
    except FileNotFoundError:
        return False, "show-args was never run (no record)"
    found = data.split(b"\0")[:-1] if data.endswith(b"\0") else data.split(b"\0")
    if data == b"":
        found = []
    expected = [a.encode() for a in c.args]
    if found == expected:
        return True, f"argv: {len(expected)} argument(s) as expected"
    if len(found) != len(expected):
        return False, (
            f"argv: expected {len(expected)} argument(s) {[a.decode(errors='backslashreplace') for a in expected]!r}, "
            f"found {len(found)} {[a.decode(errors='backslashreplace') for a in found]!r}"
        )
    i = next(i for i, (a, b) in enumerate(zip(expected, found)) if a != b)
    return False, f"argv: argument {i + 1}: {diff_bytes(expected[i], found[i])}"


def _env(c: EnvValue, root: Path, task: Task) -> tuple[bool, str]:
    try:
        data = _read(root, c.record)
    except FileNotFoundError:
        return False, "show-env was never run (no record)"
    prefix = c.name.encode() + b"="
    entries = [e for e in data.split(b"\0") if e.startswith(prefix)]
    if not entries:
        return False, f"{c.name}: not set when show-env ran"
    found = entries[-1][len(prefix):]
    expected = c.value.encode()
    if found == expected:
        return True, f"{c.name}: value as expected ({len(expected)} bytes)"
    return False, f"{c.name}: {diff_bytes(expected, found)}"


def _ran(c: Ran, root: Path, task: Task) -> tuple[bool, str]:
    try:
        data = _read(root, c.record)
    except FileNotFoundError:
        return False, f"{c.program} was never run (no record {c.record})"
    calls = data.count(b"\0")
    if calls == 0:
        return False, f"{c.program} was never run (its record {c.record} holds no call)"
    return True, f"{c.program} ran ({calls} call(s) recorded)"


def _json_path_diff(a: Any, b: Any, path: str = "$") -> str | None:
    """The first JSON path where two documents differ, comparing types as JSON does."""
    if type(a) is not type(b):
        return f"{path}: expected {json.dumps(a)[:SHOW]}, found {json.dumps(b)[:SHOW]}"
    if isinstance(a, dict):
        if set(a) != set(b):
            return f"{path}: keys differ; missing {names(sorted(set(a) - set(b)))}, unexpected {names(sorted(set(b) - set(a)))}"
        for k in a:
            d = _json_path_diff(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: expected {len(a)} items, found {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = _json_path_diff(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    if a != b:
        return f"{path}: expected {json.dumps(a, ensure_ascii=False)[:SHOW]}, found {json.dumps(b, ensure_ascii=False)[:SHOW]}"
    return None


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    doc = dict(pairs)
    if len(doc) != len(pairs):  # linear: a hostile object with 10^5 keys must not cost 10^10 steps
        seen: set[str] = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise ValueError(f"duplicate key {dup!r}")
    return doc


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _json_equal(c: JsonEqual, root: Path, task: Task) -> tuple[bool, str]:
    try:
        data = _read(root, c.path)
    except FileNotFoundError:
        return False, f"{c.path}: missing"
    try:
        found = json.loads(data.decode("utf-8"), object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError) as e:
        return False, f"{c.path}: does not parse as JSON: {str(e).splitlines()[0]}; starts {_show(data)}"
    except RecursionError:
        return False, f"{c.path}: does not parse as JSON: nested too deeply; starts {_show(data)}"
    d = _json_path_diff(c.value, found)
    if d is None:
        return True, f"{c.path}: parsed JSON equals the expected document"
    return False, f"{c.path}: {d}"


def _short(sha: str | None) -> str:
    return sha[:12] if sha else "none"


def _tree_diff(expected: bytes, found: bytes) -> str:
    """'missing [...], unexpected [...], changed [...]' between two `ls-tree -r -z` listings."""
    def entries(listing: bytes) -> dict[str, bytes]:
        out = {}
        for rec in listing.split(b"\0"):
            if b"\t" in rec:
                meta, name = rec.split(b"\t", 1)
                out[name.decode(errors="backslashreplace")] = meta
        return out

    a, b = entries(expected), entries(found)
    missing = sorted(set(a) - set(b))
    extra = sorted(set(b) - set(a))
    changed = sorted(k for k in set(a) & set(b) if a[k] != b[k])
    return f"missing {names(missing, 5)}, unexpected {names(extra, 5)}, changed {names(changed, 5)}"


def _commit_headers(raw: bytes) -> tuple[str | None, list[str]]:
    """(tree, parents) from a raw commit object."""
    tree, parents = None, []
    for line in raw.split(b"\n\n", 1)[0].split(b"\n"):
        if line.startswith(b"tree "):
            tree = line[5:].decode(errors="replace").strip()
        elif line.startswith(b"parent "):
            parents.append(line[7:].decode(errors="replace").strip())
    return tree, parents


def _git(c: GitHistory, root: Path, task: Task) -> tuple[bool, str]:
    if c.path not in (".", ""):
        try:
            st = lstat_under(root, c.path)  # the repository's own path: no link on the way, nor at its end
        except FileNotFoundError:
            return False, f"git: {c.path}: missing"
        if not stat.S_ISDIR(st.st_mode):
            return False, f"git: {c.path}: is {kind_of(st.st_mode)}, not a directory"
    try:
        with snapshot(root / c.path, c.path) as snap:
            return _git_judge(c, snap, task)
    except UnsafeRepo as e:
        return False, f"git: {e}"


def _git_judge(c: GitHistory, snap: Snapshot, task: Task) -> tuple[bool, str]:
    count = snap.git("rev-list", "--count", "HEAD")
    if count.returncode != 0:
        return False, f"git: no commits readable: {count.stderr.decode(errors='replace').strip()[:SHOW]}"
    n = int(count.stdout.strip() or 0)
    if n != c.count:
        return False, f"git: expected {c.count} commits, found {n}"
    raw = snap.out("cat-file", "commit", "HEAD") or b""
    message = raw.split(b"\n\n", 1)[1] if b"\n\n" in raw else b""
    expected = c.message.encode()
    if message != expected:
        return False, f"git: HEAD message: {diff_bytes(expected, message)}"
    branch, head, index_tree = read_facts(snap)
    tree, parents = _commit_headers(raw)
    facts = fixture_facts(task.fixture.git) if c.needs_fixture and task.fixture.git else None
    if facts and c.same_branch and branch != facts.branch:
        where = f"on {branch}" if branch else "detached"
        return False, f"git: HEAD is {where}, expected it on the fixture's branch {facts.branch}"
    if facts and c.on_fixture_head:
        want = [facts.head] if facts.head else []
        if parents != want:
            return False, (f"git: HEAD's parents are {[_short(p) for p in parents]!r}, expected "
                           f"{[_short(p) for p in want]!r} (the fixture's HEAD)")
    for rel, text in c.files.items():
        try:
            shown = snap.git("cat-file", "blob", f"HEAD:{rel}", cap=MAX_READ)
        except TooMuchOutput:
            return False, f"git: HEAD:{rel} is larger than {MAX_READ} bytes; not compared"
        if shown.returncode != 0:
            return False, f"git: HEAD does not contain {rel}"
        if shown.stdout != text.encode():
            return False, f"git: HEAD:{rel}: {diff_bytes(text.encode(), shown.stdout)}"
    if facts and c.exact_tree and tree != facts.index_tree:
        found = snap.out("ls-tree", "-r", "-z", "HEAD") or b""
        return False, f"git: HEAD's tree is not exactly the staged change: {_tree_diff(facts.index_listing, found)}"
    if c.clean_index:
        if index_tree is None:
            return False, "git: the index cannot be read (missing, or has unmerged entries)"
        if index_tree != tree:
            staged = snap.out("diff-tree", "-r", "--name-only", "-z", "HEAD", index_tree) or b""
            staged_names = [x.decode(errors="backslashreplace") for x in staged.split(b"\0") if x]
            return False, f"git: changes still staged: {names(staged_names)}"
    exact = ", tree is exactly the staged change" if facts and c.exact_tree else ""
    on = f" on {branch.removeprefix('refs/heads/')}" if branch else ""
    return True, f"git: {n} commits{on}, HEAD message exact ({len(expected)} bytes){exact}"


def _tree_listing(root: Path, skip: set[str]) -> list[str]:
    """Every path under ``root`` (hidden ones included), never following a symlink; ``skip`` left out.
    Capped at MAX_TREE entries and MAX_DEPTH levels (a 5000-level tree is refused, not walked)."""
    return [e.rel for e in walk(root, max_entries=MAX_TREE, max_depth=MAX_DEPTH, skip=skip,
                                what="the working directory") if e.rel not in skip]


def _expected_tree(task: Task, new_paths: list[str]) -> tuple[set[str], set[str]]:
    """(the paths the tree must hold, the paths not looked into) for ``fixture-unchanged`` with ``new_paths``."""
    expected: set[str] = set()

    def add(path: str) -> None:
        parts = [p for p in path.split("/") if p not in ("", ".")]
        for i in range(1, len(parts) + 1):
            expected.add("/".join(parts[:i]))

    for f in task.fixture.files:
        add(f.path)
    for d in task.fixture.dirs:
        add(d)
    skip: set[str] = set()
    if task.fixture.git is not None:
        g = task.fixture.git.path
        base = "" if os.path.normpath(g) == "." else os.path.normpath(g) + "/"
        add(base)
        for commit in task.fixture.git.commits:
            for rel in commit.files:
                add(base + rel)
        for rel in task.fixture.git.staged:
            add(base + rel)
        skip.add(base + ".git")
    for p in new_paths:
        add(p)
    return expected, skip


def _fixture_unchanged(c: FixtureUnchanged, root: Path, task: Task) -> tuple[bool, str]:
    for f in task.fixture.files:
        if f.path in c.except_paths:
            continue
        try:
            data = _read(root, f.path)
        except FileNotFoundError:
            return False, f"{f.path}: fixture file was removed"
        expected = file_bytes(f)
        if data != expected:
            return False, f"{f.path}: fixture file changed: {diff_bytes(expected, data)}"
        mode = stat.S_IMODE(lstat_under(root, f.path).st_mode)
        if mode != f.mode:
            return False, f"{f.path}: fixture file mode changed from {f.mode:o} to {mode:o}"
    if c.new_paths is None:
        return True, "fixture files unchanged"
    expected, skip = _expected_tree(task, c.new_paths)
    found = set(_tree_listing(root, skip))
    if found != expected:
        return False, (f"the tree holds other paths than the fixture's and {c.new_paths!r}: "
                       f"missing {names(sorted(expected - found), 5)}, unexpected {names(sorted(found - expected), 5)}")
    return True, f"fixture files unchanged; the tree holds exactly the fixture's paths and {c.new_paths!r}"


_CHECKERS = {
    "file-bytes": _file_bytes, "file-absent": _file_absent, "dir-listing": _dir_listing,
    "argv": _argv, "env": _env, "ran": _ran, "json-equal": _json_equal, "git": _git,
    "fixture-unchanged": _fixture_unchanged,
}


def check_name(c: Check) -> str:
    target = getattr(c, "path", None) or getattr(c, "name", None) or (c.record if isinstance(c, Ran) else "")
    return f"{c.kind}:{target}" if target and target != "." else c.kind


def _workdir_problem(workdir: Path) -> str | None:
    """Why ``workdir`` cannot be judged: it must still be the real directory the sandbox made."""
    try:
        st = os.lstat(workdir)
    except FileNotFoundError:
        return "the working directory was removed"
    if stat.S_ISLNK(st.st_mode):
        return "the working directory was replaced by a symlink; nothing behind it is inspected"
    if not stat.S_ISDIR(st.st_mode):
        return "the working directory was replaced by a non-directory"
    return None


def validate(task: Task, workdir: Path) -> Verdict:
    """Judge the final state of ``workdir`` against every check of ``task``."""
    problem = _workdir_problem(workdir)
    if problem is not None:
        return Verdict(passed=False, checks=[CheckResult(check=check_name(c), ok=False, detail=problem)
                                             for c in task.checks])
    results = []
    for c in task.checks:
        try:
            ok, detail = _CHECKERS[c.kind](c, workdir, task)  # type: ignore[operator]
        except (UnsafeRead, UnsafeRepo) as e:
            ok, detail = False, str(e)
        except RecursionError:
            ok, detail = False, "could not inspect the state: nested too deeply"
        except (OSError, subprocess.SubprocessError, ValueError) as e:
            ok, detail = False, f"could not inspect the state: {type(e).__name__}: {e}"
        results.append(CheckResult(check=check_name(c), ok=ok, detail=detail))
    return Verdict(passed=all(r.ok for r in results), checks=results)
