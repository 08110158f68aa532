"""What the command line prints, run as a user runs it (a real subprocess, sometimes on a real pty).

Parsing errors are one line; user text is printed as it is (never rich markup or emoji); control
characters from a command never reach the terminal raw; values read as a user reads them; output files
follow one rule; tables fit 80 and 60 columns without cutting a number; progress never goes backwards.
"""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

QB = [sys.executable, "-c", "from qb_client.cli import main; main()"]


def qb(*args: str, columns: int | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    if columns:
        env["COLUMNS"] = str(columns)
    return subprocess.run([*QB, *args], capture_output=True, text=True, timeout=300, env=env, cwd=cwd,
                          stdin=subprocess.DEVNULL)


def one_line_error(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stdout == "" and r.stderr.count("\n") == 1, r.stderr
    assert "Traceback" not in r.stderr and "╭" not in r.stderr and "Usage:" not in r.stderr
    return r.stderr


# ---------------------------------------------------------------- parsing errors, --help, -h, --version


@pytest.mark.parametrize("args, expect", [
    (["exec", "--transprot", "raw"],
     "quotebench: error: No such option: --transprot (Possible options: --transport, --transports) "
     "(see quotebench exec --help)\n"),
    (["exec", "--memory", "2G", "--transport", "raw"],
     "quotebench: error: No such option: --memory (--memory is a global option: give it before the command, "
     "quotebench --memory VALUE exec ...)\n"),
    (["replay", "r.jsonl", "--out", "o.jsonl", "--concurrency", "0"],
     "quotebench: error: Invalid value for '--concurrency': Input should be greater than or equal to 1 "
     "(see quotebench replay --help)\n"),
    (["exec", "--task", "file-write/h1", "--command", "true"],
     "quotebench: error: give exactly one of --transport NAME, --transports A,B,C\n"),
    (["replay"], "quotebench: error: Missing argument 'REPLIES.jsonl'. (see quotebench replay --help)\n"),
    (["nope"], "quotebench: error: No such command 'nope'. (see quotebench --help)\n"),
    (["tasks", "shwo"], "quotebench: error: No such command 'shwo'. Did you mean 'show'? (see quotebench tasks --help)\n"),
])
def test_parsing_errors_are_one_line_naming_the_option(args: list[str], expect: str) -> None:
    assert one_line_error(qb(*args)) == expect


def test_help_is_intact_and_h_is_its_alias() -> None:
    for cmd in ([], ["exec"], ["tasks", "show"], ["replay"]):
        full, short = qb(*cmd, "--help"), qb(*cmd, "-h")
        assert full.returncode == short.returncode == 0, full.stderr
        assert full.stdout == short.stdout and "Usage: quotebench" in full.stdout
    assert "--transport" in qb("exec", "-h").stdout
    no_args = qb("tasks")  # a group with no command prints its help, as before
    assert "Usage: quotebench tasks" in no_args.stdout and "Traceback" not in no_args.stderr


def test_version_and_python_m() -> None:
    r = qb("--version")
    assert (r.returncode, r.stdout, r.stderr) == (0, f"quotebench {version('quotebench')}\n", "")
    m = subprocess.run([sys.executable, "-m", "qb_client", "--version"], capture_output=True, text=True, timeout=60)
    assert (m.returncode, m.stdout) == (0, r.stdout)
    m = subprocess.run([sys.executable, "-m", "qb_client", "exec", "--transprot", "x"], capture_output=True, text=True,
                       timeout=60)
    assert m.returncode == 2 and m.stderr.startswith("quotebench: error: No such option: --transprot")


# ---------------------------------------------------------------- user text is printed as it is


@pytest.mark.parametrize("task", ["x:smile:y", "[bold]x[/bold]", "192.168.1.5:1234", "a[/]b"])
def test_user_text_in_errors_is_neither_markup_nor_emoji(task: str) -> None:
    err = one_line_error(qb("exec", "--task", task, "--transport", "raw", "--command", "true"))
    assert err.startswith(f"quotebench: error: unknown task '{task}'")


def test_exec_prints_command_and_output_verbatim() -> None:
    text = "x:smile:y [bold]x[/bold] 192.168.1.5:1234 [red]r"
    r = qb("exec", "--task", "file-write/control", "--transport", "raw", "--command", f"echo '{text}'")
    assert r.returncode == 1, r.stderr
    assert re.search(r"^command +echo '" + re.escape(text) + r"' *$", r.stdout, re.M), r.stdout
    assert re.search(r"^stdout +" + re.escape(text) + r" *$", r.stdout, re.M), r.stdout
    assert "😄" not in r.stdout and "🔢" not in r.stdout


# ---------------------------------------------------------------- control characters never reach the terminal


HOSTILE = r"printf '\033]52;c;aGVsbG8=\007 \033[2J \033[31mred \302\233 \342\200\256 \r\n'"


def test_exec_escapes_the_commands_terminal_sequences() -> None:
    r = subprocess.run([*QB, "exec", "--task", "file-write/control", "--transport", "raw", "--command", HOSTILE],
                       capture_output=True, timeout=120)
    assert r.returncode == 1, r.stderr
    for raw in (b"\x1b", b"\x07", b"\r", b"\xc2\x9b", "\u202e".encode()):
        assert raw not in r.stdout and raw not in r.stderr, raw
    out = r.stdout.decode("utf-8")
    line = next(x for x in out.splitlines() if x.startswith("stdout"))
    assert line.split(None, 1)[1].rstrip() == r"\x1b]52;c;aGVsbG8=\x07 \x1b[2J \x1b[31mred \x9b \u202e \r"


def test_exec_received_and_command_are_escaped_too() -> None:
    r = subprocess.run([*QB, "exec", "--task", "file-write/control", "--transport", "raw", "--command",
                        "echo \x1b[2J\x1b]52;c;eA==\x07"], capture_output=True, timeout=120)
    assert b"\x1b" not in r.stdout and b"\x07" not in r.stdout
    text = r.stdout.decode()
    assert "command   echo \\x1b[2J\\x1b]52;c;eA==\\x07" in text
    assert "received  echo \\x1b[2J\\x1b]52;c;eA==\\x07" in text


def test_an_error_that_quotes_user_text_is_escaped_and_one_line() -> None:
    r = subprocess.run([*QB, "exec", "--task", "x\x1b[2J\ny\x9b", "--transport", "raw", "--command", "true"],
                       capture_output=True, timeout=60)
    assert r.returncode == 2 and b"\x1b" not in r.stderr and b"\xc2\x9b" not in r.stderr
    assert r.stderr.count(b"\n") == 1 and b"unknown task 'x\\x1b[2J y\\x9b'" in r.stderr


def test_replay_summary_and_report_escape_labels_from_records(tmp_path: Path) -> None:
    store = tmp_path / "replies.jsonl"
    store.write_text(json.dumps({"task_id": "file-write/control", "command": "echo hello world > out.txt",
                                 "config": {"provider": "p\x1b]52;c;eA==\x07", "model": "m:smile:", "effort": "[b]"}})
                     + "\n")
    out = tmp_path / "results.jsonl"
    wide = {**os.environ, "COLUMNS": "200"}
    r = subprocess.run([*QB, "replay", str(store), "--transports", "raw", "--out", str(out)], capture_output=True,
                       timeout=120, env=wide)
    assert r.returncode == 0, r.stderr
    assert b"\x1b" not in r.stdout + r.stderr and b"\x07" not in r.stdout + r.stderr
    assert b"p\\x1b]52;c;eA==\\x07:m:smile:@[b]" in r.stdout
    rep = subprocess.run([*QB, "report", str(out)], capture_output=True, timeout=120, env=wide)
    assert rep.returncode == 0, rep.stderr
    assert b"\x1b" not in rep.stdout and b"p\\x1b]52;c;eA==\\x07:m:smile:@[b]" in rep.stdout


# ---------------------------------------------------------------- values as a user reads them


def test_exec_shows_no_python_reprs() -> None:
    r = qb("exec", "--task", "file-write/control", "--transport", "nested", "--command", "echo 'it''s' \"a b\"")
    got = dict(re.findall(r"^(command|received|exit) +(.*?) *$", r.stdout, re.M))
    # the texts themselves, not repr()'s quotes and backslashes; (damaged) on a line of its own
    assert got == {"command": "echo 'it''s' \"a b\"", "received": "echo 'it''s' a", "exit": "0"}, r.stdout
    assert re.search(r"^received .*\n +\(damaged\) *$", r.stdout, re.M), r.stdout
    # a byte that is not UTF-8 cannot be carried by the shell argument: nothing received, no exit code
    bad = subprocess.run([*QB, "exec", "--task", "file-write/control", "--transport", "raw", "--command", b"echo \xff"],
                         capture_output=True, timeout=60)
    got = dict(re.findall(r"^(command|received|exit) +(.*?) *$", bad.stdout.decode(), re.M))
    assert got == {"command": "echo \\xff", "received": "none (no shell received a program)",
                   "exit": "none (no shell ran)"}, bad.stdout
    assert b"None" not in bad.stdout and b"'echo" not in bad.stdout


def test_tasks_show_reads_like_the_task_not_like_python() -> None:
    r = qb("tasks", "show", "json-edit/h2")
    assert r.returncode == 0, r.stderr
    for repr_ in ("None", "False", "True", "{'", "['", "': '"):
        assert repr_ not in r.stdout, repr_
    assert "  value: N3w$Pass`2024`!\\50%\n" in r.stdout
    assert "    except_paths: config.json\n" in r.stdout and "    new_paths: none\n" in r.stdout
    assert '      "verbose": false\n' in r.stdout


# ---------------------------------------------------------------- the output-file rule


@pytest.mark.parametrize("args, option", [
    (["replay", "{store}", "--transports", "raw", "--out", "{missing}/results.jsonl"], "--out"),
    (["run", "--model", "reference", "--tasks", "file-write/control", "--out", "{missing}/campaign"], "--out"),
    (["demo", "--html", "{missing}/report.html"], "--html"),
    (["demo", "--out", "{missing}/campaign"], "--out"),
    (["report", "{results}", "--html", "{missing}/report.html"], "--html"),
])
def test_a_file_in_the_way_of_an_output_directory_is_one_line(tmp_path: Path, args: list[str], option: str) -> None:
    store = tmp_path / "replies.jsonl"
    store.write_text(json.dumps({"task_id": "file-write/control", "command": "true"}) + "\n")
    results = tmp_path / "results.jsonl"
    results.write_text("")
    (tmp_path / "blocker").write_text("")
    missing = tmp_path / "blocker" / "such"
    argv = [a.format(store=store, missing=missing, results=results) for a in args]
    path = argv[argv.index(option) + 1]
    err = one_line_error(qb(*argv, cwd=tmp_path))
    assert err.startswith(f"quotebench: error: {option} ") and f"{tmp_path / 'blocker'} exists and is not a directory" in err


def test_missing_output_directories_are_made(tmp_path: Path) -> None:
    """One rule for every output: what is missing on the way is created (`--out runs/inspect`)."""
    store = tmp_path / "replies.jsonl"
    store.write_text(json.dumps({"task_id": "file-write/control", "command": "true"}) + "\n")
    r = qb("replay", str(store), "--transports", "raw", "--out", "runs/a/results.jsonl", cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / "runs/a/results.jsonl").is_file(), r.stderr
    r = qb("run", "--model", "reference", "--tasks", "file-write/control", "--contracts", "raw", "--transports", "raw",
           "--out", "runs/b/campaign", cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / "runs/b/campaign/results.jsonl").is_file(), r.stderr
    r = qb("report", "runs/a/results.jsonl", "--html", "pages/x/report.html", cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / "pages/x/report.html").is_file(), r.stderr


def test_demo_writes_its_page_into_its_out_directory(tmp_path: Path) -> None:
    from qb_client.cli.runs import demo_html

    assert demo_html(tmp_path / "d", None) == tmp_path / "d" / "quotebench-report.html"
    assert demo_html(None, None) == Path("quotebench-report.html")
    assert demo_html(tmp_path / "d", Path("x.html")) == Path("x.html")


def test_help_states_the_output_rule() -> None:
    assert "Missing directories are created." in qb("replay", "--help", columns=300).stdout
    assert "made with any missing parents." in qb("run", "--help", columns=300).stdout
    assert "missing directories on the way are created" in qb("--help", columns=300).stdout
    assert "quotebench-report.html in --out" in qb("demo", "--help", columns=300).stdout


# ---------------------------------------------------------------- tables that fit, numbers never cut


@pytest.fixture(scope="module")
def two_configs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small campaign of two offline configs (reference and habits) over 3 families, raw and nested."""
    out = tmp_path_factory.mktemp("two") / "campaign"
    for model in ("reference", "habits"):
        r = qb("run", "--model", model, "--out", str(out), "--tasks", "file-write/*,heredoc/*,env-pass/*",
               "--contracts", "raw,disclosed", "--transports", "raw,nested,escaped", "--json")
        assert r.returncode == 0, r.stderr
    return out / "results.jsonl"


def numbers_of(doc: dict) -> set[str]:
    """Every number the JSON report holds, as the terminal prints it (percent and points, one decimal)."""
    pct = lambda x: f"{x * 100:.1f}"  # noqa: E731
    pts = lambda x: "0.0" if abs(x) < 5e-4 else f"{x * 100:+.1f}"  # noqa: E731
    shown: set[str] = set()
    for c in doc["configs"]:
        for cell in c["cells"].values():
            if cell:
                shown |= {f"{pct(cell['rate'])} ({cell['passed']:g}/{cell['n']})"}
        for key in ("damage", "compensation", "matched_gap", "boundary_cost"):
            if c[key]:
                lo, hi = c[key]["ci95"]
                shown.add(f"{pts(c[key]['value'])} [{pts(lo)}, {pts(hi)}]")
        for key in ("retention", "exit_zero_wrong"):
            if c[key] is not None:
                shown.add(pct(c[key]))
        for a in c["damage_attribution"].values():
            if a:
                shown.add(f"{a['damaged']}/{a.get('failures', a.get('n'))}")
        for row in c["contracts"].values():
            shown |= {pct(v) for v in row.values() if v is not None}
        for row in c["families"].values():
            shown |= {pct(v) for v in row.values() if v is not None}
    return shown


@pytest.mark.parametrize("columns", [80, 60])
def test_report_tables_fit_and_never_cut_a_number(two_configs: Path, columns: int) -> None:
    doc = json.loads(qb("report", str(two_configs), "--json").stdout)
    r = qb("report", str(two_configs), columns=columns)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert max(len(x) for x in lines) <= columns
    assert "…" not in r.stdout
    wanted = numbers_of(doc)
    assert len(wanted) > 20
    missing = {n for n in wanted if not re.search(r"(?<![\d.+-])" + re.escape(n) + r"(?![\d.])", r.stdout)}
    assert not missing, (missing, r.stdout)


def test_wide_terminals_still_get_one_table(two_configs: Path) -> None:
    r = qb("report", str(two_configs), columns=200)
    assert re.search(r"┃\s*config\s*┃\s*draws\s*┃\s*RR\s*┃\s*RN\s*┃\s*NR\s*┃\s*NN\s*┃", r.stdout), r.stdout


# ---------------------------------------------------------------- progress: known totals, never backwards


def on_a_pty(args: list[str], cwd: Path) -> tuple[int, str]:
    """Run the CLI with stdout and stderr on a real terminal (so rich animates its bars); all it wrote."""
    master, slave = os.openpty()
    env = {**os.environ, "COLUMNS": "100", "TERM": "xterm"}
    proc = subprocess.Popen([*QB, *args], stdout=slave, stderr=slave, stdin=subprocess.DEVNULL, cwd=cwd, env=env)
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        ready, _, _ = select.select([master], [], [], 300)
        if not ready:
            proc.kill()
            raise AssertionError("no output for 300 s")
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=60), b"".join(chunks).decode("utf-8", "replace")


def test_progress_totals_are_known_up_front_and_never_go_backwards(tmp_path: Path) -> None:
    # the demo runs two campaigns (two agents); the totals must not grow when the second begins
    code, text = on_a_pty(["demo", "--transports", "raw", "--out", str(tmp_path / "demo"),
                           "--html", str(tmp_path / "r.html")], tmp_path)
    assert code == 0, text[-2000:]
    for bar, total in (("generate", 2 * 56 * 2), ("execute", 2 * 56 * 2 * 1)):
        seen = [(int(a), int(b)) for a, b in re.findall(bar + r"[^\n\r/]*?(\d+)/(\d+)", text)]
        assert len(seen) > 2, text[-2000:]
        assert {b for _, b in seen} == {total}, seen
        done = [a for a, _ in seen]
        assert done == sorted(done) and done[-1] == total


def test_a_resumed_run_with_nothing_to_do_says_so(tmp_path: Path) -> None:
    args = ["--model", "reference", "--out", str(tmp_path / "c"), "--tasks", "file-write/control",
            "--contracts", "raw", "--transports", "raw,nested"]
    assert qb("run", *args).returncode == 0
    again = qb("run", *args)
    assert again.returncode == 0, again.stderr
    assert f"nothing to do: 2 results already in {tmp_path / 'c'}/results.jsonl" in again.stderr
    store = tmp_path / "replies.jsonl"
    store.write_text(json.dumps({"task_id": "file-write/control", "command": "true"}) + "\n")
    out = tmp_path / "results.jsonl"
    assert qb("replay", str(store), "--transports", "raw,nested", "--out", str(out)).returncode == 0
    replay = qb("replay", str(store), "--transports", "raw,nested", "--out", str(out))
    assert f"nothing to do: 2 results already in {out}\n" in replay.stderr
