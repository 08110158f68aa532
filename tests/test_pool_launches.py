"""Launchers started ahead for a delivery of several runs (``ssh``: its local side with the client's directory and
environment, then the embedded server's run of the request) and for a run fed a stream: each run takes the
launcher its own would equal, and the record is the one it would have been without."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from tasks.load import get_task
from transports.execute import execute
from transports.registry import get
from transports.sandbox import Sandbox, pool

pytestmark = pytest.mark.needs("bwrap", "openssh")
TASK = "file-write/control"
# $(...) and $HOME run in the local side's parse (what it sees of its start), the rest on the server's run
COMMAND = ("echo local $(env | grep -v ^QB_SANDBOX= | sort | tr '\\n' ' ') $HOME pid=$$; "
           "env | sort; echo pid=\\$\\$ ppid=\\$PPID")


async def _ssh_pair(command: str):
    """``command`` through ssh in a sandbox whose launchers were started ahead for ssh, and in one without."""
    ssh = get("ssh")
    await execute(get_task(TASK), ssh, "true")  # the endpoint is up from here on
    out = []
    for ahead in (True, False):
        with Sandbox.create(get_task(TASK)) as box:
            if ahead:
                assert box.start_ahead(ssh.launches(box))
            held = list(box.waiting)
            out.append((await ssh.deliver(command, box), held))
    return out


def test_an_ssh_delivery_takes_both_its_launchers_started_ahead_and_is_judged_as_without_them() -> None:
    (early, held), (own, none) = anyio.run(_ssh_pair, COMMAND)
    assert len(held) == 2 and all(w.used for w in held) and none == []
    assert early.received == own.received and early.received != COMMAND  # the local parse expanded it
    assert (early.split, early.received_note) == (own.split, own.received_note)
    a, b = early.execution, own.execution
    assert (a.exit_code, a.stdout.text, a.stderr.text) == (b.exit_code, b.stdout.text, b.stderr.text)
    # the local side saw its client's environment and pid 2; the server's run the sandbox's own, pid 2 too
    assert "local BASH_ENV=" in a.stdout.text and "HOME=/sandbox/home" in a.stdout.text
    assert a.stdout.text.count("pid=2") == 2 and "ppid=1" in a.stdout.text and "\nSHLVL=1\n" in a.stdout.text


def test_the_ssh_token_a_launcher_started_ahead_holds_serves_one_delivery_and_no_other_sandbox() -> None:
    """The token made for a sandbox's local side is taken by its delivery: a second delivery in the same
    sandbox gets a fresh one, and another sandbox's delivery never finds it registered."""
    async def go():
        ssh = get("ssh")
        await execute(get_task(TASK), ssh, "true")
        with Sandbox.create(get_task(TASK)) as box, Sandbox.create(get_task(TASK)) as other:
            assert box.start_ahead(ssh.launches(box))
            token = box.waiting[0].env["QB_SANDBOX"]
            first = await ssh.deliver("echo $QB_SANDBOX", box)  # expanded by the local side
            second = await ssh.deliver("echo again", box)
            # out of the double quotes: the local side runs a second client with the first delivery's token
            probe = await ssh.deliver(f'echo mine"; QB_SANDBOX={token} ssh qb-remote echo stolen; echo "$?', other)
        return token, first, second, probe
    token, first, second, probe = anyio.run(go)
    assert first.execution.stdout.text == token + "\n"  # the remote run has no token; the local parse put it
    assert second.execution.stdout.text == "again\n" and probe.execution.stdout.text == "mine\n255\n"
    assert "unknown sandbox token" in probe.execution.stderr.text


async def _stream(*chunks: bytes) -> AsyncIterator[bytes]:
    for c in chunks:
        await anyio.sleep(0.01)
        yield c


def test_a_streamed_input_reaches_the_command_of_a_launcher_started_ahead_whole() -> None:
    async def go():
        with Sandbox.create(get_task(TASK)) as box:
            assert box.start_ahead()
            waiting = box.waiting[0]
            ex = await box.run(["bash", "-c", "cat | wc -c; echo done"], stdin=_stream(b"a" * 70_000, b"bc\n"))
            return ex, waiting
    ex, waiting = anyio.run(go)
    assert waiting.used and ex.stdout.text == "70003\ndone\n"


def test_pooled_ssh_records_find_both_launchers_and_the_pool_keeps_starting_them() -> None:
    """Records through the pool: once the endpoint is up, each ssh sandbox built ahead comes with two launchers
    and its record uses both; ssh is never put among the transports whose launchers go unused."""
    task = get_task(TASK)
    ssh = get("ssh")

    async def go():
        records = [await execute(task, ssh, "echo x > out.txt") for _ in range(3)]
        for _ in range(200):
            if pool.idle("ssh"):
                break
            await anyio.sleep(0.05)
        box = pool.take(task, None, "ssh", ssh.launches)
        assert box is not None
        with box:
            held = list(box.waiting)
            delivery = await ssh.deliver("echo hi; echo there | cat", box)
        return records, held, delivery
    records, held, delivery = anyio.run(go)
    assert all(r.exit_code == 0 for r in records)
    assert len(held) == 2 and all(w.used for w in held)
    assert delivery.execution.stdout.text == "hi\nthere\n" and "ssh" not in pool._no_ahead
