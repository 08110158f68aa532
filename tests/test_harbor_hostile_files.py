"""Harbor's files, written by a hostile author: an ATIF trajectory for ``quotebench import-atif`` (huge, a lone
surrogate, behind a linked directory, into a FIFO store) and the final state an exported task's verifier judges
(a working directory replaced by a link). The bar is the bad-input rule (one line, exit 2, nothing half-written,
never a hang) and a reward only where the host validator would pass. The CLI runs in a child process, so a
hang or a blow-up fails the test instead of taking the run with it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from probes import cli_process, one_line_refusal

from tasks.load import get_task
from transports.results.store import StoreError, read_jsonl

TASK = get_task("file-write/control")
GOOD = 'echo "hello world" > out.txt'


def _trajectory(command_json: str) -> str:
    """A minimal ATIF document with one Codex ``exec_command`` call whose ``cmd`` is the JSON text given."""
    return ('{"schema_version": "ATIF-v1.8", "session_id": "s", "agent": {"name": "codex", "version": "1"}, '
            '"steps": [{"step_id": 1, "source": "user", "message": "x"}, {"step_id": 2, "source": "agent", '
            '"message": "", "tool_calls": [{"tool_call_id": "c0", "function_name": "exec_command", '
            '"arguments": {"cmd": ' + command_json + '}}]}]}')


@pytest.mark.needs("harbor")
def test_import_atif_never_writes_a_line_its_own_readers_refuse(tmp_path: Path) -> None:
    """Attack: a 9 MB trajectory (under the 64 MiB file cap) whose one command is 9,000,000 characters, imported
    into a store that already holds good replies. Safe behaviour: the import refuses it in one line (exit 2) with
    the store untouched, or writes only what ``read_jsonl`` reads back: the store stays readable either way."""
    store = tmp_path / "store.jsonl"
    small = tmp_path / "small.json"
    small.write_text(_trajectory(json.dumps(GOOD)))
    assert cli_process("import-atif", str(small), "--out", str(store), "--task", TASK.id).returncode == 0
    big = tmp_path / "big.json"
    big.write_text(_trajectory(json.dumps("echo " + "a" * 9_000_000 + " > out.txt")))
    done = cli_process("import-atif", str(big), "--out", str(store), "--task", TASK.id)
    assert "Traceback" not in done.stderr
    try:
        lines = list(read_jsonl(store, warn=None))
    except StoreError as e:
        pytest.fail(f"the store no longer reads: {e}")
    assert len(lines) in (1, 2)


@pytest.mark.needs("harbor")
def test_import_atif_refuses_a_lone_surrogate_in_one_line(tmp_path: Path) -> None:
    """Attack: a trajectory whose command holds a lone surrogate escape (``\\ud800``), which our JSON reader accepts
    and a strict encoder cannot write. Safe behaviour: one line naming the file, exit 2, no store written (never a
    traceback or a half-written store)."""
    path = tmp_path / "sur.json"
    path.write_text(_trajectory('"echo \\ud800 > out.txt"'))
    store = tmp_path / "store.jsonl"
    done = cli_process("import-atif", str(path), "--out", str(store), "--task", TASK.id)
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
    done = cli_process("import-atif", str(job), "--out", str(store), "--task", TASK.id)
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
        done = cli_process("import-atif", str(path), "--out", str(fifo), "--task", TASK.id, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("import-atif hung on a FIFO --out")
    assert one_line_refusal(done), done.stderr


def test_exported_harbor_task_does_not_reward_a_workdir_replaced_by_a_link(tmp_path: Path) -> None:
    """Attack on the exported verifier: the agent leaves the right bytes in a directory elsewhere and replaces the
    working directory with a symlink to it (on the host such a state fails: nothing behind the link is inspected).
    Safe behaviour: the exported ``tests/test.sh`` gives reward 0, as the host validator's verdict would."""
    from qb_client.adapters.harbor.export import dir_name, export

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
