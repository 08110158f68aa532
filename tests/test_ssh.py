"""The ``ssh`` transport, for real: OpenSSH (through its master connection) + the embedded asyncssh server.

What is checked
* a round trip works, the master connection is reused (one SSH connection for many commands) and the
  remote side runs in the sandbox's working directory with its environment;
* ``received`` is the exec request; where the local (outer) parse of ``ssh <target> "R"`` yields one word it
  equals what ``nested`` received and the verdict, exit code and output agree; where it splits, the request
  is the words joined with single spaces (OpenSSH's rule), computed here independently;
* exit status, signal mapping (128+n), stdout/stderr, truncation, timeout, cancellation;
* several deliveries at once on different sandboxes do not cross;
* the sandbox token is what routes a request: a missing, unknown or stale one is refused (255);
* :func:`transports.ssh.client.exec_request` matches OpenSSH 9.2's parse argument vector for argument vector,
  and the fallback asyncssh client gives the same requests;
* the remote side and the local side have no host network (under bwrap);
* several event loops (separate ``anyio.run`` calls) reuse one endpoint;
* the real-sshd mode, against a foreign SSH server that knows nothing of tokens.
"""

from __future__ import annotations

import asyncio
import re
import socket
import time
from pathlib import Path

import anyio
import asyncssh
import pytest

from tasks.load import get_task
from transports.ssh import transport as ssh_mod
from transports.execute import execute
from transports.raw import Raw
from transports.registry import get
from transports.base import Delivery
from transports.sandbox import Execution, Limits, Sandbox, isolation_available
from transports.ssh import HOST_ALIAS, Ssh, endpoint, outer_program
from transports.ssh.client import UsageError, exec_request, parse_command_line
from transports.ssh.server import TOKEN_ENV

pytestmark = pytest.mark.needs("openssh")  # skips locally, fails under CI=true (tests/conftest.py)

LIMITS = Limits(timeout_s=5)
BWRAP = isolation_available() == "bwrap"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def norm(text: str | None) -> str | None:
    """Without bwrap every sandbox shows its own host path; comparisons across sandboxes ignore it."""
    return None if text is None else re.sub(r"/[^\s'\"]*/qb-sandbox-[a-z0-9_]+", "/SANDBOX", text)


async def outer_words(command: str) -> list[str] | None:
    """The words the local shell passes to ``ssh`` for ``ssh <target> "R"`` (None: ssh was never called).

    The outer text is run for real in a sandbox with ``ssh`` defined as a function that records its
    arguments to a file (not stdout: R may redirect the local ssh's output, which is itself damage).
    """
    with Sandbox.create(limits=LIMITS) as box:
        out = box.meta / "words"
        probe = f"ssh() {{ [ -e {box.inside(out)} ] || printf '%s\\0' \"$@\" > {box.inside(out)}; }}\n"
        await Raw().deliver(probe + outer_program(command), box)
        if not out.exists():
            return None
        words = out.read_bytes().decode().split("\0")[:-1]
    assert words[0] == HOST_ALIAS
    return words[1:]


def verdict_key(record: object) -> tuple[bool, list[tuple[str, bool]]]:
    """The verdict without its detail texts (they may name the sandbox's own host path)."""
    v = record.verdict  # type: ignore[attr-defined]
    return v.passed, [(c.check, c.ok) for c in v.checks]


# -- round trip --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_round_trip_through_openssh_and_the_embedded_server() -> None:
    t = Ssh(client="openssh")
    with Sandbox.create(limits=LIMITS) as box:
        (box.workdir / "given.txt").write_text("fixture\n")
        d = await t.deliver("cat given.txt; pwd; echo $HOME; echo oops >&2; echo made > made.txt; exit 3", box)
        ep = await endpoint(None, "openssh")
        assert ep.server is not None and ep.master is not None and ep.master.poll() is None
        before = ep.server.connections
        for i in range(3):
            again = await t.deliver(f"echo {i}", box)
            assert again.execution is not None and again.execution.stdout.text == f"{i}\n"
        assert ep.server.connections == before, "every session must go through the one master connection"
        # $HOME is expanded by the local shell (double quotes), with the same sandbox environment
        assert d.received == f"cat given.txt; pwd; echo {box.inside(box.home)}; echo oops >&2; echo made > made.txt; exit 3"
        ex = d.execution
        assert ex is not None and ex.exit_code == 3 and not ex.timed_out
        assert ex.stdout.text == f"fixture\n{box.inside(box.workdir)}\n{box.inside(box.home)}\n"
        assert ex.stderr.text == "oops\n"
        assert (box.workdir / "made.txt").read_text() == "made\n"


@pytest.mark.anyio
async def test_remote_side_has_the_sandbox_environment_and_no_rc_files() -> None:
    with Sandbox.create(limits=LIMITS) as box:
        (box.home / ".bashrc").write_text("echo RC-READ\n")
        d = await Ssh().deliver("env | sort; shopt -q login_shell && echo LOGIN", box)
        assert d.execution is not None
        out = d.execution.stdout.text
        assert "RC-READ" not in out and "LOGIN" not in out
        assert TOKEN_ENV not in out and "SSH_" not in out
        assert f"HOME={box.inside(box.home)}\n" in out and "PATH=/usr/local/bin:/usr/bin:/bin\n" in out


# -- received and verdicts against nested ----------------------------------------------------

HOSTILE = [
    "printf '%s\\n' 'Don'\\''t \"quote\" me' > out.txt",
    'printf "%s\\n" "$HOME costs \\$5" > out.txt',
    "echo `echo backtick` $(echo subst) > out.txt",
    "cat > out.txt <<'EOF'\n$literal `not run` \\n \"q\" 'q'\nEOF",
    'echo "hello world" > out.txt',
    "printf '%s|' \"a  b\" c",
    'echo "unbalanced',
    "echo \\",
    "echo 'ünïcödé ✓ 日本語' > out.txt",
    "echo !! !$ '!' \"!\" > out.txt",
    "x='a\"b'; echo \"${x}\" > out.txt",
    "echo \"\"\"''\"\" > out.txt",
    "echo " + "long-word-" * 1000 + " > out.txt",
    "",
    "   ",
    "-q\" \"echo hi",
]


@pytest.mark.anyio
@pytest.mark.parametrize("command", HOSTILE, ids=range(len(HOSTILE)))
async def test_received_is_the_outer_parsed_request(command: str) -> None:
    task = get_task("file-write/control")
    ssh_rec = await execute(task, "ssh", command, limits=LIMITS)
    nested_rec = await execute(task, "nested", command, limits=LIMITS)
    words = await outer_words(command)
    if words is None:  # the local shell could not parse the outer text: no request was ever sent
        assert ssh_rec.received is None and nested_rec.received is None
        assert ssh_rec.exit_code == nested_rec.exit_code == 2
        return
    assert norm(ssh_rec.received) == norm(exec_request([HOST_ALIAS, *words]))  # OpenSSH's join (and rescan)
    if len(words) == 1 and words[0] and not words[0].startswith("-"):
        # one word: ssh and nested hand the same program to the same kind of shell
        assert norm(ssh_rec.received) == norm(nested_rec.received) == norm(words[0])
        assert verdict_key(ssh_rec) == verdict_key(nested_rec)
        assert (ssh_rec.exit_code, norm(ssh_rec.stdout.text), norm(ssh_rec.stderr.text)) == \
            (nested_rec.exit_code, norm(nested_rec.stdout.text), norm(nested_rec.stderr.text))


@pytest.mark.anyio
async def test_a_split_outer_parse_is_joined_with_single_spaces() -> None:
    with Sandbox.create(limits=LIMITS) as box:
        d = await Ssh().deliver("printf '%s|' \"a  b\" c", box)
        n = await get("nested").deliver("printf '%s|' \"a  b\" c", box)
    assert await outer_words("printf '%s|' \"a  b\" c") == ["printf '%s|' a", "b c"]
    assert d.received == "printf '%s|' a b c" and d.execution is not None and d.execution.stdout.text == "a|b|c|"
    assert n.received == "printf '%s|' a"  # bash -c makes the rest $0 $1


@pytest.mark.anyio
async def test_options_after_the_destination_are_openssh_options() -> None:
    # the outer parse gives the words  -q  "echo hi": OpenSSH rescans options after the host
    with Sandbox.create(limits=LIMITS) as box:
        d = await Ssh().deliver('-q" "echo hi', box)
        bad = await Ssh().deliver('-Z" "echo hi', box)
    assert d.received == "echo hi" and d.execution is not None and d.execution.stdout.text == "hi\n"
    assert bad.received is None and bad.execution is not None and bad.execution.exit_code == 255
    assert "unknown option -- Z" in bad.execution.stderr.text


TASK_IDS = [f"{family}/{tier}" for family in ("file-write", "heredoc", "remote-exec")
            for tier in ("control", "h1", "h2", "h3")]


@pytest.mark.anyio
@pytest.mark.parametrize("task_id", TASK_IDS)
async def test_same_verdict_as_nested_on_task_solutions(task_id: str) -> None:
    task = get_task(task_id)
    for command in (task.solution, task.solution_disclosed):
        if command is None:
            continue
        words = await outer_words(command)
        s = await execute(task, "ssh", command, limits=LIMITS)
        n = await execute(task, "nested", command, limits=LIMITS)
        if words is not None and len(words) == 1:
            assert norm(s.received) == norm(n.received), command
            assert verdict_key(s) == verdict_key(n), command
        else:
            assert norm(s.received) == norm(None if words is None else exec_request([HOST_ALIAS, *words])), command


# -- exit status, output, limits ---------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("command, code", [
    ("exit 7", 7), ("true", 0), ("false", 1), ("kill -TERM \\$\\$", 143), ("kill -KILL \\$\\$", 137),
    ("kill -INT \\$\\$", 130), ("nosuchcommand-qb", 127), ("exit 255", 255),
    pytest.param("kill -TERM $$", 143, marks=pytest.mark.needs("bwrap")),
])
async def test_exit_status_and_signals(command: str, code: int) -> None:
    # \$\$ reaches the remote shell as $$ (itself); a bare $$ is expanded by the local shell: under bwrap both
    # shells are pid 2 of their own pid namespace, so it is 143 too; without bwrap the remote kill would hit
    # the local ssh client (255), which is what an unisolated setup does
    with Sandbox.create(limits=LIMITS) as box:
        d = await Ssh().deliver(command, box)
        assert d.execution is not None and d.execution.exit_code == code
        if "\\" in command:
            assert d.received == command.replace("\\", "")
            r = await Raw().deliver(d.received, box)  # the remote program run directly exits the same way
            assert r.execution is not None and r.execution.exit_code == code


@pytest.mark.anyio
async def test_stdout_and_stderr_are_faithful() -> None:
    command = "printf 'out 1\\nünï ✓\\n\\tno newline'; printf 'err\\r\\n' >&2; printf '' >&2"
    with Sandbox.create(limits=LIMITS) as box:
        d = await Ssh().deliver(command, box)
        r = await Raw().deliver(command, box)
    assert d.execution is not None and r.execution is not None
    assert d.execution.stdout.text == r.execution.stdout.text == "out 1\nünï ✓\n\tno newline"
    assert d.execution.stderr.text == r.execution.stderr.text == "err\r\n"


@pytest.mark.anyio
async def test_large_output_is_capped_and_marked_like_raw() -> None:
    command = "head -c 200000 /dev/zero | tr '\\0' a"
    with Sandbox.create(limits=LIMITS) as box:
        d = await Ssh().deliver(command, box)
        r = await Raw().deliver(command, box)
    assert d.execution is not None and r.execution is not None
    assert d.execution.stdout.text == r.execution.stdout.text
    assert d.execution.stdout.truncated and r.execution.stdout.truncated


@pytest.mark.anyio
async def test_remote_timeout_is_reported_and_nothing_outlives_the_delivery() -> None:
    with Sandbox.create(limits=Limits(timeout_s=0.5)) as box:
        start = time.perf_counter()
        d = await Ssh().deliver("echo before; (sleep 1; echo late > late.txt) & sleep 5", box)
        elapsed = time.perf_counter() - start
        assert d.execution is not None and d.execution.timed_out and d.execution.exit_code is None
        assert d.execution.stdout.text == "before\n"  # the remote run timed out first and sent its output
        assert elapsed < 3.0
        await anyio.sleep(1.0)
        assert not (box.workdir / "late.txt").exists()


@pytest.mark.anyio
async def test_a_cancelled_delivery_stops_the_remote_run() -> None:
    with Sandbox.create(limits=LIMITS) as box:
        with anyio.move_on_after(0.3):
            await Ssh().deliver("sleep 0.8; echo late > late.txt", box)
        await anyio.sleep(1.0)
        assert not (box.workdir / "late.txt").exists()
        ep = await endpoint(None, "openssh")
        assert ep.server is not None and not ep.server._sessions  # unregistered


# -- concurrency and the token ------------------------------------------------------------------


@pytest.mark.anyio
async def test_concurrent_deliveries_on_different_sandboxes_do_not_cross() -> None:
    boxes = [Sandbox.create(limits=LIMITS) for _ in range(8)]
    results: dict[int, Delivery] = {}

    async def one(i: int) -> None:
        results[i] = await Ssh().deliver(f"echo {i} > who.txt; sleep 0.5; cat who.txt; ls", boxes[i])

    try:
        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for i in range(len(boxes)):
                tg.start_soon(one, i)
        assert time.perf_counter() - start < 0.5 * len(boxes)  # concurrent, not one after another
        for i, box in enumerate(boxes):
            d = results[i]
            assert d.received == f"echo {i} > who.txt; sleep 0.5; cat who.txt; ls"
            assert d.execution is not None and d.execution.stdout.text == f"{i}\nwho.txt\n"
            assert (box.workdir / "who.txt").read_text() == f"{i}\n"
    finally:
        for box in boxes:
            box.close()


@pytest.mark.anyio
async def test_concurrent_first_deliveries_wait_for_the_master() -> None:
    """A cold start with many deliveries at once: none may run before the control socket exists (a client
    that finds none falls back to a direct TCP connect, which the isolated local side cannot make)."""
    ssh_mod.shutdown()
    boxes = [Sandbox.create(limits=LIMITS) for _ in range(12)]
    results: dict[int, Delivery] = {}

    async def one(i: int) -> None:
        await anyio.sleep(i * 0.015)  # staggered: some arrive while the master is still connecting
        results[i] = await Ssh().deliver(f"echo {i}", boxes[i])

    try:
        async with anyio.create_task_group() as tg:
            for i in range(len(boxes)):
                tg.start_soon(one, i)
        for i in range(len(boxes)):
            d = results[i]
            assert d.execution is not None and d.execution.exit_code == 0, d.execution and d.execution.stderr.text
            assert d.received == f"echo {i}" and d.execution.stdout.text == f"{i}\n"
    finally:
        for box in boxes:
            box.close()


async def _raw_ssh(box: Sandbox, token: str | None, args: tuple[str, ...] = ()) -> Execution:
    """Run the transport's OpenSSH wrapper in ``box`` by hand, with the token of our choosing (or none)."""
    ep = await endpoint(None, "openssh")
    env = {TOKEN_ENV: token} if token is not None else {}
    wrapper = ep.client_dir / "bin-openssh" / "ssh"
    return await box.run([str(wrapper), HOST_ALIAS, *args], env=env, binds=ep.binds("openssh", box))


@pytest.mark.anyio
async def test_unknown_missing_or_stale_tokens_are_refused() -> None:
    ep = await endpoint(None, "openssh")
    assert ep.server is not None
    with Sandbox.create(limits=LIMITS) as box:
        stale = ep.server.open(box)
        await ep.server.finish(stale)
        for token, why in (("0" * 32, "unknown sandbox token"), (None, "no sandbox token"),
                           (stale, "unknown sandbox token")):
            ex = await _raw_ssh(box, token, args=("touch pwned",))
            assert ex.exit_code == 255, token
            assert why in ex.stderr.text and ex.stderr.text.count("\n") == 1
        assert not (box.workdir / "pwned").exists()


# -- OpenSSH's command-line grammar, and the fallback client ---------------------------------------

ARGVS: list[list[str]] = [
    ["printf", "%s", "a b"], ["-q", "echo", "hi"], ["--", "-q", "x"], ["echo", "-v"], ["-", "echo"],
    ["-o", "LogLevel=ERROR", "echo", "x"], ["-qT", "echo", "y"], ["", "x"], ["", ""], ["echo  two", " spaces "],
    ["-Z", "echo"], ["-o"], [],
]


@pytest.mark.anyio
async def test_exec_request_matches_openssh_for_each_argument_vector() -> None:
    ep = await endpoint(None, "openssh")
    assert ep.server is not None
    with Sandbox.create(limits=LIMITS) as box:
        for args in ARGVS:
            token = ep.server.open(box)
            try:
                ex = await _raw_ssh(box, token, args=tuple(args))
            finally:
                session = await ep.server.finish(token)
            try:
                expected = exec_request([HOST_ALIAS, *args])
            except UsageError:
                assert ex.exit_code == 255 and not session.requests, args
                continue
            if expected is None:
                assert session.requests == [] and session.shell_requests == 1, args
            else:
                assert session.requests == [expected], args


def test_parse_command_line_basics() -> None:
    assert parse_command_line(["-p", "22", "h", "-l", "u", "a", "-b"]) == ([("p", "22"), ("l", "u")], "h", ["a", "-b"])
    assert parse_command_line(["-p22", "--", "h", "-q"]) == ([("p", "22")], "h", ["-q"])
    with pytest.raises(UsageError):
        parse_command_line(["-q"])


@pytest.mark.anyio
async def test_fallback_client_gives_the_same_received_and_outcome() -> None:
    fallback, openssh = Ssh(client="asyncssh"), Ssh(client="openssh")
    for command in ("printf '%s|' \"a  b\" c; echo err >&2; exit 4", "echo `echo x` '$HOME'\"\\$\"", "-q\" \"echo hi",
                    "kill -TERM \\$\\$"):
        with Sandbox.create(limits=LIMITS) as box:
            f = await fallback.deliver(command, box)
            o = await openssh.deliver(command, box)
        assert f.execution is not None and o.execution is not None
        assert f.received == o.received, command
        assert (f.execution.exit_code, f.execution.stdout.text, f.execution.stderr.text) == \
            (o.execution.exit_code, o.execution.stdout.text, o.execution.stderr.text), command


@pytest.mark.anyio
@pytest.mark.parametrize("client", ["openssh", "asyncssh"])
async def test_a_request_that_is_not_utf8_is_refused(client: str) -> None:
    # the local shell can make bytes the exec request cannot carry as text; the server refuses it
    with Sandbox.create(limits=LIMITS) as box:
        d = await Ssh(client=client).deliver("echo $(printf '\\377') > out.txt", box)  # type: ignore[arg-type]
        assert d.received is None and d.execution is not None and d.execution.exit_code == 255
        assert not (box.workdir / "out.txt").exists()


def test_fallback_client_can_be_forced_by_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ssh_mod.CLIENT_ENV, "asyncssh")
    assert Ssh().client_kind() == "asyncssh"
    monkeypatch.setenv(ssh_mod.CLIENT_ENV, "openssh")
    assert Ssh().client_kind() == "openssh"
    assert Ssh(client="asyncssh").client_kind() == "asyncssh"


# -- isolation ------------------------------------------------------------------------------------


@pytest.fixture
def host_listener() -> object:
    """A TCP listener on the host's loopback (reachable from the host network namespace only)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    yield srv.getsockname()[1]
    srv.close()


@pytest.mark.anyio
@pytest.mark.needs("bwrap")
async def test_neither_side_reaches_the_host_network(host_listener: int) -> None:
    probe = f"exec 3<>/dev/tcp/127.0.0.1/{host_listener} && echo open || echo closed"
    with Sandbox.create(limits=LIMITS) as box:
        host = await box.run(["bash", "-c", probe], network=True)  # the control: the port is open
        assert host.stdout.text == "open\n"
        remote = await Ssh().deliver(probe + " 2>/dev/null", box)
        assert remote.execution is not None and remote.execution.stdout.text == "closed\n"
        # $(...) inside the double quotes runs in the local shell, before ssh: the local side is isolated too
        local = await Ssh().deliver(f"echo $({probe} 2>/dev/null)", box)
        assert local.received == "echo closed"


# -- lifetime -------------------------------------------------------------------------------------


def test_several_event_loops_share_one_endpoint() -> None:
    async def once() -> tuple[int, int | None]:
        with Sandbox.create(limits=LIMITS) as box:
            d = await Ssh().deliver("echo ok", box)
        assert d.execution is not None and d.execution.stdout.text == "ok\n"
        ep = await endpoint(None, "openssh")
        assert ep.server is not None and ep.master is not None
        return ep.server.port, ep.master.pid

    first = anyio.run(once)
    second = anyio.run(once)
    assert first == second


def test_configure_sets_the_default_target(tmp_path: Path) -> None:
    key = tmp_path / "id"
    key.write_text("not really a key")
    try:
        ssh_mod.configure("alice@example.org:2222", str(key))
        assert Ssh().remote == ssh_mod.Remote("alice", "example.org", 2222, str(key.resolve()))
        ssh_mod.configure("[::1]:2200", None)
        assert Ssh().remote == ssh_mod.Remote(None, "::1", 2200, None)
        with pytest.raises(ValueError):
            ssh_mod.configure("bob@host:notaport", None)
        with pytest.raises(ValueError):
            ssh_mod.configure("bob@host", str(tmp_path / "missing"))
    finally:
        ssh_mod.configure(None, None)
    assert Ssh().remote is None


@pytest.mark.anyio
async def test_real_sshd_mode_against_a_foreign_server(tmp_path: Path) -> None:
    """Any sshd: here an asyncssh server that knows no tokens and runs ``bash -c`` in its own directory."""
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    client_key = asyncssh.generate_private_key("ssh-ed25519")
    key_file = tmp_path / "id_ed25519"
    client_key.write_private_key(str(key_file))
    key_file.chmod(0o600)
    home = tmp_path / "home"
    home.mkdir()
    seen: list[tuple[str | None, dict[str, str], str | None]] = []

    async def handler(process: asyncssh.SSHServerProcess[bytes]) -> None:
        seen.append((process.command, dict(process.env), process.get_extra_info("username")))
        proc = await asyncio.create_subprocess_exec(
            "bash", "-c", process.command or "", cwd=home, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={"PATH": "/usr/bin:/bin"})
        out, err = await proc.communicate()
        process.stdout.write(out)
        process.stderr.write(err)
        process.exit(proc.returncode if proc.returncode >= 0 else 128 - proc.returncode)

    server = await asyncssh.listen("127.0.0.1", 0, server_host_keys=[host_key], encoding=None,
                                   authorized_client_keys=asyncssh.import_authorized_keys(
                                       client_key.export_public_key().decode()),
                                   process_factory=handler)
    port = server.sockets[0].getsockname()[1]
    t = Ssh(target=f"tester@127.0.0.1:{port}", key=str(key_file), client="openssh")
    try:
        with Sandbox.create(limits=LIMITS) as box:
            d = await t.deliver("printf '%s|' \"a  b\" c; pwd; exit 5", box)
        assert d.received == "printf '%s|' a b c; pwd; exit 5"
        assert seen == [(d.received, {}, "tester")]  # no token is sent to a foreign sshd
        assert d.execution is not None and d.execution.exit_code == 5
        assert d.execution.stdout.text == f"a|b|c|{home}\n"  # the remote cwd is whatever the server gives
    finally:
        ssh_mod.close_endpoint(t.remote)
        server.close()
        await server.wait_closed()


@pytest.mark.anyio
@pytest.mark.parametrize("client", ["openssh", "asyncssh"])
async def test_stdin_reaches_the_remote_command(client: str) -> None:
    """`ssh host "cmd" <<< text`: sshd hands the client's stdin to the command, so ssh agrees with nested here."""
    command = 'cat > out.txt" <<< "hello world'
    task = get_task("file-write/control")
    ssh_record = await execute(task, Ssh(client=client), command)  # type: ignore[arg-type]
    nested_record = await execute(task, get("nested"), command)
    assert ssh_record.received == nested_record.received == "cat > out.txt"
    assert ssh_record.verdict.passed and nested_record.verdict.passed


@pytest.mark.anyio
@pytest.mark.needs("bwrap")  # what the sandbox can see is only limited under bwrap
async def test_the_fallback_client_does_not_expose_the_project() -> None:
    project = Path(__file__).resolve().parent.parent
    with Sandbox.create(limits=LIMITS) as box:
        d = await Ssh(client="asyncssh").deliver(f'echo $(ls {project} 2>&1 | head -3)', box)
    assert d.execution is not None and d.execution.exit_code == 0
    assert "No such file or directory" in (d.received or "")


def test_a_deep_temp_directory_does_not_break_the_control_socket(tmp_path: Path) -> None:
    """OpenSSH binds the master's socket at ControlPath plus 17 characters, and a Unix socket path holds at
    most 107: under a deep TMPDIR (pytest's, a CI runner's) the endpoint's directory goes to /tmp instead."""
    import json
    import os
    import subprocess
    import sys

    deep = tmp_path / ("d" * 60)
    deep.mkdir()
    env = {**os.environ, "TMPDIR": str(deep)}
    done = subprocess.run([sys.executable, "-m", "qb_client", "exec", "--task", "file-write/control", "--transport",
                           "ssh", "--command", "echo 'hello world' > out.txt", "--json"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["verdict"]["passed"] and record["received"] == "echo 'hello world' > out.txt", record
