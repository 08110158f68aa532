"""The gate of a launcher started ahead (transports.sandbox.gate): it hands the command the environment
bwrap gave it, byte for byte and in its order, and it starts only in an environment it reads nothing of."""

from __future__ import annotations

import os
import sys
import time

import anyio
import pytest

from tasks.load import get_task
from transports.sandbox import Sandbox, gate
from transports.sandbox.ahead import Launch

sys.path.insert(0, os.path.dirname(__file__))
from test_pool_attacks import _pair  # noqa: E402

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
    {"LD_PRELOAD": "/nonexistent-qb.so"},     # perl's loader would add its own error line to the command's
    {"GLIBC_TUNABLES": "glibc.malloc.check=3"},  # glibc's start reads it in every program, the gate's too
])
def test_an_environment_the_gate_would_read_gets_the_runs_own_launcher_and_the_same_result(extra) -> None:
    used, early, own = _environs(extra)
    assert not used
    assert early == own
    assert "perl" not in early[3]


def test_the_gate_takes_the_sandboxs_own_environment_and_refuses_what_perl_or_its_loader_reads() -> None:
    base = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC"}
    assert gate.takes(base)
    for extra in ({"PERL_UNICODE": "S"}, {"LD_LIBRARY_PATH": "/x"}, {"LOCPATH": "/x"}, {"GCONV_PATH": "/x"},
                  {"LC_ALL": "xx_XX.UTF-8"}, {"LANG": "xx_XX.UTF-8", "LC_ALL": ""}):
        assert not gate.takes({**base, **extra}), extra


@BWRAP
def test_an_argv_of_more_words_than_bwrap_takes_fails_the_same_with_a_launcher_started_ahead() -> None:
    # bwrap refuses a command line of over 9000 words; the gate would exec it directly
    early, own, used = _pair(["echo"] + ["-"] * 9000)
    assert not used
    assert early == own and early[0] != 0 and "maximum number of arguments" in early[2]
    early, own, used = _pair(["echo"] + ["-"] * gate.MAX_WORDS)
    assert not used and early == own  # MAX_WORDS and the program: one word over
    early, own, used = _pair(["echo"] + ["-"] * (gate.MAX_WORDS - 1))
    assert used and early == own


@BWRAP
def test_the_commands_signal_state_umask_personality_and_limits_are_the_same_with_a_launcher_started_ahead() -> None:
    early, own, used = _pair(["grep", "-E", "^(Sig(Blk|Ign|Cgt)|Umask|NoNewPrivs)", "/proc/self/status"])
    assert used and early == own
    early, own, used = _pair(["cat", "/proc/self/personality", "/proc/self/comm", "/proc/self/limits"])
    assert used and early == own


@BWRAP
def test_a_script_without_a_shebang_runs_the_same_through_the_gates_execvp() -> None:
    async def one(ahead: bool):
        with Sandbox.create(get_task(TASK)) as box:
            if ahead:
                assert box.start_ahead()
            script = box.workdir / "noshebang"
            script.write_text("echo hi from $0 $1\n")
            script.chmod(0o755)
            ex = await box.run(["./noshebang", "a"])
            assert ex.trace is not None
            return ex.exit_code, ex.stdout.text, ex.stderr.text, [e.argv for e in ex.trace.execs]

    async def go():
        return await one(True), await one(False)
    early, own = anyio.run(go)
    assert early == own == (0, "hi from ./noshebang a\n", "", [(b"/bin/sh", b"./noshebang", b"a")])


# -- what a command can still tell (docs/sandbox.md, "What a command can tell") ------------------------------------


@BWRAP
def test_the_commands_stdin_without_input_is_the_hosts_dev_null_with_a_launcher_started_ahead() -> None:
    # the host's /dev/null is a mount the command's namespace does not list; the sandbox's own would be listed
    probe = 'grep -c "^$(sed -n "s/^mnt_id:\\t//p" /proc/$$/fdinfo/0) " /proc/$$/mountinfo'
    early, own, used = _pair(["bash", "-c", f"n=$({probe}); echo listed=$n; cat /proc/$$/fdinfo/0; ls /proc/$$/fd"])
    assert used
    assert early[1] == own[1] and early[1].startswith("listed=0\n") and "\n0\n1\n2\n" in early[1]


@BWRAP
@pytest.mark.xfail(strict=True, reason="exec keeps a process's I/O counters: the gate's reads show in the command's")
def test_the_commands_io_counters_are_the_same_with_a_launcher_started_ahead() -> None:
    early, own, used = _pair(["grep", "-E", "^(rchar|syscr)", "/proc/self/io"])
    assert used
    assert early[1] == own[1]


@BWRAP
@pytest.mark.xfail(strict=True, reason="exec keeps a process's start time: the launcher's wait shows as the "
                   "command's own age")
def test_the_command_cannot_see_how_long_its_launcher_waited() -> None:
    command = ('read -r _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ start _ < /proc/$$/stat; read up _ < /proc/uptime; '
               'echo $(( ${up%.*}00 + 10#${up#*.} - start >= 100 ))')  # aged a second or more (100 ticks)

    async def one(ahead: bool):
        with Sandbox.create(get_task(TASK)) as box:
            if ahead:
                assert box.start_ahead()
            time.sleep(1.5)
            ex = await box.run(["bash", "-c", command])
            return ex.stdout.text

    async def go():
        return await one(True), await one(False)
    early, own = anyio.run(go)
    assert own == "0\n"
    assert early == own
