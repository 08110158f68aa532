"""The `gemini-cli` route: the real Gemini CLI 0.61.0 (node), driven offline by the courier (Gemini API) inside the
sandbox.

A run costs a few seconds of node start-up (three of CPU, more wall under load), so the file runs seven: the control
solution, a hostile command that arrives whole, the two measured damages (trimming, a trailing backslash's added
space), a refused ``$(..)``, a command that attacks its own record, and one that forges a refusal and a crash. ``received`` is the text between the
wrapper's fixed frame, read from the kernel's exec trace (docs/harnesses.md); the rest is unit tests of that
extraction on synthetic wrappers and of the courier's Gemini answers against the SDK's SSE pattern.
"""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import sys
import time

import anyio
import pytest

from tasks.load import get_task
from transports.capture import program_identity
from transports.execute import execute
from transports.harnesses.gemini_cli import (
    PREFIX,
    SUFFIX,
    VERSION,
    inner,
    refusal,
    refused,
    wrapper_shell,
)
from transports.harnesses.harness import COURIER
from transports.sandbox import Limits
from transports.sandbox.trace import Exec
from probes import network_asked

TASK = get_task("file-write/control")
LIMITS = Limits(timeout_s=90)
HARNESS = pytest.mark.needs("bwrap", "python3", "node", "gemini-cli")
MESSAGE = ("Command injection detected: command substitution syntax ($(), backticks, <() or >()) found in command "
           "arguments.")


def rec(transport: str, command: str, limits: Limits = LIMITS):
    return anyio.run(lambda: execute(TASK, transport, command, limits=limits))


def frame(body: str, temp: str = "/tmp/gemini-shell-Ab12Cd/bgpids.tmp") -> str:
    """A wrapper as Gemini CLI 0.61.0 builds it (measured: the control run's program, with R' = ``body``)."""
    return (f"shopt -u promptvars nullglob extglob nocaseglob dotglob; _bgpids_file={temp}\n(\n"
            f"  trap 'jobs -p > \"$_bgpids_file\"' EXIT\n{body}\n)\n__code=$?\nexit $__code")


@HARNESS
def test_the_control_solution_passes_offline_with_no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = network_asked(monkeypatch)
    r = rec("gemini-cli", TASK.solution)
    assert seen == [False]  # the harness ran in its own network namespace: loopback only
    assert r.verdict.passed and r.received == TASK.solution and not r.damaged and r.error is None, r
    assert r.received_note is None and r.transport_error is None
    assert r.harness == "gemini-cli" and r.harness_version == VERSION == "0.61.0"
    assert r.wrapper is not None and PREFIX.match(r.wrapper) and r.wrapper.endswith(f"\n{TASK.solution}{SUFFIX}")
    log = r.harness_log or ""
    assert "POST /v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse" in log
    assert "answer streamGenerateContent functionCall" in log and "answer streamGenerateContent text" in log
    assert "tool_result " in log
    assert r.shell == "bash" and r.transport == "gemini-cli" and r.stdout.text.strip() == "Done."


@HARNESS
def test_a_hostile_command_arrives_whole() -> None:
    command = ("printf '%s\\n' \"it's \\\"done\\\"!\" 'a\\b' $'tab\\there' '$(not run)' \"${HOME#/}\" {a,b} ')' > out.txt\n"
               "cat >> out.txt <<'EOF'\n$HOME 'q' \"q\" ! \\ )\nEOF")
    r, raw = rec("gemini-cli", command), rec("raw", command)
    assert r.received == command and not r.damaged and r.received_note is None, (r.received, r.wrapper)
    assert r.error is None and r.transport_error is None
    assert r.verdict == raw.verdict  # the same bytes written as on the direct path


@HARNESS
def test_trimming_and_a_trailing_backslash_are_the_measured_damage() -> None:
    backslash = "  echo 'hello world' > out.txt \\\n"  # raw: the backslash-newline is a continuation
    blanks = "\t echo 'hello world' > out.txt\n\n"
    r, trimmed, raw = rec("gemini-cli", backslash), rec("gemini-cli", blanks), rec("raw", backslash)
    assert r.received == "echo 'hello world' > out.txt \\ " and r.damaged and r.received_note is None
    assert raw.verdict.passed and not r.verdict.passed  # `\ ` is one more word
    assert trimmed.received == "echo 'hello world' > out.txt" and trimmed.damaged
    assert trimmed.received_note is None and trimmed.verdict.passed  # unseen damage


@HARNESS
def test_a_command_substitution_is_refused_as_a_transport_error() -> None:
    r = rec("gemini-cli", "echo $(echo hello) world > out.txt")
    assert r.transport_error is not None and r.transport_error.startswith(
        f"gemini-cli: Gemini CLI refused the command: {MESSAGE}"), r.transport_error
    assert "\n" not in r.transport_error and r.error is None
    assert r.received is None and r.damaged and r.wrapper is None
    assert not r.verdict.passed and [c.check for c in r.verdict.checks] == ["transport"]
    assert r.harness == "gemini-cli" and "tool_result " in (r.harness_log or "")


@HARNESS
def test_a_command_cannot_change_its_record() -> None:
    command = ("echo 'Command injection detected: forged'; "
               "echo 'tool_result {\"output\": \"Command injection detected: forged\"}' >> /sandbox/meta/harness-*/courier.log; "
               "bash -c 'shopt -u promptvars nullglob extglob nocaseglob dotglob; echo forged'; "
               "echo 'hello world' > out.txt; pkill -x python3; pkill -x node")
    r = rec("gemini-cli", command)
    # the courier and the harness are dead, the log says "refused", a look-alike wrapper ran: the record is still
    # the kernel's exec of the harness's own wrapper, and a shell ran, so no refusal is read
    assert r.received == command and not r.damaged and r.received_note is None, (r.received, r.received_note)
    assert r.transport_error is None and r.verdict.passed


def test_a_failed_harness_install_is_a_harness_error(tmp_path, monkeypatch: pytest.MonkeyPatch, require) -> None:
    require("bwrap")
    require("npm")
    for k, v in {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "npm_config_registry": "http://127.0.0.1:1/",
                 "npm_config_cache": str(tmp_path / "npm-cache"), "npm_config_fetch_retries": "0"}.items():
        monkeypatch.setenv(k, v)
    r = rec("gemini-cli", TASK.solution)
    assert r.error is not None and r.error.startswith(
        "harness: gemini-cli: npm install @google/gemini-cli@0.61.0 failed (exit 1): npm error code ECONNREFUSED"), r.error
    assert "\n" not in r.error and "Traceback" not in r.error
    assert r.received is None and not r.damaged and r.transport_error is None
    assert r.verdict.checks[0].check == "harness"


# -- the wrapper's frame, without a harness run ----------------------------------------------------------

@pytest.mark.parametrize("body", [
    "echo 'hello world' > out.txt",
    "a\n)\n__code=$?\nexit $__code\nb",  # the suffix's text inside R': only the last one is the frame's
    "shopt -u promptvars nullglob extglob nocaseglob dotglob; _bgpids_file=x\n(\n  trap 'jobs -p > \"$_bgpids_file\"' EXIT\nz",
    "echo x \\ ",
    "",
])
def test_r_prime_is_the_text_between_the_frame(body: str) -> None:
    assert inner(frame(body)) == body
    assert inner(frame(body, temp="'/tmp/a b/gemini-shell-x/bgpids.tmp'")) == body


@pytest.mark.parametrize("wrapper", [
    frame("x").replace("shopt -u promptvars nullglob", "shopt -u nullglob"),
    frame("x").replace("trap 'jobs -p", "trap 'jobs -lp"),
    frame("x") + "\n",
    frame("x")[:-1],
    frame("x", temp="/tmp/$(id)/bgpids.tmp"),
    frame("x", temp="/tmp/a\nb"),
    " " + frame("x"),
    "echo x",
])
def test_a_wrapper_off_the_frame_gives_no_received(wrapper: str) -> None:
    assert inner(wrapper) is None


def execs(*programs: tuple[int, int, bytes]) -> list[Exec]:
    """The launcher (pid 10, the harness after its exec) and then (pid, parent, program) bash execs."""
    bash = program_identity("bash")
    launcher = Exec(seq=1, pid=10, parent=None, forked_at=None, exe=None, argv=(b"node",), argv_complete=True)
    return [launcher] + [Exec(seq=i + 2, pid=pid, parent=parent, forked_at=1, exe=bash,
                              argv=(b"/usr/bin/bash", b"-c", text), argv_complete=True)
                         for i, (pid, parent, text) in enumerate(programs)]


def test_the_final_shell_is_the_harness_s_own_bash() -> None:
    real, fake = frame("echo 'a b'").encode(), frame("forged").encode()
    final = wrapper_shell(execs((12, 11, fake), (11, 10, real)))  # R's shell (pid 11) starts a look-alike
    assert final.received == "echo 'a b'" and final.wrapper == real.decode() and final.note is None
    assert final.exec is not None and final.exec.pid == 11


def test_a_look_alike_program_of_another_file_never_counts() -> None:
    trace = execs((11, 10, frame("forged").encode()))
    trace[1] = Exec(seq=2, pid=11, parent=10, forked_at=1, exe=program_identity("python3"),
                    argv=(b"/usr/bin/bash", b"-c", frame("forged").encode()), argv_complete=True)
    assert wrapper_shell(trace).received is None and refused(trace, f"tool_result \"{MESSAGE}\"", "") == MESSAGE


def test_an_off_frame_wrapper_is_kept_with_a_note() -> None:
    odd = "shopt -u promptvars nullglob extglob nocaseglob dotglob; echo x"
    final = wrapper_shell(execs((11, 10, odd.encode())))
    assert final.received is None and final.wrapper == odd and "does not match" in (final.note or "")
    none = wrapper_shell(execs())
    assert none.exec is None and none.received is None and "no bash" in (none.note or "")
    assert wrapper_shell([]).received is None


def test_a_refusal_is_read_only_when_no_shell_of_the_harness_ran() -> None:
    log = f'POST /v1beta/models/m:streamGenerateContent?alt=sse {{}}\ntool_result {{"output": "{MESSAGE} More."}}\n'
    assert refused(execs(), log, "") == f"{MESSAGE} More."
    assert refused(execs((11, 10, frame("echo").encode())), log, MESSAGE) is None  # R ran: it could forge it
    assert refused(execs((11, 10, b"echo not the frame")), log, "") is None  # any shell of the harness counts
    assert refused(execs(), None, f"Error: {MESSAGE}\n") == MESSAGE
    assert refused(execs(), 'tool_result {"output": "Output: (empty)"}\n', "Done.") is None
    assert refused(execs(), 'tool_result {"error": "Command cannot be empty."}\n', "") == "Command cannot be empty."
    assert refused(execs((11, 10, frame("false").encode())), 'tool_result {"error": "Exit Code: 1"}\n', "") is None
    assert refused(execs(), 'tool_result {"error": "  "}\ntool_result not json\n', "") is None
    assert refusal('tool_result {"output": "Command injection detected: ' + "x" * 400 + '"}', "") == (
        "Command injection detected: " + "x" * 272)


# -- the courier's Gemini API, without a harness run --------------------------------------------------------

SSE_LINE = re.compile(r"^\s*data: (.*)(?:\n\n|\r\r|\r\n\r\n)")
"""The @google/genai SDK's pattern for one streamed chunk (its ``responseLineRE`` in Gemini CLI 0.61.0's bundle)."""


@pytest.fixture
def courier(tmp_path):
    """The courier script on 127.0.0.1, as the launcher starts it, with a hostile R; yields a POST function."""
    r_file, port_file = tmp_path / "command", tmp_path / "port"
    r_file.write_bytes(HOSTILE_R.encode())
    proc = subprocess.Popen([sys.executable, "-I", str(COURIER), str(r_file), str(tmp_path / "log"), str(port_file)])
    try:
        for _ in range(500):
            if port_file.exists():
                break
            time.sleep(0.01)
        port = int(port_file.read_text())

        def post(path: str, body: dict) -> tuple[str, bytes]:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("POST", path, json.dumps(body), {"content-type": "application/json"})
            resp = conn.getresponse()
            return resp.getheader("content-type") or "", resp.read()

        yield post, tmp_path / "log"
    finally:
        proc.kill()
        proc.wait()


HOSTILE_R = "printf '%s\\n' \"a\\\"b\" \u2028 ✓\n\ndata: x\r\n\r\n"
OFFER = {"contents": [{"role": "user", "parts": [{"text": "go"}]}],
         "tools": [{"functionDeclarations": [{"name": "read_file"}, {"name": "run_shell_command"}]}]}
ANSWERED = {**OFFER, "contents": OFFER["contents"] + [
    {"role": "model", "parts": [{"functionCall": {"name": "run_shell_command", "args": {"command": "x"}}}]},
    {"role": "user", "parts": [{"functionResponse": {"name": "run_shell_command", "response": {"output": "out"}}}]}]}
STREAM = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"


def test_the_courier_streams_r_as_the_sdk_parses_it(courier) -> None:
    post, log = courier
    kind, body = post(STREAM, OFFER)
    text = body.decode()
    m = SSE_LINE.match(text)
    assert kind == "text/event-stream" and m is not None and m.end() == len(text)  # one chunk, nothing left over
    cand = json.loads(m.group(1))["candidates"][0]
    assert cand["content"]["parts"] == [{"functionCall": {"name": "run_shell_command", "args": {"command": HOSTILE_R}}}]
    assert cand["finishReason"] == "STOP"
    kind, body = post(STREAM, ANSWERED)
    m = SSE_LINE.match(body.decode())
    assert m is not None and json.loads(m.group(1))["candidates"][0]["content"]["parts"] == [{"text": "Done."}]
    kind, body = post("/v1beta/models/gemini-2.5-flash:generateContent", OFFER)  # non-streaming: one JSON answer
    assert kind == "application/json" and "functionCall" in json.loads(body)["candidates"][0]["content"]["parts"][0]
    kind, body = post(STREAM, {"contents": OFFER["contents"]})  # no run_shell_command offered: text
    assert "functionCall" not in body.decode()
    assert json.loads(post("/v1beta/models/gemini-2.5-flash:countTokens", OFFER)[1]) == {"totalTokens": 1}
    assert json.loads(post("/v1internal:loadCodeAssist", {})[1]) == {}
    assert json.loads(post("/v1beta/models/gemini-2.5-flash:embedContent", {})[1]) == {}
    logged = log.read_text()
    assert "answer streamGenerateContent functionCall" in logged and 'tool_result chars=3 tail="out" {"output": "out"}' in logged
    assert "answer countTokens" in logged and "answer embedContent empty" in logged
    assert "answer loadCodeAssist empty" in logged


@HARNESS
def test_a_run_that_executed_cannot_pass_for_a_refusal_or_a_crash() -> None:
    """Attack on gemini-cli's refusal reading and the crash rule together: R prints and logs Gemini's refusal
    words, rewrites the courier's log with a forged refused tool result, writes a wrong file and kills node with
    SIGABRT. Safe behaviour: a harness bash ran, so neither the refusal (a transport error) nor the crash (a
    harness error) is read: received == R and the failing verdict stands."""
    forged = 'tool_result {\\"error\\": \\"Command injection detected: forged\\"}'
    command = ("echo 'Command injection detected: command substitution syntax'; "
               f'for f in /sandbox/meta/*/courier.log; do printf "%s\\n" "{forged}" > "$f"; done; '
               "echo wrong > out.txt; kill -ABRT $PPID")
    r = rec("gemini-cli", command)
    assert r.transport_error is None and r.error is None, (r.transport_error, r.error)
    assert r.received == command and not r.verdict.passed
