"""Probes several test files share.

``cli``: ``quotebench ARGS`` through its real entry point (bad input becomes one line and exit 2 there), without
the cost of a subprocess; ``cli_process``: the same in a child process, so a hang or a blow-up cannot take the
test run with it, and ``one_line_refusal`` for its answer. ``network_asked``: wraps ``Sandbox.run``, whose real
code still runs every time, and lists each run's ``network`` flag, so a test can say the harness had only its own
network namespace. ``traced`` and ``run_each``: plain ``bash -c`` runs in a fresh sandbox, bounded in time so a
hang fails the test. ``STORM``: a fork storm whose forkers are SIGKILLed mid-fork, then thread execs.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import anyio
import pytest
from bounded import bounded

from qb_client.cli import main
from tasks.load import get_task
from transports.sandbox import Limits, Sandbox

ROOT = Path(__file__).resolve().parents[1]


def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str, str]:
    """``quotebench ARGS`` in this process: (exit status, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["quotebench", *args])
    with pytest.raises(SystemExit) as ended:
        main()
    got = capsys.readouterr()
    return int(ended.value.code or 0), got.out, got.err


def cli_process(*args: str, timeout: float = 60, limit_as: int | None = None) -> subprocess.CompletedProcess[str]:
    """``quotebench ARGS`` in a child process, optionally under an address-space limit of ``limit_as`` bytes."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def cap() -> None:
        if limit_as is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

    return subprocess.run([sys.executable, "-c", "import sys; from qb_client.cli import main; "
                           "sys.argv[0] = 'quotebench'; main()", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, preexec_fn=cap)


def one_line_refusal(done: subprocess.CompletedProcess[str]) -> bool:
    """The bad-input rule: exit 2, no traceback, one line on stderr."""
    return done.returncode == 2 and "Traceback" not in done.stderr and done.stderr.count("\n") == 1


def network_asked(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """The ``network`` flag of every ``Sandbox.run`` from now on, in order (the real run goes on)."""
    seen: list[bool] = []
    real = Sandbox.run

    async def recording(self, argv, **kw):  # type: ignore[no-untyped-def]
        seen.append(bool(kw.get("network", False)))
        return await real(self, argv, **kw)

    monkeypatch.setattr(Sandbox, "run", recording)
    return seen


def traced(command: str, timeout: float = 4):
    """One plain run of ``bash -c command`` in a fresh sandbox of the control task: (execution, wall seconds,
    whether workdir/alive was still being rewritten 0.6 s after the run ended)."""
    async def go():
        with Sandbox.create(get_task("file-write/control"), Limits(timeout_s=timeout)) as box:
            start = time.monotonic()
            ex = await box.run(["bash", "-c", command])
            wall = time.monotonic() - start
            alive = box.workdir / "alive"
            moved = False
            if alive.exists():
                before = alive.stat().st_mtime_ns
                await anyio.sleep(0.6)
                moved = alive.stat().st_mtime_ns != before
            return ex, wall, moved
    return bounded(lambda: anyio.run(go), timeout + 60)


def run_each(commands: list[str], timeout: float = 5, **kw):
    """Each command as ``bash -c`` in one fresh sandbox without a task: [(execution, wall seconds)]."""
    async def go():
        out = []
        with Sandbox.create(None, Limits(timeout_s=timeout)) as box:
            for c in commands:
                start = time.monotonic()
                ex = await box.run(["bash", "-c", c], **kw)
                out.append((ex, time.monotonic() - start))
        return out
    return bounded(lambda: anyio.run(go), timeout * len(commands) + 60)


STORM = textwrap.dedent(r"""
    python3 - <<'PY'
    import os, threading, time
    for r in range(40):                      # forkers SIGKILLed while stopped at fork events
        pid = os.fork()
        if pid == 0:
            def forker():
                while True:
                    try:
                        if os.fork() == 0:
                            os._exit(0)
                    except OSError:
                        pass
            for _ in range(3):
                threading.Thread(target=forker, daemon=True).start()
            time.sleep(0.01)
            os.kill(os.getpid(), 9)
        os.waitpid(pid, 0)
    for r in range(30):                      # a thread's execve: its former tid vanishes unreported
        pid = os.fork()
        if pid == 0:
            threading.Thread(target=lambda: os.execv("/bin/true", ["true"])).start()
            time.sleep(5)
        os.waitpid(pid, 0)
    PY
    setsid sleep 5 >/dev/null 2>&1 & echo done""")


def results_file(path: Path, commands: tuple[str, ...], transports: tuple[str, ...],
                 task_id: str = "file-write/control") -> Path:
    """``path`` written as a campaign writes its results: each command executed on each transport, one draw
    each, in that order."""
    from transports.execute import execute

    task = get_task(task_id)
    runs = [(c, t) for c in commands for t in transports]
    records = [anyio.run(lambda: execute(task, t, c, draw=k)) for k, (c, t) in enumerate(runs)]
    path.write_text("".join(r.model_dump_json() + "\n" for r in records))
    return path
