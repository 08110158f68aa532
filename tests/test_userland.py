"""`--userland busybox`: real busybox applets in place of GNU coreutils, sed, grep, find, on every path.

Everything here runs real commands in real sandboxes: which program a command finds, that git, jq,
the shells and the task tools are untouched, that a GNU-only option really fails under busybox
(so the userland is not a label), that every public reference passes under busybox, and that
records, resume and the report keep the userlands apart.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tasks.gen_quote import disclose
from tasks.load import get_task
from transports.execute import execute
from transports.sandbox import Sandbox, default_userland, set_default_userland
from transports.sandbox.userland import MOUNT, UserlandError, directory

pytestmark = [pytest.mark.needs("busybox"), pytest.mark.needs("bwrap")]
CLI = [sys.executable, "-m", "qb_client"]
PROBE = ('for p in sed grep find sort cat dirname sh git jq; do printf "%s=%s\\n" $p "$(readlink -f "$(command -v $p)")"; '
         'done; sed --version 2>&1 | head -n 1')


@pytest.fixture
def busybox() -> Iterator[None]:
    before = default_userland()
    set_default_userland("busybox")
    try:
        yield
    finally:
        set_default_userland(before)


def _programs(stdout: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in stdout.splitlines() if "=" in line)


@pytest.mark.parametrize("transport", ["raw", "nested", "tempscript", "ssh"])
def test_busybox_applets_replace_gnu_and_nothing_else(busybox: None, transport: str, require) -> None:
    if transport == "ssh":
        require("openssh")
    command = disclose(PROBE) if transport in ("nested", "ssh") else PROBE  # both paste R into bash -c "R"
    rec = anyio.run(lambda: execute(get_task("file-write/control"), transport, command))
    progs = _programs(rec.stdout.text)
    assert rec.received == PROBE and rec.userland == "busybox" and rec.suite == "public"
    assert {p: progs[p] for p in ("sed", "grep", "find", "sort", "cat", "dirname")} == dict.fromkeys(
        ("sed", "grep", "find", "sort", "cat", "dirname"), "/usr/bin/busybox")
    assert progs["sh"] == "/usr/bin/dash" and progs["git"] == "/usr/bin/git" and progs["jq"] == "/usr/bin/jq"
    assert rec.stdout.text.rstrip().endswith("This is not GNU sed version 4.0")


def test_gnu_is_the_default_and_untouched() -> None:
    rec = anyio.run(lambda: execute(get_task("file-write/control"), "raw", PROBE))
    progs = _programs(rec.stdout.text)
    assert rec.userland == "gnu" and progs["sed"] == "/usr/bin/sed" and progs["sort"] == "/usr/bin/sort"
    assert "GNU sed" in rec.stdout.text


def test_the_userland_is_real_a_gnu_only_option_fails_under_busybox(busybox: None) -> None:
    """grep -P (Perl regexps) exists in GNU grep only: the same command passes on gnu, fails on busybox."""
    task = get_task("file-write/control")
    command = "printf 'hello world\\n' | grep -P 'hello\\sworld' > out.txt"
    on_busybox = anyio.run(lambda: execute(task, "raw", command))
    set_default_userland("gnu")
    on_gnu = anyio.run(lambda: execute(task, "raw", command))
    assert (on_gnu.verdict.passed, on_busybox.verdict.passed) == (True, False)
    assert on_busybox.exit_code != 0 and "grep" in on_busybox.stderr.text


def test_task_tools_git_and_jq_keep_working(busybox: None) -> None:
    """The wrappers (./remote runs sh, ./cexec bash, show-env uses env -0) and git and jq, under busybox."""
    for task_id in ("remote-exec/h3", "container-exec/h2", "env-pass/h3", "argv-pass/h3", "git-commit/h2",
                    "json-edit/h1", "find-glob/h3", "sed-replace/h2", "grep-count/h3"):
        task = get_task(task_id)
        rec = anyio.run(lambda: execute(task, "raw", task.solution))
        assert rec.verdict.passed, (task_id, rec.verdict.checks, rec.stderr.text)


def test_sandbox_option_binds_the_applets_read_only(tmp_path: Path) -> None:
    with Sandbox.create(get_task("file-write/control"), userland="busybox") as box:
        assert box.userland == "busybox" and box.env()["PATH"].startswith(MOUNT + ":")
        ex = anyio.run(lambda: box.run(["bash", "-c", f"ln -s /bin/true {MOUNT}/qb-new 2>&1; ls {MOUNT} | wc -l"]))
        assert "Read-only file system" in ex.stdout.text
        assert int(ex.stdout.text.split()[-1]) > 100
    with Sandbox.create(None) as box:
        assert box.userland == "gnu" and MOUNT not in box.env()["PATH"]
    assert directory("gnu") is None
    with pytest.raises(UserlandError, match="unknown userland 'bsd'"):
        Sandbox.create(None, userland="bsd")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=600)


def test_public_suite_check_passes_under_busybox() -> None:
    """Every public reference passes on its path and every near miss fails, with busybox's applets."""
    out = _cli("tasks", "check", "--userland", "busybox", "--json")
    doc = json.loads(out.stdout)
    assert out.returncode == 0, [r for r in doc["results"] if not r["ok"]]
    assert (doc["userland"], doc["tasks"], doc["ok"]) == ("busybox", 56, 56)


def test_bad_userland_is_one_line_exit_2() -> None:
    out = _cli("exec", "--userland", "bsd", "--task", "file-write/control", "--transport", "raw", "--command", "true")
    assert out.returncode == 2 and out.stderr == "quotebench: error: --userland: unknown userland 'bsd' (known: gnu, busybox, uutils)\n"


def test_replay_resumes_per_userland_and_report_keeps_them_apart(tmp_path: Path) -> None:
    store = tmp_path / "replies.jsonl"
    lines = [{"task_id": "grep-count/h1", "command": get_task("grep-count/h1").solution},
             {"task_id": "file-write/control", "command": "printf 'hello world\\n' | grep -P 'hello\\sworld' > out.txt"}]
    store.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "results.jsonl"
    for userland, executed in (("gnu", 2), ("busybox", 2), ("busybox", 0)):
        r = _cli("replay", str(store), "--transports", "raw", "--out", str(out), "--userland", userland, "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["executed_now"] == executed
    records = [json.loads(x) for x in out.read_text().splitlines()]
    assert sorted((r["userland"], r["task_id"], r["verdict"]["passed"]) for r in records) == [
        ("busybox", "file-write/control", False), ("busybox", "grep-count/h1", True),
        ("gnu", "file-write/control", True), ("gnu", "grep-count/h1", True)]
    doc = json.loads(_cli("report", str(out), "--json").stdout)
    assert [(c["userland"], c["contracts"]["raw"]["raw"]) for c in doc["configs"]] == [("busybox", 0.5), ("gnu", 1.0)]
    assert [(s["suite"], s["userland"]) for s in doc["strata"]] == [("public", "gnu"), ("public", "busybox")]


@pytest.mark.needs("coreutils")
def test_uutils_replaces_coreutils_only_and_the_public_check_passes() -> None:
    rec = _cli("exec", "--userland", "uutils", "--task", "file-write/control", "--transport", "raw",
               "--command", PROBE + "; sort --version | head -n 1", "--json")
    doc = json.loads(rec.stdout)
    progs = _programs(doc["stdout"]["text"])
    assert doc["userland"] == "uutils" and progs["sort"] == progs["cat"] == progs["dirname"] == "/usr/bin/coreutils"
    assert progs["sed"] == "/usr/bin/sed" and progs["grep"] == "/usr/bin/grep" and progs["sh"] == "/usr/bin/dash"
    assert doc["stdout"]["text"].rstrip().endswith("sort 0.0.17") or "sort 0." in doc["stdout"]["text"]
    out = _cli("tasks", "check", "--userland", "uutils", "--tasks", "file-*,argv-pass/*,env-pass/*,find-glob/*,"
               "remote-exec/*,container-exec/*", "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["ok"] == 28
