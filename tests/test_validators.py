"""Each validator kind on a right state and on near-miss states; verdicts never read an exit code."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tasks.fixture import git_env, materialize
from tasks.schema import Task
from tasks.validate import diff_bytes, validate


def make_task(checks: list[dict], fixture: dict | None = None) -> Task:
    return Task.model_validate(dict(
        id="t/control", family="t", tier="control", operation="op", instruction="do it", payload={},
        fixture=fixture or {}, checks=checks, solution="true", solution_disclosed="true",
    ))


def verdict(task: Task, root: Path):
    v = validate(task, root)
    return v.passed, [c.detail for c in v.checks]


def test_file_bytes_exact_and_near_misses(tmp_path: Path) -> None:
    task = make_task([{"kind": "file-bytes", "path": "out.txt", "text": 'say "hi"\n'}])
    f = tmp_path / "out.txt"
    assert verdict(task, tmp_path) == (False, ["out.txt: missing (expected 9 bytes)"])
    f.write_bytes(b'say "hi"\n')
    assert verdict(task, tmp_path)[0]
    for wrong in (b'say "hi"\nx', b'say "hi"', b'say "hi"\n\n', b"say hi\n", b'say "hi" \n'):
        f.write_bytes(wrong)
        ok, details = verdict(task, tmp_path)
        assert not ok and "first difference at byte" in details[0], wrong


def test_diff_detail_names_the_first_differing_byte() -> None:
    assert diff_bytes(b"abc", b"abd").startswith("expected 3 bytes, found 3; first difference at byte 2")
    assert "first difference at byte 3" in diff_bytes(b"abc", b"abc\n")


def test_symlink_out_of_the_workdir_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("host data")
    root = tmp_path / "work"
    root.mkdir()
    (root / "out.txt").symlink_to(secret)
    task = make_task([{"kind": "file-bytes", "path": "out.txt", "text": "host data"}])
    ok, details = verdict(task, root)
    assert not ok and "symlink" in details[0] and "host data" not in details[0]


def test_file_absent(tmp_path: Path) -> None:
    task = make_task([{"kind": "file-absent", "path": "-rf"}])
    assert verdict(task, tmp_path)[0]
    (tmp_path / "-rf").write_text("")
    assert not verdict(task, tmp_path)[0]


def test_dir_listing(tmp_path: Path) -> None:
    task = make_task([{"kind": "dir-listing", "path": ".", "names": ["a b.txt", "Bob's.txt"]}])
    (tmp_path / "a b.txt").write_text("")
    (tmp_path / "Bob's.txt").write_text("")
    assert verdict(task, tmp_path)[0]
    (tmp_path / ".hidden").write_text("")
    ok, details = verdict(task, tmp_path)
    assert not ok and "'.hidden'" in details[0]
    (tmp_path / ".hidden").unlink()
    (tmp_path / "Bob's.txt").rename(tmp_path / "Bobs.txt")
    assert not verdict(task, tmp_path)[0]


def test_argv_record(tmp_path: Path) -> None:
    task = make_task([{"kind": "argv", "args": ["-n", "", "a b", "$x"]}])
    rec = tmp_path / ".qb-args"
    assert verdict(task, tmp_path) == (False, ["show-args was never run (no record)"])
    rec.write_bytes(b"-n\0\0a b\0$x\0")
    assert verdict(task, tmp_path)[0]
    for wrong in (b"-n\0a b\0$x\0", b"-n\0\0a b\0$x\0extra\0", b"-n\0\0a\0b\0$x\0", b"-n\0\0a b\0\0"):
        rec.write_bytes(wrong)
        assert not verdict(task, tmp_path)[0], wrong
    empty = make_task([{"kind": "argv", "args": []}])
    rec.write_bytes(b"")
    assert verdict(empty, tmp_path)[0]


def test_env_record(tmp_path: Path) -> None:
    task = make_task([{"kind": "env", "name": "DB_PASSWORD", "value": "p@ss $1\n"}])
    rec = tmp_path / ".qb-env"
    rec.write_bytes(b"PWD=/x\0DB_PASSWORD=p@ss $1\n\0SHLVL=1\0")
    assert verdict(task, tmp_path)[0]
    rec.write_bytes(b"PWD=/x\0DB_PASSWORD=p@ss \n\0")
    assert not verdict(task, tmp_path)[0]
    rec.write_bytes(b"PWD=/x\0")
    assert verdict(task, tmp_path) == (False, ["DB_PASSWORD: not set when show-env ran"])


def test_show_tools_record_what_they_get(tmp_path: Path) -> None:
    task = make_task([{"kind": "argv", "args": ["a\nb", "*"]}, {"kind": "env", "name": "V", "value": "x y"}],
                     fixture={"files": [{"path": "show-args", "source": "show-args", "mode": 0o755},
                                        {"path": "show-env", "source": "show-env", "mode": 0o755}]})
    materialize(task.fixture, tmp_path)
    subprocess.run(["./show-args", "a\nb", "*"], cwd=tmp_path, check=True)
    subprocess.run(["./show-env"], cwd=tmp_path, check=True, env={"V": "x y", "PATH": "/usr/bin:/bin"})
    assert verdict(task, tmp_path)[0]


def test_json_equal_compares_parsed_structure_and_types(tmp_path: Path) -> None:
    doc = {"name": 'A "b"', "n": 1, "ok": True, "tags": ["x", "$y"], "sub": {"z": None}}
    task = make_task([{"kind": "json-equal", "path": "c.json", "value": doc}])
    f = tmp_path / "c.json"
    f.write_text(json.dumps(doc, indent=4, sort_keys=True))
    assert verdict(task, tmp_path)[0]
    for wrong in ({**doc, "n": 1.0}, {**doc, "ok": 1}, {**doc, "n": "1"}, {**doc, "extra": 0},
                  {**doc, "tags": ["x"]}, {**doc, "name": "A b"}):
        f.write_text(json.dumps(wrong))
        assert not verdict(task, tmp_path)[0], wrong
    f.write_text('{"name": "a", "name": "b"}')
    assert "duplicate key" in verdict(task, tmp_path)[1][0]
    f.write_text("{not json")
    assert "does not parse as JSON" in verdict(task, tmp_path)[1][0]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, env=git_env(repo.parent), check=True, capture_output=True)


def test_git_history(tmp_path: Path) -> None:
    fixture = {"git": {"commits": [{"message": "init\n", "files": {"a.txt": "a\n"}}], "staged": {"b.txt": "b\n"}}}
    task = make_task([{"kind": "git", "count": 2, "message": "Fix \"quotes\"\n\nBody $HOME\n"}], fixture)
    repo = tmp_path / "repo"
    repo.mkdir()
    materialize(task.fixture, repo)
    ok, details = verdict(task, repo)
    assert not ok and "expected 2 commits, found 1" in details[0]
    msg = tmp_path / "msg"
    msg.write_text('Fix "quotes"\n\nBody $HOME\n')
    _git(repo, "commit", "-q", "-F", str(msg))
    assert verdict(task, repo)[0]
    _git(repo, "commit", "-q", "--amend", "-m", "Fix quotes\n\nBody $HOME")
    assert not verdict(task, repo)[0]


def test_git_fixture_hashes_are_reproducible(tmp_path: Path) -> None:
    fixture = {"git": {"commits": [{"message": "init\n", "files": {"a.txt": "a\n"}}]}}
    task = make_task([{"kind": "git", "count": 1, "message": "init\n"}], fixture)
    heads = []
    for name in ("one", "two"):
        d = tmp_path / name
        d.mkdir()
        materialize(task.fixture, d)
        heads.append((d / ".git" / "refs" / "heads" / "main").read_text())
    assert heads[0] == heads[1]
    assert heads[0].strip() == subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=tmp_path / "one", env=git_env(tmp_path), capture_output=True, text=True
    ).stdout.strip()


def test_fixture_unchanged(tmp_path: Path) -> None:
    fixture = {"files": [{"path": "keep.txt", "text": "keep\n"}, {"path": "tool", "text": "#!/bin/sh\n", "mode": 0o755}]}
    task = make_task([{"kind": "fixture-unchanged"}], fixture)
    materialize(task.fixture, tmp_path)
    assert verdict(task, tmp_path)[0]
    os.chmod(tmp_path / "tool", 0o644)
    assert "mode changed" in verdict(task, tmp_path)[1][0]
    os.chmod(tmp_path / "tool", 0o755)
    (tmp_path / "keep.txt").write_text("keep\n ")
    assert not verdict(task, tmp_path)[0]
    (tmp_path / "keep.txt").unlink()
    assert "removed" in verdict(task, tmp_path)[1][0]


def test_verdict_has_one_line_per_check(tmp_path: Path) -> None:
    task = make_task([{"kind": "file-absent", "path": "x"}, {"kind": "file-bytes", "path": "y", "text": "1"}])
    v = validate(task, tmp_path)
    assert [c.ok for c in v.checks] == [True, False]
    assert all("\n" not in c.detail for c in v.checks)


def _commit_message(repo: Path, message: str, *extra: str) -> None:
    (repo.parent / "msg").write_text(message)
    _git(repo, "commit", "-q", "--cleanup=verbatim", "-F", str(repo.parent / "msg"), *extra)


def test_git_commit_must_be_exactly_the_staged_change_on_the_fixture_branch(tmp_path: Path) -> None:
    """Right message and count are not enough: same branch, parent = the fixture's HEAD, tree = the staged index."""
    fixture = {"git": {"commits": [{"message": "init\n", "files": {"README.md": "# r\n", "a.sh": "v1\n"}},
                                   {"message": "two\n", "files": {"a.sh": "v1b\n"}}],
                       "staged": {"a.sh": "v2\n"}}}
    task = make_task([{"kind": "git", "count": 3, "message": "Fix\n", "files": {"a.sh": "v2\n"}}], fixture)

    def state(name: str, prepare) -> tuple[bool, list[str]]:
        repo = tmp_path / name
        repo.mkdir()
        materialize(task.fixture, repo)
        prepare(repo)
        return verdict(task, repo)

    assert state("right", lambda r: _commit_message(r, "Fix\n")) == (
        True, ["git: 3 commits on main, HEAD message exact (4 bytes), tree is exactly the staged change"])

    def deleted(r: Path) -> None:
        _git(r, "rm", "-q", "README.md")
        _commit_message(r, "Fix\n")

    def extra_file(r: Path) -> None:
        (r / "notes.txt").write_text("x\n")
        _git(r, "add", "-A")
        _commit_message(r, "Fix\n")

    def new_branch(r: Path) -> None:
        _git(r, "checkout", "-q", "-b", "feature")
        _commit_message(r, "Fix\n")

    def merge(r: Path) -> None:  # same count, but an extra parent
        _commit_message(r, "Fix\n")
        tree = subprocess.run(["git", "rev-parse", "HEAD^{tree}"], cwd=r, capture_output=True, text=True).stdout.strip()
        new = subprocess.run(["git", "commit-tree", tree, "-p", "HEAD^", "-p", "HEAD^^"], cwd=r, env=git_env(tmp_path),
                             input="Fix\n", capture_output=True, text=True, check=True).stdout.strip()
        _git(r, "update-ref", "HEAD", new)

    ok, details = state("deleted", deleted)
    assert not ok and "not exactly the staged change: missing ['README.md']" in details[0]
    ok, details = state("extra", extra_file)
    assert not ok and "unexpected ['notes.txt']" in details[0]
    ok, details = state("branch", new_branch)
    assert not ok and "HEAD is on refs/heads/feature, expected it on the fixture's branch refs/heads/main" in details[0]
    ok, details = state("merge", merge)
    assert not ok and "HEAD's parents are" in details[0] and "(the fixture's HEAD)" in details[0]
    ok, details = state("detached", lambda r: (_git(r, "checkout", "-q", "--detach"), _commit_message(r, "Fix\n")))
    assert not ok and "HEAD is detached" in details[0]


def test_git_exactness_can_be_switched_off(tmp_path: Path) -> None:
    fixture = {"git": {"commits": [{"message": "init\n", "files": {"a.txt": "a\n"}}], "staged": {"b.txt": "b\n"}}}
    loose = make_task([{"kind": "git", "count": 2, "message": "m\n", "same_branch": False, "on_fixture_head": False,
                        "exact_tree": False}], fixture)
    repo = tmp_path / "repo"
    repo.mkdir()
    materialize(loose.fixture, repo)
    (repo / "c.txt").write_text("c\n")
    _git(repo, "checkout", "-q", "-b", "other")
    _git(repo, "add", "-A")
    _commit_message(repo, "m\n")
    assert verdict(loose, repo)[0]


def test_ran_record(tmp_path: Path) -> None:
    task = make_task([{"kind": "ran", "record": ".qb-remote", "program": "./remote"}])
    assert verdict(task, tmp_path) == (False, ["./remote was never run (no record .qb-remote)"])
    (tmp_path / ".qb-remote").write_bytes(b"")
    assert verdict(task, tmp_path) == (False, ["./remote was never run (its record .qb-remote holds no call)"])
    (tmp_path / ".qb-remote").write_bytes(b"echo hi > x\0true\0")
    assert verdict(task, tmp_path) == (True, ["./remote ran (2 call(s) recorded)"])
    assert validate(task, tmp_path).checks[0].check == "ran:.qb-remote"


def test_wrappers_record_their_calls_and_remote_home_is_the_remote_directory(tmp_path: Path) -> None:
    fixture = {"files": [{"path": "remote", "source": "remote", "mode": 0o755},
                         {"path": "cexec", "source": "cexec", "mode": 0o755}],
               "dirs": ["remote-host", "container"]}
    task = make_task([{"kind": "ran", "record": ".qb-remote"}, {"kind": "ran", "record": ".qb-cexec"},
                      {"kind": "file-bytes", "path": "remote-host/status.txt", "text": "up\n"},
                      {"kind": "file-bytes", "path": "container/env.txt", "text": "prod-eu-7\n"}], fixture)
    materialize(task.fixture, tmp_path)
    assert not verdict(task, tmp_path)[0]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "local-home")}
    subprocess.run(["./remote", "echo", "up", ">", "~/status.txt"], cwd=tmp_path, env=env, check=True)
    subprocess.run(["./cexec", 'echo "$APP_ENV" > env.txt'], cwd=tmp_path, env=env, check=True)
    assert subprocess.run(["./cexec", "a", "b"], cwd=tmp_path, env=env, capture_output=True).returncode == 2
    assert verdict(task, tmp_path)[0]
    assert (tmp_path / ".qb-remote").read_bytes() == b"echo up > ~/status.txt\0"
    assert (tmp_path / ".qb-cexec").read_bytes() == b'echo "$APP_ENV" > env.txt\0'  # the refused call ran nothing


def test_fixture_unchanged_with_new_paths_sees_the_whole_tree(tmp_path: Path) -> None:
    fixture = {"files": [{"path": "a.log", "text": ""}, {"path": "logs/old/b.log", "text": ""}], "dirs": ["empty"]}
    task = make_task([{"kind": "fixture-unchanged", "new_paths": ["found.txt"]}], fixture)
    plain = make_task([{"kind": "fixture-unchanged"}], fixture)
    materialize(task.fixture, tmp_path)
    ok, details = verdict(task, tmp_path)
    assert not ok and "missing ['found.txt']" in details[0]
    (tmp_path / "found.txt").write_text("./a.log\n")
    assert verdict(task, tmp_path)[0]
    for stray, is_dir in (("logs/old/.hidden", False), ("empty/x", False), ("logs/new", True)):
        p = tmp_path / stray
        if is_dir:
            p.mkdir()
        else:
            p.write_text("")
        ok, details = verdict(task, tmp_path)
        assert not ok and f"unexpected [{stray!r}]" in details[0], stray
        assert verdict(plain, tmp_path)[0]  # without new_paths only the fixture files are compared
        if is_dir:
            p.rmdir()
        else:
            p.unlink()
    (tmp_path / "empty").rmdir()
    assert "missing ['empty']" in verdict(task, tmp_path)[1][0]


def test_fixture_unchanged_new_paths_skips_only_the_fixture_repository(tmp_path: Path) -> None:
    fixture = {"git": {"commits": [{"message": "init\n", "files": {"a.txt": "a\n", "src/b.txt": "b\n"}}]}}
    task = make_task([{"kind": "fixture-unchanged", "new_paths": []}], fixture)
    materialize(task.fixture, tmp_path)
    assert verdict(task, tmp_path)[0]
    (tmp_path / "src" / ".git").mkdir()  # a second repository is a stray path like any other
    assert "unexpected ['src/.git']" in verdict(task, tmp_path)[1][0]


def test_git_changes_left_staged_after_the_right_commit_fail(tmp_path: Path) -> None:
    """The right commit is not enough: the index must be exactly HEAD's tree afterwards (a new file staged,
    or a tracked file's change staged, and left uncommitted, fails and is named)."""
    fixture = {"git": {"commits": [{"message": "init\n", "files": {"README.md": "# r\n", "a.sh": "v1\n"}}],
                       "staged": {"a.sh": "v2\n"}}}
    task = make_task([{"kind": "git", "count": 2, "message": "Fix\n", "files": {"a.sh": "v2\n"}}], fixture)

    def state(name: str, after) -> tuple[bool, list[str]]:
        repo = tmp_path / name
        repo.mkdir()
        materialize(task.fixture, repo)
        _commit_message(repo, "Fix\n")
        after(repo)
        return verdict(task, repo)

    def new_file(r: Path) -> None:
        (r / "notes.txt").write_text("x\n")
        _git(r, "add", "notes.txt")

    def tracked_change(r: Path) -> None:
        (r / "README.md").write_text("# r2\n")
        _git(r, "add", "README.md")

    def unstaged_only(r: Path) -> None:  # the working tree may differ; only the index counts
        (r / "README.md").write_text("# r2\n")
        (r / "untracked.txt").write_text("u\n")

    assert state("right", lambda r: None) == (
        True, ["git: 2 commits on main, HEAD message exact (4 bytes), tree is exactly the staged change"])
    assert state("new", new_file) == (False, ["git: changes still staged: ['notes.txt']"])
    assert state("tracked", tracked_change) == (False, ["git: changes still staged: ['README.md']"])
    assert state("unstaged", unstaged_only)[0] is True


def test_git_commit_control_with_another_file_staged_fails_and_is_a_near_miss() -> None:
    """The suite's own task: its reference solution followed by `git add <another file>` must FAIL, and
    `tasks check` holds that state as a near miss the validator rejects."""
    import anyio

    from qb_client.ops.suite_check import check_task
    from tasks.load import get_task
    from tasks.nearmiss import near_misses
    from transports.execute import execute

    task = get_task("git-commit/control")
    solved = anyio.run(lambda: execute(task, "raw", task.solution))
    assert solved.verdict.passed, solved.verdict
    staged = anyio.run(lambda: execute(task, "raw", task.solution + "\necho x > other.txt && git add other.txt"))
    assert not staged.verdict.passed and staged.exit_code == 0
    assert [c.detail for c in staged.verdict.checks] == ["git: changes still staged: ['other.txt']"]
    assert "git: another file staged after the commit" in [d for d, _ in near_misses(task)]
    checked = anyio.run(check_task, task)
    assert checked.ok and checked.near_misses == checked.near_misses_rejected == 9
