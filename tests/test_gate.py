"""The gate of a launcher started ahead (transports.sandbox.launch.LATE_GATE): it hands the command the environment
bwrap gave it, byte for byte and in its order, and it starts only in an environment it reads nothing of."""

from __future__ import annotations

import anyio
import pytest

from tasks.load import get_task
from transports.sandbox import Sandbox
from transports.sandbox.ahead import Launch

BWRAP = pytest.mark.needs("bwrap")
TASK = "file-write/control"
# /proc/self/environ of the command's first program, as it would print it: the order and every byte
ENVIRON = ["bash", "-c", "od -An -c /proc/$$/environ"]


def _environs(extra: dict[str, str]) -> tuple[bool, tuple, tuple]:
    """Whether a launcher was started ahead for a run in ``extra``, and that run's (environ dump, first exec's
    environment, stderr) against the same run's in a sandbox that starts its own launcher."""
    async def one(ahead: bool):
        with Sandbox.create(get_task(TASK)) as box:
            waiting = list(box.waiting) if ahead and box.start_ahead((Launch(env=extra),)) else []
            ex = await box.run(ENVIRON, env=box.env(extra))
            assert ex.trace is not None
            return any(w.used for w in waiting), (ex.exit_code, ex.stdout.text, ex.trace.execs[0].env, ex.stderr.text)

    async def go():
        return await one(True), await one(False)
    (used, early), (_, own) = anyio.run(go)
    return used, early, own


@BWRAP
def test_the_gate_hands_on_the_environment_in_bwraps_order_byte_for_byte() -> None:
    # values with '=', nothing, newlines and bytes that are not UTF-8; a bash gate would add 1 to SHLVL and
    # rebuild the environment in its own order (the od dump shows the order)
    extra = {"ZZ": "last?", "AA": "a=b=c", "MM": "", "NL": "two\nlines", "RAW": "\udcff\udcfe", "SHLVL": "7"}
    used, early, own = _environs(extra)
    assert used
    assert early == own
    environ = early[2]
    assert environ is not None
    assert {b"RAW=\xff\xfe", b"NL=two\nlines", b"SHLVL=7", b"AA=a=b=c", b"MM="} <= set(environ)
    assert early[3] == ""


@BWRAP
@pytest.mark.parametrize("extra", [
    {"PERL5OPT": "-Mstrict"},                 # would load a module in the gate, before the command
    {"PERL5LIB": "/sandbox"},                 # would put the command's own directory on the gate's @INC
    {"LC_ALL": "xx_XX.UTF-8"},                # a locale perl cannot set: it would warn on the command's stderr
])
def test_an_environment_the_gate_would_read_gets_the_runs_own_launcher_and_the_same_result(extra) -> None:
    used, early, own = _environs(extra)
    assert not used
    assert early == own
    assert "perl" not in early[3]
