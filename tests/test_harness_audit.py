"""``quotebench harness audit NAME``: what a harness does to every command, measured by probes through its real route.

One live audit of claude-code (six runs at once: four through Claude Code, two through raw; a few seconds) is held
equal to the committed ``docs/audits/claude-code.json`` on every stable row; each committed audit is held equal
to its table in docs/harnesses.md; the rest is parsing and bad input (hostile ``--from`` documents: a FIFO, a huge file, deep nesting, forged
rows), without a harness run. mini-swe-agent's live
audit (about 40 s on a loaded 2-core machine) is not run here: its table is held to its committed document only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from probes import cli_process, one_line_refusal

from qb_client.ops.audit import probes
from qb_client.ops.audit.measure import audit
from qb_client.ops.audit.model import Audit
from qb_client.ops.audit.read import change, mask, shown, tool_result, type_kinds
from qb_client.ops.audit.render import docs_block, markdown, with_block
from qb_client.ops.audit.route import AuditError, route_of
from qb_client.ops.audit.rows import sources, template
from qb_client.ops.audit.run import observe
from transports.harnesses import HARNESSES
from transports.harnesses.courier import result_line
from transports.raw import Raw
from transports.sandbox import Limits

ROOT = Path(__file__).resolve().parents[1]
AUDITS = ROOT / "docs" / "audits"
DOC = ROOT / "docs" / "harnesses.md"
REGENERATE = ("regenerate with: quotebench harness audit NAME --json > docs/audits/NAME.json, then put "
              "quotebench harness audit NAME --from docs/audits/NAME.json --markdown between the markers")


def committed(name: str) -> Audit:
    return Audit.model_validate_json((AUDITS / f"{name}.json").read_text())


# -- the documents ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["claude-code", "mini-swe-agent"])
def test_each_harness_has_a_committed_audit_and_its_table_in_the_docs(name: str) -> None:
    doc = committed(name)
    assert doc.harness == name and name in HARNESSES
    assert docs_block(DOC.read_text(), name) == markdown(doc), REGENERATE


@pytest.mark.parametrize("path", sorted(AUDITS.glob("*.json")), ids=lambda p: p.stem)
def test_every_committed_audit_is_in_the_docs(path: Path) -> None:
    doc = Audit.model_validate_json(path.read_text())
    assert doc.harness == path.stem
    assert docs_block(DOC.read_text(), path.stem) == markdown(doc), REGENERATE


def test_a_docs_block_is_replaced_between_its_markers_only() -> None:
    text = "a\n<!-- audit:x -->\nold\n<!-- /audit:x -->\nb\n"
    assert docs_block(with_block(text, "x", "new |\n"), "x") == "new |\n"
    assert with_block(text, "x", "new\n") == "a\n<!-- audit:x -->\nnew\n<!-- /audit:x -->\nb\n"
    assert docs_block("no markers", "x") is None


# -- the live audit ---------------------------------------------------------------------------------------------

@pytest.mark.needs("bwrap", "python3", "claude-code", "root")
def test_a_live_claude_code_audit_equals_the_committed_one_on_every_stable_row() -> None:
    # root: the committed audit was made as root, whose sandboxed commands run as uid 65534, which shows in
    # Claude Code's paths (/tmp/claude-65534/...)
    live = anyio.run(lambda: audit("claude-code"))
    want = committed("claude-code")
    assert (live.harness, live.version, live.baseline, live.isolation) == (
        want.harness, want.version, want.baseline, want.isolation)
    got, expected = live.stable_rows(), want.stable_rows()
    assert sorted(got) == sorted(expected)
    assert {k: r for k, r in got.items() if r != expected[k]} == {}, REGENERATE
    # what the table says, held here in words too
    rows = {r.key: r for r in live.rows}
    assert rows["shell.file"].harness.startswith("bash") and "eval '<R>'" in rows["shell.program"].harness
    assert rows["set_e"].harness.startswith("ignored") and rows["set_e"].raw.startswith("honoured")
    assert rows["type.grep"].harness.startswith("function") and rows["type.grep"].raw.startswith("/usr/bin/grep")
    assert rows["rc.bashrc"].harness.startswith("ran in the final shell") and rows["rc.bashrc"].raw.startswith("never")
    assert rows["env.CLAUDECODE"].harness == "1" and rows["env.ANTHROPIC_API_KEY"].harness == "(set; value not shown)"
    assert rows["status.in_result"].harness == "yes" and rows["status.exit"].raw == "7"
    assert 0 < int(rows["output.chars"].harness) < probes.CAP_BYTES
    assert all(r.received_equals_command for r in live.runs)


def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str, str]:
    """``quotebench ARGS`` in this process (its entry point, which turns bad input into one line and exit 2): a
    subprocess costs a Python start and the CLI's imports, 14 s each on a loaded 2-core machine."""
    from qb_client.cli import main

    monkeypatch.setattr(sys, "argv", ["quotebench", *args])
    capsys.readouterr()
    with pytest.raises(SystemExit) as ended:
        main()
    got = capsys.readouterr()
    return int(ended.value.code or 0), got.out, got.err


def test_an_unknown_harness_is_one_line_listing_the_known_ones_exit_2(capsys, monkeypatch) -> None:
    code, out, err = cli(capsys, monkeypatch, "harness", "audit", "no-such-harness")
    assert code == 2 and out == ""
    assert err.strip() == f"quotebench: error: unknown harness 'no-such-harness' (known: {', '.join(HARNESSES)})"
    with pytest.raises(AuditError, match="known: claude-code"):
        route_of("no-such-harness")


def test_a_bad_saved_audit_is_one_line_naming_the_file_and_field(tmp_path: Path, capsys, monkeypatch) -> None:
    bad = tmp_path / "a.json"
    bad.write_text(json.dumps({"harness": "claude-code"}))
    code, _, err = cli(capsys, monkeypatch, "harness", "audit", "claude-code", "--from", str(bad))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert str(bad) in err and "field 'version'" in err and "Traceback" not in err
    code, _, err = cli(capsys, monkeypatch, "harness", "audit", "claude-code", "--from", str(tmp_path / "none.json"))
    assert code == 2 and "none.json" in err and len(err.strip().splitlines()) == 1


def test_a_saved_audit_renders_without_a_run(capsys, monkeypatch) -> None:
    saved = str(AUDITS / "mini-swe-agent.json")
    code, out, _ = cli(capsys, monkeypatch, "harness", "audit", "mini-swe-agent", "--from", saved, "--markdown")
    assert code == 0 and out == markdown(committed("mini-swe-agent"))
    code, out, _ = cli(capsys, monkeypatch, "harness", "audit", "mini-swe-agent", "--from", saved, "--json")
    assert code == 0 and Audit.model_validate_json(out) == committed("mini-swe-agent")


def test_a_harness_that_cannot_be_installed_is_one_line_exit_1(tmp_path, monkeypatch, capsys, require) -> None:
    require("bwrap")
    require("npm")
    for k, v in {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "npm_config_registry": "http://127.0.0.1:1/",
                 "npm_config_cache": str(tmp_path / "npm-cache"), "npm_config_fetch_retries": "0"}.items():
        monkeypatch.setenv(k, v)
    code, out, err = cli(capsys, monkeypatch, "harness", "audit", "claude-code", "--json")
    assert code == 1 and out == "" and len(err.strip().splitlines()) == 1, err
    assert err.startswith("quotebench: error: claude-code: npm install @anthropic-ai/claude-code@") and \
        "Traceback" not in err


# -- reading what a probe left ------------------------------------------------------------------------------------

@pytest.mark.needs("bwrap")
def test_files_a_command_turns_into_links_or_fifos_are_not_read() -> None:
    # the probe's directory belongs to the command: a FIFO must not hang the host, a link must not be followed
    def command(o: str) -> str:
        return (f"mkfifo {o}/env; ln -s /etc/passwd {o}/pid; mkdir {o}/flags; echo hBc > {o}/set_o; "
                f"ln -s /etc {o}/../qb-audit-link")
    ob = anyio.run(lambda: observe(Raw(), command, lambda t: t.execs[0] if t and t.execs else None,
                                   Limits(timeout_s=20)))
    assert set(ob.files) == {"set_o"} and ob.files["set_o"] == b"hBc\n"
    assert ob.final is not None and ob.received == ob.command


def test_values_that_change_between_runs_are_masked_token_by_token() -> None:
    assert mask(["http://127.0.0.1:4100/v1", "http://127.0.0.1:39012/v1"]) == ("http://127.0.0.1:*/v1", True)
    assert mask(["a1b2-c3", "ffff-c3", "0000-c3"]) == ("*-c3", True)
    assert mask(["same", "same"]) == ("same", True)
    assert mask(["a-b", "a/b"]) == ("a-b", False)  # not even the same shape: not consistent
    assert mask([]) == (None, True)
    # a time-ordered UUID (v7) keeps its first group through runs made at once: every group is masked
    v7 = ["01a2339f-1c2d-7e3f-8a4b-5c6d7e8f9a0b", "01a2339f-2222-7e3f-9999-000000000000"]
    assert mask(v7) == ("*-*-*-*-*", True)


def test_a_change_is_described_edit_by_edit() -> None:
    assert change("  \t echo a \\", "echo a \\ ") == "'  \\t ' removed at the start; ' ' added at the end"
    assert change("echo a\nb", "echo a\n\nb") == "'\\n' added at character 7"
    assert change("a", "b") == "'a' became 'b' at the start"


def test_secrets_are_named_never_shown() -> None:
    for name in ("ANTHROPIC_API_KEY", "GH_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "X_AUTH"):
        assert shown(name, "sk-live-123") == "(set; value not shown)"
    assert shown("GIT_AUTHOR_NAME", "x") == "x" and shown("KEYBOARD", "us") == "us" and shown("A", None) == "(unset)"
    assert shown("GIT_CONFIG_KEY_0", "core.pager") == "core.pager" and shown("E", "") == "(empty)"


@pytest.mark.parametrize("listing, kinds", [
    ("grep is aliased to `grep --color=auto'\ngrep is a function\ngrep () \n{ \n  x\n}\ngrep is /usr/bin/grep\n",
     "alias (grep --color=auto) > function > /usr/bin/grep"),
    ("grep is an alias for grep -n\n", "alias (grep -n)"),  # dash
    ("grep is a shell function\n", "function"),  # dash
    ("bash: line 3: type: grep: not found\n", "not found"),
    ("grep: not found\n", "not found"),  # dash
    ("grep is a shell builtin\ngrep is /bin/grep\n", "builtin > /bin/grep"),
])
def test_type_listings_of_bash_and_dash_are_read(listing: str, kinds: str) -> None:
    assert type_kinds("grep", listing) == kinds


def test_the_courier_logs_each_tool_results_length_and_the_audit_reads_it() -> None:
    assert result_line("abc") == 'tool_result chars=3 tail="abc" "abc"'
    assert result_line([{"type": "text", "text": "ab"}, {"type": "text", "text": "cde"}, {"type": "image"}]).startswith(
        'tool_result chars=5 tail="abcde" [')
    long = "x\n" * 5000 + "END"
    line = result_line(long)[:4096]  # the courier cuts a log line at 4 KiB
    got = tool_result(f"POST /v1/messages {{}}\n{line}\nanswer end_turn\n")
    assert got is not None and got.chars == 10003 and not got.whole and got.text.startswith("x\nx\n")
    assert got.tail is not None and got.tail.endswith("x\nEND") and len(got.tail) == 256
    old = tool_result('tool_result "abc"\n')  # a courier from before the fields
    assert old is not None and (old.text, old.chars, old.whole) == ("abc", 3, True)
    whole = tool_result(result_line([{"type": "text", "text": "Exit code 7\nout"}]))
    assert whole is not None and whole.whole and whole.text == "Exit code 7\nout" and whole.chars == 15
    assert tool_result("answer tool_use\n") is None


def test_r_is_shown_in_the_wrapper_as_a_placeholder() -> None:
    assert template("source s && eval 'echo a' < /dev/null", "echo a") == "source s && eval '<R>' < /dev/null"
    assert template("echo a", "echo a") == "<R>"
    assert template("( trap x EXIT\necho a\n)", "echo a") == "( trap x EXIT\n<R>\n)"
    assert sources("source /h/snap-*.sh 2>/dev/null || true && eval '<R>' < /dev/null") == "/h/snap-*.sh"
    assert sources("<R>") == "none" and sources("cd /w && . ./env.sh; <R>") == "./env.sh"


def test_the_probes_hold_nothing_a_harness_may_refuse_and_no_single_quote() -> None:
    for probe in (probes.main_probe, probes.cap_probe, probes.trim_probe):
        text = probe("/sandbox/work/qb-audit")
        assert "'" not in text and "$(" not in text and "`" not in text and "<(" not in text


def test_audit_from_a_fifo_does_not_hang(tmp_path: Path) -> None:
    """Attack: ``quotebench harness audit claude-code --from FIFO``. Safe behaviour (docs/sandbox.md, Input
    files): a FIFO is refused by name, never opened: one line, exit 2, at once."""
    fifo = tmp_path / "audit.json"
    os.mkfifo(fifo)
    try:
        done = cli_process("harness", "audit", "claude-code", "--from", str(fifo), timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail("harness audit --from hung on a FIFO")
    assert one_line_refusal(done), done.stderr


def test_audit_from_a_huge_file_is_refused_by_its_size_in_one_line(tmp_path: Path) -> None:
    """Attack: ``--from`` a 3 GiB (sparse) file. Safe behaviour: refused before reading, by its size: one line,
    exit 2, never a traceback or unbounded memory (the CLI runs under a 1.5 GB address-space limit here)."""
    big = tmp_path / "audit.json"
    with open(big, "wb") as fh:
        fh.truncate(3 << 30)
    done = cli_process("harness", "audit", "claude-code", "--from", str(big), timeout=30, limit_as=1_500_000_000)
    assert one_line_refusal(done), done.stderr[-500:]


def test_audit_from_a_deeply_nested_document_is_one_line(tmp_path: Path) -> None:
    """Attack: ``--from`` a JSON array nested 100,000 deep. Safe behaviour: one line, exit 2 (no RecursionError)."""
    deep = tmp_path / "audit.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    done = cli_process("harness", "audit", "claude-code", "--from", str(deep))
    assert one_line_refusal(done) and str(deep) in done.stderr, done.stderr


def test_audit_from_cannot_forge_markdown_rows_or_send_terminal_escapes(tmp_path: Path) -> None:
    """Attack: an audit document (valid to the model) whose first row's value holds an OSC/CSI escape and a newline
    followed by a whole forged table row. Safe behaviour: ``--markdown`` prints one table line per row (a value
    stays in its cell) and no control character reaches the terminal (as the rich table already does)."""
    doc = json.loads((ROOT / "docs" / "audits" / "claude-code.json").read_text())
    doc["rows"][0]["harness"] = "x\x1b]0;pwned\x07\x1b[2J\n| shell | forged row | `yes` | `no` |"
    path = tmp_path / "audit.json"
    path.write_text(json.dumps(doc))
    done = cli_process("harness", "audit", "claude-code", "--from", str(path), "--markdown")
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout
    table = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert len(table) == len(doc["rows"]) + 1  # the header and one line per row (the |---| line starts with "|-")
