"""The validator runs on the host against a directory a hostile command wrote: nothing it reads may
make it run that command's programs, follow its symlinks out of the sandbox, or crash."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any, Callable

from tasks.fixture import git_env, materialize
from tasks.safefs import remove_tree
from tasks.schema import Task
from tasks.validate import MAX_DETAIL, CheckResult, Verdict, validate

from bounded import bounded as _bounded

MESSAGE = "Add retry\n\nRetry 3 times.\n"


def make_task(checks: list[dict], fixture: dict | None = None) -> Task:
    return Task.model_validate(dict(
        id="t/control", family="t", tier="control", operation="op", instruction="do it", payload={},
        fixture=fixture or {}, checks=checks, solution="true", solution_disclosed="true",
    ))


def git_task() -> Task:
    fixture = {"git": {"commits": [{"message": "init\n", "files": {"README.md": "# r\n", "a.sh": "v1\n"}}],
                       "staged": {"a.sh": "v2\n"}}}
    return make_task([{"kind": "git", "count": 2, "message": MESSAGE, "files": {"a.sh": "v2\n"}}], fixture)


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, env=git_env(repo.parent), check=True, capture_output=True)


def committed_repo(tmp_path: Path, task: Task) -> Path:
    """The fixture with the staged change committed correctly, as a solution would leave it."""
    repo = tmp_path / "work"
    repo.mkdir()
    materialize(task.fixture, repo)
    (tmp_path / "msg").write_text(MESSAGE)
    _git(repo, "commit", "-q", "--cleanup=verbatim", "-F", str(tmp_path / "msg"))
    return repo


def test_repo_config_written_by_the_command_never_runs_on_the_host(tmp_path: Path) -> None:
    """core.fsmonitor (and hooks, aliases, external diff) in the command's repository are never run:
    the validator reads a private copy of the history with a config of its own."""
    task = git_task()
    repo = committed_repo(tmp_path, task)
    marker = tmp_path / "PWNED"
    payload = f"id > {marker}"
    for key, value in (("core.fsmonitor", payload), ("core.hooksPath", str(tmp_path / "hooks")),
                       ("diff.external", payload), ("core.pager", payload), ("alias.diff", f"!{payload}")):
        _git(repo, "config", key, value)
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    for name in ("post-index-change", "reference-transaction", "post-checkout"):
        (hooks / name).write_text(f"#!/bin/sh\n{payload}\n")
        (hooks / name).chmod(0o755)
    v = validate(task, repo)
    assert not marker.exists(), "the validator ran a program configured by the command"
    assert v.passed, [c.detail for c in v.checks]
    assert "2 commits on main" in v.checks[0].detail


def test_fsmonitor_payload_does_not_change_the_verdict_of_a_wrong_state(tmp_path: Path) -> None:
    task = git_task()
    repo = tmp_path / "work"
    repo.mkdir()
    materialize(task.fixture, repo)
    marker = tmp_path / "PWNED"
    _git(repo, "config", "core.fsmonitor", f"id > {marker}")
    v = validate(task, repo)
    assert not marker.exists()
    assert not v.passed and "expected 2 commits, found 1" in v.checks[0].detail


def test_symlinks_and_special_files_in_git_are_refused(tmp_path: Path) -> None:
    task = git_task()
    good = committed_repo(tmp_path, task)
    cases = {}
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / ".git").symlink_to(good / ".git")  # a repository that is not in the working directory
    cases["linked"] = (linked, ".git: is a symlink")
    for name, make, expect in (
        ("config-link", lambda g: (g / "description").symlink_to("/etc/passwd"), ".git/description: is a symlink"),
        ("fifo", lambda g: os.mkfifo(g / "index.lock"), ".git/index.lock: is a FIFO; the repository is not inspected"),
        ("objects-link", lambda g: (g / "objects" / "zz").symlink_to("/"), ".git/objects/zz: is a symlink"),
    ):
        d = tmp_path / name
        d.mkdir()
        materialize(task.fixture, d)
        make(d / ".git")
        cases[name] = (d, expect)
    gitfile = tmp_path / "gitfile"
    gitfile.mkdir()
    (gitfile / ".git").write_text(f"gitdir: {good / '.git'}\n")  # a .git file pointing at a host repository
    cases["gitfile"] = (gitfile, ".git: is not a directory")
    for name, (root, expect) in cases.items():
        v = validate(task, root)
        assert not v.passed, name
        assert expect in v.checks[0].detail, (name, v.checks[0].detail)


def test_alternates_do_not_let_the_validator_read_host_objects(tmp_path: Path) -> None:
    """objects/info/alternates would make git read another repository's objects; it is never copied."""
    host = tmp_path / "host"
    host.mkdir()
    _git(host, "init", "-q", "--template=")
    _git(host, "commit", "-q", "--allow-empty", "-m", "secret host message")
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=host, capture_output=True, text=True).stdout.strip()
    task = git_task()
    repo = tmp_path / "work"
    repo.mkdir()
    materialize(task.fixture, repo)
    info = repo / ".git" / "objects" / "info"
    info.mkdir(exist_ok=True)
    (info / "alternates").write_text(f"{host / '.git' / 'objects'}\n")
    _git(repo, "update-ref", "refs/heads/main", sha)
    v = validate(task, repo)
    assert not v.passed
    assert "secret" not in v.checks[0].detail and "no commits readable" in v.checks[0].detail


def test_a_symlinked_working_directory_is_not_followed(tmp_path: Path) -> None:
    """`cd /sandbox && rm -rf work && ln -s /root work`: no check looks behind the link."""
    host = tmp_path / "host-root"
    host.mkdir()
    (host / ".bashrc").write_text("secret\n")
    (host / "out.txt").write_text("hello\n")
    work = tmp_path / "work"
    work.symlink_to(host)
    task = make_task([{"kind": "dir-listing", "path": ".", "names": [".bashrc", "out.txt"]},
                      {"kind": "file-bytes", "path": "out.txt", "text": "hello\n"},
                      {"kind": "fixture-unchanged", "new_paths": ["out.txt"]}])
    v = validate(task, work)
    assert not v.passed and len(v.checks) == 3
    for c in v.checks:
        assert not c.ok and "replaced by a symlink" in c.detail
        assert ".bashrc" not in c.detail and "secret" not in c.detail
    work.unlink()
    work.write_text("")
    assert all("non-directory" in c.detail for c in validate(task, work).checks)
    work.unlink()
    assert all("removed" in c.detail for c in validate(task, work).checks)


def test_deeply_nested_json_is_not_json_and_does_not_crash(tmp_path: Path) -> None:
    task = make_task([{"kind": "json-equal", "path": "c.json", "value": {"a": 1}}])
    for text in ("[" * 100_000 + "]" * 100_000, '{"a":' * 50_000 + "1" + "}" * 50_000):
        (tmp_path / "c.json").write_text(text)
        v = validate(task, tmp_path)
        assert not v.passed
        assert "does not parse as JSON: nested too deeply" in v.checks[0].detail


def test_many_keys_are_checked_for_duplicates_in_linear_time(tmp_path: Path) -> None:
    """A 0.9 MiB object of 80,000 distinct keys: judged at once, not after n^2 key comparisons (a minute)."""
    keys = {f"k{i}": 0 for i in range(80_000)}
    (tmp_path / "c.json").write_text(json.dumps(keys, separators=(",", ":")))
    task = make_task([{"kind": "json-equal", "path": "c.json", "value": {}}])
    started = time.monotonic()
    detail = validate(task, tmp_path).checks[0].detail
    assert time.monotonic() - started < 5
    assert "keys differ" in detail
    (tmp_path / "c.json").write_text('{"k": 1, "j": 2, "k": 3}')
    assert "duplicate key 'k'" in validate(task, tmp_path).checks[0].detail


# ---------------------------------------------------------------- hostile trees, special files, bombs
# Every attack below is a real state on disk; each must give a failed check with a one-line, capped
# detail in bounded time and memory, never a hang, a crash or host data.

SECRET = "host secret 7f3a\n"


def bounded(fn: Callable[[], Any], seconds: float = 60.0) -> Any:
    return _bounded(fn, seconds)


def deep_tree(base: Path, levels: int, name: str = "d") -> None:
    """``levels`` nested directories in ``base`` (made with dir fds: the path exceeds PATH_MAX)."""
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(levels):
            os.mkdir(name, dir_fd=fd)
            nxt = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nxt
    finally:
        os.close(fd)


def assert_failed_one_line(v: Verdict, *expect: str) -> None:
    assert not v.passed
    for c in v.checks:
        assert "\n" not in c.detail and len(c.detail) <= MAX_DETAIL, c.detail[:300]
        assert "secret" not in c.detail, c.detail
    details = " | ".join(c.detail for c in v.checks if not c.ok)
    for e in expect:
        assert e in details, details


def test_a_5000_level_tree_inside_git_is_a_failed_check_not_a_crash(tmp_path: Path) -> None:
    task = git_task()
    repo = committed_repo(tmp_path, task)
    for levels in (1500, 5000):  # 1500: the recursive copy's RecursionError; 5000: past PATH_MAX as well
        deep_tree(repo / ".git" / "refs", levels, f"d{levels}")
        try:
            v = bounded(lambda: validate(task, repo))
            assert [c.detail for c in v.checks] == ["git: .git is nested deeper than 64 levels; not inspected"]
        finally:
            remove_tree(repo / ".git" / "refs" / f"d{levels}")
    assert validate(task, repo).passed


def test_a_5000_level_tree_in_the_working_directory_is_a_failed_check(tmp_path: Path, request: Any) -> None:
    deep_tree(tmp_path, 5000)
    request.addfinalizer(lambda: remove_tree(tmp_path / "d"))  # pytest's own cleanup recurses
    task = make_task([{"kind": "fixture-unchanged", "new_paths": ["out.txt"]},
                      {"kind": "file-bytes", "path": "d/" * 3000 + "x", "text": "x"},
                      {"kind": "dir-listing", "path": "d/" * 3000, "names": []},
                      {"kind": "file-absent", "path": "d/" * 3000 + "x"}])
    v = bounded(lambda: validate(task, tmp_path))
    assert [c.ok for c in v.checks] == [False, False, False, True]
    assert v.checks[0].detail == "the working directory is nested deeper than 100 levels; not inspected"
    assert v.checks[1].detail.endswith("d/x: missing (expected 1 bytes)")
    assert v.checks[2].detail.endswith("d/: entries differ; missing [], unexpected ['d']")


def _record_tasks() -> dict[str, tuple[Task, str]]:
    """A task per check kind that reads a file, and the file it reads."""
    fixture = {"files": [{"path": "keep.txt", "text": "fixture\n"}]}
    return {
        "file-bytes": (make_task([{"kind": "file-bytes", "path": "out.txt", "text": SECRET}]), "out.txt"),
        "argv": (make_task([{"kind": "argv", "args": ["a"]}]), ".qb-args"),
        "env": (make_task([{"kind": "env", "name": "HOME", "value": "/x"}]), ".qb-env"),
        "ran": (make_task([{"kind": "ran", "program": "remote", "record": ".qb-remote"}]), ".qb-remote"),
        "json-equal": (make_task([{"kind": "json-equal", "path": "c.json", "value": {"a": 1}}]), "c.json"),
        "fixture-unchanged": (make_task([{"kind": "fixture-unchanged"}], fixture), "keep.txt"),
    }


def test_fifo_symlink_and_huge_file_on_every_read_path(tmp_path: Path) -> None:
    """What a command can leave where the validator reads: a FIFO (a naive open blocks forever), a link
    to a host file, a sparse 8 GiB file, a link in the middle of the path. Each read path refuses each."""
    host = tmp_path / "host"
    host.mkdir()
    (host / "secret").write_text(SECRET)
    attacks: dict[str, tuple[Callable[[Path], None], str]] = {
        "fifo": (lambda p: os.mkfifo(p), "is a FIFO, not a regular file"),
        "symlink": (lambda p: p.symlink_to(host / "secret"), "is a symlink, not a regular file"),
        "sparse": (lambda p: (p.write_bytes(b""), os.truncate(p, 8 << 30)), "is larger than 1048576 bytes"),
        "dir": (lambda p: p.mkdir(), "is a directory, not a regular file"),
    }
    for kind, (task, rel) in _record_tasks().items():
        for attack, (make, expect) in attacks.items():
            root = tmp_path / f"{kind}-{attack}"
            root.mkdir()
            make(root / rel)
            started = time.monotonic()
            v = bounded(lambda: validate(task, root), 20)
            assert time.monotonic() - started < 10, (kind, attack)
            assert_failed_one_line(v, f"{rel}: {expect}")
        root = tmp_path / f"{kind}-parent-link"  # a link as a directory on the way: never followed
        (root / "sub").mkdir(parents=True)
        (root / "sub" / "up").symlink_to(host)
        task2 = task.model_copy(update={"checks": [
            c.model_copy(update={f: "sub/up/secret" for f in ("path", "record") if getattr(c, f, None) == rel})
            for c in task.checks]})
        if kind != "fixture-unchanged":
            assert_failed_one_line(validate(task2, root), "sub/up: is a symlink, not a directory")


def test_file_absent_does_not_probe_the_host_through_a_link(tmp_path: Path) -> None:
    host = tmp_path / "host"
    host.mkdir()
    root = tmp_path / "w"
    root.mkdir()
    (root / "a").symlink_to(host)
    task = make_task([{"kind": "file-absent", "path": "a/x"}])
    assert_failed_one_line(validate(task, root), "a: is a symlink, not a directory")


def test_dir_listing_of_20000_files_gives_a_capped_detail(tmp_path: Path) -> None:
    for i in range(20_000):
        (tmp_path / f"file-{i:05d}-{'x' * 40}").touch()
    task = make_task([{"kind": "dir-listing", "path": ".", "names": ["out.txt"]},
                      {"kind": "fixture-unchanged", "new_paths": ["out.txt"]}])
    v = validate(task, tmp_path)
    assert_failed_one_line(v, "(19990 more)", "missing ['out.txt']")
    assert v.checks[1].detail == "the working directory holds more than 10000 entries; not inspected"


def test_every_detail_is_capped_with_an_explicit_marker() -> None:
    long = "y" * (MAX_DETAIL * 3)
    r = CheckResult(check="c", ok=False, detail=long)
    head, _, tail = r.detail.partition(" ... (")
    n, _, tail = tail.partition(" more characters) ... ")
    assert long.startswith(head) and long.endswith(tail) and len(head) > len(tail) > 0
    assert int(n) == len(long) - len(head) - len(tail)
    assert len(r.detail) <= MAX_DETAIL
    assert CheckResult(check="c", ok=True, detail="y" * MAX_DETAIL).detail == "y" * MAX_DETAIL
    assert "(98050 more characters)" in Verdict.failed("harness", "z" * 100_000).checks[0].detail
    assert CheckResult(check="c", ok=False, detail="a\nb\rc").detail == "a\\nb\\rc"


def test_a_non_utf8_branch_name_is_a_failed_check_not_a_crash(tmp_path: Path) -> None:
    """`printf 'ref: refs/heads/\\377\\n' > .git/HEAD`: git accepts the name; the validator must too."""
    task = git_task()
    repo = committed_repo(tmp_path, task)
    subprocess.run([b"git", b"update-ref", b"refs/heads/\xff", b"HEAD"], cwd=repo, env=git_env(tmp_path),
                   check=True, capture_output=True)
    (repo / ".git" / "HEAD").write_bytes(b"ref: refs/heads/\xff\n")
    v = validate(task, repo)
    assert_failed_one_line(v, "git: HEAD is on refs/heads/\\xff, expected it on the fixture's branch refs/heads/main")


def zlib_bomb(kind: bytes, head: bytes, zeros: int, block: int = 1 << 20) -> tuple[str, bytes]:
    """(object id, loose object file) of a git object ``head`` + ``zeros`` NUL bytes, deflated to about
    1/1000th: each all-zero block after a full flush compresses to the same bytes, so it is repeated."""
    assert zeros % block == 0
    header = b"%s %d\0" % (kind, len(head) + zeros)
    c = zlib.compressobj(9)
    prefix = c.compress(header + head) + c.flush(zlib.Z_FULL_FLUSH)
    zero = bytes(block)
    body = c.compress(zero) + c.flush(zlib.Z_FULL_FLUSH)
    adler, sha = zlib.adler32(header + head), hashlib.sha1(header + head)
    for _ in range(zeros // block):
        adler = zlib.adler32(zero, adler)
        sha.update(zero)
    final = b"\x03\x00" + adler.to_bytes(4, "big")  # an empty final fixed-Huffman block, then the checksum
    return sha.hexdigest(), prefix + body * (zeros // block) + final


def plant(repo: Path, oid: str, data: bytes) -> None:
    d = repo / ".git" / "objects" / oid[:2]
    d.mkdir(exist_ok=True)
    (d / oid[2:]).write_bytes(data)


def _out(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, env=git_env(repo.parent), check=True,
                          capture_output=True, text=True).stdout.strip()


VALIDATE_AND_MEASURE = """
import json, resource, sys, time
from pathlib import Path
from tasks.schema import Task
from tasks.validate import validate
task = Task.model_validate_json(sys.stdin.read())
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.monotonic()
v = validate(task, Path(sys.argv[1]))
print(json.dumps({"verdict": v.model_dump(), "seconds": time.monotonic() - started,
                  "self_kib": [before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss],
                  "git_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


def validate_measured(task: Task, repo: Path) -> dict[str, Any]:
    """validate() in a fresh interpreter, with its own peak RSS and its children's (git's)."""
    done = subprocess.run([sys.executable, "-c", VALIDATE_AND_MEASURE, str(repo)], input=task.model_dump_json(),
                          capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[1])
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_a_git_zlib_bomb_is_a_failed_check_with_bounded_memory(tmp_path: Path) -> None:
    """A 1 MiB loose blob that inflates to 1 GiB, committed as the file the check reads (a.sh), and a
    commit object that inflates to 1 GiB: each is a failed check; neither the validator nor git holds it."""
    task = git_task()
    repo = committed_repo(tmp_path, task)
    oid, data = zlib_bomb(b"blob", b"", 1 << 30)
    assert len(data) < 1_100_000
    plant(repo, oid, data)
    _git(repo, "update-index", "--cacheinfo", f"100644,{oid},a.sh")
    tree = _out(repo, "write-tree")
    parent = _out(repo, "rev-parse", "HEAD~1")
    commit = subprocess.run(["git", "commit-tree", tree, "-p", parent], input=MESSAGE, cwd=repo, check=True,
                            env=git_env(tmp_path), capture_output=True, text=True).stdout.strip()
    _git(repo, "update-ref", "refs/heads/main", commit)
    m = validate_measured(task, repo)
    detail = m["verdict"]["checks"][0]["detail"]
    assert not m["verdict"]["passed"]
    assert detail == "git: HEAD:a.sh is larger than 1048576 bytes; not compared", detail
    grew_mib = (m["self_kib"][1] - m["self_kib"][0]) / 1024
    assert grew_mib < 200, m
    assert m["git_kib"] / 1024 < 600, m  # git itself runs under an address-space limit

    # the commit object itself: git must not inflate it into the validator, nor past its own limit
    head = b"tree %s\nparent %s\nauthor a <a> 0 +0000\ncommitter a <a> 0 +0000\n\n" % (tree.encode(), parent.encode())
    oid, data = zlib_bomb(b"commit", head, 1 << 30)
    plant(repo, oid, data)
    _git(repo, "update-ref", "refs/heads/main", oid)
    m = validate_measured(task, repo)
    detail = m["verdict"]["checks"][0]["detail"]
    assert not m["verdict"]["passed"] and detail.startswith("git: "), detail
    assert (m["self_kib"][1] - m["self_kib"][0]) / 1024 < 200, m
    assert m["git_kib"] / 1024 < 600, m


def test_an_exception_in_validation_is_a_recorded_harness_error_not_a_traceback() -> None:
    """A check the validator cannot handle (here: one that bypassed the schema, text=None) raises inside
    validate(); through the real execution path the record is still made, with a one-line harness check."""
    import anyio

    from tasks.schema import FileBytes
    from transports.execute import execute
    from transports.sandbox import Limits

    task = make_task([{"kind": "file-bytes", "path": "out.txt", "text": "x"}])
    broken = task.model_copy(update={"checks": [FileBytes.model_construct(kind="file-bytes", path="out.txt", text=None)]})
    rec = anyio.run(lambda: execute(broken, "raw", "echo hi > out.txt", limits=Limits(timeout_s=5)))
    assert rec.exit_code == 0 and not rec.verdict.passed
    assert [(c.check, c.detail) for c in rec.verdict.checks] == [
        ("harness", "AttributeError: 'NoneType' object has no attribute 'encode'")]


def test_hostile_states_left_by_real_commands_in_the_sandbox() -> None:
    """The same attacks made by a command through the real execution path: each a failed check, in time."""
    import anyio

    from transports.execute import execute
    from transports.sandbox import Limits

    task = make_task([{"kind": "file-bytes", "path": "out.txt", "text": "x"},
                      {"kind": "dir-listing", "path": ".", "names": ["out.txt"]}])
    cases = {
        "mkfifo out.txt": ["out.txt: is a FIFO, not a regular file"],
        "ln -s /etc/passwd out.txt": ["out.txt: is a symlink, not a regular file"],
        "truncate -s 2M out.txt": ["out.txt: is larger than 1048576 bytes (2097152); not read"],
        "touch out.txt; for i in $(seq 20000); do : > f$i; done": [
            "out.txt: expected 1 bytes, found 0", "(19990 more)]"],
    }
    for command, expect in cases.items():
        started = time.monotonic()
        rec = bounded(lambda: anyio.run(lambda: execute(task, "raw", command, limits=Limits(timeout_s=30))), 90)
        assert time.monotonic() - started < 60, command
        assert_failed_one_line(rec.verdict, *expect)
