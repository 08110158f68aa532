"""QuoteBench inside Inspect AI, through the real inspect_ai package (the ``inspect`` extra).

The model is Inspect's own ``mockllm/model`` with scripted outputs (a callable
``custom_outputs`` that answers by the prompt it receives, so sample order
does not matter), or our offline ``quotebench/reference`` model for the
``inspect eval`` command line. Nothing of ours is mocked: the task, the
sandbox, the transports, the validator and the import are the real code.
Scripted outputs carry their usage, because mockllm otherwise counts tokens
with tiktoken, which downloads its encoding (no network here).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import pytest

from qb_client.replies.contracts import build_messages, fence, reference_reply
from tasks.load import get_task, select

pytestmark = pytest.mark.needs("inspect_ai", "bwrap")

ARGV_TASKS = "argv-pass/*"
CLI = [sys.executable, "-m", "qb_client"]


# ---------------------------------------------------------------- helpers


def scripted(answer: Callable[[Any, str, list[Any]], Any]) -> tuple[Any, Counter]:
    """``mockllm/model`` whose output for a prompt is ``answer(task, contract, tools)``; counts generations."""
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    prompts = {tuple(build_messages(t, c)): (t, c) for t in select(None)
               for c in ("raw", "disclosed", "native")}
    calls: Counter = Counter()

    def outputs(input: list, tools: list, tool_choice: Any, config: Any) -> ModelOutput:
        system = next(m.text for m in input if m.role == "system")
        task, contract = prompts[(system, input[-1].text)]
        calls[(task.id, contract)] += 1
        out = answer(task, contract, tools)
        if isinstance(out, str):
            out = ModelOutput.from_content("mockllm/model", out)
        out.usage = ModelUsage(input_tokens=7, output_tokens=3, total_tokens=10)
        return out

    return get_model("mockllm/model", custom_outputs=outputs, memoize=False), calls


def run_eval(model: Any, log_dir: Path, **task_args: Any) -> Any:
    from inspect_ai import eval as inspect_eval

    from qb_client.adapters.inspect_ext.task import quotebench

    [log] = inspect_eval(quotebench(**task_args), model=model, log_dir=str(log_dir), display="none")
    assert log.status == "success", log.error
    return log


def metrics(log: Any) -> dict[str, float]:
    """Per-transport pass rates as Inspect computed them (``mean`` of each transport's verdicts)."""
    return {s.name: s.metrics["mean"].value for s in log.results.scores}


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=cwd, timeout=600)


def report_cells(results: Path) -> dict[str, Any]:
    p = cli("report", str(results), "--json")
    assert p.returncode == 0, p.stderr
    [config] = json.loads(p.stdout)["configs"]
    return {"cells": config["cells"], "contracts": config["contracts"], "label": config["config"]}


def verdicts(results: Path) -> dict[tuple[str, str], tuple[bool, str | None, str | None]]:
    out = {}
    for line in results.read_text().splitlines():
        r = json.loads(line)
        out[(r["reply_id"], r["transport"])] = (r["verdict"]["passed"], r["command"], r["received"])
    return out


# ---------------------------------------------------------------- the crossed design


def test_raw_replies_generated_once_and_judged_on_every_transport(tmp_path: Path) -> None:
    model, calls = scripted(lambda task, contract, tools: fence(task.solution))
    log = run_eval(model, tmp_path / "logs", contract="raw", transports="raw,nested", tasks=ARGV_TASKS)
    ids = [t.id for t in select(ARGV_TASKS)]
    assert sorted(calls) == sorted((i, "raw") for i in ids) and set(calls.values()) == {1}
    # the reference solutions pass on raw; nested damages the quoted ones (pinned by the driver test below)
    rates = metrics(log)
    assert set(rates) == {"raw", "nested"} and rates["raw"] == 1.0 and rates["nested"] < 1.0
    sample = next(s for s in log.samples if s.id == "argv-pass/control")
    score = sample.scores["verdicts"]
    assert score.value == {"raw": 1.0, "nested": 0.0}
    assert score.answer == get_task("argv-pass/control").solution
    assert score.explanation.splitlines()[0] == "raw: PASS"
    assert "nested: FAIL" in score.explanation and "FAIL argv: argv: expected 4 argument(s)" in score.explanation
    records = score.metadata["records"]
    assert [r["transport"] for r in records] == ["raw", "nested"]
    assert records[0]["received"] == records[0]["command"] and records[1]["damaged"] is True
    assert {r["config"]["provider"] for r in records} == {"inspect"}


def test_import_and_report_reproduce_our_driver_on_the_same_replies(tmp_path: Path) -> None:
    """import-inspect + report give the cells our own replay gives on the imported
    replies, execution by execution."""
    model, _ = scripted(lambda task, contract, tools: fence(task.solution))
    run_eval(model, tmp_path / "logs", contract="raw", transports="raw,nested", tasks="argv-pass/*,file-write/*")
    model, _ = scripted(lambda task, contract, tools: fence(task.solution_disclosed))
    run_eval(model, tmp_path / "logs", contract="disclosed", transports="raw,nested", tasks="argv-pass/*,file-write/*")
    logs = sorted(str(p) for p in (tmp_path / "logs").glob("*.eval"))
    assert len(logs) == 2
    p = cli("import-inspect", *logs, "--out", str(tmp_path / "imp"))
    assert p.returncode == 0, p.stderr
    assert "imported 16 replies and 32 records" in p.stderr
    replies = [json.loads(x) for x in (tmp_path / "imp" / "replies.jsonl").read_text().splitlines()]
    assert len(replies) == 16 and {r["contract"] for r in replies} == {"raw", "disclosed"}
    p = cli("replay", str(tmp_path / "imp" / "replies.jsonl"), "--transports", "raw,nested",
            "--out", str(tmp_path / "driver.jsonl"))
    assert p.returncode == 0, p.stderr
    imported, driver = report_cells(tmp_path / "imp" / "results.jsonl"), report_cells(tmp_path / "driver.jsonl")
    assert imported == driver
    assert imported["label"]["provider"] == "inspect" and imported["label"]["model"] == "mockllm/model"
    assert imported["cells"]["RR"] == {"passed": 8, "n": 8, "rate": 1.0}
    assert imported["cells"]["NN"]["passed"] == 8
    assert verdicts(tmp_path / "imp" / "results.jsonl") == verdicts(tmp_path / "driver.jsonl")
    # importing the same logs again adds nothing
    p = cli("import-inspect", *logs, "--out", str(tmp_path / "imp"))
    assert p.returncode == 0 and "imported 0 replies and 0 records" in p.stderr
    assert len((tmp_path / "imp" / "results.jsonl").read_text().splitlines()) == 32


def test_epochs_are_draws_each_generated_once(tmp_path: Path) -> None:
    from inspect_ai import eval as inspect_eval

    from qb_client.adapters.inspect_ext.task import quotebench

    seen: Counter = Counter()

    def answer(task: Any, contract: str, tools: list) -> str:
        seen[task.id] += 1
        return fence(task.solution) if seen[task.id] == 1 else "echo wrong > report.txt"

    model, calls = scripted(answer)
    [log] = inspect_eval(quotebench(contract="raw", transports="raw", tasks="file-write/control"), model=model,
                         epochs=2, log_dir=str(tmp_path / "logs"), display="none")
    assert calls == Counter({("file-write/control", "raw"): 2})
    p = cli("import-inspect", log.location, "--out", str(tmp_path / "imp"))
    assert p.returncode == 0, p.stderr
    replies = [json.loads(x) for x in (tmp_path / "imp" / "replies.jsonl").read_text().splitlines()]
    assert sorted(r["draw"] for r in replies) == [0, 1] and len({r["reply_id"] for r in replies}) == 2
    p = cli("replay", str(tmp_path / "imp" / "replies.jsonl"), "--transports", "raw",
            "--out", str(tmp_path / "driver.jsonl"))
    assert p.returncode == 0, p.stderr
    assert verdicts(tmp_path / "imp" / "results.jsonl") == verdicts(tmp_path / "driver.jsonl")
    assert sorted(v[0] for v in verdicts(tmp_path / "driver.jsonl").values()) == [False, True]


def test_native_offers_our_bash_tool_never_runs_it_and_replays_the_call(tmp_path: Path) -> None:
    from inspect_ai.model import ModelOutput

    from qb_server.observation import SHELL_DESCRIPTION

    offered: list[list[str]] = []

    def answer(task: Any, contract: str, tools: list) -> Any:
        offered.append([(t.name, t.description) for t in tools])
        if task.id == "argv-pass/h1":
            return "I would rather not."  # no tool call: a model failure, not an error
        return ModelOutput.for_tool_call("mockllm/model", "bash", {"command": task.solution})

    model, calls = scripted(answer)
    log = run_eval(model, tmp_path / "logs", contract="native", transports="raw,nested", tasks=ARGV_TASKS)
    assert set(calls.values()) == {1}
    assert offered and all(o == [("bash", SHELL_DESCRIPTION)] for o in offered)
    for s in log.samples:
        assert [m.role for m in s.messages] == ["system", "user", "assistant"]  # no tool result: one step
    by_id = {s.id: s.scores["verdicts"] for s in log.samples}
    assert by_id["argv-pass/control"].value == {"raw": 1.0, "nested": 0.0}
    refused = by_id["argv-pass/h1"]
    assert refused.value == {"raw": 0.0, "nested": 0.0}
    assert refused.metadata["extraction"] == {"method": "none", "error": "no tool call in the reply"}
    assert all(r["received"] is None for r in refused.metadata["records"])
    p = cli("import-inspect", *map(str, (tmp_path / "logs").glob("*.eval")), "--out", str(tmp_path / "imp"))
    assert p.returncode == 0, p.stderr
    p = cli("replay", str(tmp_path / "imp" / "replies.jsonl"), "--transports", "raw,nested",
            "--out", str(tmp_path / "driver.jsonl"))
    assert p.returncode == 0, p.stderr
    assert verdicts(tmp_path / "imp" / "results.jsonl") == verdicts(tmp_path / "driver.jsonl")
    # and a campaign on the same replies, whose native path is our MCP server
    p = cli("run", "--model", f"replay:{tmp_path / 'imp' / 'replies.jsonl'}", "--contracts", "native",
            "--transports", "raw,nested", "--tasks", ARGV_TASKS, "--out", str(tmp_path / "campaign"))
    assert p.returncode == 0, p.stderr
    assert verdicts(tmp_path / "imp" / "results.jsonl") == verdicts(tmp_path / "campaign" / "results.jsonl")
    native = report_cells(tmp_path / "imp" / "results.jsonl")["contracts"]["native"]
    assert native["raw"] == 0.75  # 3 of the 4 argv tasks: h1 made no call
    assert report_cells(tmp_path / "campaign" / "results.jsonl")["contracts"]["native"] == native


def test_the_native_tool_runs_a_call_through_its_transport_in_a_fresh_sandbox() -> None:
    """For solvers that do loop: the tool is real, each call in a fresh sandbox of the sample's task."""
    import anyio

    from qb_client.adapters.inspect_ext.shell_tool import shell_tool

    tool = shell_tool("file-write/control", "nested")

    async def calls() -> tuple[str, str]:
        return (await tool(command="printf '%s|' a \"b c\" > out; cat out; exit 3"),
                await tool(command="ls out || echo fresh"))

    first, second = anyio.run(calls)
    # nested: the quotes of "b c" close and reopen the outer ones, so the inner shell runs printf '%s|' a b
    # and gets the whole rest, 'c > out; cat out; exit 3', as its $0: nothing redirected, no exit 3
    assert first == "exit code: 0\nstdout:\na|b|\nstderr: (empty)"
    assert "fresh" in second


# ---------------------------------------------------------------- hostile replies


def test_hostile_replies_are_judged_and_contained(tmp_path: Path) -> None:
    marker = tmp_path / "escaped"
    hostile = {
        "argv-pass/control": f"echo pwned > {marker}; touch {marker}2",  # outside the sandbox: not visible
        "argv-pass/h1": "yes quotebench | head -c 30000000",  # 30 MB of output
        "argv-pass/h2": "(sleep 60 >/dev/null 2>&1 &) ; kill -9 $$",  # a survivor (output elsewhere), the shell killing itself
        "argv-pass/h3": "echo \"$(cat /etc/shadow)\" '\x00'",  # a NUL byte: nothing can run it
    }
    model, _ = scripted(lambda task, contract, tools: hostile[task.id])
    log = run_eval(model, tmp_path / "logs", contract="raw", transports="raw,nested", tasks=ARGV_TASKS)
    assert not marker.exists() and not Path(f"{marker}2").exists()
    assert metrics(log) == {"raw": 0.0, "nested": 0.0}
    recs = {s.id: {r["transport"]: r for r in s.scores["verdicts"].metadata["records"]} for s in log.samples}
    assert len(log.samples) == 4 and all(set(r) == {"raw", "nested"} for r in recs.values())
    flood = recs["argv-pass/h1"]["raw"]
    assert flood["stdout"]["truncated"] is True and len(flood["stdout"]["text"]) <= 64 * 1024
    assert recs["argv-pass/h2"]["raw"]["exit_code"] == 137 and recs["argv-pass/h2"]["raw"]["timed_out"] is False
    nul = recs["argv-pass/h3"]["raw"]
    assert nul["verdict"]["passed"] is False and nul["received"] is None
    assert (nul["error"] or nul["transport_error"])  # recorded, never raised through Inspect
    assert sum(p.stat().st_size for p in (tmp_path / "logs").glob("*.eval")) < 2_000_000
    p = cli("import-inspect", *map(str, (tmp_path / "logs").glob("*.eval")), "--out", str(tmp_path / "imp"))
    assert p.returncode == 0, p.stderr


# ---------------------------------------------------------------- bad logs


def _refused(tmp_path: Path, log: Path) -> str:
    """The import's one-line refusal of ``log``, with nothing written (called in-process: inspect_ai's import
    costs seconds per process; the exit status and the single stderr line are checked once, by the CLI)."""
    from qb_client.console import BadInput
    from qb_client.adapters.inspect_ext.importer import import_logs

    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    with pytest.raises(BadInput) as e:
        import_logs([log], out)
    assert str(log) in str(e.value) and "\n" not in str(e.value)
    assert list(out.iterdir()) == []
    return str(e.value)


def test_a_bad_log_is_one_line_naming_the_file_exit_2_and_writes_nothing(tmp_path: Path) -> None:
    junk = tmp_path / "junk.eval"
    junk.write_bytes(b"PK\x03\x04 not really a zip")
    p = cli("import-inspect", str(junk), "--out", str(tmp_path / "out"))
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert p.stderr.splitlines() == [f"quotebench: error: {junk}: not an Inspect eval log (ValueError: EOCD not found)"]
    assert not (tmp_path / "out" / "results.jsonl").exists()


def test_logs_that_are_not_quotebench_logs_are_refused(tmp_path: Path) -> None:
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.log import read_eval_log, write_eval_log
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.solver import generate

    assert _refused(tmp_path, tmp_path / "missing.eval") == f"{tmp_path / 'missing.eval'}: no such log file"
    out = ModelOutput.from_content("mockllm/model", "hi")
    out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    [other] = inspect_eval(Task(dataset=[Sample(input="hello")], solver=generate(), name="other"),
                           model=get_model("mockllm/model", custom_outputs=[out], memoize=False),
                           log_dir=str(tmp_path / "other"), display="none")
    assert "a log of task 'other', not of quotebench/quotebench" in _refused(tmp_path, Path(other.location))

    model, _ = scripted(lambda task, contract, tools: fence(task.solution))
    log = run_eval(model, tmp_path / "logs", contract="raw", transports="raw", tasks="argv-pass/control")
    tampered = read_eval_log(log.location)
    tampered.samples[0].scores["verdicts"].metadata["records"][0]["verdict"] = "passed"
    bad = tmp_path / "tampered.eval"
    write_eval_log(tampered, str(bad))
    assert "sample argv-pass/control epoch 1: records[0]: field 'verdict'" in _refused(tmp_path, bad)
    del tampered.samples[0].metadata["contract"]
    write_eval_log(tampered, str(bad))
    assert "metadata field 'contract' is missing" in _refused(tmp_path, bad)


# ---------------------------------------------------------------- the command line, through the entry point


def test_inspect_eval_command_finds_the_task_by_its_entry_point(tmp_path: Path) -> None:
    """The README's command, offline: a fresh process finds quotebench/quotebench and quotebench/reference
    through the ``inspect_ai`` entry point, and prints each transport's pass rate."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INSPECT_")}
    p = subprocess.run(["inspect", "eval", "quotebench/quotebench", "--model", "quotebench/reference",
                        "-T", "contract=disclosed", "-T", "transports=raw,nested", "-T", f"tasks={ARGV_TASKS},file-write/control",
                        "--log-dir", str(tmp_path / "logs"), "--display", "plain"],
                       capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    text = p.stdout + p.stderr
    lines = [line.split() for line in text.splitlines()]
    assert ["raw", "nested"] in lines
    assert any(words[:1] == ["mean"] and words[-2:] == ["mean", "1.000"] for words in lines), text[-1500:]
    [log] = (tmp_path / "logs").glob("*.eval")
    p = cli("import-inspect", str(log), "--out", str(tmp_path / "imp"))
    assert p.returncode == 0, p.stderr
    cells = report_cells(tmp_path / "imp" / "results.jsonl")
    assert cells["label"]["model"] == "quotebench/reference" and cells["cells"]["NN"]["rate"] == 1.0


def test_the_reference_model_answers_each_contract_like_our_reference_provider() -> None:
    import anyio
    from inspect_ai.model import ChatMessageSystem, ChatMessageUser, get_model

    model = get_model("quotebench/reference", memoize=False)
    task = get_task("json-write/h2")
    for contract in ("raw", "disclosed", "native"):
        system, user = build_messages(task, contract)
        out = anyio.run(model.generate, [ChatMessageSystem(content=system), ChatMessageUser(content=user)])
        ref = reference_reply(task, contract)
        if contract == "native":
            assert [(c.function, c.arguments) for c in out.message.tool_calls] == [("bash", {"command": ref.command})]
        else:
            assert out.completion == ref.text


def test_a_non_editable_install_registers_the_same_names(tmp_path: Path) -> None:
    """Inspect prefixes a task's name with its top-level package only when that package lives in
    site-packages (qb_client/...), so an editable install alone cannot show that ``quotebench/quotebench``
    is found in a wheel install too: install the project into a directory named site-packages and look
    the task up by name, through the entry point, in a fresh process."""
    root = Path(__file__).resolve().parents[1]
    target = tmp_path / "site-packages"
    p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        "--disable-pip-version-check", "--target", str(target), str(root)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    code = (
        "import qb_client, inspect_ai\n"
        f"assert qb_client.__file__.startswith({str(target)!r}), qb_client.__file__\n"
        "[log] = inspect_ai.eval('quotebench/quotebench', model='quotebench/reference', limit=1,\n"
        "                        task_args={'transports': 'nested'}, display='none', log_dir='logs')\n"
        "print(log.eval.task_registry_name, log.status, log.results.scores[0].name)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split() == ["quotebench/quotebench", "success", "nested"]
