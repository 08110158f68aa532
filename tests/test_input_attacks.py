"""Every input file is hostile: suites, task files, reply stores, results files,
``serve --record`` files, campaign directories and Inspect logs, each attacked through the real CLI.

Each test is an attack. The bar is the project's bad-input rule: exit 2, one
line on stderr naming the file (and the field or line), no traceback, nothing half-written. Every
attacking subprocess runs under an address-space limit and a timeout, so a regression (a read of
``/dev/zero``, an inflated zip bomb, a hang on a FIFO) fails the test instead of eating the machine.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FAMILIES = ROOT / "tasks" / "families"
QB = [sys.executable, "-c", "from qb_client.cli import main; main()"]
AS_LIMIT = 2 << 30  # enough for the CLI; far less than any unbounded read would take
DEEP = 200_000


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


def run(argv: list[str], *, timeout: float = 60, env: dict[str, str] | None = None,
        stdin: int | None = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    """``argv`` under the address-space limit; a hang past ``timeout`` is a failed test, not a stuck run."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env or dict(os.environ),
                              preexec_fn=_limits, stdin=stdin, errors="replace")
    except subprocess.TimeoutExpired:
        pytest.fail(f"{argv[2:]} hung for {timeout} s")


def qb(*args: str, **kw) -> subprocess.CompletedProcess[str]:
    return run([*QB, *args], **kw)


def one_error(r: subprocess.CompletedProcess[str], *parts: str) -> str:
    """Exit 2, no traceback, exactly one line on stderr holding every one of ``parts``; that line."""
    assert r.returncode == 2, (r.returncode, r.stderr[-3000:])
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr[-3000:]
    for p in parts:
        assert p in lines[0], (p, lines[0])
    return lines[0]


def suite_with(tmp_path: Path, *families: str) -> Path:
    d = tmp_path / "suite"
    d.mkdir()
    for f in families:
        shutil.copy(FAMILIES / f"{f}.toml", d / f"{f}.toml")
    return d


def with_source(suite: Path, source: str) -> Path:
    """The suite's argv-pass family, its helper program taken from ``source``."""
    f = suite / "argv-pass.toml"
    f.write_text(f.read_text().replace('source = "show-args"', f"source = {json.dumps(source)}"))
    return f


def line(**fields: object) -> str:
    return json.dumps(fields) + "\n"


def deep(n: int = DEEP) -> str:
    return "[" * n + "]" * n


# ---------------------------------------------------------------- 1. fixture sources stay in the suite


@pytest.mark.parametrize("source", ["/proc/self/environ", "/etc/passwd", "../../../../../../etc/passwd",
                                    "../families/../tools/show-args", "sub/../../x"])
def test_a_fixture_source_outside_the_suite_is_refused_at_load(tmp_path: Path, source: str) -> None:
    suite = suite_with(tmp_path, "argv-pass")
    f = with_source(suite, source)
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-qb-secret-1234"}
    r = qb("tasks", "list", "--suite", str(suite), env=env)
    one_error(r, str(f), "fixture.files", source)
    r = qb("exec", "--suite", str(suite), "--task", "argv-pass/control", "--transport", "raw",
           "--command", "cat show-args", "--json", env=env)
    assert "sk-ant-qb-secret-1234" not in r.stdout + r.stderr
    one_error(r, str(f), "fixture.files")


def test_a_fixture_source_through_a_symlink_leaving_the_tree_is_refused(tmp_path: Path) -> None:
    suite = suite_with(tmp_path, "argv-pass")
    (suite / "tools").mkdir()
    (suite / "tools" / "helper").symlink_to("/proc/self/environ")
    (suite / "linked").symlink_to("/etc")
    for source in ("tools/helper", "linked/passwd"):
        f = with_source(suite, source)
        one_error(qb("tasks", "list", "--suite", str(suite)), str(f), "fixture.files", source, "symlink")
        f.write_text((FAMILIES / "argv-pass.toml").read_text())


def test_a_fixture_source_that_is_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    suite = suite_with(tmp_path, "argv-pass")
    os.mkfifo(suite / "helper")
    f = with_source(suite, "helper")
    one_error(qb("tasks", "list", "--suite", str(suite)), str(f), "fixture.files", "FIFO")


def test_a_suite_may_ship_its_own_helper_and_the_sandbox_gets_its_bytes(tmp_path: Path) -> None:
    suite = suite_with(tmp_path, "argv-pass")
    (suite / "bin").mkdir()
    helper = (FAMILIES.parent / "tools" / "show-args").read_bytes() + b"# this suite's own copy\n"
    (suite / "bin" / "show-args").write_bytes(helper)
    with_source(suite, "bin/show-args")
    r = qb("exec", "--suite", str(suite), "--task", "argv-pass/control", "--transport", "raw",
           "--command", "cat show-args", "--json")
    assert r.returncode in (0, 1), r.stderr
    assert json.loads(r.stdout)["stdout"]["text"].endswith("# this suite's own copy\n")


def test_the_public_suite_still_finds_its_tools(tmp_path: Path) -> None:
    from tasks.fixture import file_bytes
    from tasks.load import get_task

    f = next(f for f in get_task("argv-pass/control").fixture.files if f.source)
    assert file_bytes(f) == (FAMILIES.parent / "tools" / "show-args").read_bytes()


# ---------------------------------------------------------------- 2. special files and links in suites


def test_a_fifo_named_toml_in_a_suite_does_not_hang_tasks_list(tmp_path: Path) -> None:
    suite = suite_with(tmp_path, "file-write")
    os.mkfifo(suite / "zz.toml")
    one_error(qb("tasks", "list", "--suite", str(suite), timeout=30), str(suite / "zz.toml"), "FIFO")


def test_a_toml_link_to_dev_zero_is_never_read(tmp_path: Path) -> None:
    suite = suite_with(tmp_path, "file-write")
    (suite / "x.toml").symlink_to("/dev/zero")
    one_error(qb("tasks", "list", "--suite", str(suite), timeout=30), str(suite / "x.toml"), "symlink")


def test_a_toml_link_out_of_the_suite_is_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    shutil.copy(FAMILIES / "heredoc.toml", outside / "heredoc.toml")
    suite = suite_with(tmp_path, "file-write")
    (suite / "heredoc.toml").symlink_to(outside / "heredoc.toml")
    one_error(qb("tasks", "list", "--suite", str(suite)), str(suite / "heredoc.toml"), "symlink")


def test_a_suite_manifest_that_is_a_fifo_does_not_hang(tmp_path: Path) -> None:
    suite = suite_with(tmp_path, "file-write")
    os.mkfifo(suite / "suite.json")
    one_error(qb("tasks", "list", "--suite", str(suite), timeout=30), str(suite / "suite.json"), "FIFO")


def test_an_oversized_task_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    suite = suite_with(tmp_path, "file-write")
    big = suite / "file-write.toml"
    with open(big, "a") as fh:
        fh.write(("# " + "x" * 1000 + "\n") * 2000)
    one_error(qb("tasks", "list", "--suite", str(suite)), str(big), "larger than")


def test_a_command_file_that_is_a_fifo_or_dev_zero_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "cmd"
    os.mkfifo(fifo)
    for path in (str(fifo), "/dev/zero"):
        r = qb("exec", "--task", "file-write/control", "--transport", "raw", "--command-file", path, timeout=30)
        one_error(r, path, "not a regular file")


def test_tasks_generate_never_waits_on_a_fifo_in_its_out_directory(tmp_path: Path) -> None:
    first = qb("tasks", "generate", "--seed", "fifo-1", "--out", str(tmp_path / "a"), "--json")
    assert first.returncode == 0, first.stderr
    out = tmp_path / "b"
    out.mkdir()
    for p in (tmp_path / "a").iterdir():
        os.mkfifo(out / p.name)
    r = qb("tasks", "generate", "--seed", "fifo-1", "--out", str(out), timeout=30)
    one_error(r, str(out), "not empty and not this suite")


# ---------------------------------------------------------------- 2. special files as JSONL inputs


def test_a_reply_store_that_is_a_fifo_does_not_hang_replay(tmp_path: Path) -> None:
    fifo = tmp_path / "replies.jsonl"
    os.mkfifo(fifo)
    out = tmp_path / "results.jsonl"
    one_error(qb("replay", str(fifo), "--transports", "raw", "--out", str(out), timeout=30), str(fifo), "FIFO")
    assert not out.exists()


def test_a_reply_store_linked_to_dev_zero_is_never_read(tmp_path: Path) -> None:
    link = tmp_path / "replies.jsonl"
    link.symlink_to("/dev/zero")
    one_error(qb("replay", str(link), "--transports", "raw", "--out", str(tmp_path / "r.jsonl"), timeout=30),
              str(link), "device")


def test_a_results_file_that_is_a_fifo_or_dev_zero_does_not_hang_report(tmp_path: Path) -> None:
    fifo = tmp_path / "results.jsonl"
    os.mkfifo(fifo)
    one_error(qb("report", str(fifo), timeout=30), str(fifo), "FIFO")
    one_error(qb("report", "/dev/zero", timeout=30), "/dev/zero", "device")


def test_a_line_without_end_is_refused_at_the_line_cap(tmp_path: Path) -> None:
    store = tmp_path / "replies.jsonl"
    with open(store, "w") as fh:
        fh.write(line(task_id="file-write/control", command="true"))
        fh.write('{"task_id": "file-write/h1", "command": "' + "x" * (17 << 20) + '"}\n')
    one_error(qb("replay", str(store), "--transports", "raw", "--out", str(tmp_path / "r.jsonl")),
              f"{store}: line 2", "longer than")


@pytest.mark.parametrize("name", ["replies.jsonl", "results.jsonl", "errors.jsonl"])
def test_a_campaign_file_linked_out_of_its_directory_is_never_read_or_appended(tmp_path: Path, name: str) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    camp = tmp_path / "camp"
    camp.mkdir()
    (camp / name).symlink_to(victim)
    r = qb("run", "--model", "reference", "--out", str(camp), "--tasks", "file-write/control", "--contracts", "raw",
           "--transports", "raw")
    one_error(r, str(camp / name), "symlink")
    assert victim.read_text() == "keep me\n"
    assert sorted(p.name for p in camp.iterdir()) == [name]


def test_a_campaign_file_that_is_a_fifo_does_not_hang_run(tmp_path: Path) -> None:
    camp = tmp_path / "camp"
    camp.mkdir()
    os.mkfifo(camp / "results.jsonl")
    r = qb("run", "--model", "reference", "--out", str(camp), "--tasks", "file-write/control", "--contracts", "raw",
           "--transports", "raw", timeout=60)
    one_error(r, str(camp / "results.jsonl"), "FIFO")


def test_a_serve_record_file_linked_to_dev_zero_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "rec.jsonl"
    link.symlink_to("/dev/zero")
    r = run([sys.executable, "-m", "qb_server", "--record", str(link)], timeout=30)
    one_error(r, str(link))


def test_an_inspect_log_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "x.eval"
    os.mkfifo(fifo)
    one_error(qb("import-inspect", str(fifo), "--out", str(tmp_path / "out"), timeout=30), str(fifo))
    assert not (tmp_path / "out" / "replies.jsonl").exists()


# ---------------------------------------------------------------- 3. JSON nested 200,000 deep


def test_a_deep_line_in_a_reply_store_is_one_line_in_replay(tmp_path: Path) -> None:
    store = tmp_path / "replies.jsonl"
    store.write_text(line(task_id="file-write/control", command="true") + deep() + "\n")
    out = tmp_path / "results.jsonl"
    one_error(qb("replay", str(store), "--transports", "raw", "--out", str(out)), f"{store}: line 2", "nested deeper")
    assert not out.exists()


def test_deep_json_inside_a_reply_or_its_tool_call_is_not_a_crash(tmp_path: Path) -> None:
    store = tmp_path / "replies.jsonl"
    call = {"name": "bash", "arguments": deep(), "id": "c1"}
    store.write_text(line(task_id="file-write/control", contract="native", reply=deep(), tool_calls=[call])
                     + line(task_id="file-write/h1", contract="native", reply=deep()))
    out = tmp_path / "results.jsonl"
    r = qb("replay", str(store), "--transports", "raw", "--out", str(out), "--json")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(recs) == 2 and all(rec["command"] is None and not rec["verdict"]["passed"] for rec in recs)


def test_a_deep_line_in_a_results_file_is_one_line_in_report(tmp_path: Path) -> None:
    res = tmp_path / "results.jsonl"
    res.write_text('{"x": ' + deep() + '}\n{"a": 1}\n')
    one_error(qb("report", str(res)), f"{res}: line 1", "nested deeper")


def test_a_deep_line_in_a_serve_record_file_is_one_line_at_start(tmp_path: Path) -> None:
    rec = tmp_path / "rec.jsonl"
    body = deep() + "\n"
    rec.write_text(body)
    for argv in ([sys.executable, "-m", "qb_server", "--record", str(rec)], [*QB, "serve", "--record", str(rec)]):
        one_error(run(argv, timeout=60), f"{rec}: line 1", "nested deeper")
        assert rec.read_text() == body


def test_a_deep_line_in_a_campaign_stops_run_resume_and_loses_nothing(tmp_path: Path) -> None:
    camp = tmp_path / "camp"
    args = ("run", "--model", "reference", "--out", str(camp), "--tasks", "file-write/control,file-write/h1",
            "--contracts", "raw", "--transports", "raw")
    assert qb(*args).returncode == 0
    before = {p.name: p.read_bytes() for p in camp.iterdir()}
    with open(camp / "results.jsonl", "a") as fh:
        fh.write(deep() + "\n")
    grown = (camp / "results.jsonl").read_bytes()
    one_error(qb(*args), f"{camp / 'results.jsonl'}: line 3", "nested deeper")
    assert (camp / "results.jsonl").read_bytes() == grown
    assert (camp / "replies.jsonl").read_bytes() == before["replies.jsonl"]


def test_read_jsonl_refuses_a_deep_line_naming_it(tmp_path: Path) -> None:
    from transports.results.store import StoreError, read_jsonl

    f = tmp_path / "replies.jsonl"
    f.write_text(deep() + "\n")
    with pytest.raises(StoreError, match="line 1: .*nested deeper"):
        list(read_jsonl(f))


def test_the_depth_scan_is_exact_and_ignores_brackets_in_strings() -> None:
    from transports.results.store import MAX_DEPTH, parse_line

    ok = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert parse_line(ok.encode()) is not None
    with pytest.raises(ValueError, match="nested deeper"):
        parse_line(("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)).encode())
    text = json.dumps({"s": "[{" * 100_000 + '\\"[', "t": ["]"]})
    assert parse_line(text.encode())["t"] == ["]"]


# ---------------------------------------------------------------- 4. a zip bomb as an Inspect log


def _inspect_log(tmp_path: Path) -> Path:
    """A real, small Inspect log (of another task: the bomb is met before the task is checked)."""
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.solver import generate

    out = ModelOutput.from_content("mockllm/model", "hi")
    out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    [log] = inspect_eval(Task(dataset=[Sample(input="hello")], solver=generate(), name="other"),
                         model=get_model("mockllm/model", custom_outputs=[out], memoize=False),
                         log_dir=str(tmp_path / "logs"), display="none")
    return Path(log.location)


def _add_bomb(log: Path, size: int) -> None:
    import zipfile

    import inspect_ai._util.zipfile  # noqa: F401  (zstd in zipfile, as Inspect writes it)

    zero = bytes(1 << 20)
    with zipfile.ZipFile(log, "a", compression=zipfile.ZIP_ZSTANDARD) as zf:
        with zf.open("samples/bomb_epoch_1.json", "w") as fh:
            for _ in range(size >> 20):
                fh.write(zero)


@pytest.mark.needs("inspect_ai")
def test_a_zstd_zip_bomb_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    log = _inspect_log(tmp_path)
    _add_bomb(log, 1536 << 20)
    assert log.stat().st_size < 2_000_000
    proc = subprocess.Popen([*QB, "import-inspect", str(log), "--out", str(tmp_path / "out")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            preexec_fn=_limits)
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    except BaseException:
        proc.kill()
        raise
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    r = subprocess.CompletedProcess(proc.args, os.waitstatus_to_exitcode(status), "", err)
    one_error(r, str(log), "samples/bomb_epoch_1.json", "inflates to more than")
    assert usage.ru_maxrss < 600 << 10, f"peak RSS {usage.ru_maxrss >> 10} MiB"
    assert not (tmp_path / "out" / "replies.jsonl").exists()


@pytest.mark.needs("inspect_ai")
def test_a_member_that_inflates_past_its_declared_size_is_refused(tmp_path: Path) -> None:
    from qb_client.adapters.inspect_ext.logcheck import LogTooLarge, check_log

    log = _inspect_log(tmp_path)
    _add_bomb(log, 64 << 20)
    data = bytearray(log.read_bytes())
    name = b"samples/bomb_epoch_1.json"
    k = data.rfind(b"PK\x01\x02", 0, data.rfind(name))  # its central directory entry
    data[k + 24:k + 28] = (1000).to_bytes(4, "little")  # declared: 1000 bytes
    log.write_bytes(bytes(data))
    with pytest.raises(LogTooLarge, match="inflates to more than its declared 1000 bytes"):
        check_log(log)


@pytest.mark.needs("inspect_ai")
def test_an_honest_log_passes_the_check(tmp_path: Path) -> None:
    from qb_client.adapters.inspect_ext.logcheck import check_log

    check_log(_inspect_log(tmp_path))
