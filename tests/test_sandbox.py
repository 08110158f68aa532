"""The sandbox: containment, limits, scrubbed environment. Real processes, real bwrap."""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import anyio
import pytest
from probes import traced

from transports.sandbox import cgroups
from transports.sandbox import hostuid
from transports.sandbox import Limits, Sandbox

needs_bwrap = pytest.mark.needs("bwrap")  # skips locally, fails under CI=true (tests/conftest.py)
needs_pids = pytest.mark.needs("pids-cgroup")


def run(cmd: str, limits: Limits | None = None, isolation=None):
    async def go():
        with Sandbox.create(None, limits, isolation) as box:
            ex = await box.run(["bash", "-c", cmd])
            return ex, sorted(os.listdir(box.workdir)), box
    return anyio.run(go)


def leftovers(marker: str) -> list[str]:
    found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    return [p for p in found if int(p) != os.getpid()]


@needs_bwrap
def test_cannot_write_outside_working_directory(tmp_path: Path) -> None:
    target = tmp_path / "pwned"
    host = [Path("/etc/qb-pwned"), Path("/usr/qb-pwned"), Path(tempfile.gettempdir()) / "qb-pwned"]
    assert not any(p.exists() for p in host), "left by an earlier run; remove them"
    try:
        ex, listing, _ = run(f"echo x > {target}; echo y > /etc/qb-pwned; echo z > /usr/qb-pwned; "
                             f"echo w > ../../qb-pwned; touch ok")
        escaped = [p for p in host if p.exists()]
    finally:  # a broken sandbox must not leave the host changed for every later run
        for p in host:
            p.unlink(missing_ok=True)
    assert not target.exists()
    assert escaped == []
    assert listing == ["ok"]
    assert "Read-only file system" in ex.stderr.text or "No such file" in ex.stderr.text


@needs_bwrap
def test_host_home_is_not_visible(tmp_path: Path) -> None:
    """A marker planted in the host's home and in a host temporary directory: without isolation the command
    reads both (checked below), under bwrap it finds neither."""
    token = f"qb-marker-{uuid.uuid4().hex}"
    markers = [Path.home() / f".{token}", tmp_path / token]
    probe = "; ".join(f"cat {m} 2>/dev/null; ls -a {m.parent} 2>/dev/null | grep -c {token}" for m in markers)
    try:
        for m in markers:
            m.write_text(token + "\n")
        seen, _, _ = run(probe + "; echo done", isolation="none")
        if hostuid.user() == "dropped":  # root is dropped: even without isolation, root's files are out of reach
            assert seen.stdout.text == "0\n0\ndone\n"
        else:
            assert seen.stdout.text == f"{token}\n1\n{token}\n1\ndone\n"  # the probe works: isolation off sees them
        ex, _, box = run(probe + "; echo done")
    finally:
        for m in markers:
            m.unlink(missing_ok=True)
    assert box.isolation == "bwrap"
    assert ex.stdout.text == "0\n0\ndone\n"


@needs_bwrap
def test_cannot_reach_host_loopback_listener() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(3)
    port = server.getsockname()[1]
    accepted: list[object] = []

    def accept() -> None:
        try:
            accepted.append(server.accept())
        except OSError:
            pass

    t = threading.Thread(target=accept)
    t.start()
    ex, _, _ = run(f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected")
    server.close()
    t.join()
    assert "connected" not in ex.stdout.text
    assert accepted == []


def test_sanity_loopback_reachable_without_isolation() -> None:
    """The listener test above would pass vacuously if the probe never worked; here it must connect."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    ex, _, _ = run(f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected", isolation="none")
    server.close()
    assert "connected" in ex.stdout.text


@pytest.mark.parametrize("isolation", ["bwrap", "none"])
def test_runaways_end_within_the_limit_and_leave_nothing(isolation: str, require) -> None:
    if isolation == "bwrap":
        require("bwrap")
    limits = Limits(timeout_s=1.0)
    start = time.monotonic()
    ex, _, _ = run("sleep 100731", limits, isolation)
    assert ex.timed_out and ex.exit_code is None
    ex, _, _ = run("for i in $(seq 30); do sleep 100732 & done; wait", limits, isolation)
    assert ex.timed_out
    # background jobs whose output goes elsewhere end with the main process
    ex, _, _ = run("sleep 100733 >/dev/null 2>&1 & sleep 100733 >/dev/null 2>&1 & echo started", limits, isolation)
    assert not ex.timed_out and ex.stdout.text == "started\n"
    # one that still holds the output keeps the run going, as ssh would, until the time limit
    ex, _, _ = run("sleep 100734 & echo started", limits, isolation)
    assert ex.timed_out and ex.stdout.text == "started\n"
    ex, _, _ = run("yes", limits, isolation)
    assert ex.stdout.truncated
    assert time.monotonic() - start < 8
    time.sleep(0.2)
    assert leftovers("sleep 10073") == []


def test_output_cap_marks_truncation() -> None:
    ex, _, _ = run("head -c 5000 /dev/zero | tr '\\0' a; echo err >&2", Limits(output_cap=1000))
    assert len(ex.stdout.text) == 1000 and ex.stdout.truncated
    assert ex.stderr.text == "err\n" and not ex.stderr.truncated


def test_file_size_limit() -> None:
    """RLIMIT_FSIZE cuts the write at exactly the limit; the writer dies of SIGXFSZ (128 + 25)."""
    ex, _, box = run("head -c 3000000 /dev/zero > big; echo rc=$?; stat -c %s big", Limits(file_size=1 << 20))
    assert ex.stdout.text == f"rc=153\n{1 << 20}\n"
    assert "File size limit exceeded" in ex.stderr.text


def test_stderr_cap_marks_truncation() -> None:
    ex, _, _ = run("head -c 5000 /dev/zero | tr '\\0' b >&2; echo out", Limits(output_cap=1000))
    assert ex.stderr.text == "b" * 1000 and ex.stderr.truncated
    assert ex.stdout.text == "out\n" and not ex.stdout.truncated
    assert ex.exit_code == 0


def test_environment_is_scrubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-value")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-value")
    ex, _, box = run("env; echo HOME=$HOME; pwd")
    assert "secret-value" not in ex.stdout.text
    env = dict(line.split("=", 1) for line in ex.stdout.text.splitlines() if "=" in line)
    assert env["PATH"] == "/usr/local/bin:/usr/bin:/bin"
    assert env["LANG"] == "C.UTF-8" and env["TZ"] == "UTC"
    assert env["HOME"] == box.inside(box.home)
    assert ex.stdout.text.splitlines()[-1] == box.inside(box.workdir)
    if box.isolation == "bwrap":  # fixed paths make replays byte-reproducible
        assert (env["HOME"], box.inside(box.workdir)) == ("/sandbox/home", "/sandbox/work")


def test_stdin_is_closed() -> None:
    ex, _, _ = run("cat; echo rc=$?", Limits(timeout_s=3))
    assert not ex.timed_out and ex.stdout.text == "rc=0\n"


def test_signal_death_maps_to_128_plus_n() -> None:
    ex, _, _ = run("kill -TERM $$")
    assert ex.exit_code == 143


def test_without_bwrap_records_isolation_none() -> None:
    ex, _, _ = run("true", isolation="none")
    assert ex.isolation == "none" and ex.exit_code == 0


def test_close_removes_everything() -> None:
    box = Sandbox.create()
    root = box.root
    assert root.exists()
    box.close()
    assert not root.exists()


@needs_pids
def test_process_count_is_limited_even_for_root() -> None:
    async def go():
        with Sandbox.create(None, Limits(timeout_s=2, processes=32)) as box:
            ex = await box.run(["bash", "-c", "for i in $(seq 100); do sleep 100734 & done; wait"])
            return ex, int((box.cgroup / "pids.peak").read_text()), (box.cgroup / "pids.events").read_text()
    ex, peak, events = anyio.run(go)
    assert 28 <= peak <= 32  # it reached the limit and never passed it (bash keeps retrying the refused forks)
    time.sleep(0.2)
    assert leftovers("sleep 100734") == []


@needs_pids
def test_a_fork_bomb_ends_and_the_cgroup_goes_away() -> None:
    async def go():
        box = Sandbox.create(None, Limits(timeout_s=2, processes=64))
        group = box.cgroup
        ex = await box.run(["bash", "-c", "b() { b | b & }; b; sleep 100735"])
        box.close()
        return ex, group
    start = time.monotonic()
    ex, group = anyio.run(go)
    assert time.monotonic() - start < 6
    assert group is not None and not group.exists()
    assert leftovers("sleep 100735") == []


@needs_bwrap
def test_capabilities_are_dropped_and_secrets_masked() -> None:
    ex, _, _ = run("grep CapEff /proc/self/status; mount -o remount,rw,bind /usr && echo REMOUNTED; "
                   "cat /etc/shadow 2>/dev/null | wc -c; ls /etc/ssh | wc -l")
    lines = ex.stdout.text.split()
    assert lines[:2] == ["CapEff:", "0000000000000000"]
    assert "REMOUNTED" not in ex.stdout.text
    assert lines[-2:] == ["0", "0"]


def test_a_flood_of_output_is_cut_short_not_timed_out() -> None:
    start = time.monotonic()
    ex, _, _ = run("head -c 50000000 /dev/zero; echo never >&2", Limits(timeout_s=8))
    assert time.monotonic() - start < 4
    assert ex.stdout.truncated and not ex.timed_out and ex.exit_code == 137


@needs_bwrap
def test_private_tmp_has_a_size_limit() -> None:
    ex, _, _ = run("head -c 3000000 /dev/zero > /tmp/big; echo rc=$?", Limits(tmp_size=1 << 20))
    assert "rc=1" in ex.stdout.text and "No space left" in ex.stderr.text


@needs_pids
def test_a_setsid_escapee_is_killed_even_without_bwrap() -> None:
    async def go():
        with Sandbox.create(None, Limits(timeout_s=3), "none") as box:
            ex = await box.run(["bash", "-c", "setsid bash -c 'sleep 1.5; echo late > late.txt' >/dev/null 2>&1 & "
                                              "echo started"])
            await anyio.sleep(2)
            return ex, (box.workdir / "late.txt").exists()
    ex, late = anyio.run(go)
    assert ex.stdout.text == "started\n" and not late


@pytest.mark.parametrize("isolation", ["bwrap", "none"])
def test_a_background_job_holding_the_output_runs_to_its_end(isolation: str, require) -> None:
    """``A & B`` as ssh delivers it: the run lasts until the last holder of the output closes it, so the
    orphaned job runs and what it wrote is recorded (1 of 3,200 NL2Bash executions does this)."""
    if isolation == "bwrap":
        require("bwrap")
    ex, files, _ = run("(sleep 0.3; echo late; echo x > late.txt) & echo early", Limits(timeout_s=5), isolation)
    assert not ex.timed_out and ex.exit_code == 0
    assert ex.stdout.text == "early\nlate\n" and files == ["late.txt"]


@pytest.mark.parametrize("signal_name, code", [("TERM", 143), ("KILL", 137)])
def test_a_command_killed_by_a_signal_leaves_stderr_as_bash_c_alone_would(signal_name: str, code: int) -> None:
    """Nothing between bwrap and the command reports its death ("Terminated"), which bash -c R alone never prints."""
    ex, _, _ = run(f"echo before; kill -{signal_name} $$")
    assert ex.exit_code == code and ex.stdout.text == "before\n" and ex.stderr.text == ""


def test_stdin_bytes_are_fed() -> None:
    async def go():
        with Sandbox.create() as box:
            return await box.run(["bash", "-c", "cat; echo"], stdin=b"fed through")
    ex = anyio.run(go)
    assert ex.stdout.text == "fed through\n"


@needs_pids
def test_leftover_groups_of_dead_processes_are_swept_quickly(tmp_path: Path) -> None:
    """A process killed before its atexit leaves groups (nested ones included); the next start removes them
    without waiting on them (waiting on a stale nested group would add seconds to every command)."""
    stale = cgroups.CGROUP_ROOT / "pids" / "quotebench-999999999"
    (stale / "sandbox-1" / "run-2").mkdir(parents=True)
    start = time.monotonic()
    cgroups._sweep_stale(cgroups.CGROUP_ROOT / "pids")
    assert not stale.exists()
    assert time.monotonic() - start < 0.5


def test_each_caller_gets_its_own_copy_of_the_host_layout_binds() -> None:
    """system_binds() is read once per process; each caller gets its own copy, so a launcher that
    extends its list does not change the next one's."""
    from transports.sandbox.systemdirs import system_binds

    first = system_binds()
    first += ["--bind", "/", "/"]
    assert "--bind" not in system_binds() or system_binds().count("--bind") == 0


@pytest.mark.needs("root")
@pytest.mark.needs("bwrap")
def test_the_command_cannot_leave_its_cgroup_nor_pass_the_pids_limit() -> None:
    """No cgroup file is reachable (no /sys, a cgroup namespace, no mount in a user namespace), and
    forks stop at the sandbox's pids.max."""
    command = ("for f in /sys/fs/cgroup/pids/tasks /proc/1/root/sys/fs/cgroup/pids/tasks; do "
               "echo 0 > $f 2>/dev/null && echo ESCAPED $f; done; "
               "unshare -Urm sh -c 'mkdir -p /tmp/c && mount -t cgroup -o pids none /tmp/c && echo 0 > /tmp/c/tasks "
               "&& echo ESCAPED mount' 2>/dev/null; "
               "python3 -c 'import os, time\nn = 0\nfor i in range(400):\n    try:\n        if os.fork() == 0:\n"
               "            time.sleep(3); os._exit(0)\n        n += 1\n    except OSError:\n        break\n"
               "print(\"forked\", n)' >forks 2>&1 </dev/null; cat forks")
    ex, _, _ = traced(command, timeout=6)
    assert "ESCAPED" not in ex.stdout.text
    forked = int(ex.stdout.text.split("forked")[1].split()[0])
    assert forked < Limits().processes and ex.limit_hit == "processes"


@pytest.mark.needs("bwrap")
def test_a_background_job_holding_the_output_forever_ends_at_the_time_limit() -> None:
    """The wait for a holder of the output is bounded by the run's deadline."""
    ex, wall, _ = traced("sleep 1000 & exit 0", timeout=2)
    assert ex.timed_out and wall < 2 + 1.5


@pytest.mark.needs("bwrap")
def test_stopped_processes_and_zombies_do_not_hold_the_tracer() -> None:
    """A stopped first program, a stopped child holding the output, an unreaped zombie under a
    stopped parent: all killed at the deadline, the tracer joins."""
    command = "(sleep 1000 & kill -STOP $!; (exit 3) & kill -STOP $BASHPID) & sleep 0.2; kill -STOP $$"
    ex, wall, _ = traced(command, timeout=2)
    assert ex.timed_out and wall < 2 + 1.5


@pytest.mark.needs("bwrap")
def test_the_holder_scan_cannot_stretch_a_run_past_its_deadline() -> None:
    """240 processes with 1000 descriptors each and one holder of the output: a holder scan (a readlink of
    every descriptor) costs ~0.8 s of the harness's CPU, so the scan stops at the deadline, looks at the last
    holder first, and scans are spaced by twice their own cost: the run costs about what the same processes
    cost without a holder, and ends near its deadline."""
    setup = ("for i in $(seq 3 1020); do eval \"exec $i</dev/null\"; done; "
             "for i in $(seq 240); do sleep 30 >/dev/null 2>&1 & done; ")
    # the same processes without a holder of the output: what the tracer, the kill and the kernel's
    # teardown of 241 processes of 1018 descriptors cost on this machine at this moment (2.3 s wall and
    # 1.8 s of the harness's CPU on a quiet 2-core machine, several times that with the other core busy)
    cpu = time.process_time()
    free, free_wall, _ = traced(setup + "sleep 30 >/dev/null 2>&1 & exit 0", timeout=20)
    free_cpu = time.process_time() - cpu
    assert not free.timed_out
    cpu = time.process_time()
    ex, wall, _ = traced(setup + "sleep 30 & exit 0", timeout=8)
    held_cpu = time.process_time() - cpu
    assert ex.timed_out
    # scanning without a pause would keep a harness core busy from the first program's exit (~2 s in) to the
    # deadline: ~6 s more CPU than the run without a holder; spaced scans that look at the last holder
    # first cost ~0.2 s. Both runs are measured side by side, so a loaded machine slows both: no
    # absolute time is asserted but a hang guard.
    assert held_cpu < free_cpu + 2, (held_cpu, free_cpu)
    assert wall < 8 + free_wall + 6, (wall, free_wall)
