"""Attacks a hostile review found after step 6's first round, each fixed and pinned here.

* Host writes into the command's own area: transports wrote their scripts into ``meta/`` under
  predictable names with ``Path.write_bytes``, which follows a symlink the command planted in an
  earlier call of the same sandbox (an MCP session): a root-owned host file with the next reply's text.
* The same files, replaced by a directory, made the host's ``unlink`` raise: a traceback, no record.
* A paste that breaks out of the quotes can run R through a shell of its own in the outer expansion
  (``${BASH_EXECUTION_STRING}``): the record said ``damaged: false``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import anyio
import pytest

from tasks.load import get_task
from transports.execute import execute
from transports.registry import get
from transports.sandbox import Limits, Sandbox

TASK = get_task("file-write/control")
LIMITS = Limits(timeout_s=5)
QB = [sys.executable, "-c", "from qb_client.cli import main; main()"]
WRITERS = ["tempscript", "gha-run-safe", "gha-block-safe", "make-safe", "tmux-safe"]


@pytest.mark.parametrize("transport", WRITERS)
def test_a_planted_link_never_makes_the_host_write_outside(transport: str, require) -> None:
    if transport.startswith("tmux"):
        require("tmux")
    if transport.startswith("make"):
        require("make")
    target = Path("/tmp") / f"qb-review-{uuid.uuid4().hex}"
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
def test_replacing_the_harness_files_is_never_a_traceback(transport: str, attack: str, require) -> None:
    if transport.startswith("make"):
        require("make")
    done = subprocess.run([*QB, "exec", "--task", "file-write/control", "--transport", transport, "--json",
                           "--command", attack], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr
    record = json.loads(done.stdout)
    assert record["verdict"]["passed"] and not record["damaged"]  # the files are read-only to the command


@pytest.mark.parametrize("transport, command", [
    ("nested", '$(exec bash -c "${BASH_EXECUTION_STRING:9:-1}" >/dev/null 2>&1)"; echo PAYLOAD; #'),
    ("ssh", '$(ssh qb-remote "${BASH_EXECUTION_STRING:15:-1}" >/dev/null 2>&1 </dev/null)"; echo PAYLOAD; #'),
])
def test_a_breakout_that_feeds_r_to_a_shell_of_its_own_is_still_damaged(transport: str, command: str) -> None:
    record = anyio.run(lambda: execute(TASK, transport, command, limits=LIMITS))
    assert "PAYLOAD" in record.stdout.text  # the outer shell ran the breakout
    assert record.damaged  # whatever a shell of R's own received, the command did not arrive as one program
    assert record.received_note
