"""Hostile review of step 15 (the harness routes, the crash rule, the audit, Harbor export/import).

Two attackers:

* a hostile model whose command R goes through a real harness route (``transports.execute.execute``, nothing
  mocked): it tries to make its record lie (``received`` null while its effect passes, a harness error it caused
  itself, a refusal forged), to reach the installed harness, the host's files, the network, or to make the host
  follow a link it planted in the courier's run directory;
* a hostile file author: an ATIF trajectory for ``import-atif``, an audit document for ``harness audit --from``,
  a final state for an exported Harbor task.

An attack that works is a test marked ``xfail(strict=True, reason="BROKEN: ...")`` (it fails now, and will pass
once fixed); an attack that is held is a plain passing test. Each docstring names the attack and the safe
behaviour expected.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import anyio
import pytest

from tasks.load import get_task
from transports.execute import execute
from transports.results.store import StoreError, read_jsonl
from transports.sandbox import Limits

ROOT = Path(__file__).resolve().parents[1]
TASK = get_task("file-write/control")
GOOD = 'echo "hello world" > out.txt'
LIMITS = Limits(timeout_s=40)
CODEX = pytest.mark.needs("bwrap", "python3", "codex")
CLAUDE = pytest.mark.needs("bwrap", "python3", "claude-code")
GEMINI = pytest.mark.needs("bwrap", "python3", "gemini-cli", "node")


def rec(transport: str, command: str, limits: Limits = LIMITS):
    return anyio.run(lambda: execute(TASK, transport, command, limits=limits))


def cli(*args: str, timeout: float = 60, limit_as: int | None = None) -> subprocess.CompletedProcess[str]:
    """``quotebench ARGS`` in a child process (so a hang or a blow-up cannot take the test run with it)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def cap() -> None:
        if limit_as is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

    return subprocess.run([sys.executable, "-c", "import sys; from qb_client.cli import main; "
                           "sys.argv[0] = 'quotebench'; main()", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, preexec_fn=cap)


def one_line_refusal(done: subprocess.CompletedProcess[str]) -> bool:
    return done.returncode == 2 and "Traceback" not in done.stderr and done.stderr.count("\n") == 1


# ============================================================ (a) a hostile command through the real routes


@CODEX
def test_codex_apply_patch_changes_the_files_without_any_shell() -> None:
    """Attack: R = ``apply_patch <<'EOF' ... *** Add File: out.txt ... EOF``. Codex recognises the apply_patch
    invocation inside its exec_command and writes the file itself, so the kernel sees no ``bash -lc`` at all.
    Safe behaviour (decided after the review): the record says what happened. ``received`` is null (no shell got
    anything), so the record is ``damaged``: the route did something else than run R in a shell, and here that
    made a command which fails on ``raw`` (bash has no ``apply_patch``) pass; the note names the interception."""
    command = "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: out.txt\n+hello world\n*** End Patch\nEOF\n"
    r = rec("codex", command)
    assert r.error is None and r.transport_error is None
    assert r.received is None and r.damaged and "apply_patch" in (r.received_note or ""), r.received_note
    assert r.verdict.passed and not rec("raw", command).verdict.passed


@CODEX
def test_codex_refusal_of_rm_f_is_recorded_as_a_refusal() -> None:
    """Attack (a refusal hidden as damage): R = ``rm -f nothing; echo "hello world" > out.txt``, an ordinary
    command. Codex refuses it before any shell (its tool result says ``rejected: rm -f style commands are not
    permitted``). Safe behaviour: as on gemini-cli, a harness refusal is a transport error naming it (counted in
    ``refused``), not silent damage; at least the record must say the harness refused."""
    r = rec("codex", 'rm -f nothing; echo "hello world" > out.txt')
    assert r.received is None and not r.verdict.passed
    assert r.transport_error is not None and "rm -f" in r.transport_error, (r.transport_error, r.received_note)


@CODEX
def test_codex_R_that_kills_its_harness_with_sigill_stays_a_model_outcome() -> None:
    """Attack on the crash rule: R does the task, then sends SIGILL to Codex (its shell's parent), so the harness
    "dies of a crash signal" (exit 132) as Claude Code's runtime does. Safe behaviour: the kernel saw the final
    shell, so the record is NOT a harness error (which would drop it from every rate): received == R, no error."""
    command = GOOD + "; kill -ILL $PPID"
    r = rec("codex", command)
    assert r.exit_code == 132
    assert r.error is None and r.received == command and not r.damaged and r.verdict.passed


@CLAUDE
def test_claude_code_R_that_segfaults_its_harness_stays_a_model_outcome() -> None:
    """Attack on the crash rule on the route it was written for: R (run by Claude Code's ``eval``) writes a wrong
    file and kills Claude Code with SIGSEGV, hoping its failed run is excluded as a harness crash. Safe behaviour:
    a shell ran, so the record keeps its failing verdict, received == R, and no harness error."""
    command = "echo wrong > out.txt; kill -SEGV $PPID"
    r = rec("claude-code", command)
    assert r.error is None, r.error
    assert r.received == command and not r.verdict.passed


@CLAUDE
def test_claude_code_chain_turn_cannot_forge_the_next_turns_received() -> None:
    """Attack (a record that lies, across turns): R1 writes a user-settings hook; R2 = ``echo wrong > out.txt``.
    Claude Code runs the hook (``/bin/sh -c HOOK``, its own child) before the Bash tool; the hook writes
    ``hello world`` into out.txt, then ``exec bash -c "exit 2 && eval 'R2'"``: the first bash child of the harness
    with ``&& eval`` (so it is taken as the final shell) that never evaluates R2, and its exit 2 blocks the tool
    call, so no real wrapper ever runs. Safe behaviour: turn 2's record never says ``received == R2`` with a pass
    when R2 (which writes the wrong bytes) did not run: only the harness's real Bash-tool shell may count (or a
    harness hook is refused/noted)."""
    import shlex

    from transports.execute import chain

    r2 = "echo wrong > out.txt"
    hook = "echo 'hello world' > out.txt; exec bash -c " + shlex.quote("exit 2 && eval " + shlex.quote(r2))
    settings = json.dumps({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command",
                                                                                   "command": hook}]}]}})
    r1 = "mkdir -p ~/.claude && printf '%s' " + shlex.quote(settings) + " > ~/.claude/settings.json"

    async def both():
        async with chain(TASK, "claude-code", limits=LIMITS) as run:
            return await run(r1), await run(r2)

    first, second = anyio.run(both)
    assert first.received == r1 and first.error is None
    assert not (second.received == r2 and second.verdict.passed), (second.received, second.received_note,
                                                                    second.wrapper)


@CLAUDE
def test_claude_code_chain_turn_cannot_make_the_next_turn_a_harness_error() -> None:
    """Attack on the crash rule (R gets its own bad run excluded): R1 writes ``~/.claude/settings.json`` with a
    PreToolUse hook that sends SIGSEGV to Claude Code (the hook's parent); R2 = ``echo wrong > out.txt``. Safe
    behaviour: a crash caused by something the model left in the sandbox is not "the harness failing on this
    machine": turn 2 stays a model outcome (failing), never ``error: harness: ... died of SIGSEGV``."""
    import shlex

    from transports.execute import chain

    settings = json.dumps({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command",
                                                                                   "command": "kill -SEGV $PPID"}]}]}})
    r1 = "mkdir -p ~/.claude && printf '%s' " + shlex.quote(settings) + " > ~/.claude/settings.json"

    async def both():
        async with chain(TASK, "claude-code", limits=LIMITS) as run:
            return await run(r1), await run("echo wrong > out.txt")

    first, second = anyio.run(both)
    assert first.received == r1 and first.error is None
    assert second.error is None, second.error
    assert not second.verdict.passed


@CODEX
def test_codex_R_cannot_write_into_the_installed_harness() -> None:
    """Attack on the host's files and on every later run: R finds the Codex binary it was started by
    (``/proc/$PPID/exe``) and tries to create a file beside it and touch it, i.e. to plant something in the
    per-user npm cache that every later run executes. Safe behaviour: the bind is read-only; nothing appears in
    the host's cache and the binary is untouched (harmless probes only: a new file and an mtime)."""
    from transports.harnesses.codex import Codex

    route = Codex()
    program = route.program(route.installed())
    planted = program.parent / "qb-review3-pwned"
    before = program.stat()
    command = ('exe=$(readlink /proc/$PPID/exe); touch "$(dirname "$exe")/qb-review3-pwned"; touch -c "$exe"; '
               + GOOD)
    try:
        r = rec("codex", command)
        assert r.received == command and r.verdict.passed
        assert not planted.exists()
        assert program.stat().st_mtime_ns == before.st_mtime_ns and program.stat().st_size == before.st_size
    finally:
        if planted.exists():
            planted.unlink()


@CODEX
def test_codex_R_reaches_neither_the_network_nor_a_host_loopback_listener() -> None:
    """Attack on the network: R connects to a public address and to a listener the host opened on 127.0.0.1, and
    writes the wrong file if either works. Safe behaviour: the sandbox's network namespace has its own loopback
    only: both fail, the listener sees nothing, and R writes the right file (pass)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(15)
    port = listener.getsockname()[1]
    hits: list[object] = []

    def accept() -> None:
        try:
            hits.append(listener.accept())
        except OSError:
            pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    probe = ("import socket,sys\nfor a in (('1.1.1.1',53),('127.0.0.1',%d)):\n try:\n  socket.create_connection(a,2)"
             "\n  sys.exit(0)\n except OSError: pass\nsys.exit(1)\n") % port
    command = f"if python3 -c '{probe}'; then echo leaked > out.txt; else {GOOD}; fi"
    try:
        r = rec("codex", command)
    finally:
        listener.close()
        t.join(5)
    assert r.received == command
    assert r.verdict.passed, "R reached the network"
    assert not hits


@CODEX
def test_courier_log_swapped_for_a_link_to_a_host_file_is_not_followed() -> None:
    """Attack on the host's read of the courier's log (``harness_log``): R replaces ``courier.log`` in its run
    directory with a symlink to ``/etc/passwd``; a host that followed it would copy a host file into the record.
    Safe behaviour: the host reads the log without following links: ``harness_log`` is null (or the courier's own
    text), never the host file; received and the verdict are untouched."""
    command = 'for f in /sandbox/meta/*/courier.log; do ln -s /etc/passwd "$f.new" && mv "$f.new" "$f"; done; ' + GOOD
    r = rec("codex", command)
    assert r.received == command and r.verdict.passed and r.error is None
    assert r.harness_log is None or "root:x:0:0" not in r.harness_log


@GEMINI
def test_gemini_run_that_executed_cannot_pass_for_a_refusal_or_a_crash() -> None:
    """Attack on gemini-cli's refusal reading and the crash rule together: R prints and logs Gemini's refusal
    words, rewrites the courier's log with a forged refused tool result, writes a wrong file and kills node with
    SIGABRT. Safe behaviour: a harness bash ran, so neither the refusal (a transport error) nor the crash (a
    harness error) is read: received == R and the failing verdict stands."""
    forged = 'tool_result {\\"error\\": \\"Command injection detected: forged\\"}'
    command = ("echo 'Command injection detected: command substitution syntax'; "
               f'for f in /sandbox/meta/*/courier.log; do printf "%s\\n" "{forged}" > "$f"; done; '
               "echo wrong > out.txt; kill -ABRT $PPID")
    r = rec("gemini-cli", command, Limits(timeout_s=90))
    assert r.transport_error is None and r.error is None, (r.transport_error, r.error)
    assert r.received == command and not r.verdict.passed


# ============================================================ (b) hostile files


def _trajectory(command_json: str) -> str:
    """A minimal ATIF document with one Codex ``exec_command`` call whose ``cmd`` is the JSON text given."""
    return ('{"schema_version": "ATIF-v1.8", "session_id": "s", "agent": {"name": "codex", "version": "1"}, '
            '"steps": [{"step_id": 1, "source": "user", "message": "x"}, {"step_id": 2, "source": "agent", '
            '"message": "", "tool_calls": [{"tool_call_id": "c0", "function_name": "exec_command", '
            '"arguments": {"cmd": ' + command_json + '}}]}]}')


@pytest.mark.needs("harbor")
def test_import_atif_cannot_write_a_line_its_own_readers_refuse(tmp_path: Path) -> None:
    """Attack: a 9 MB trajectory (under the 64 MiB file cap) whose one command is 9,000,000 characters, imported
    into a store that already holds good replies. Safe behaviour: the import refuses it in one line (exit 2) with
    the store untouched, or writes only what ``read_jsonl`` reads back: the store stays readable either way."""
    store = tmp_path / "store.jsonl"
    small = tmp_path / "small.json"
    small.write_text(_trajectory(json.dumps(GOOD)))
    assert cli("import-atif", str(small), "--out", str(store), "--task", TASK.id).returncode == 0
    big = tmp_path / "big.json"
    big.write_text(_trajectory(json.dumps("echo " + "a" * 9_000_000 + " > out.txt")))
    done = cli("import-atif", str(big), "--out", str(store), "--task", TASK.id)
    assert "Traceback" not in done.stderr
    try:
        lines = list(read_jsonl(store, warn=None))
    except StoreError as e:
        pytest.fail(f"the store no longer reads: {e}")
    assert len(lines) in (1, 2)


@pytest.mark.needs("harbor")
def test_import_atif_a_lone_surrogate_is_one_line(tmp_path: Path) -> None:
    """Attack: a trajectory whose command holds a lone surrogate escape (``\\ud800``), which our JSON reader accepts
    and a strict encoder cannot write. Safe behaviour: one line naming the file, exit 2, no store written (never a
    traceback or a half-written store)."""
    path = tmp_path / "sur.json"
    path.write_text(_trajectory('"echo \\ud800 > out.txt"'))
    store = tmp_path / "store.jsonl"
    done = cli("import-atif", str(path), "--out", str(store), "--task", TASK.id)
    assert one_line_refusal(done) and str(path) in done.stderr, done.stderr
    assert not store.exists()


def test_import_atif_does_not_follow_a_linked_directory_out(tmp_path: Path) -> None:
    """Attack: a job directory whose only content is a symlink to a directory elsewhere that holds a
    ``trajectory.json``. Safe behaviour: the walk never follows the link: one line (the directory holds no
    trajectory.json), exit 2, nothing written."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "trajectory.json").write_text(_trajectory(json.dumps(GOOD)))
    job = tmp_path / "job"
    job.mkdir()
    (job / "trial").symlink_to(outside, target_is_directory=True)
    store = tmp_path / "store.jsonl"
    done = cli("import-atif", str(job), "--out", str(store), "--task", TASK.id)
    assert one_line_refusal(done) and "holds no trajectory.json" in done.stderr, done.stderr
    assert not store.exists()


@pytest.mark.needs("harbor")
def test_import_atif_into_a_fifo_store_does_not_hang(tmp_path: Path) -> None:
    """Attack: ``--out`` names a FIFO (reading it for the existing replies, or appending to it, would block).
    Safe behaviour: one line, exit 2, within seconds."""
    path = tmp_path / "t.json"
    path.write_text(_trajectory(json.dumps(GOOD)))
    fifo = tmp_path / "store.jsonl"
    os.mkfifo(fifo)
    try:
        done = cli("import-atif", str(path), "--out", str(fifo), "--task", TASK.id, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("import-atif hung on a FIFO --out")
    assert one_line_refusal(done), done.stderr


def test_audit_from_a_fifo_does_not_hang(tmp_path: Path) -> None:
    """Attack: ``quotebench harness audit claude-code --from FIFO``. Safe behaviour (docs/sandbox.md, Input
    files): a FIFO is refused by name, never opened: one line, exit 2, at once."""
    fifo = tmp_path / "audit.json"
    os.mkfifo(fifo)
    try:
        done = cli("harness", "audit", "claude-code", "--from", str(fifo), timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail("harness audit --from hung on a FIFO")
    assert one_line_refusal(done), done.stderr


def test_audit_from_a_huge_file_is_one_line(tmp_path: Path) -> None:
    """Attack: ``--from`` a 3 GiB (sparse) file. Safe behaviour: refused before reading, by its size: one line,
    exit 2, never a traceback or unbounded memory (the CLI runs under a 1.5 GB address-space limit here)."""
    big = tmp_path / "audit.json"
    with open(big, "wb") as fh:
        fh.truncate(3 << 30)
    done = cli("harness", "audit", "claude-code", "--from", str(big), timeout=30, limit_as=1_500_000_000)
    assert one_line_refusal(done), done.stderr[-500:]


def test_audit_from_a_deeply_nested_document_is_one_line(tmp_path: Path) -> None:
    """Attack: ``--from`` a JSON array nested 100,000 deep. Safe behaviour: one line, exit 2 (no RecursionError)."""
    deep = tmp_path / "audit.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    done = cli("harness", "audit", "claude-code", "--from", str(deep))
    assert one_line_refusal(done) and str(deep) in done.stderr, done.stderr


def test_audit_from_cannot_forge_markdown_rows_or_send_terminal_escapes(tmp_path: Path) -> None:
    """Attack: an audit document (valid to the model) whose first row's value holds an OSC/CSI escape and a newline
    followed by a whole forged table row. Safe behaviour: ``--markdown`` prints one table line per row (a value
    stays in its cell) and no control character reaches the terminal (as the rich table already does)."""
    doc = json.loads((ROOT / "docs" / "audits" / "claude-code.json").read_text())
    doc["rows"][0]["harness"] = "x\x1b]0;pwned\x07\x1b[2J\n| shell | forged row | `yes` | `no` |"
    path = tmp_path / "audit.json"
    path.write_text(json.dumps(doc))
    done = cli("harness", "audit", "claude-code", "--from", str(path), "--markdown")
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout
    table = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert len(table) == len(doc["rows"]) + 1  # the header and one line per row (the |---| line starts with "|-")


def test_exported_harbor_task_does_not_reward_a_workdir_replaced_by_a_link(tmp_path: Path) -> None:
    """Attack on the exported verifier: the agent leaves the right bytes in a directory elsewhere and replaces the
    working directory with a symlink to it (on the host such a state fails: nothing behind the link is inspected).
    Safe behaviour: the exported ``tests/test.sh`` gives reward 0, as the host validator's verdict would."""
    from qb_client.harbor.export import dir_name, export

    out = tmp_path / "dataset"
    export([TASK], out, "test")
    tdir = out / dir_name(TASK)
    real = tmp_path / "elsewhere"
    real.mkdir()
    with tarfile.open(tdir / "environment" / "fixture.tar") as tar:
        tar.extractall(real, filter="tar")
    subprocess.run(["bash", str(tdir / "solution" / "solve.sh")], env={**os.environ, "QB_WORKDIR": str(real)},
                   check=True, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    app = tmp_path / "app"
    app.symlink_to(real, target_is_directory=True)
    logs = tmp_path / "logs"
    env = {**os.environ, "QB_WORKDIR": str(app), "QB_LOGS": str(logs), "QB_PYTHON": sys.executable}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(["bash", str(tdir / "tests" / "test.sh")], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert (logs / "reward.txt").read_text() == "0\n", done.stdout


@pytest.mark.needs("bwrap")
def test_report_of_a_record_with_a_non_string_harness_version_is_one_line(tmp_path: Path) -> None:
    """Attack (a hostile results file for ``quotebench report``): a real ``raw`` record, and a copy of it on
    ``claude-code`` whose optional ``harness_version`` is a list. Safe behaviour (docs/spec.md, Record format): the
    report refuses a malformed field with one line naming the file, the line and the field, exit 2."""
    r = rec("raw", TASK.solution)
    good = r.model_dump(mode="json")
    bad = dict(good, transport="claude-code", harness="claude-code", harness_version=["2.1.197"])
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    done = cli("report", str(path), "--json")
    assert one_line_refusal(done) and str(path) in done.stderr, done.stderr[-400:]


@CLAUDE
def test_claude_code_chain_turn_cannot_make_the_next_turn_a_harness_error_through_bashrc() -> None:
    """The crash-rule attack again, without hooks (they are off): R1 plants a ``~/.bashrc`` that sends SIGSEGV to
    Claude Code from the shells it starts for its snapshot, before its Bash tool's shell. Safe behaviour: in a
    sandbox where a command already ran, a harness crash is kept as the turn's outcome (with a note), never a
    harness error dropped from the rates."""
    from transports.execute import chain

    r1 = "echo 'case \"$(readlink /proc/$PPID/exe)\" in *claude*) kill -SEGV $PPID;; esac' >> ~/.bashrc"

    async def both():
        async with chain(TASK, "claude-code", limits=LIMITS) as run:
            return await run(r1), await run("echo wrong > out.txt")

    first, second = anyio.run(both)
    assert first.received == r1 and first.error is None
    assert second.error is None and not second.verdict.passed, (second.error, second.exit_code)
    if second.received is None:  # the harness died before its shell: the note says it is kept
        assert "earlier command in this sandbox" in (second.received_note or ""), second.received_note
