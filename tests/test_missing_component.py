"""A path whose component cannot be had is a harness error, tried once per process, never path damage.

With the host's ``npm install shell-quote@1.8.3`` failing, a piped command on ``shell-quote-eval`` must
not retry the install (about 70 s each), be recorded as a damaged transport error, count as "points of
damage" in the report, or let ``replay`` exit 0. Here npm fails for real: its registry is 127.0.0.1:1
(nothing listens) and its cache is empty.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tasks.load import get_task
from transports import components, needs
from transports.execute import execute
from transports.paths import npm_cache
from transports.sandbox import Limits

ROOT = Path(__file__).resolve().parent.parent
TASK = get_task("file-write/control")


def npm_failing_env(tmp_path: Path) -> dict[str, str]:
    """The process environment with npm pointed at a registry nobody serves, an empty cache, its debug
    logs (one file per npm run) in ``tmp_path/npm-logs``, and no retries inside npm (that is npm's
    policy, not ours, and would only slow the test)."""
    (tmp_path / "xdg").mkdir()
    (tmp_path / "npm-logs").mkdir()
    return {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(tmp_path / "xdg"),
            "npm_config_registry": "http://127.0.0.1:1/", "npm_config_cache": str(tmp_path / "npm-cache"),
            "npm_config_logs_dir": str(tmp_path / "npm-logs"), "npm_config_fetch_retries": "0"}


def quotebench(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "qb_client", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.needs("bwrap", "node", "npm")
def test_a_failed_npm_install_is_one_harness_error_per_process_not_damage(tmp_path: Path) -> None:
    env = npm_failing_env(tmp_path)
    replies = tmp_path / "replies.jsonl"
    commands = ["echo hello world | cat > out.txt", "printf 'hello world\\n' | cat > out.txt",
                "echo hello world | tee out.txt", "echo 'hello world' > out.txt"]
    replies.write_text("".join(json.dumps({"task_id": TASK.id, "draw": k, "command": c}) + "\n"
                               for k, c in enumerate(commands)))
    results = tmp_path / "results.jsonl"
    done = quotebench(["replay", str(replies), "--transports", "raw,shell-quote-eval", "--out", str(results)], env)
    assert done.returncode == 1, done.stderr  # harness errors: not a clean replay
    assert "Traceback" not in done.stderr
    records = [json.loads(line) for line in results.read_text().splitlines()]
    sq = [r for r in records if r["transport"] == "shell-quote-eval"]
    assert len(sq) == 4
    for r in sq:  # every execution on the path, piped or not: the path could not be measured here
        assert r["error"].startswith("harness: shell-quote-eval: npm install shell-quote@1.8.3 failed (exit 1): "
                                     "npm error code ECONNREFUSED: ")
        assert "reason: connect ECONNREFUSED 127.0.0.1:1" in r["error"]  # npm's own reason line
        assert "debug-0.log" not in r["error"] and "\n" not in r["error"]
        assert r["damaged"] is False and r["transport_error"] is None and r["received"] is None
        assert r["verdict"]["checks"][0]["check"] == "harness"
    assert all(r["error"] is None and r["verdict"]["passed"] for r in records if r["transport"] == "raw")
    assert len(list((tmp_path / "npm-logs").iterdir())) == 1  # npm ran once for the whole process

    report = quotebench(["report", str(results), "--json"], env)
    assert report.returncode == 0, report.stderr
    config = json.loads(report.stdout)["configs"][0]
    assert config["errors"] == 4
    assert all(p["transport"] != "shell-quote-eval" or p["damage"] is None or p["n"] == 0
               for p in config.get("paths") or [])


def test_a_failure_is_remembered_for_the_process_and_retried_only_on_request(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No npm run at all: node and npm are looked up through the one function, pointed at an empty dir."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(needs, "SEARCH_PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(npm_cache, "_failed", {})
    calls: list[str] = []
    real = npm_cache.node_program

    def counted() -> str:
        calls.append("install")
        return real()
    monkeypatch.setattr(npm_cache, "node_program", counted)
    for _ in range(3):
        with pytest.raises(components.MissingComponent, match="^node is not installed .*not retried in this process"):
            npm_cache.package_dir("shell-quote", "1.8.3")
    assert calls == ["install"]
    with pytest.raises(components.MissingComponent):
        npm_cache.package_dir("shell-quote", "1.8.3", retry=True)
    assert calls == ["install", "install"]


@pytest.mark.needs("bwrap")
def test_a_missing_program_is_a_harness_error_before_anything_runs(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(needs, "SEARCH_PATH", str(tmp_path))
    r = anyio.run(lambda: execute(TASK, "make", "echo hello world > out.txt", limits=Limits(timeout_s=10)))
    assert r.error == f"harness: make: make not found in {tmp_path} (Debian package: make; apt-get install make)"
    assert r.transport_error is None and r.damaged is False and r.exit_code is None
    assert not r.verdict.passed and r.verdict.checks[0].check == "harness"


@pytest.mark.parametrize(("stderr", "reason"), [
    ("npm error code ECONNREFUSED\nnpm error syscall connect\nnpm error errno ECONNREFUSED\n"
     "npm error FetchError: request to http://127.0.0.1:1/shell-quote failed, reason: connect ECONNREFUSED 127.0.0.1:1\n"
     "npm error     at ClientRequest.<anonymous> (/usr/lib/node_modules/npm/x.js:130:14)\nnpm error {\n"
     "npm error   code: 'ECONNREFUSED',\nnpm error }\nnpm error\n"
     "npm error If you are behind a proxy, please make sure that the 'proxy' config is set properly.\n"
     "npm error A complete log of this run can be found in: /root/.npm/_logs/2026-debug-0.log\n",
     "npm error code ECONNREFUSED: request to http://127.0.0.1:1/shell-quote failed, reason: connect ECONNREFUSED "
     "127.0.0.1:1"),
    ("npm error code ETARGET\nnpm error notarget No matching version found for shell-quote@9.9.9.\n"
     "npm error notarget In most cases you or one of your dependencies are requesting\n"
     "npm error A complete log of this run can be found in: /x/_logs/a-debug-0.log\n",
     "npm error code ETARGET: notarget No matching version found for shell-quote@9.9.9."),
    ("npm ERR! code E404\nnpm ERR! 404 Not Found - GET https://registry.npmjs.org/nope - Not found\n",
     "npm ERR! code E404: 404 Not Found - GET https://registry.npmjs.org/nope - Not found"),
    ("npm error A complete log of this run can be found in: /x-debug-0.log\n", "npm error A complete log of this "
     "run can be found in: /x-debug-0.log"),
    ("", "(no output)"),
])
def test_npm_reason_is_the_code_and_the_line_that_says_why(stderr: str, reason: str) -> None:
    assert npm_cache.npm_reason(stderr) == reason


@pytest.mark.needs("bwrap")
def test_a_program_only_transport_with_a_missing_program_is_a_harness_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A transport that needs only programs is checked inline on the loop (no thread hop): a missing program is
    still a harness error with nothing run (here the final shell, looked up in an empty search path)."""
    from transports.execute import deliver
    from transports.registry import get
    from transports.sandbox import Sandbox

    monkeypatch.setattr(needs, "SEARCH_PATH", "/nonexistent-qb-search-path")

    async def go():
        with Sandbox.create(TASK, Limits(timeout_s=5)) as box:
            return await deliver(get("raw"), "echo hi", box)
    d = anyio.run(go)
    assert d.execution is None and d.harness_error is not None and "not found" in d.harness_error, d
