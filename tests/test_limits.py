"""Memory, disk, file-size and leftover limits of the sandbox: floods end cleanly, the record says which
cap (and only the kernel's report says it), and the host keeps nothing. Each attack is a real command in a real sandbox."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from probes import run_each

from tasks.load import get_task
from transports.execute import execute
from transports.sandbox import Limits, Sandbox

TASK = get_task("file-write/control")
QB = [sys.executable, "-c", "from qb_client.cli import main; main()"]


def record(command: str, limits: Limits, transport: str = "raw"):
    return anyio.run(lambda: execute(TASK, transport, command, limits=limits))


def test_a_memory_flood_is_ended_by_the_memory_cap_and_says_so(require) -> None:
    require("memory-cgroup")
    start = time.monotonic()
    r = record("python3 -c 'x = bytearray(400 << 20); print(len(x))'", Limits(timeout_s=20, memory=128 << 20))
    assert time.monotonic() - start < 15
    assert r.limit_hit == "memory" and r.exit_code == 137 and not r.timed_out
    assert r.limits_applied and r.limits_applied["memory"] in ("cgroup-v1", "cgroup-v2")
    assert r.stdout.text == ""


def test_memory_under_the_cap_is_fine() -> None:
    r = record("python3 -c 'x = bytearray(32 << 20); print(len(x))'", Limits(memory=256 << 20))
    assert r.limit_hit is None and r.stdout.text == str(32 << 20) + "\n"


def test_a_tmpfs_file_counts_against_the_memory_cap(require) -> None:
    require("memory-cgroup")
    r = record("for i in 1 2 3 4; do head -c 40000000 /dev/zero > /tmp/big$i; done; echo wrote",
               Limits(memory=96 << 20, tmp_size=512 << 20))
    assert r.limit_hit == "memory" and "wrote" not in r.stdout.text


def test_a_disk_flood_fills_only_the_sandbox_cap(require) -> None:
    require("disk-cap")
    free_before = shutil.disk_usage(tempfile.gettempdir()).free
    r = record("for i in $(seq 64); do head -c 1000000 /dev/zero > f$i || break; done; echo stopped at $i",
               Limits(disk=16 << 20))
    assert r.limit_hit == "disk"
    assert r.limits_applied and r.limits_applied["disk"] == "tmpfs"
    assert "No space left on device" in r.stderr.text
    stopped = int(r.stdout.text.split()[-1])
    assert 10 <= stopped <= 17  # about 16 one-megabyte files fit, never 64
    assert shutil.disk_usage(tempfile.gettempdir()).free > free_before - (8 << 20)


def test_one_big_file_hits_the_file_size_limit_exactly() -> None:
    r = record("head -c 5000000 /dev/zero > big; ls -l big | cut -d' ' -f5 >&2", Limits(file_size=1 << 20))
    assert r.exit_code == 0  # the shell survives; head was killed by SIGXFSZ
    assert r.stderr.text.endswith(f"{1 << 20}\n")
    assert r.limit_hit == "file-size"


def test_the_address_space_fallback_applies_and_is_recorded(tmp_path: Path) -> None:
    """Where no cgroup can be made (QB_NO_CGROUP=1 stands in for such a machine), the memory cap is an
    address-space rlimit, and the record says so."""
    env = {**os.environ, "QB_NO_CGROUP": "1", "QB_NO_DISK_CAP": "1"}
    done = subprocess.run([*QB, "exec", "--task", "file-write/control", "--transport", "raw", "--json", "--command",
                           "python3 -c 'x = bytearray(3 << 30)'"], capture_output=True, text=True, env=env,
                          timeout=60)
    rec = json.loads(done.stdout)
    applied = {k: v for k, v in rec["limits_applied"].items() if k not in ("user", "kernel")}
    assert applied == {"processes": "none", "memory": "rlimit-as", "disk": "file-size only"}
    assert rec["limit_hit"] == "memory" and "MemoryError" in rec["stderr"]["text"]


DEEP = """
import os
for i in range(5000):
    os.mkdir("d"); os.chdir("d")
os.mkfifo("f"); os.symlink("/etc/passwd", "l"); os.chmod("..", 0)
print("deep")
"""


def test_a_deep_tree_is_removed_by_close() -> None:
    async def go():
        box = Sandbox.create(TASK, Limits(timeout_s=20))
        ex = await box.run(["python3", "-c", DEEP])
        root = box.root
        box.close()
        return ex, root
    ex, root = anyio.run(go)
    assert ex.stdout.text == "deep\n"
    assert not root.exists()


def test_the_same_deep_tree_without_the_tmpfs() -> None:
    env_before = os.environ.get("QB_NO_DISK_CAP")
    os.environ["QB_NO_DISK_CAP"] = "1"
    try:
        box = Sandbox.create(None, Limits(timeout_s=20))
    finally:
        if env_before is None:
            del os.environ["QB_NO_DISK_CAP"]
    assert not box.mounted
    fd = os.open(box.workdir, os.O_RDONLY)
    for _ in range(3000):
        os.mkdir("d", dir_fd=fd)
        nxt = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    os.mkfifo("f", dir_fd=fd)
    os.symlink("/etc/passwd", "l", dir_fd=fd)
    os.close(fd)
    root = box.root
    box.close()
    assert not root.exists() and Path("/etc/passwd").exists()


def test_leftovers_of_dead_processes_are_swept_and_live_ones_kept(tmp_path: Path) -> None:
    tmp = Path(tempfile.gettempdir())
    dead = tmp / "qb-sandbox-999999999-leftover"
    (dead / "work" / "a" / "b").mkdir(parents=True)
    (dead / "work" / "link").symlink_to("/etc/passwd")
    cache = tmp / "qb-fixture-cache-999999999-leftover"  # a killed process's git fixture templates too
    (cache / "t" / ".git").mkdir(parents=True)
    live = tmp / f"qb-sandbox-{os.getppid()}-alive"
    live.mkdir(exist_ok=True)
    try:
        subprocess.run([sys.executable, "-c", "from transports.sandbox import Sandbox; Sandbox.create().close()"],
                       check=True, timeout=60, capture_output=True)
        assert not dead.exists() and not cache.exists()
        assert live.exists() and Path("/etc/passwd").exists()
    finally:
        shutil.rmtree(live, ignore_errors=True)
        shutil.rmtree(dead, ignore_errors=True)
        shutil.rmtree(cache, ignore_errors=True)


ORPHAN = """
import os, signal, subprocess, time
from transports.sandbox import Sandbox, cgroups
box = Sandbox.create()
full, _ = box.launcher(["bash", "-c", "echo ran > ran.txt"], group=cgroups.child(box.cgroup))
proc = subprocess.Popen(full, cwd=box.workdir, env=box.env(None), start_new_session=True,
                        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(0.3)  # the launcher waits at its first line, as the tracer finds it before seizing
print(proc.pid, box.workdir, flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # the harness killed between the spawn and the seize
"""


def test_a_launcher_whose_harness_dies_before_the_seize_ends_itself_having_run_nothing() -> None:
    """A harness killed between starting the launcher and seizing it (a campaign killed at the wrong
    millisecond) must not leave it behind: a launcher that stopped itself until the tracer seized it would stay
    stopped for ever, an orphan in no cgroup. The launcher waits for the tracer's line on its stdin instead,
    and a harness that dies closes that pipe: the launcher reads its end and exits on its own, with no harness started after it, and nothing of the run
    (bwrap, the command) ever ran."""
    done = subprocess.run([sys.executable, "-c", ORPHAN], capture_output=True, text=True, timeout=60)
    pid_text, workdir = done.stdout.split()
    pid = int(pid_text)

    def state() -> str | None:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return None
    try:
        for _ in range(100):
            if state() in (None, "Z"):
                break
            time.sleep(0.05)
        assert state() in (None, "Z")
        assert not Path(workdir, "ran.txt").exists()
    finally:
        if state() not in (None, "Z"):
            os.kill(pid, 9)


def test_the_memory_and_disk_caps_are_options(tmp_path: Path) -> None:
    done = subprocess.run([*QB, "--memory", "64M", "exec", "--task", "file-write/control", "--transport", "raw",
                           "--json", "--command", "python3 -c 'x = bytearray(200 << 20)'"],
                          capture_output=True, text=True, timeout=60)
    rec = json.loads(done.stdout)
    assert rec["limit_hit"] == ("memory" if rec["limits_applied"]["memory"] != "rlimit-as" else rec["limit_hit"])
    assert rec["exit_code"] != 0 and rec["stdout"]["text"] == ""
    bad = subprocess.run([*QB, "--disk", "lots", "exec", "--task", "file-write/control", "--transport", "raw",
                          "--command", "true"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "quotebench: error: --disk: 'lots' is not a size (examples: 512M, 1G, 1048576)"]


def test_a_dead_processes_tmpfs_root_is_detached_wherever_it_was_made(tmp_path: Path, require) -> None:
    """A harness killed with TMPDIR elsewhere (a test's own directory) leaves a mounted root there; the next
    process finds it through the mount table, not by looking in its own temp directory."""
    from transports.sandbox import diskcap

    require("disk-cap")
    stale = tmp_path / "elsewhere" / "qb-sandbox-999999998-stale"
    stale.mkdir(parents=True)
    assert diskcap.mount(stale, 1 << 20) and os.path.ismount(stale)
    (stale / "work").mkdir()
    subprocess.run([sys.executable, "-c", "from transports.sandbox import Sandbox; Sandbox.create().close()"],
                   check=True, timeout=60, capture_output=True)
    assert not os.path.ismount(stale) and not stale.exists()


def test_a_command_cannot_forge_limit_hit_file_size() -> None:
    """``limit_hit: file-size`` is the kernel's report of a process killed by SIGXFSZ, never the exit code
    (128+SIGXFSZ) or stderr's words, both the command's to choose."""
    got = run_each(["exit 153", "echo 'File size limit exceeded' >&2"])
    assert [ex.limit_hit for ex, _ in got] == [None, None]
