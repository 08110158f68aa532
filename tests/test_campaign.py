"""Campaigns as users run them: `quotebench run` in a subprocess, offline and against a local fake Anthropic
server speaking the real wire format; resume after SIGKILL; provider errors kept apart from verdicts."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_llm import FakeServer, Scripted, Seen, body_for, error_body, running_fake_server

from qb_client.replies.contracts import fence

QB = [sys.executable, "-c", "from qb_client.cli import main; main()"]
HOSTILE = ("printf '%s\\n' \"a'b\" $HOME `id` \\ ! % * ? [x] {a,b} ~ # ; & | < > (\n"
           "\tnext\rline é 漢 🙂 end\\")


def qb(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*QB, *args], capture_output=True, text=True, timeout=300, env=env)


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeServer]:
    yield from running_fake_server()


def llm_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    env["ANTHROPIC_API_KEY"] = "sk-ant-campaign-test-key"
    return env


def test_reference_campaign_offline(tmp_path: Path) -> None:
    r = qb("run", "--model", "reference", "--out", str(tmp_path), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["generated"] == 56 * 3 and doc["executed"] == 56 * 3 * 2 and doc["errors"] == 0
    records = lines(tmp_path / "results.jsonl")
    cells = collections.Counter((x["contract"], x["transport"]) for x in records if x["verdict"]["passed"])
    assert cells[("raw", "raw")] == cells[("native", "raw")] == cells[("disclosed", "nested")] == 56
    assert cells[("raw", "nested")] < 56
    native = [x for x in records if x["contract"] == "native"]
    assert all(x["config"]["provider"] == "reference" and x["versions"]["prompt"] for x in native)
    # a rerun finds nothing to do
    again = json.loads(qb("run", "--model", "reference", "--out", str(tmp_path), "--json").stdout)
    assert again["generated"] == 0 and again["executed"] == 0 and again["reused"] == 168


def hostile_responder(seen: Seen) -> Scripted:
    if seen.body.get("tools"):
        return Scripted(200, body_for("anthropic", text="Running it.", calls=[{"command": HOSTILE}]))
    return Scripted(200, body_for("anthropic", text="Here you go:\n\n" + fence(HOSTILE) + "\n"))


def test_hostile_replies_are_recorded_byte_identical(fake: FakeServer, tmp_path: Path) -> None:
    fake.reset()
    fake.responder = hostile_responder
    r = qb("run", "--model", "anthropic:claude-test", "--base-url", fake.url, "--tasks", "file-write/h1,json-edit/h2",
           "--out", str(tmp_path), "--json", env=llm_env())
    assert r.returncode == 0, r.stderr
    replies = lines(tmp_path / "replies.jsonl")
    assert len(replies) == 6 and all(x["command"] == HOSTILE for x in replies)
    records = lines(tmp_path / "results.jsonl")
    assert len(records) == 12 and all(x["command"] == HOSTILE for x in records)
    assert all(x["received"] == HOSTILE and not x["damaged"] for x in records if x["transport"] == "raw")
    assert all(x["damaged"] for x in records if x["transport"] == "nested")
    assert all(x["config"]["provider"] == "anthropic" and x["config"]["model"] == "claude-test" for x in records)
    assert {s.headers["authorization"] for s in fake.seen} == {"Bearer sk-ant-campaign-test-key"}
    assert "sk-ant-campaign-test-key" not in (tmp_path / "results.jsonl").read_text()
    assert "sk-ant-campaign-test-key" not in (tmp_path / "replies.jsonl").read_text()
    # native: the model was handed the MCP server's shell tool
    tool_requests = [s for s in fake.seen if s.body.get("tools")]
    assert [t["name"] for t in tool_requests[0].body["tools"]] == ["bash"]


def test_nul_in_a_tool_call_is_a_recorded_transport_error(fake: FakeServer, tmp_path: Path) -> None:
    fake.reset()
    fake.responder = lambda seen: Scripted(200, body_for("anthropic", calls=[{"command": "echo a\u0000b > out.txt"}]))
    r = qb("run", "--model", "anthropic:m", "--base-url", fake.url, "--tasks", "file-write/control",
           "--contracts", "native", "--out", str(tmp_path), env=llm_env())
    assert r.returncode == 0, r.stderr
    records = lines(tmp_path / "results.jsonl")
    assert len(records) == 2
    assert all(x["transport_error"] and "NUL" in x["transport_error"] and not x["verdict"]["passed"] for x in records)


def test_provider_errors_are_kept_apart_and_retried_on_rerun(fake: FakeServer, tmp_path: Path) -> None:
    fake.reset()
    fake.forever = Scripted(500, error_body("overloaded"))
    args = ["run", "--model", "anthropic:m", "--base-url", fake.url, "--tasks", "file-write/control",
            "--contracts", "raw", "--out", str(tmp_path), "--max-tries", "2"]
    r = qb(*args, env=llm_env())
    assert r.returncode == 1
    assert "1 error(s) recorded" in r.stderr and "Traceback" not in r.stderr
    errors = lines(tmp_path / "errors.jsonl")
    assert len(errors) == 1 and "500" in errors[0]["error"] and errors[0]["attempts"] == 2
    assert lines(tmp_path / "results.jsonl") == [] and lines(tmp_path / "replies.jsonl") == []
    assert len(fake.seen) == 2
    fake.reset()
    fake.responder = lambda seen: Scripted(200, body_for("anthropic", text="echo hello world > out.txt"))
    r = qb(*args, env=llm_env())
    assert r.returncode == 0, r.stderr
    records = lines(tmp_path / "results.jsonl")
    assert len(records) == 2 and [x["transport"] for x in records].count("raw") == 1


def test_killed_campaign_resumes_without_loss_or_duplicates(tmp_path: Path) -> None:
    args = [*QB, "run", "--model", "habits", "--out", str(tmp_path), "--exec-concurrency", "1"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    results = tmp_path / "results.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if results.exists() and results.read_text().count("\n") >= 30:
            break
        time.sleep(0.01)
    killed = proc.poll() is None
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = results.read_text().count("\n")
    assert killed and before < 336, "the campaign finished before it could be killed"
    r = qb("run", "--model", "habits", "--out", str(tmp_path), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    records = lines(results)
    keys = collections.Counter((x["reply_id"], x["transport"]) for x in records)
    assert len(records) == len(keys) == 336
    assert doc["executed"] == 336 - before
    replies = lines(tmp_path / "replies.jsonl")
    assert len({x["reply_id"] for x in replies}) == len(replies) == 168


def test_replies_replay_through_the_replay_provider_and_command(tmp_path: Path) -> None:
    first = tmp_path / "first"
    assert qb("run", "--model", "habits", "--tasks", "argv-pass/*", "--contracts", "raw,disclosed",
              "--out", str(first)).returncode == 0
    store = first / "replies.jsonl"
    again = tmp_path / "again.jsonl"
    r = qb("replay", str(store), "--transports", "raw,nested,escaped", "--out", str(again), "--json")
    assert r.returncode == 0, r.stderr
    original = {(x["reply_id"], x["transport"]): x["verdict"]["passed"] for x in lines(first / "results.jsonl")}
    replayed = {(x["reply_id"], x["transport"]): x["verdict"]["passed"] for x in lines(again)}
    assert len(replayed) == 8 * 3
    assert all(replayed[k] == v for k, v in original.items())
    # a replay campaign from the store reproduces the original verdicts too
    second = tmp_path / "second"
    assert qb("run", "--model", f"replay:{store}", "--tasks", "argv-pass/*", "--contracts", "raw,disclosed",
              "--out", str(second)).returncode == 0
    rerun = sorted((x["task_id"], x["contract"], x["transport"], x["verdict"]["passed"]) for x in lines(second / "results.jsonl"))
    orig = sorted((x["task_id"], x["contract"], x["transport"], x["verdict"]["passed"]) for x in lines(first / "results.jsonl"))
    assert rerun == orig


@pytest.mark.parametrize("args, expect", [
    (["run", "--model", "martian:x", "--out", "/tmp/x"], "unknown provider 'martian'"),
    (["run", "--model", "reference", "--contracts", "telepathy", "--out", "/tmp/x"], "telepathy"),
    (["run", "--model", "reference", "--params", "[1]", "--out", "/tmp/x"], "--params: must be a JSON object"),
    (["run", "--model", "replay:/nonexistent.jsonl", "--out", "/tmp/x"], "/nonexistent.jsonl"),
])
def test_bad_run_input_is_one_line(args: list[str], expect: str) -> None:
    r = qb(*args)
    assert r.returncode == 2, r.stderr
    assert expect in r.stderr and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_a_bad_provider_is_named_before_the_isolation_refusal() -> None:
    """The input's own error comes first: a typo is not answered with advice about the sandbox."""
    r = subprocess.run([*QB, "run", "--model", "martian:x", "--out", "/tmp/x"], capture_output=True, text=True,
                       timeout=120, stdin=subprocess.DEVNULL, env={**os.environ, "QB_NO_BWRAP": "1"})
    assert r.returncode == 2 and "unknown provider 'martian'" in r.stderr and "isolation" not in r.stderr


def test_native_contract_against_a_running_http_server(tmp_path: Path) -> None:
    import re

    server = subprocess.Popen([*QB, "serve", "--http", "127.0.0.1:0", "--control", "--transport", "nested"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        url = None
        assert server.stderr is not None
        for line in server.stderr:
            if m := re.search(r"(http://127\.0\.0\.1:\d+/mcp)", line):
                url = m.group(1)
                break
        assert url, "the server did not print its address"
        # several transports through one server: refused before any work, with one line that explains
        r = qb("run", "--model", "reference", "--contracts", "native", "--transports", "nested,raw",
               "--tasks", "file-write/control,argv-pass/h2", "--server", url, "--out", str(tmp_path / "two"))
        assert r.returncode == 2 and "serves the one transport it was started with" in r.stderr
        assert r.stderr.count("\n") == 1 and "rerun" not in r.stderr and not (tmp_path / "two").exists()
        # the transport the server runs: its records, damaged by the nested paste
        r = qb("run", "--model", "reference", "--contracts", "native", "--transports", "nested",
               "--tasks", "file-write/control,argv-pass/h2", "--server", url, "--out", str(tmp_path))
        records = lines(tmp_path / "results.jsonl")
        assert [x["transport"] for x in records] == ["nested", "nested"]
        assert all(x["contract"] == "native" and x["config"]["provider"] == "reference" for x in records)
        assert not any(x["verdict"]["passed"] for x in records)  # raw solutions damaged by the nested server
        # a single transport the server does not run: one line naming both
        r = qb("run", "--model", "reference", "--contracts", "native", "--transports", "raw",
               "--tasks", "file-write/control", "--server", url, "--out", str(tmp_path / "raw"))
        assert r.returncode in (1, 2) and "runs transport 'nested', not 'raw'" in r.stderr
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(20)


def test_an_effort_ladder_runs_one_config_per_rung(tmp_path: Path) -> None:
    r = qb("run", "--model", "habits", "--effort", "low,high", "--tasks", "file-write/*", "--contracts", "raw",
           "--out", str(tmp_path), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["configs"] == ["habits:human-habits@low", "habits:human-habits@high"] and doc["executed"] == 16
    records = lines(tmp_path / "results.jsonl")
    assert collections.Counter(x["config"]["effort"] for x in records) == {"low": 8, "high": 8}
    assert len({x["reply_id"] for x in records}) == 8  # each rung's replies are its own


# ---------------------------------------------------------------- in-process: errors never abort, resume identity


def run_campaign(provider, out: Path, tasks: str = "file-write/*", contracts: tuple[str, ...] = ("raw",),
                 transports: tuple[str, ...] = ("raw", "nested")):
    import anyio

    from qb_client.campaign.oneshot import Campaign
    from qb_client.campaign.work import Plan
    from tasks.load import select

    plan = Plan(tasks=select(tasks), contracts=list(contracts), transports=list(transports), exec_concurrency=4)
    return anyio.run(Campaign(provider, plan, out).run)


def test_an_exception_in_one_execution_is_an_error_line_and_the_campaign_goes_on(tmp_path: Path) -> None:
    """A stored reply edited by hand (its usage is no longer a number) makes its executions raise; each is an
    errors.jsonl line, the others run, and a rerun after the repair does exactly the failed ones."""
    from qb_client.adapters.providers import make_provider

    first = run_campaign(make_provider("reference"), tmp_path)
    assert (first.generated, first.executed) == (4, 8)
    store = tmp_path / "replies.jsonl"
    good = store.read_text()
    replies = lines(store)
    rid = next(x["reply_id"] for x in replies if x["task_id"] == "file-write/h2")
    store.write_text("".join(json.dumps({**x, "usage": {"input_tokens": "many"}} if x["reply_id"] == rid else x) + "\n"
                             for x in replies))
    (tmp_path / "results.jsonl").unlink()
    outcome = run_campaign(make_provider("reference"), tmp_path)
    assert (outcome.generated, outcome.executed, len(outcome.errors)) == (0, 6, 2)
    records = lines(tmp_path / "results.jsonl")
    assert len(records) == 6 and "file-write/h2" not in {x["task_id"] for x in records}
    errors = sorted(lines(tmp_path / "errors.jsonl"), key=lambda e: e["transport"])
    assert [{k: e[k] for k in ("stage", "task_id", "contract", "transport", "reply_id")} for e in errors] == [
        {"stage": "execute", "task_id": "file-write/h2", "contract": "raw", "transport": t, "reply_id": rid}
        for t in ("nested", "raw")]
    for e in errors:
        assert e["error"].startswith("ValidationError: 1 validation error for Usage input_tokens Input should be a "
                                     "valid integer") and "\n" not in e["error"]
    # the rerun, with the line repaired, does only the failed executions
    store.write_text(good)
    again = run_campaign(make_provider("reference"), tmp_path)
    assert (again.generated, again.executed, again.errors) == (0, 2, [])
    assert len(lines(tmp_path / "results.jsonl")) == 8


def test_an_exception_in_one_generation_is_an_error_line_and_the_campaign_goes_on(tmp_path: Path) -> None:
    from qb_client.adapters.providers.offline import ReferenceProvider

    class Broken(ReferenceProvider):
        async def generate(self, request):
            if request.task.id == "file-write/h1":
                raise KeyError("choices")  # a provider bug, not a ProviderError
            return await super().generate(request)

    outcome = run_campaign(Broken(), tmp_path)
    assert outcome.generated == 3 and outcome.executed == 6
    [error] = lines(tmp_path / "errors.jsonl")
    assert error["stage"] == "generate" and error["task_id"] == "file-write/h1" and error["contract"] == "raw"
    assert error["error"] == "KeyError: 'choices'" and error["reply_id"].startswith("r-")


def test_records_carry_the_versions_their_reply_was_made_under(tmp_path: Path) -> None:
    from qb_client.adapters.providers import make_provider

    run_campaign(make_provider("reference"), tmp_path, transports=("raw",))
    replies = lines(tmp_path / "replies.jsonl")
    for x in replies:  # as if generated by an older package, under the same prompt and suite
        x["versions"]["quotebench"] = "0.0.1-old"
    (tmp_path / "replies.jsonl").write_text("".join(json.dumps(x) + "\n" for x in replies))
    (tmp_path / "results.jsonl").unlink()
    outcome = run_campaign(make_provider("reference"), tmp_path, transports=("raw",))
    assert (outcome.generated, outcome.executed) == (0, 4)
    assert {x["versions"]["quotebench"] for x in lines(tmp_path / "results.jsonl")} == {"0.0.1-old"}


def test_replay_provider_and_replay_command_agree_on_reply_ids_and_commands(tmp_path: Path) -> None:
    store = tmp_path / "store.jsonl"
    cfg = {"provider": "anthropic", "model": "m", "effort": "high", "params": {}}
    args = json.dumps({"command": "echo hello world > out.txt"})
    store.write_text("".join(json.dumps(x) + "\n" for x in [
        {"task_id": "file-write/control", "reply_id": "stored-1", "command": "echo hello world > out.txt",
         "config": cfg},
        {"task_id": "file-write/control", "reply_id": "stored-2", "contract": "native", "reply": "",
         "tool_calls": [{"name": "bash", "arguments": args}], "config": cfg},
    ]))
    campaign_dir = tmp_path / "run"
    run_args = ["run", "--model", f"replay:{store}", "--tasks", "file-write/control", "--contracts", "raw,native",
                "--transports", "raw", "--out", str(campaign_dir), "--json"]
    r = qb(*run_args)
    assert r.returncode == 0, r.stderr
    replayed = tmp_path / "replayed.jsonl"
    r = qb("replay", str(store), "--transports", "raw", "--out", str(replayed), "--json")
    assert r.returncode == 0, r.stderr

    def view(path: Path) -> list[tuple]:
        return sorted((x["reply_id"], x["contract"], x["command"], x["verdict"]["passed"]) for x in lines(path))

    assert view(campaign_dir / "results.jsonl") == view(replayed) == [
        ("stored-1", "raw", "echo hello world > out.txt", True),
        ("stored-2", "native", "echo hello world > out.txt", True)]
    # resume is keyed on the stored ids too: nothing to do the second time
    again = json.loads(qb(*run_args).stdout)
    assert (again["generated"], again["executed"]) == (0, 0)


def test_repeated_transports_and_contracts_are_done_once(tmp_path: Path) -> None:
    r = qb("run", "--model", "reference", "--tasks", "file-write/control", "--contracts", "raw,raw,disclosed,raw",
           "--transports", "raw,nested,raw", "--out", str(tmp_path), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert (doc["generated"], doc["executed"]) == (2, 4)
    assert len(lines(tmp_path / "results.jsonl")) == 4


@pytest.mark.parametrize("effort, expect", [
    ("low,,high", "--effort 'low,,high': an empty rung"),
    ("low,", "an empty rung"),
    ("low,high,low", "rung 'low' is given twice"),
    ("high,raw:high", "rung 'high' is given twice"),  # raw:high sends high
])
def test_bad_effort_ladders_are_one_line_errors(tmp_path: Path, effort: str, expect: str) -> None:
    r = qb("run", "--model", "reference", "--effort", effort, "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and expect in r.stderr and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists()


def test_bad_server_and_out_are_one_line_errors_before_any_work(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    cases = [
        (["--contracts", "native", "--transports", "raw", "--server", "http://127.0.0.1:1/mcp", "--out",
          str(tmp_path / "o1")],
         "--server http://127.0.0.1:1/mcp: cannot use it as an MCP server"),
        (["--contracts", "raw", "--out", str(afile)], f"--out {afile}: exists and is not a directory"),
    ]
    for args, expect in cases:
        r = qb("run", "--model", "reference", "--tasks", "file-write/control", *args)
        assert r.returncode == 2, r.stderr
        assert expect in r.stderr and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert not (tmp_path / "o1").exists()


def test_a_server_without_control_is_a_one_line_error(tmp_path: Path) -> None:
    import re

    server = subprocess.Popen([*QB, "serve", "--http", "127.0.0.1:0"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        url = None
        assert server.stderr is not None
        for line in server.stderr:
            if m := re.search(r"(http://127\.0\.0\.1:\d+/mcp)", line):
                url = m.group(1)
                break
        assert url, "the server did not print its address"
        r = qb("run", "--model", "reference", "--contracts", "native", "--tasks", "file-write/control",
               "--transports", "raw", "--server", url, "--out", str(tmp_path / "out"))
        assert r.returncode == 2 and "start it with `quotebench serve --control`" in r.stderr
        assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
        assert not (tmp_path / "out").exists()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(20)


def test_run_refuses_an_undocumented_effort_and_sends_a_raw_one(fake: FakeServer, tmp_path: Path) -> None:
    fake.reset()
    fake.responder = lambda seen: Scripted(200, body_for("anthropic", text="echo hello world > out.txt"))
    base = ["run", "--model", "anthropic:m", "--base-url", fake.url, "--tasks", "file-write/control",
            "--contracts", "raw", "--transports", "raw"]
    r = qb(*base, "--effort", "low,hihg", "--out", str(tmp_path / "bad"), env=llm_env())
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("quotebench: error: --effort 'hihg': anthropic takes low, "
                                                              "medium, high")
    assert "'raw:hihg' sends it unchecked" in r.stderr
    assert fake.seen == [] and not (tmp_path / "bad").exists()
    r = qb(*base, "--effort", "raw:ultra", "--out", str(tmp_path / "raw"), "--json", env=llm_env())
    assert r.returncode == 0, r.stderr
    assert [s.body["output_config"] for s in fake.seen] == [{"effort": "ultra"}]
    assert [x["config"]["effort"] for x in lines(tmp_path / "raw" / "results.jsonl")] == ["ultra"]
