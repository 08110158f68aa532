"""The validator runs on the host against a directory a hostile command wrote: nothing it reads may
make it run that command's programs, follow its symlinks out of the sandbox, or crash."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from tasks.fixture import git_env, materialize
from tasks.schema import Task
from tasks.validate import validate

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
        ("fifo", lambda g: os.mkfifo(g / "index.lock"), ".git/index.lock: is a special file"),
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
