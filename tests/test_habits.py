"""The habitual baseline agent: deterministic, total over the suite, well-formed replies, and real executions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from qb_client.adapters.agents.habits import CONTRACTS, habitual_command_for, habitual_reply
from qb_client.replies.contracts import extract_command, quote_for_single
from tasks.load import get_task, suite
from transports.execute import execute
from transports.sandbox import Limits

LIMITS = Limits(timeout_s=5)
ROOT = Path(__file__).resolve().parents[1]
CELLS = {"RR": ("raw", "raw"), "RN": ("raw", "nested"), "NR": ("disclosed", "raw"), "NN": ("disclosed", "nested")}


def all_replies() -> dict[str, str]:
    return {f"{t.id} {c}": habitual_reply(t, c) for t in suite() for c in CONTRACTS}


def run(task_id: str, transport: str, command: str):
    return anyio.run(lambda: execute(get_task(task_id), transport, command, limits=LIMITS))


# ---------------------------------------------------------------- pure properties


def test_a_reply_for_every_task_and_contract() -> None:
    tasks = suite()
    assert len(tasks) == 56
    replies = all_replies()
    assert len(replies) == 56 * len(CONTRACTS)
    assert set(CONTRACTS) == {"raw", "native", "disclosed", "disclosed-single"}
    for key, reply in replies.items():
        assert isinstance(reply, str) and reply.strip(), key


def test_deterministic_in_process() -> None:
    assert all_replies() == all_replies()


def test_deterministic_across_processes_and_environments(tmp_path: Path) -> None:
    """A fresh interpreter with another hash seed, locale, HOME and cwd gives the same replies."""
    code = ("import json; from tasks.load import suite; from qb_client.adapters.agents.habits import CONTRACTS, habitual_reply; "
            "print(json.dumps({f'{t.id} {c}': habitual_reply(t, c) for t in suite() for c in CONTRACTS}))")
    env = {**os.environ, "PYTHONHASHSEED": "12345", "LC_ALL": "C", "LANG": "C", "HOME": str(tmp_path),
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                         check=True, timeout=60)
    assert json.loads(out.stdout) == all_replies()


def test_text_contracts_are_fenced_and_read_back_exactly() -> None:
    for t in suite():
        for c in ("raw", "disclosed", "disclosed-single"):
            reply = habitual_reply(t, c)
            assert "```bash\n" in reply or "````bash\n" in reply, (t.id, c)
            command, reason = extract_command(reply, c)
            assert reason is None
            assert command == habitual_command_for(t, c), (t.id, c)


def test_native_is_the_bare_raw_command() -> None:
    for t in suite():
        native = habitual_reply(t, "native")
        assert "```" not in native or "```" in habitual_command_for(t, "raw")
        assert native == habitual_command_for(t, "raw") == habitual_command_for(t, "native")


def test_disclosed_variants_are_the_documented_rewrites_of_the_raw_command() -> None:
    for t in suite():
        raw = habitual_command_for(t, "raw")
        assert habitual_command_for(t, "disclosed-single") == quote_for_single(raw)
        disclosed = habitual_command_for(t, "disclosed")
        # only double quotes (and the backslash already escaping one) change; $ and backticks are left alone
        assert disclosed.replace('\\\\\\"', '\\"').replace('\\"', '"') == raw.replace('\\"', '"'), t.id
        for ch in "$`'":
            assert disclosed.count(ch) == raw.count(ch), (t.id, ch)


def test_the_habits_look_typed() -> None:
    cmd = {t.id: habitual_command_for(t, "raw") for t in suite()}
    assert cmd["file-write/control"] == 'echo "hello world" > out.txt'
    assert cmd["hostile-filenames/control"] == 'mv draft.txt "quarterly report 2024.txt"'
    assert cmd["find-glob/control"] == 'find . -name "*.log" | sort > found.txt'
    assert cmd["grep-count/control"] == 'grep -c "connection timed out" server.log > count.txt'
    assert cmd["sed-replace/control"] == 'sed -i "s/Acme Corp/Acme Group/g" contract.txt'
    assert cmd["heredoc/control"].startswith("cat > notes.txt << EOF\n") and cmd["heredoc/control"].endswith("\nEOF")
    assert cmd["argv-pass/control"] == './show-args --title "Quarterly report" --pages 12'
    assert cmd["env-pass/control"] == 'GREETING="Good morning team" ./show-env'
    assert cmd["git-commit/control"].startswith('git commit -m "Add retry limit to deploy script" -m ')
    assert cmd["remote-exec/control"].startswith('./remote "echo ')
    assert cmd["container-exec/control"].startswith('./cexec "echo \\"$APP_ENV: ')
    assert cmd["file-write/h3"].count("echo") == 3 and "echo -n" in cmd["file-write/h3"]
    assert cmd["json-write/control"].startswith('echo "{\\"name\\": ')


# ---------------------------------------------------------------- real executions


def test_passes_the_file_write_control_on_raw() -> None:
    rec = run("file-write/control", "raw", habitual_command_for(get_task("file-write/control"), "raw"))
    assert rec.verdict.passed, rec.verdict


def test_fails_file_write_h2_on_raw() -> None:
    command = habitual_command_for(get_task("file-write/h2"), "raw")
    # $4 and `promo` stay active inside the double quotes; the trailing \SAVE\ also escapes the closing quote,
    # so on this tier bash already stops at "unexpected EOF" and price.txt is never written
    assert command.startswith('echo "Total: $42.50') and command.endswith('\\SAVE\\" > price.txt')
    rec = run("file-write/h2", "raw", command)
    assert not rec.verdict.passed


def test_disclosed_reply_for_file_write_h1_passes_on_nested() -> None:
    task = get_task("file-write/h1")
    command, _ = extract_command(habitual_reply(task, "disclosed"), "disclosed")
    assert command is not None
    rec = run("file-write/h1", "nested", command)
    assert rec.verdict.passed, rec.verdict


@pytest.fixture(scope="module")
def cell_results() -> dict[tuple[str, str], bool]:
    async def sweep() -> dict[tuple[str, str], bool]:
        results: dict[tuple[str, str], bool] = {}
        limit = anyio.Semaphore(12)

        async def one(task, cell: str, contract: str, transport: str) -> None:
            command, _ = extract_command(habitual_reply(task, contract), contract)
            assert command is not None
            async with limit:
                rec = await execute(task, transport, command, limits=LIMITS)
            results[(task.id, cell)] = rec.verdict.passed

        async with anyio.create_task_group() as tg:
            for task in suite():
                for cell, (contract, transport) in CELLS.items():
                    tg.start_soon(one, task, cell, contract, transport)
        return results

    return anyio.run(sweep)


# The tasks the habitual baseline passes on raw x raw (and, disclosed, on nested x nested). The baseline is
# not tuned to any score; these are pinned so that a change in a transport, a validator, the extraction or
# the habits shows up here as a changed set, to be explained, not as a silently different number.
HABIT_PASSES = {
    "file-write/control", "file-write/h1", "file-write/h3", "file-append/control", "file-append/h1",
    "file-append/h3", "hostile-filenames/control", "hostile-filenames/h1", "find-glob/control", "find-glob/h1",
    "find-glob/h3", "grep-count/control", "grep-count/h1", "sed-replace/control", "heredoc/control", "heredoc/h1",
    "argv-pass/control", "argv-pass/h1", "argv-pass/h3", "env-pass/control", "env-pass/h1", "env-pass/h3",
    "json-write/control", "json-write/h3", "json-edit/control", "json-edit/h3", "git-commit/control",
    "git-commit/h1", "git-commit/h3", "remote-exec/control",
}


def test_cell_pass_counts_are_reported(cell_results: dict[tuple[str, str], bool]) -> None:
    """Exact: which tasks pass in each cell (run pytest with -s to see the table)."""
    assert len(cell_results) == 56 * len(CELLS)
    counts = {cell: sum(ok for (_, c), ok in cell_results.items() if c == cell) for cell in CELLS}
    passes = {cell: {t for (t, c), ok in cell_results.items() if c == cell and ok} for cell in CELLS}
    assert counts == {"RR": 30, "RN": 1, "NR": 1, "NN": 30}
    assert passes["RR"] == passes["NN"] == HABIT_PASSES
    # only the quote-free heredoc survives a boundary it was not written for
    assert passes["RN"] == passes["NR"] == {"heredoc/control"}
    print("\nhabitual baseline pass counts over 56 tasks: "
          + "  ".join(f"{cell} {n}/56" for cell, n in counts.items()))
    for task in suite():
        marks = " ".join(cell if cell_results[(task.id, cell)] else "--" for cell in CELLS)
        print(f"  {task.id:28s} {marks}")
