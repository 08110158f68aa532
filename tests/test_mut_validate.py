"""Tests written from the mutation run of tasks/validate.py and tasks/gitread.py (docs/mutation.md):
each pins an exact verdict and detail that some surviving mutant changed. Real files, real git."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

from tasks.fixture import git_env, materialize
from tasks.schema import Task
from tasks.validate import Verdict, diff_bytes, validate


def make_task(checks: list[dict], fixture: dict | None = None) -> Task:
    return Task.model_validate(dict(
        id="t/control", family="t", tier="control", operation="op", instruction="do it", payload={},
        fixture=fixture or {}, checks=checks, solution="true", solution_disclosed="true",
    ))


def judge(task: Task, root: Path) -> tuple[bool, list[str]]:
    v = validate(task, root)
    return v.passed, [c.detail for c in v.checks]


def run_git(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    return subprocess.run(["git", *args], cwd=repo, env=git_env(repo.parent), input=stdin, check=True,
                          capture_output=True).stdout


def commit(repo: Path, message: str, *extra: str) -> None:
    (repo.parent / "msg").write_text(message)
    run_git(repo, "commit", "-q", "--cleanup=verbatim", "-F", str(repo.parent / "msg"), *extra)


def fresh(tmp_path: Path, name: str, task: Task) -> Path:
    repo = tmp_path / name
    repo.mkdir()
    materialize(task.fixture, repo)
    return repo


# ---------------------------------------------------------------- details, names, check names


def test_diff_bytes_context_and_ellipsis() -> None:
    assert diff_bytes(b"abc", b"xbc") == "expected 3 bytes, found 3; first difference at byte 0: expected 'abc', found 'xbc'"
    exp, found = b"0123456789abcdefghijKLM", b"0123456789abcdefghijKxM"
    assert diff_bytes(exp, found) == (
        "expected 23 bytes, found 23; first difference at byte 21: expected 'bcdefghijKLM', found 'bcdefghijKxM'")
    long = b"x" * 100
    assert diff_bytes(long, long + b"!") == (
        f"expected 100 bytes, found 101; first difference at byte 100: expected {'x' * 10!r}, found {'x' * 10 + '!'!r}")
    assert diff_bytes(b"a" * 61, b"b" * 61) == (
        f"expected 61 bytes, found 61; first difference at byte 0: expected {'a' * 60!r}..., found {'b' * 60!r}...")
    assert diff_bytes(b"a" * 60, b"b" * 60).endswith(f"expected {'a' * 60!r}, found {'b' * 60!r}")
    assert diff_bytes(b"ok\n", b"ok\xff\n") == (
        "expected 3 bytes, found 4; first difference at byte 2: expected 'ok\\n', found 'ok\\\\xff\\n'")


def test_verdict_failed_is_a_failed_check() -> None:
    v = Verdict.failed("harness", "boom")
    assert (v.passed, [(c.check, c.ok, c.detail) for c in v.checks]) == (False, [("harness", False, "boom")])


def test_check_names_and_workdir_problems(tmp_path: Path) -> None:
    task = make_task([{"kind": "file-bytes", "path": "o.txt", "text": "x"}, {"kind": "env", "name": "V", "value": "1"},
                      {"kind": "argv", "args": []}, {"kind": "dir-listing", "names": []},
                      {"kind": "ran", "record": ".qb-r"}, {"kind": "git", "count": 1, "message": "m",
                                                          "same_branch": False, "on_fixture_head": False,
                                                          "exact_tree": False}])
    assert [c.check for c in validate(task, tmp_path).checks] == [
        "file-bytes:o.txt", "env:V", "argv", "dir-listing", "ran:.qb-r", "git"]
    gone = tmp_path / "gone"
    assert judge(task, gone) == (False, ["the working directory was removed"] * 6)
    gone.symlink_to(tmp_path)
    assert judge(task, gone)[1][0] == "the working directory was replaced by a symlink; nothing behind it is inspected"
    gone.unlink()
    gone.write_text("")
    assert judge(task, gone)[1][0] == "the working directory was replaced by a non-directory"


def test_an_os_error_is_a_failed_check_naming_it(tmp_path: Path) -> None:
    task = make_task([{"kind": "file-bytes", "path": "n" * 300, "text": "x"}])
    assert judge(task, tmp_path) == (
        False, [f"could not inspect the state: OSError: [Errno 36] File name too long: {'n' * 300!r}"])


# ---------------------------------------------------------------- records: argv, env, dir-listing


def test_argv_details(tmp_path: Path) -> None:
    task = make_task([{"kind": "argv", "args": ["a", "b c", "d"]}])
    rec = tmp_path / ".qb-args"
    rec.write_bytes(b"a\0b c\0d")  # the last argument's NUL lost: still the same three arguments
    assert judge(task, tmp_path) == (True, ["argv: 3 argument(s) as expected"])
    rec.write_bytes(b"a\0b c\0d\0d")
    assert judge(task, tmp_path) == (
        False, ["argv: expected 3 argument(s) ['a', 'b c', 'd'], found 4 ['a', 'b c', 'd', 'd']"])
    rec.write_bytes(b"a\0b\xff\0")
    assert judge(task, tmp_path) == (False, ["argv: expected 3 argument(s) ['a', 'b c', 'd'], found 2 ['a', 'b\\\\xff']"])
    rec.write_bytes(b"a\0b  c\0d\0")
    assert judge(task, tmp_path) == (
        False, ["argv: argument 2: expected 3 bytes, found 4; first difference at byte 2: expected 'b c', found 'b  c'"])


def test_env_details(tmp_path: Path) -> None:
    task = make_task([{"kind": "env", "name": "V", "value": "x y"}])
    assert judge(task, tmp_path) == (False, ["show-env was never run (no record)"])
    (tmp_path / ".qb-env").write_bytes(b"V=x y\0")
    assert judge(task, tmp_path) == (True, ["V: value as expected (3 bytes)"])


def test_dir_listing_details(tmp_path: Path) -> None:
    ten = [f"n{i}" for i in range(10)]
    task = make_task([{"kind": "dir-listing", "path": "d", "names": ten}])
    assert judge(task, tmp_path) == (False, ["d: directory missing"])
    (tmp_path / "d").mkdir()
    assert judge(task, tmp_path) == (False, [f"d: entries differ; missing {ten!r}, unexpected []"])
    eleven = make_task([{"kind": "dir-listing", "path": "d", "names": [*ten, "n10"]}])
    assert judge(eleven, tmp_path) == (
        False, ["d: entries differ; missing ['n0', 'n1', 'n10', 'n2', 'n3', 'n4', 'n5', 'n6', 'n7', 'n8', ... (1 more)], "
                "unexpected []"])


# ---------------------------------------------------------------- json-equal


def test_json_equal_details(tmp_path: Path) -> None:
    doc = {"sub": {"z": None}, "tags": ["x", "é"], "n": 1}
    task = make_task([{"kind": "json-equal", "path": "c.json", "value": doc}])
    f = tmp_path / "c.json"
    assert judge(task, tmp_path) == (False, ["c.json: missing"])
    cases = [
        ({**doc, "sub": {"z": 0}}, "c.json: $.sub.z: expected null, found 0"),
        ({**doc, "tags": ["x", "e"]}, 'c.json: $.tags[1]: expected "é", found "e"'),
        ({**doc, "tags": ["x", "ü"]}, 'c.json: $.tags[1]: expected "é", found "ü"'),
        ({**doc, "tags": ["x", "é", "y"]}, "c.json: $.tags: expected 2 items, found 3"),
        ([1], 'c.json: $: expected {"sub": {"z": null}, "tags": ["x", "\\u00e9"], "n": 1}, found [1]'),
        ({"n": 1, "a": 2, "b": 3}, "c.json: $: keys differ; missing ['sub', 'tags'], unexpected ['a', 'b']"),
    ]
    for wrong, detail in cases:
        f.write_text(json.dumps(wrong, ensure_ascii=False))
        assert judge(task, tmp_path) == (False, [detail]), wrong
    f.write_text('{"a": 1, "b": 2, "b": 3}')
    assert judge(task, tmp_path) == (False, ["c.json: does not parse as JSON: duplicate key 'b'; starts "
                                             "'{\"a\": 1, \"b\": 2, \"b\": 3}'"])
    nan = make_task([{"kind": "json-equal", "path": "c.json", "value": {"x": 1}}])
    f.write_text('{"x": NaN}')
    assert judge(nan, tmp_path) == (False, ["c.json: does not parse as JSON: NaN is not JSON; starts '{\"x\": NaN}'"])


# ---------------------------------------------------------------- fixture-unchanged


def test_fixture_unchanged_details(tmp_path: Path) -> None:
    fixture = {"files": [{"path": "a.txt", "text": "a\n"}, {"path": "b.txt", "text": "b\n"},
                         {"path": "t", "text": "t\n", "mode": 0o755}]}
    plain = make_task([{"kind": "fixture-unchanged"}], fixture)
    skip_a = make_task([{"kind": "fixture-unchanged", "except_paths": ["a.txt"]}], fixture)
    materialize(plain.fixture, tmp_path)
    assert judge(plain, tmp_path) == (True, ["fixture files unchanged"])
    (tmp_path / "a.txt").write_text("A\n")
    assert judge(skip_a, tmp_path)[0] is True
    (tmp_path / "b.txt").write_text("b\n\n")  # a file after an excepted one is still compared
    assert judge(skip_a, tmp_path) == (
        False, ["b.txt: fixture file changed: expected 2 bytes, found 3; first difference at byte 2: expected 'b\\n', "
                "found 'b\\n\\n'"])
    (tmp_path / "b.txt").unlink()
    assert judge(skip_a, tmp_path) == (False, ["b.txt: fixture file was removed"])
    (tmp_path / "b.txt").write_text("b\n")
    os.chmod(tmp_path / "t", 0o775)
    assert judge(skip_a, tmp_path) == (False, ["t: fixture file mode changed from 755 to 775"])


def test_fixture_unchanged_new_paths_lists_and_the_fixture_repository(tmp_path: Path) -> None:
    fixture = {"files": [{"path": "f.txt", "text": ""}],
               "git": {"path": "repo", "commits": [{"message": "i\n", "files": {"s/a.txt": "a\n"}}],
                       "staged": {"s/new.txt": "n\n"}}}
    task = make_task([{"kind": "fixture-unchanged", "new_paths": ["./out/r.txt"]}], fixture)
    materialize(task.fixture, tmp_path)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "r.txt").write_text("")
    assert judge(task, tmp_path) == (
        True, ["fixture files unchanged; the tree holds exactly the fixture's paths and ['./out/r.txt']"])
    for i in range(6):
        (tmp_path / f"x{i}").write_text("")
    (tmp_path / "repo" / "s" / "new.txt").unlink()
    (tmp_path / "repo" / "s" / "a.txt").unlink()
    wide = make_task([{"kind": "fixture-unchanged", "new_paths": [f"m{i}" for i in range(4)]}], fixture)
    assert judge(wide, tmp_path) == (
        False, ["the tree holds other paths than the fixture's and ['m0', 'm1', 'm2', 'm3']: "
                "missing ['m0', 'm1', 'm2', 'm3', 'repo/s/a.txt', ... (1 more)], "
                "unexpected ['out', 'out/r.txt', 'x0', 'x1', 'x2', ... (3 more)]"])


# ---------------------------------------------------------------- git: where the repository is, and no fixture


def test_git_repository_in_a_subdirectory_without_a_fixture(tmp_path: Path) -> None:
    loose = {"kind": "git", "path": "repo", "count": 1, "message": "m\n", "same_branch": False,
             "on_fixture_head": False, "exact_tree": False}
    task = make_task([loose])
    repo = tmp_path / "repo"
    assert judge(task, tmp_path) == (False, ["git: repo: missing"])
    repo.write_text("")
    assert judge(task, tmp_path) == (False, ["git: repo: is a regular file, not a directory"])
    repo.unlink()
    repo.mkdir()
    assert judge(task, tmp_path) == (False, ["git: repo: not a git repository any more (no .git)"])
    run_git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("a\n")
    run_git(repo, "add", "a.txt")
    commit(repo, "m\n")
    assert judge(task, tmp_path) == (True, ["git: 1 commits on main, HEAD message exact (2 bytes)"])
    run_git(repo, "checkout", "-q", "--detach")
    assert judge(task, tmp_path) == (True, ["git: 1 commits, HEAD message exact (2 bytes)"])


def test_git_fixture_without_commits_wants_a_root_commit(tmp_path: Path) -> None:
    task = make_task([{"kind": "git", "count": 1, "message": "first\n"}], {"git": {"staged": {"a.txt": "a\n"}}})
    repo = fresh(tmp_path, "repo", task)
    commit(repo, "first\n")
    assert judge(task, repo) == (
        True, ["git: 1 commits on main, HEAD message exact (6 bytes), tree is exactly the staged change"])


# ---------------------------------------------------------------- git: parents and branch

FIXTURE = {"git": {"commits": [{"message": "init\n", "files": {"README.md": "# r\n", "a.sh": "v1\n"}}],
                   "staged": {"a.sh": "v2\n"}}}


def test_git_parent_is_checked_only_when_asked_and_named_exactly(tmp_path: Path) -> None:
    rebased = make_task([{"kind": "git", "count": 2, "message": "Fix\n", "on_fixture_head": False,
                          "exact_tree": False}], FIXTURE)
    strict = make_task([{"kind": "git", "count": 2, "message": "Fix\n"}], FIXTURE)
    repo = fresh(tmp_path, "repo", rebased)
    fixture_head = run_git(repo, "rev-parse", "HEAD").decode().strip()
    again = run_git(repo, "commit-tree", "HEAD^{tree}", "-m", "init again").decode().strip()
    run_git(repo, "update-ref", "refs/heads/main", again)  # a rewritten parent; the staged change is kept
    commit(repo, "Fix\n")
    parent = run_git(repo, "rev-parse", "HEAD^").decode().strip()
    assert judge(rebased, repo) == (True, ["git: 2 commits on main, HEAD message exact (4 bytes)"])
    assert judge(strict, repo) == (
        False, [f"git: HEAD's parents are [{parent[:12]!r}], expected [{fixture_head[:12]!r}] (the fixture's HEAD)"])


def test_git_message_lines_that_look_like_headers_are_not_parents(tmp_path: Path) -> None:
    message = "Fix\n\nparent 0123456789abcdef0123456789abcdef01234567\ntree x\n"
    task = make_task([{"kind": "git", "count": 2, "message": message}], FIXTURE)
    repo = fresh(tmp_path, "repo", task)
    commit(repo, message)
    assert judge(task, repo) == (
        True, ["git: 2 commits on main, HEAD message exact (60 bytes), tree is exactly the staged change"])


def test_git_commit_object_without_a_message(tmp_path: Path) -> None:
    task = make_task([{"kind": "git", "count": 2, "message": "Fix\n"}], FIXTURE)
    repo = fresh(tmp_path, "repo", task)
    tree = run_git(repo, "write-tree").decode().strip()
    head = run_git(repo, "rev-parse", "HEAD").decode().strip()
    raw = (f"tree {tree}\nparent {head}\nauthor A <a@b> 0 +0000\ncommitter A <a@b> 0 +0000\n").encode()
    new = run_git(repo, "hash-object", "-t", "commit", "-w", "--literally", "--stdin", stdin=raw).decode().strip()
    run_git(repo, "update-ref", "HEAD", new)
    assert judge(task, repo) == (
        False, ["git: HEAD message: expected 4 bytes, found 0; first difference at byte 0: expected 'Fix\\n', found ''"])


# ---------------------------------------------------------------- git: files in HEAD, exact tree, clean index


def test_git_files_in_head(tmp_path: Path) -> None:
    big = "x" * ((1 << 20) + 1)
    fixture = {"git": {"commits": [{"message": "init\n", "files": {"a.txt": "a\n"}}],
                       "staged": {"big.txt": big}}}
    task = make_task([{"kind": "git", "count": 2, "message": "Fix\n", "files": {"big.txt": big}}], fixture)
    absent = make_task([{"kind": "git", "count": 2, "message": "Fix\n", "files": {"nope.txt": ""}}], fixture)
    repo = fresh(tmp_path, "repo", task)
    commit(repo, "Fix\n")
    assert judge(task, repo) == (False, [f"git: HEAD:big.txt is larger than {1 << 20} bytes; not compared"])
    assert judge(absent, repo) == (False, ["git: HEAD does not contain nope.txt"])


def test_git_exact_tree_detail_lists_missing_unexpected_and_changed(tmp_path: Path) -> None:
    files = {"keep/k.txt": "k\n", **{f"d{i}": "d\n" for i in range(6)}, **{f"c{i}": "c\n" for i in range(6)}}
    fixture = {"git": {"commits": [{"message": "init\n", "files": files}], "staged": {"keep/k.txt": "k2\n"}}}
    task = make_task([{"kind": "git", "count": 2, "message": "Fix\n"}], fixture)
    repo = fresh(tmp_path, "repo", task)
    run_git(repo, "rm", "-q", *[f"d{i}" for i in range(6)])
    for name in [*(f"u{i}" for i in range(5)), "tab\tname", os.fsdecode(b"\xff")]:
        (repo / name).write_text("u\n")
    for i in range(6):
        (repo / f"c{i}").write_text("changed\n")
    run_git(repo, "add", "-A")
    commit(repo, "Fix\n")
    assert judge(task, repo) == (False, [
        "git: HEAD's tree is not exactly the staged change: "
        "missing ['d0', 'd1', 'd2', 'd3', 'd4', ... (1 more)], "
        "unexpected ['\\\\xff', 'tab\\tname', 'u0', 'u1', 'u2', ... (2 more)], "
        "changed ['c0', 'c1', 'c2', 'c3', 'c4', ... (1 more)]"])


def test_git_index_left_staged_or_unmerged(tmp_path: Path) -> None:
    task = make_task([{"kind": "git", "count": 2, "message": "Fix\n"}], FIXTURE)
    repo = fresh(tmp_path, "staged", task)
    commit(repo, "Fix\n")
    (repo / "src").mkdir()
    (repo / "src" / "x.txt").write_text("x\n")
    (repo / os.fsdecode(b"\xff.txt")).write_text("y\n")
    run_git(repo, "add", "-A")
    assert judge(task, repo) == (False, ["git: changes still staged: ['src/x.txt', '\\\\xff.txt']"])

    repo = fresh(tmp_path, "unmerged", task)
    commit(repo, "Fix\n")
    blob = run_git(repo, "hash-object", "-w", "--stdin", stdin=b"side\n").decode().strip()
    run_git(repo, "update-index", "--index-info", stdin=f"100644 {blob} 1\tc.txt\n100644 {blob} 2\tc.txt\n".encode())
    assert judge(task, repo) == (False, ["git: the index cannot be read (missing, or has unmerged entries)"])


# ---------------------------------------------------------------- gitread: the fixture's facts, replace refs, caps


def test_fixture_facts_of_a_new_fixture(tmp_path: Path) -> None:
    """A fixture no other test built (its facts are computed here, not taken from the process's cache):
    branch, HEAD and the index tree and listing all reach the verdict."""
    token = uuid.uuid4().hex
    fixture = {"git": {"commits": [{"message": "init\n", "files": {"t.txt": token, "sub/s.txt": "s\n"}}],
                       "staged": {"sub/s.txt": "s2\n"}}}
    task = make_task([{"kind": "git", "count": 2, "message": "Fix\n"}], fixture)
    repo = fresh(tmp_path, "right", task)
    fixture_head = run_git(repo, "rev-parse", "HEAD").decode().strip()
    commit(repo, "Fix\n")
    assert judge(task, repo) == (
        True, ["git: 2 commits on main, HEAD message exact (4 bytes), tree is exactly the staged change"])
    (repo / "sub" / "s.txt").write_text("s3\n")
    (repo / "t.txt").unlink()
    run_git(repo, "add", "-A")
    commit(repo, "Fix\n", "--amend")
    assert judge(task, repo) == (
        False, ["git: HEAD's tree is not exactly the staged change: missing ['t.txt'], unexpected [], changed ['sub/s.txt']"])
    repo = fresh(tmp_path, "parent", task)
    head = run_git(repo, "commit-tree", "HEAD^{tree}", "-m", "x").decode().strip()
    run_git(repo, "update-ref", "refs/heads/main", head)
    commit(repo, "Fix\n")
    assert judge(task, repo) == (
        False, [f"git: HEAD's parents are [{head[:12]!r}], expected [{fixture_head[:12]!r}] (the fixture's HEAD)"])


def test_replace_refs_are_ignored(tmp_path: Path) -> None:
    """refs/replace/ in the command's repository cannot swap a wrong HEAD for a right one."""
    task = make_task([{"kind": "git", "count": 2, "message": "Fix\n"}], FIXTURE)
    repo = fresh(tmp_path, "repo", task)
    commit(repo, "Wrong\n")
    good = run_git(repo, "commit-tree", "HEAD^{tree}", "-p", "HEAD^", "-m", "Fix").decode().strip()
    run_git(repo, "replace", "HEAD", good)
    assert run_git(repo, "log", "-1", "--format=%B", "HEAD").decode() == "Fix\n\n"  # git itself is fooled
    assert judge(task, repo) == (
        False, ["git: HEAD message: expected 4 bytes, found 6; first difference at byte 0: expected 'Fix\\n', "
                "found 'Wrong\\n'"])


def test_a_file_of_exactly_the_read_cap_is_compared(tmp_path: Path) -> None:
    exact = "y" * (1 << 20)
    fixture = {"git": {"commits": [{"message": "init\n", "files": {"a.txt": "a\n"}}], "staged": {"big.txt": exact}}}
    task = make_task([{"kind": "git", "count": 2, "message": "Fix\n", "files": {"big.txt": exact}}], fixture)
    repo = fresh(tmp_path, "repo", task)
    commit(repo, "Fix\n")
    assert judge(task, repo) == (
        True, ["git: 2 commits on main, HEAD message exact (4 bytes), tree is exactly the staged change"])


def test_only_the_history_is_copied_not_a_commondir(tmp_path: Path) -> None:
    """.git/commondir (like config and hooks) is not copied: it cannot point the reader at another repository."""
    task = make_task([{"kind": "git", "count": 2, "message": "Fix\n"}], FIXTURE)
    other = fresh(tmp_path, "other", task)
    commit(other, "Fix\n")
    repo = fresh(tmp_path, "repo", task)
    commit(repo, "Wrong\n")
    (repo / ".git" / "commondir").write_text(f"{other / '.git'}\n")
    assert run_git(repo, "log", "-1", "--format=%B").decode() == "Fix\n\n"  # git itself follows it
    assert judge(task, repo) == (
        False, ["git: HEAD message: expected 4 bytes, found 6; first difference at byte 0: expected 'Fix\\n', "
                "found 'Wrong\\n'"])


def test_a_git_file_or_a_bare_git_directory(tmp_path: Path) -> None:
    task = make_task([{"kind": "git", "path": "repo", "count": 1, "message": "m\n", "same_branch": False,
                       "on_fixture_head": False, "exact_tree": False}])
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / ".git").write_text(f"gitdir: {tmp_path}\n")
    assert judge(task, tmp_path) == (False, ["git: repo/.git: is not a directory; the repository is not inspected"])
    (tmp_path / "repo" / ".git").unlink()
    (tmp_path / "repo" / ".git").mkdir()
    (tmp_path / "repo" / ".git" / "HEAD").write_text("ref: refs/heads/main\n")  # no refs/, no objects/
    ok, details = judge(task, tmp_path)
    assert not ok and details[0].startswith("git: no commits readable: fatal: ") and "not a git repository" not in details[0]


def test_the_copy_budget_is_exact(tmp_path: Path) -> None:
    """.git may hold MAX_BYTES (256 MiB) of history, not one byte more (a sparse file: fast to read)."""
    task = make_task([{"kind": "git", "count": 1, "message": "init\n", "same_branch": False,
                       "on_fixture_head": False, "exact_tree": False}],
                     {"git": {"commits": [{"message": "init\n", "files": {"a.txt": "a\n"}}]}})
    repo = fresh(tmp_path, "repo", task)
    git = repo / ".git"
    copied = sum(p.stat().st_size for p in git.rglob("*") if p.is_file() and p.relative_to(git).parts[0] in
                 ("HEAD", "refs", "packed-refs", "objects", "index") and p.relative_to(git).parts[:2] != ("objects", "info"))
    pad = git / "objects" / "pack" / "pad"
    with open(pad, "wb") as fh:
        fh.truncate((256 << 20) - copied)
    assert judge(task, repo) == (True, ["git: 1 commits on main, HEAD message exact (5 bytes)"])
    with open(pad, "ab") as fh:
        fh.write(b"x")
    assert judge(task, repo) == (False, ["git: .git is larger than 256 MiB; not inspected"])
