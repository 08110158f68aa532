"""The final-state validator: judges a working directory, never an exit code.

Every check compares exact bytes or parsed structure and explains a failure in
one line: what was expected, what was found, and where they first differ. The
validator runs on the host against a directory written by hostile commands, so
it refuses to follow symlinks out of the working directory and reads capped
amounts.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .fixture import file_bytes, git_env
from .schema import (
    Argv, Check, DirListing, EnvValue, FileAbsent, FileBytes, FixtureUnchanged, GitHistory,
    JsonEqual, Task,
)

MAX_READ = 1 << 20
SHOW = 60


class CheckResult(BaseModel):
    check: str
    ok: bool
    detail: str


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


class _Unsafe(Exception):
    pass


def _inside(root: Path, rel: str) -> Path:
    """The path of ``rel`` under ``root``, refusing anything that escapes it or is a symlink."""
    p = root / rel
    real_root = os.path.realpath(root)
    real_parent = os.path.realpath(p.parent)
    if os.path.commonpath([real_root, real_parent]) != real_root:
        raise _Unsafe(f"{rel}: its directory leads outside the working directory")
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        raise
    if stat.S_ISLNK(st.st_mode):
        raise _Unsafe(f"{rel}: is a symlink, not a file")
    return p


def _read(root: Path, rel: str) -> bytes:
    p = _inside(root, rel)
    if not p.is_file():
        raise _Unsafe(f"{rel}: is not a regular file")
    with open(p, "rb") as fh:
        return fh.read(MAX_READ)


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
    if os.path.lexists(root / c.path):
        return False, f"{c.path}: exists, expected absent"
    return True, f"{c.path}: absent as expected"


def _dir_listing(c: DirListing, root: Path, task: Task) -> tuple[bool, str]:
    try:
        p = _inside(root, c.path) if c.path != "." else root
        found = sorted(os.listdir(p))
    except FileNotFoundError:
        return False, f"{c.path}: directory missing"
    expected = sorted(c.names)
    if found == expected:
        return True, f"{c.path}: {len(found)} entries as expected"
    missing = [n for n in expected if n not in found]
    extra = [n for n in found if n not in expected]
    return False, f"{c.path}: entries differ; missing {missing!r}, unexpected {extra!r}"


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


def _json_path_diff(a: Any, b: Any, path: str = "$") -> str | None:
    """The first JSON path where two documents differ, comparing types as JSON does."""
    if type(a) is not type(b):
        return f"{path}: expected {json.dumps(a)[:SHOW]}, found {json.dumps(b)[:SHOW]}"
    if isinstance(a, dict):
        if set(a) != set(b):
            return f"{path}: keys differ; missing {sorted(set(a) - set(b))!r}, unexpected {sorted(set(b) - set(a))!r}"
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
    keys = [k for k, _ in pairs]
    dup = next((k for k in keys if keys.count(k) > 1), None)
    if dup is not None:
        raise ValueError(f"duplicate key {dup!r}")
    return dict(pairs)


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
    d = _json_path_diff(c.value, found)
    if d is None:
        return True, f"{c.path}: parsed JSON equals the expected document"
    return False, f"{c.path}: {d}"


def _git_out(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    with tempfile.TemporaryDirectory(prefix="qb-git-home-") as home:
        return subprocess.run(
            ["git", "-c", "safe.directory=*", *args], cwd=root, env=git_env(home),
            capture_output=True, timeout=30,
        )


def _git(c: GitHistory, root: Path, task: Task) -> tuple[bool, str]:
    repo = root / c.path
    if not (repo / ".git").is_dir():
        return False, f"{c.path}: not a git repository any more"
    count = _git_out(repo, "rev-list", "--count", "HEAD")
    if count.returncode != 0:
        return False, f"git: no commits readable: {count.stderr.decode(errors='replace').strip()[:SHOW]}"
    n = int(count.stdout.strip() or 0)
    if n != c.count:
        return False, f"git: expected {c.count} commits, found {n}"
    raw = _git_out(repo, "cat-file", "commit", "HEAD").stdout
    message = raw.split(b"\n\n", 1)[1] if b"\n\n" in raw else b""
    expected = c.message.encode()
    if message != expected:
        return False, f"git: HEAD message: {diff_bytes(expected, message)}"
    for rel, text in c.files.items():
        shown = _git_out(repo, "cat-file", "blob", f"HEAD:{rel}")
        if shown.returncode != 0:
            return False, f"git: HEAD does not contain {rel}"
        if shown.stdout != text.encode():
            return False, f"git: HEAD:{rel}: {diff_bytes(text.encode(), shown.stdout)}"
    if c.clean_index:
        staged = _git_out(repo, "diff", "--cached", "--name-only")
        if staged.stdout.strip():
            return False, f"git: changes still staged: {staged.stdout.decode(errors='replace').split()!r}"
    return True, f"git: {n} commits, HEAD message exact ({len(expected)} bytes)"


def _fixture_unchanged(c: FixtureUnchanged, root: Path, task: Task) -> tuple[bool, str]:
    for f in task.fixture.files:
        if f.path in c.except_paths:
            continue
        try:
            p = _inside(root, f.path)
            data = _read(root, f.path)
        except FileNotFoundError:
            return False, f"{f.path}: fixture file was removed"
        expected = file_bytes(f)
        if data != expected:
            return False, f"{f.path}: fixture file changed: {diff_bytes(expected, data)}"
        mode = stat.S_IMODE(os.lstat(p).st_mode)
        if mode != f.mode:
            return False, f"{f.path}: fixture file mode changed from {f.mode:o} to {mode:o}"
    return True, "fixture files unchanged"


_CHECKERS = {
    "file-bytes": _file_bytes, "file-absent": _file_absent, "dir-listing": _dir_listing,
    "argv": _argv, "env": _env, "json-equal": _json_equal, "git": _git,
    "fixture-unchanged": _fixture_unchanged,
}


def check_name(c: Check) -> str:
    target = getattr(c, "path", None) or getattr(c, "name", None) or ""
    return f"{c.kind}:{target}" if target and target != "." else c.kind


def validate(task: Task, workdir: Path) -> Verdict:
    """Judge the final state of ``workdir`` against every check of ``task``."""
    results = []
    for c in task.checks:
        try:
            ok, detail = _CHECKERS[c.kind](c, workdir, task)  # type: ignore[operator]
        except _Unsafe as e:
            ok, detail = False, str(e)
        except (OSError, subprocess.SubprocessError) as e:
            ok, detail = False, f"could not inspect the state: {e}"
        results.append(CheckResult(check=check_name(c), ok=ok, detail=detail))
    return Verdict(passed=all(r.ok for r in results), checks=results)
