"""A link or a directory the command plants in its own area never makes the host act outside the sandbox.

The routes write their scripts into ``meta/`` (and ``/run/qb-files``) under predictable names; an earlier call
of the same sandbox (an MCP session, a turn) can plant a symlink there to a root-owned host file, or a
directory where a file goes. The host's own housekeeping, as root, makes directories for a route's run and
sweeps the mounts a dead harness left. Each test plants the link for real and checks the host file, directory
or mount it names is untouched, and that the record is still made (never a traceback).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import anyio
import pytest
from bounded import bounded

from tasks.load import get_task
from transports.registry import get
from transports.sandbox import Limits, Sandbox
from transports.sandbox import leftovers as leftovers_mod

TASK = get_task("file-write/control")
LIMITS = Limits(timeout_s=5)
QB = [sys.executable, "-c", "from qb_client.cli import main; main()"]
WRITERS = ["tempscript", "gha-run-safe", "gha-block-safe", "make-safe", "tmux-safe"]


@pytest.mark.parametrize("transport", WRITERS)
def test_a_link_planted_where_the_route_writes_its_files_is_never_followed(transport: str, require) -> None:
    """The first call plants links to a host path under every name a route's script could take; the second
    call's route writes its own files without following them: the host path never appears."""
    if transport.startswith("tmux"):
        require("tmux")
    if transport.startswith("make"):
        require("make")
    target = Path("/tmp") / f"qb-planted-{uuid.uuid4().hex}"
    plant = ("for n in $(seq 1 12); do for s in script gha recipe setup Makefile command; do "
             f"for e in '' .sh .mk; do ln -sf {target} /sandbox/meta/$s-$n$e 2>/dev/null; "
             f"ln -sf {target} /run/qb-files/$s-$n$e 2>/dev/null; done; done; done; echo planted")

    async def two_calls():
        t = get(transport)
        with Sandbox.create(TASK, LIMITS) as box:
            first = await t.deliver(plant, box)
            second = await t.deliver("printf 'two lines\\nfor make\\n' > out.txt", box)
            return first, second
    try:
        first, second = anyio.run(two_calls)
        assert not os.path.lexists(target), "the host wrote through a planted link"
        assert second.execution is not None
    finally:
        if os.path.lexists(target):
            os.unlink(target)


@pytest.mark.parametrize("transport, attack", [
    ("tempscript", "rm -f $0; mkdir $0; echo hello world > out.txt"),
    ("gha-run-safe", "rm -f $0; mkdir $0; echo hello world > out.txt"),
    ("make-safe", "rm -rf /sandbox/meta/* /run/qb-files/*; mkdir -p /sandbox/meta/Makefile-2/; echo hello world > out.txt"),
])
def test_the_route_s_files_replaced_by_a_directory_are_never_a_traceback(transport: str, attack: str, require) -> None:
    """A route's script or Makefile replaced by a directory: the host's removal of it is no traceback, and the
    files the command runs are read-only to it, so the run still passes undamaged."""
    if transport.startswith("make"):
        require("make")
    done = subprocess.run([*QB, "exec", "--task", "file-write/control", "--transport", transport, "--json",
                           "--command", attack], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr
    record = json.loads(done.stdout)
    assert record["verdict"]["passed"] and not record["damaged"]  # the files are read-only to the command


@pytest.mark.needs("root")
@pytest.mark.needs("bwrap")
def test_make_dir_never_follows_a_planted_link_to_the_host() -> None:
    """A run replaces meta/ with a link to a host directory: the tmux route's make_dir (as root) refuses to
    create its run directory through it, the delivery is a transport error, and the host directory stays
    empty (remove_tree does not reach through the link either)."""
    target = Path(tempfile.mkdtemp(prefix="qb-planted-target-"))

    async def go():
        with Sandbox.create(TASK, Limits(timeout_s=5)) as box:
            ex = await box.run(["sh", "-c", f"rm -rf /sandbox/meta && ln -s {target} /sandbox/meta && echo ok"])
            assert ex.stdout.text.strip() == "ok"
            with pytest.raises(OSError):
                box.make_dir(box.scratch("tmux"))
            from transports.paths.tmux import Tmux
            delivery = await Tmux().deliver("echo hello world > out.txt", box)
            return delivery
    try:
        delivery = bounded(lambda: anyio.run(go), 60)
        assert delivery.transport_error is not None
        assert os.listdir(target) == []
    finally:
        for name in os.listdir(target):
            p = target / name
            p.rmdir() if p.is_dir() else p.unlink()
        target.rmdir()


@pytest.mark.needs("root")
def test_the_leftover_sweep_never_unmounts_through_a_planted_link(monkeypatch: pytest.MonkeyPatch) -> None:
    """``qb-binds-<dead pid>-x`` in the temp directory that is a link is not swept: root never lazily unmounts
    the mount points of the directory it names (the sweep checks the owner and that it is no link)."""
    base = Path(tempfile.mkdtemp(prefix="qb-planted-sweep-"))
    victim = base / "victim"
    (victim / "m").mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "qb-planted", str(victim / "m")], check=True)
    try:
        dead = subprocess.Popen(["true"])
        dead.wait()
        (base / f"qb-binds-{dead.pid}-x").symlink_to(victim)
        monkeypatch.setattr(tempfile, "tempdir", str(base))
        monkeypatch.setattr(leftovers_mod, "_swept", False)
        leftovers_mod.sweep_leftovers()
        assert os.path.ismount(victim / "m")
    finally:
        subprocess.run(["umount", "-l", str(victim / "m")], capture_output=True)
        (base / f"qb-binds-{dead.pid}-x").unlink(missing_ok=True)
        (victim / "m").rmdir()
        victim.rmdir()
        base.rmdir()
