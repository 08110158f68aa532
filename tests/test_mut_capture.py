"""What the received channel believes, pinned exactly (found by mutation testing, docs/mutation.md).

test_capture_channel.py attacks the channel through the transports; these pin the pieces a mutant
could change unseen: the rule that turns what the channel saw into ``received`` and its note, the
caps (MAX_CMDLINE, MAX_MESSAGES, MAX_NOTES, a note's 200 characters), and each check an announcer
must pass. The channel tests run a real outer bash on the host, holding a real channel on fd 9 and
reaching the real capture shim as ``$1``, so every byte of each command line is known.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tasks.load import get_task
from transports import nested
from transports.capture import InnerShell, judge, judge_argv, received_from, run_captured, shim_dir, with_channel
from transports.channel import MAX_CMDLINE, MAX_MESSAGES, Capture, ReceivedChannel
from transports.execute import execute
from transports.sandbox import Limits, Sandbox
from transports.shells import SHELLS

from bounded import bounded

ROOT = Path(__file__).resolve().parent.parent
SHIM = str(shim_dir() / "bash")
TASK = get_task("file-write/control")
FORKED_ONE = "the outer shell forked the inner shell (the paste split R into several commands)"


def host_run(script: str, *args: str, prelude: str = "printf outer >&9; ", **channel: object) -> Capture:
    """Run ``bash -c 'exec 9>&FD; PRELUDE SCRIPT' outer SHIM ARGS...`` on the host with the channel answered."""
    with ReceivedChannel(SHIM, **channel) as ch:  # type: ignore[arg-type]
        async def go() -> None:
            argv = ["bash", "-c", f"exec 9>&{ch.fd}; {prelude}{script}", "outer", SHIM, *args]
            await with_channel(ch, lambda: anyio.run_process(argv, pass_fds=(ch.fd,), check=False,
                                                              stdin=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin"}))
        bounded(lambda: anyio.run(go), 30)
        return ch.capture


def shim_cmdline(*args: str) -> bytes:
    """/proc/PID/cmdline of the shim run as ``$1 ARGS...``: the kernel runs its ``#!/bin/bash -p`` line."""
    return b"\0".join([b"/bin/bash", b"-p", SHIM.encode(), *(a.encode() for a in args)]) + b"\0"


def pid_of(note: str) -> int:
    found = re.match(r"(?:a capture message|an unexpected message) from pid (\d+)", note)
    assert found, note
    return int(found.group(1))


# -- the rule: what the channel saw -> received, note -------------------------------------------

def test_received_is_the_word_after_the_first_c_option() -> None:
    assert received_from([b"-c", b"echo a", b"zero", b"one"]) == "echo a"
    assert received_from([b"-ec", b"echo b"]) == "echo b"
    assert received_from([b"--norc", b"-c", b"echo c"]) == "echo c"  # a long option ending in c is not -c
    assert received_from([b"-x", b"-c", b""]) == ""
    assert received_from([b"-c", b"printf '\xff'"]) == "printf '\udcff'"
    assert received_from([b"-c"]) is None
    assert received_from([b"-x", b"script.sh"]) is None
    assert received_from([]) is None


def test_the_boundary_wins_over_forked_shells_and_the_lowest_forked_pid_over_arrival() -> None:
    assert judge_argv(Capture()) == (None, None)
    assert judge(Capture()) == (None, None)
    both = Capture(boundary=[[b"-c", b"in place"]], forked=[(5, [b"-c", b"forked"])])
    assert judge(both) == ("in place", None)
    two = Capture(boundary=[[b"-c", b"first"], [b"-c", b"second"]])
    assert judge(two) == ("first", "2 shells claimed the outer shell's pid; received is the first")
    forked = Capture(forked=[(9, [b"-c", b"nine"]), (7, [b"-c", b"seven"]), (8, [b"-c", b"eight"])])
    assert judge_argv(forked) == ([b"-c", b"seven"],
                                  "the outer parse started 3 shells; received is the first one's program")
    one = Capture(forked=[(7, [b"-x"])], ignored=["one thing", "another"])
    assert judge_argv(one) == ([b"-x"], f"one thing; another; {FORKED_ONE}")
    assert judge(one) == (None, f"one thing; another; {FORKED_ONE}")
    assert judge(Capture(ignored=["only this"])) == (None, "only this")


def test_a_new_process_writes_each_shim_and_the_enter_file_once_and_removes_them_when_it_exits(tmp_path) -> None:
    # a new interpreter (the shim directory is made once per process) importing what PYTHONPATH names first
    # (under mutmut the mutated copy): -P keeps the current directory off its import path. Its PATH starts
    # with another bash: the shims exec the system's shells (SYSTEM_PATH), not the first on the caller's PATH
    (tmp_path / "bash").write_text("#!/bin/sh\n")
    (tmp_path / "bash").chmod(0o755)
    code = ("import json, os; from transports.capture import shim_dir; d = shim_dir(); print(json.dumps("
            "{'dir': str(d), 'pid': os.getpid(), 'again': shim_dir() == d, 'mode': d.stat().st_mode & 0o777,"
            " 'files': {p.name: [p.read_text(), p.stat().st_mode & 0o777] for p in sorted(d.iterdir())}}))")
    path = os.pathsep.join([p for p in (os.environ.get("PYTHONPATH"), str(ROOT)) if p])
    done = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=60, check=True,
                          env={**os.environ, "PYTHONPATH": path, "PATH": f"{tmp_path}:{os.environ['PATH']}"})
    seen = json.loads(done.stdout)
    assert seen["again"] and seen["mode"] == 0o755
    assert sorted(p.name for p in shim_dir().iterdir()) == sorted(seen["files"])  # this process's, made once
    assert os.path.basename(seen["dir"]).startswith(f"qb-shim-{seen['pid']}-")
    assert not os.path.exists(seen["dir"])  # removed when that process exited
    expected = {}
    for name in ("bash", "busybox", "dash", "sh", "zsh"):
        real = shutil.which(name, path="/usr/local/bin:/usr/bin:/bin") or f"/bin/{name}"
        expected[name] = [("#!/bin/bash -p\n# quotebench capture shim (transports/capture.py): announce, wait for the"
                           f" host, then be {name}\n{{ printf shim >&9 && kill -STOP $$; }} 2>/dev/null\nexec 9>&-\n"
                           f'exec -a {name} {real} "$@"\n'), 0o755]
    enter = seen["files"].pop("enter")
    assert seen["files"] == expected
    assert enter[0] == ('hash -p "${BASH_ENV%/*}/${QB_FINAL_SHELL:-bash}" "${QB_FINAL_SHELL:-bash}"\n'
                        'if [ "${QB_CHANNEL:-9}" != 9 ]; then eval "exec 9>&$QB_CHANNEL $QB_CHANNEL>&-"; fi\n'
                        "printf outer >&9 2>/dev/null\nunset QB_CHANNEL QB_FINAL_SHELL BASH_ENV\n")


# -- the channel: which announcers are believed ------------------------------------------------

def test_the_shim_exec_d_in_place_is_the_boundary_once() -> None:
    # the shim execs bash in the same pid, which execs the shim again: only the first announcement counts
    cap = host_run('exec "$1" -c "exec $1 -c second"')
    assert cap.boundary == [[b"-c", f"exec {SHIM} -c second".encode()]]
    assert cap.forked == [] and cap.ignored == []
    assert judge(cap) == (f"exec {SHIM} -c second", None)


def test_only_the_first_announcement_from_the_outer_shells_pid_is_looked_at() -> None:
    # the outer shell announces and stops itself (failing verification), then execs the real shim: too late
    cap = host_run('printf shim >&9; kill -STOP $$; exec "$1" -c second')
    assert cap.boundary == [] and cap.forked == []
    assert cap.ignored == [f"a capture message from pid {cap.outer_pid} failed verification: it is not the capture shim"]


def test_a_command_line_of_exactly_max_cmdline_bytes_is_read_whole_and_one_more_is_refused() -> None:
    program = "echo " + "b" * 70000  # longer than one read of /proc (64 KiB)
    base = len(shim_cmdline("-c", program))
    for total in (MAX_CMDLINE, MAX_CMDLINE + 1):
        pads, need = [], total - base
        while need > 0:
            n = min(100000, need)
            pads.append("a" * (n - 1))
            need -= n
        assert len(shim_cmdline("-c", program, *pads)) == total
        cap = host_run('exec "$1" "${@:2}"', "-c", program, *pads)
        if total == MAX_CMDLINE:
            assert cap.boundary == [[b"-c", program.encode(), *(p.encode() for p in pads)]]
            assert cap.ignored == []
        else:
            assert cap.boundary == []
            assert cap.ignored == [f"a capture message from pid {cap.outer_pid} failed verification: "
                                   "its command line is longer than 1048576 bytes"]


def test_forked_shims_are_inspected_up_to_max_messages_then_counted_once() -> None:
    cap = host_run('for i in $(seq 65); do "$1" -c "exit $i" </dev/null & done; wait')  # one past the cap
    assert MAX_MESSAGES == 64
    assert len(cap.forked) == 64 and cap.boundary == []
    assert all(argv[0] == b"-c" and re.fullmatch(rb"exit \d+", argv[1]) for _pid, argv in cap.forked)
    assert cap.ignored == ["more than 64 shells were forked; the rest were not inspected"]
    assert judge(cap)[1] == ("more than 64 shells were forked; the rest were not inspected; "
                             "the outer parse started 64 shells; received is the first one's program")


def test_a_shim_forked_deeper_than_the_outer_shell_is_not_at_the_boundary() -> None:
    cap = host_run('( "$1" -c deeper </dev/null; : ); "$1" -c direct </dev/null')
    assert [argv for _pid, argv in cap.forked] == [[b"-c", b"direct"]]
    assert cap.ignored == [] and cap.boundary == []


def test_the_shim_without_arguments_is_believed_with_an_empty_argv() -> None:
    cap = host_run('"$1" </dev/null')
    assert [argv for _pid, argv in cap.forked] == [[]]
    assert judge(cap) == (None, FORKED_ONE)


def test_the_first_message_must_be_the_outer_shells() -> None:
    cap = host_run('printf outer >&9; exec "$1" -c late', prelude="printf hello >&9; ")
    assert cap.ignored == ["the channel's first message did not come from the outer shell"]
    assert cap.outer_pid is not None and cap.boundary == [[b"-c", b"late"]]


def test_an_empty_message_is_read_and_noted() -> None:
    # a zero-length record still carries its sender's credentials: it is a message, not the end of the batch
    send = "import socket; socket.socket(fileno=9).send(b'')"
    cap = host_run(f'python3 -c "{send}"; exec "$1" -c after')
    assert len(cap.ignored) == 1 and cap.ignored == [f"an unexpected message from pid {pid_of(cap.ignored[0])}"]
    assert pid_of(cap.ignored[0]) != cap.outer_pid and cap.boundary == [[b"-c", b"after"]]


def test_a_repeated_announcement_of_a_pending_pid_does_not_replace_its_entry() -> None:
    cap = host_run('printf shim >&9; printf shim >&9; exec "$1" -c "echo once"')
    assert cap.boundary == [[b"-c", b"echo once"]] and cap.ignored == []


def test_unexpected_messages_are_noted_eight_times_then_counted() -> None:
    cap = host_run('for i in $(seq 12); do printf junk >&9; done')
    pid = cap.outer_pid
    assert cap.ignored == [f"an unexpected message from pid {pid}"] * 8 + ["more messages were ignored"]


def test_an_announcer_that_is_not_the_shim_is_named_and_its_note_is_cut_at_200(tmp_path) -> None:
    long_dir = tmp_path / ("d" * 150)
    long_dir.mkdir()
    dash = long_dir / "dash"
    shutil.copy(shutil.which("dash", path="/usr/bin:/bin"), dash)
    stop = "printf shim >&9; kill -STOP $$"
    cap = host_run(f"{dash} -c '{stop}'; dash -c '{stop}'; bash -c '{stop}'", exe=frozenset({"bash", "sh"}))
    assert cap.forked == [] and len(cap.ignored) == 3
    first = f"a capture message from pid {pid_of(cap.ignored[0])} failed verification: it runs {dash}, not bash or sh"
    assert len(first) > 200 and cap.ignored[0] == first[:200]
    assert cap.ignored[1:] == [
        f"a capture message from pid {pid_of(cap.ignored[1])} failed verification: it runs /usr/bin/dash, not bash or sh",
        f"a capture message from pid {pid_of(cap.ignored[2])} failed verification: it is not the capture shim"]


@pytest.mark.parametrize("var", ["LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH"])
def test_a_shim_started_with_a_loader_variable_is_refused(var: str) -> None:
    # bash puts the later assignment first in the environment: the loader variable is not its first entry
    cap = host_run(f'{var}=/nonexistent QB_BEFORE=1 "$1" -c forged </dev/null 2>/dev/null; "$1" -c honest </dev/null')
    assert [argv for _pid, argv in cap.forked] == [[b"-c", b"honest"]]
    assert cap.ignored == [f"a capture message from pid {pid_of(cap.ignored[0])} failed verification: "
                           f"it was started with {var} set"]


def test_expect_names_what_must_follow_the_interpreter() -> None:
    cap = host_run('exec "$1" -c "echo x"', expect=("-p", SHIM, "-c"))
    assert cap.boundary == [[b"echo x"]]
    cap = host_run('exec "$1" -c "echo x"', expect=(SHIM,))
    assert cap.boundary == [] and cap.ignored[0].endswith("failed verification: it is not the capture shim")


def test_an_announcer_still_pending_when_the_run_ends_is_judged_by_drain() -> None:
    # a subshell of the outer shell says "shim" but never stops: the run ends within STOP_WAIT_S
    cap = host_run("(printf shim >&9; sleep 3; :) >/dev/null 2>&1 & sleep 0.3")
    assert len(cap.ignored) == 1, cap.ignored
    pid = pid_of(cap.ignored[0])
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    assert cap.ignored == [f"a capture message from pid {pid} failed verification: it is not the capture shim"]


def test_an_announcer_that_never_stops_is_given_up_and_one_that_exits_is_gone() -> None:
    # A says "shim" and sleeps past STOP_WAIT_S (2 s): resumed, never read. B exits while pending and is
    # reaped by the outer bash; C exits once the outer shell has become a sleep that never reaps it (a
    # zombie): both are taken at once (gone), before STOP_WAIT_S, and fail verification
    cap = host_run("(printf shim >&9; sleep 3.5; :) >/dev/null 2>&1 & (printf shim >&9; sleep 0.2; :) & sleep 0.5; "
                   "(printf shim >&9; sleep 0.2; :) & exec sleep 2.6")
    assert cap.forked == [] and len(cap.ignored) == 2, cap.ignored
    assert cap.ignored == [f"a capture message from pid {pid_of(note)} failed verification: the process was gone"
                           for note in cap.ignored]


def test_a_shim_whose_name_holds_a_parenthesis_is_read_once_stopped(tmp_path) -> None:
    # /proc/PID/stat names the process in parentheses: "123 (a) S) T ...": the state follows the last ")"
    (tmp_path / "a) S").symlink_to(shutil.which("bash", path="/usr/bin:/bin"))
    cap = host_run(f"'{tmp_path}/a) S' -p \"$1\" -c comm </dev/null; :")
    assert [argv for _pid, argv in cap.forked] == [[b"-c", b"comm"]] and cap.ignored == []


# -- through the transports ----------------------------------------------------------------------

def test_an_inner_shell_transport_built_here_delivers_and_keeps_its_fields() -> None:
    mine = InnerShell("mine", "a boundary", nested.wrap)
    on_dash = mine.on(SHELLS["dash"])
    assert (on_dash.name, on_dash.boundary, on_dash.wrap, on_dash.shell) == ("mine", "a boundary", nested.wrap,
                                                                             SHELLS["dash"])
    record = anyio.run(lambda: execute(TASK, on_dash, "echo $0 > out.txt", limits=Limits(timeout_s=4)))
    assert record.transport == "mine"
    assert record.received == "echo bash > out.txt" and record.received_note is None and record.damaged
    refused = anyio.run(lambda: execute(TASK, on_dash, "echo a\x00b > out.txt", limits=Limits(timeout_s=4)))
    assert refused.transport_error == "the command contains a NUL byte, which no shell argument can carry"
    assert refused.received is None and refused.exit_code is None


def test_split_is_set_only_when_forked_shells_ran_and_none_in_the_outer_shells_place() -> None:
    async def split_of(outer: str) -> tuple[str | None, bool]:
        with Sandbox.create(TASK, Limits(timeout_s=4)) as box:
            delivery = await run_captured(box, ["bash", "-c", outer])
        return delivery.received, delivery.split

    assert anyio.run(split_of, 'bash -c "echo one" & wait; bash -c "echo two"') == ("echo two", False)
    assert anyio.run(split_of, 'bash -c "echo one"; :') == ("echo one", True)
    assert anyio.run(split_of, "echo none") == (None, False)


def test_a_flood_past_max_read_is_left_unread_until_the_run_ends() -> None:
    # the outer shell writes 9000 messages: the host reads at most MAX_READ (8192) while the run lasts, so
    # the rest wait on the full socket and the run ends at its timeout instead of the host reading on
    record = anyio.run(lambda: execute(TASK, "nested", 'x"; for i in $(seq 9000); do printf junk >&9; done; echo "',
                                       limits=Limits(timeout_s=2)))
    assert record.timed_out and record.limit_hit == "time" and record.exit_code is None
    notes = (record.received_note or "").split("; ")
    assert record.received == "x"
    assert notes == [f"an unexpected message from pid {pid_of(notes[0])}"] * 8 + ["more messages were ignored",
                                                                                   FORKED_ONE]
