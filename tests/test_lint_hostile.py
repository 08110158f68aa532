"""Hostile input to the lint: its command line (``quotebench lint --file F``), its library API and the MCP
server's ``lint`` tool. Each input gets a one-line error or a correct answer, never a traceback, and a
bounded amount of work: the CLI runs in a child process with a generous hang guard, the library's scan is
held to a count of its steps (the scanner's position may only move forward)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest

from probes import cli_process, one_line_refusal
from transports.lint import LintError, deliver, lint

LAB = ("raw", "nested", "nested-single", "ssh", "json-naive", "json-correct", "escaped", "tempscript")
PATHS = ("docker-sh", "shlex-sh", "make", "gha-run", "gha-block", "tmux", "shell-quote-eval", "json-naive+ssh")
GUARD_S = 120  # a hang guard for a child process on a loaded machine, not a speed goal


def lint_file(tmp_path: Path, content: bytes, *args: str):
    f = tmp_path / "commands.jsonl"
    f.write_bytes(content)
    return cli_process("lint", "--transport", "nested", "--file", str(f), *args, timeout=GUARD_S)


# ---------------------------------------------------------------- quotebench lint --file


@pytest.mark.parametrize("content, said", [
    (b'"ok"\n12\n', ":2: a JSON int, not a string"),
    (b'"ok"\n1.5e999\n', ":2: a JSON float, not a string"),
    (b'{"command": "echo"}\n', ":1: a JSON dict, not a string"),
    (b'null\n', ":1: a JSON NoneType, not a string"),
    (b"[" * 100_000 + b"]" * 100_000 + b"\n", ":1: not a JSON string"),
    (b'{"a":' * 100_000 + b'1' + b"}" * 100_000 + b"\n", ":1: not a JSON string"),
    (b"'single quoted'\n", ":1: not a JSON string"),
    (b'"ok"\n"\xc3\x28"\n', "not valid UTF-8"),
    (b'"\xed\xa0\x80"\n', "not valid UTF-8"),  # a surrogate encoded in UTF-8 is not UTF-8
], ids=["int", "float", "object", "null", "deep-array", "deep-object", "single-quoted", "bad-byte",
        "utf8-surrogate"])
def test_a_line_that_is_not_a_json_string_is_one_line_with_exit_2(tmp_path: Path, content: bytes, said: str) -> None:
    done = lint_file(tmp_path, content)
    assert one_line_refusal(done) and said in done.stderr, done.stderr[-400:]


@pytest.mark.parametrize("command", ["echo a\x00b", "echo \ud800", "\udcff", "echo \ud83d\ude00 \udfff"])
@pytest.mark.parametrize("as_json", [True, False])
def test_nul_and_lone_surrogates_are_a_predicted_transport_error_printed_safely(
        tmp_path: Path, command: str, as_json: bool) -> None:
    line = json.dumps(command).encode("ascii")  # the escapes \u0000, \ud800 in the file, as JSON writes them
    done = lint_file(tmp_path, line + b"\n", *(["--json"] if as_json else []))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-400:]
    if as_json:
        doc = json.loads(done.stdout)
        read = json.loads(line)  # JSON joins an escaped surrogate pair into one character
        assert doc["command"] == read and doc["damaged"] is True and doc["transport_error"]
    else:
        assert "(damaged)" in done.stdout


def test_a_fifo_a_device_link_and_a_directory_are_refused_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    zero = tmp_path / "zero"
    zero.symlink_to("/dev/zero")
    for path in (fifo, zero, tmp_path):
        done = cli_process("lint", "--transport", "nested", "--file", str(path), timeout=GUARD_S)
        assert one_line_refusal(done) and str(path) in done.stderr, (path, done.stderr[-400:])


def test_a_10_mb_command_is_refused_in_one_line(tmp_path: Path) -> None:
    done = lint_file(tmp_path, json.dumps("echo " + "x" * (10 << 20)).encode() + b"\n")
    assert one_line_refusal(done) and ":1:" in done.stderr and "longer than" in done.stderr


@pytest.mark.parametrize("name, command", [
    ("dollar-paren", "$(" * 50_000),
    ("unclosed-brace", "${" + "a" * 1_000_000),
    ("quotes", "'" * 100_000),
    ("backslashes", "\\" * 500_001),
], ids=lambda v: v if len(v) < 40 else "text")
def test_deep_or_long_texts_from_a_file_are_answered(tmp_path: Path, name: str, command: str) -> None:
    done = lint_file(tmp_path, json.dumps(command).encode() + b"\n", "--json")
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr[-400:]
    assert json.loads(done.stdout)["command"] == command


# ---------------------------------------------------------------- the library


@pytest.mark.parametrize("bad", [42, b"echo", None, ["echo"], 3.5, bytearray(b"x")])
def test_the_api_refuses_a_command_that_is_not_text(bad: object) -> None:
    for call in (lint, deliver):
        with pytest.raises(LintError, match="must be text") as info:
            call(bad, "nested")  # type: ignore[arg-type]
        assert "\n" not in str(info.value)


@pytest.mark.parametrize("bad", [None, 5, b"nested", ["nested"], {"t": 1}])
def test_the_api_refuses_a_transport_that_is_not_text(bad: object) -> None:
    with pytest.raises(LintError, match="transport must be text") as info:
        lint("echo", bad)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("bad", [5, ["HOME"], {"HOME": 5}, {5: "x"}, {"HOME": b"x"}])
def test_the_api_refuses_an_environment_that_is_not_names_to_text(bad: object) -> None:
    with pytest.raises(LintError, match="env") as info:
        lint('echo "$HOME"', "nested", env=bad)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)


HOSTILE_TEXTS = {
    "dollar-paren": "$(" * 50_000,
    "unclosed-brace": "${" + "a" * 1_000_000,
    "quotes": "'" * 100_000,
    "double-quotes": '"' * 100_001,
    "backticks": "`" * 100_000,
    "ansi-c": "$'" + "\\x41" * 200_000,
    "words": "a " * 500_000,
    "operators": ";" * 500_000,
    "newlines": "echo a\n" * 100_000,
    "nul": "a\x00" * 1000,
    "surrogates": "\ud800" * 1000,
}


@pytest.mark.parametrize("name", sorted(HOSTILE_TEXTS))
def test_hostile_texts_get_an_answer_on_every_lab_route_and_path(name: str, monkeypatch) -> None:
    from transports.lint import bashparse

    steps = {"n": 0}
    real = bashparse.Scanner.word

    def counted(self):  # the real scan, counted: each word moves the position forward
        steps["n"] += 1
        before = self.i
        w = real(self)
        assert self.i > before or self.i >= len(self.s) or self.s[self.i] in bashparse.BLANKS + bashparse.OPERATOR_CHARS
        return w

    monkeypatch.setattr(bashparse.Scanner, "word", counted)
    text = HOSTILE_TEXTS[name]
    for route in LAB + PATHS:
        p = lint(text, route)
        assert p.damaged in (True, False, None) and p.command == text
        json.dumps(p.to_json())  # the --json document of any answer serialises
    assert steps["n"] <= 4 * len(text) + 100  # linear in the text, whatever its shape


# ---------------------------------------------------------------- serve --lint and --guard, over stdio

SERVER_INPUTS = [
    ({"command": 5}, "error"),
    ({"command": None}, "error"),
    ({"command": {"a": 1}}, "error"),
    ({"command": ["echo"]}, "error"),
    ({"command": "echo", "transport": 5}, "error"),
    ({"command": "echo", "transport": "bogus"}, "error"),
    ({"command": "a\x00b"}, "damaged"),
    ({"command": "x" * (10 << 20)}, "error"),
    ({"command": "$(" * 50_000}, "damaged"),
    ({"command": "${" + "a" * 1_000_000}, "damaged"),
    ({"command": "'" * 100_000}, "answer"),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.needs("bwrap")
async def test_the_lint_tool_answers_hostile_calls_with_a_result_or_a_tool_error(tmp_path: Path) -> None:
    from mcp import Client, StdioServerParameters

    from test_mcp_server import ROOT, _env

    params = StdioServerParameters(command=sys.executable, args=["-m", "qb_server", "--transport", "nested",
                                                                 "--lint"], env=_env(tmp_path), cwd=str(ROOT))
    async with Client(params) as client:
        for arguments, expected in SERVER_INPUTS:
            with anyio.fail_after(GUARD_S):
                got = await client.call_tool("lint", arguments)
            name = repr(arguments)[:60]
            if expected == "error":  # the SDK's own argument check may say more than a line; never a traceback
                assert got.is_error and "Traceback" not in got.content[0].text, name
                assert any(word in got.content[0].text for word in ("command", "transport")), name
            else:
                assert not got.is_error, (name, got.content[0].text[:200])
                doc = got.structured_content
                assert doc["damaged"] in (True, False, None), name
                if expected == "damaged":
                    assert doc["damaged"] is True, name
        after = await client.call_tool("lint", {"command": "echo ok"})  # the server still answers
        assert after.structured_content["damaged"] is False


@pytest.mark.anyio
@pytest.mark.needs("bwrap")
async def test_the_guarded_shell_takes_hostile_commands_without_breaking(tmp_path: Path) -> None:
    from mcp import Client, StdioServerParameters

    from test_mcp_server import ROOT, _calls, _env

    record = tmp_path / "r.jsonl"
    params = StdioServerParameters(command=sys.executable, args=["-m", "qb_server", "--transport", "nested", "--guard",
                                                                 "--record", str(record)],
                                   env=_env(tmp_path), cwd=str(ROOT))
    commands = ["a\x00b", "$(" * 50_000, "'" * 100_000, "x" * (2 << 20)]
    async with Client(params) as client:
        for command in commands:
            with anyio.fail_after(GUARD_S):
                got = await client.call_tool("bash", {"command": command})
            assert "Traceback" not in got.content[0].text
        after = await client.call_tool("bash", {"command": 'echo "a b"'})
        assert after.structured_content["stdout"] == "a b\n"  # guarded: escaped, so it arrives whole
    calls = _calls(record)
    assert len(calls) == len(commands) + 1
    assert calls[-1]["received"] == 'echo "a b"' and calls[-1]["guard"]["action"] == "escaped"


@pytest.mark.anyio
@pytest.mark.needs("bwrap")
async def test_a_lone_surrogate_in_process_is_a_one_line_tool_error() -> None:
    """Over stdio the SDK drops a request whose JSON holds a lone surrogate escape before any tool sees it
    (and goes on serving); an in-process client hands the string over as it is: the tool refuses it in one
    line rather than answer with text no JSON reply can carry."""
    from mcp import Client

    from qb_server.app import build_server

    server = build_server("nested", lint_tool=True)
    async with Client(server) as client:
        for arguments in ({"command": "echo \ud800"}, {"command": "echo", "transport": "nested\udcff"}):
            got = await client.call_tool("lint", arguments)
            assert got.is_error and "lone surrogate" in got.content[0].text
            assert got.content[0].text.count("\n") == 0
        assert (await client.call_tool("lint", {"command": "echo ok"})).structured_content["damaged"] is False
    await server.quotebench.aclose()
