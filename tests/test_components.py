"""``quotebench doctor`` and ``quotebench components install``: what each transport and path needs, read from
the transports themselves, reported present or missing; installing is idempotent and one line each.

A program is made missing the clean way: every program component is looked up through
``transports.components.find_program`` in ``SEARCH_PATH``, pointed here at a directory holding links to
every real program but one (the CLI runs in this process, so the change reaches it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from qb_client.ops.doctor import report
from transports import components, needs
from transports.harnesses import HARNESSES
from transports.paths import PATHS
from transports.registry import LISTED
from probes import cli

ROOT = Path(__file__).resolve().parent.parent



def all_but(tmp_path: Path, missing: str) -> Path:
    """A directory with a link to every program component found on this machine, except ``missing``."""
    where = tmp_path / "bin"
    where.mkdir()
    for c in {c.name: c for c in components_of_doctor()}.values():
        found = components.find_program(c.name) if c.kind == "program" else None
        if found and c.name != missing:
            (where / c.name).symlink_to(found)
    return where


def components_of_doctor() -> list[components.Component]:
    from qb_client.ops.doctor import sections

    return [c for _t, entries, _e in sections() for e in entries for c in e.needs]


def test_doctor_json_lists_every_transport_and_path_with_its_needs(capsys, monkeypatch) -> None:
    code, out, err = cli(capsys, monkeypatch, "doctor", "--json")
    doc = json.loads(out)
    assert code == (0 if doc["ready"] else 1) and err == ""
    by_title = {s["title"]: s for s in doc["sections"]}
    assert list(by_title) == ["sandbox", "final shells", "userlands", "transports", "paths", "agent harnesses",
                             "integrations"]
    assert [e["name"] for e in by_title["paths"]["entries"]] == list(PATHS)
    assert [e["name"] for e in by_title["transports"]["entries"]] == [n for n in LISTED if n not in PATHS
                                                                       and n not in HARNESSES]
    assert [e["name"] for e in by_title["agent harnesses"]["entries"]] == list(HARNESSES) == ["claude-code", "mini-swe-agent",
                                                                                           "codex", "gemini-cli", "openai-agents"]
    needs = {e["name"]: e["needs"] for s in doc["sections"] for e in s["entries"]}
    assert needs["shell-quote-eval"] == ["node", "shell-quote", "npm", "bash"]
    assert needs["shell-quote-eval-safe"] == ["bash"]  # the fix never re-tokenises
    assert needs["tmux"] == ["tmux", "bash"] and needs["make"] == ["make", "bash", "sh"]
    assert needs["claude-code"] == ["claude-code", "python3", "bash"]
    assert needs["mini-swe-agent"] == ["mini-swe-agent", "python3", "sh"]
    assert needs["codex"] == ["codex", "python3", "bash"]
    assert needs["gemini-cli"] == ["gemini-cli", "node", "python3", "bash"]
    assert needs["openai-agents"] == ["openai-agents", "python3", "sh"]
    comps = {c["name"]: c for c in doc["components"]}
    assert comps["shell-quote"]["kind"] == "npm" and comps["shell-quote"]["version"] == "1.8.3"
    assert comps["shell-quote"]["installable"] and not comps["tmux"]["installable"]
    assert comps["claude-code"]["kind"] == "npm" and comps["claude-code"]["version"] == "2.1.197"
    assert comps["claude-code"]["installable"]
    assert comps["mini-swe-agent"]["kind"] == "venv" and comps["mini-swe-agent"]["version"] == "2.4.6"
    assert comps["codex"]["kind"] == "npm" and comps["codex"]["version"] == "0.171.0" and comps["codex"]["installable"]
    assert comps["openai-agents"]["kind"] == "venv" and comps["openai-agents"]["version"] == "0.24.0"
    assert comps["gemini-cli"]["kind"] == "npm" and comps["gemini-cli"]["version"] == "0.61.0"
    assert comps["ssh"]["optional"] and comps["npm"]["optional"] and not comps["node"]["optional"]


def not_ready(doc: dict) -> list[str]:
    return [e["name"] for s in doc["sections"] for e in s["entries"] if not e["ready"]]


@pytest.mark.needs("tmux")
def test_doctor_reports_a_missing_binary_as_missing(tmp_path, capsys, monkeypatch) -> None:
    before = not_ready(report())  # whatever else this machine lacks
    monkeypatch.setattr(needs, "SEARCH_PATH", str(all_but(tmp_path, "tmux")))
    code, out, _ = cli(capsys, monkeypatch, "doctor", "--json")
    doc = json.loads(out)
    assert code == 1 and doc["ready"] is False
    tmux = next(c for c in doc["components"] if c["name"] == "tmux")
    assert tmux["present"] is False
    assert tmux["detail"] == f"tmux not found in {tmp_path}/bin (Debian package: tmux; apt-get install tmux)"
    assert [n for n in not_ready(doc) if n not in before] == ["tmux", "tmux-safe"]
    assert [e["missing"] for s in doc["sections"] for e in s["entries"] if e["name"] == "tmux"] == [["tmux"]]

    code, text, _ = cli(capsys, monkeypatch, "doctor")
    assert code == 1
    assert "missing: tmux: a system program (Debian package: tmux; apt-get install tmux)" in text
    assert "not ready: " in text


def test_an_optional_component_missing_leaves_its_path_ready(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(needs, "SEARCH_PATH", str(all_but(tmp_path, "ssh")))
    doc = report()
    ssh = next(e for s in doc["sections"] for e in s["entries"] if e["name"] == "ssh")
    assert ssh["missing"] == ["ssh"] and ssh["ready"] == next(
        c for c in doc["components"] if c["name"] == "asyncssh")["present"]


def test_install_refuses_what_it_does_not_install_in_one_line(capsys, monkeypatch) -> None:
    for args, message in ((["tmux"], "component tmux is not installed by quotebench: a system program (Debian "
                                     "package: tmux; apt-get install tmux)"),
                          (["nope"], "unknown component 'nope' (installable: shell-quote, claude-code, mini-swe-agent, codex, gemini-cli, openai-agents, harbor)"),
                          (["shell-quote@1.2.3"], "component shell-quote@1.2.3: quotebench pins shell-quote@1.8.3")):
        code, out, err = cli(capsys, monkeypatch, "components", "install", *args)
        assert (code, out, err) == (2, "", f"quotebench: error: {message}\n")


def quotebench(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "qb_client", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=240, env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80", **env})


@pytest.mark.needs("node", "npm", "shell-quote")  # shell-quote: the registry is reachable from here
def test_install_is_idempotent_one_line_per_component(tmp_path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    prefix = tmp_path / "quotebench" / "npm" / "shell-quote@1.8.3"
    first = quotebench(env, "components", "install", "shell-quote")  # named: all would fetch Claude Code's 235 MB
    assert (first.returncode, first.stdout, first.stderr) == (0, f"shell-quote@1.8.3: installed in {prefix}\n", "")
    stamp = (prefix / "node_modules" / "shell-quote" / "package.json").stat().st_mtime_ns
    again = quotebench(env, "components", "install", "shell-quote", "--json")
    assert again.returncode == 0
    assert json.loads(again.stdout) == {"components": [
        {"name": "shell-quote@1.8.3", "ok": True, "detail": f"already installed in {prefix}"}]}
    assert (prefix / "node_modules" / "shell-quote" / "package.json").stat().st_mtime_ns == stamp
    doctor = json.loads(quotebench(env, "doctor", "--json").stdout)
    sq = next(c for c in doctor["components"] if c["name"] == "shell-quote")
    assert sq["present"] and sq["detail"] == f"1.8.3 in {prefix}"


@pytest.mark.needs("node", "npm")
def test_a_failed_install_is_one_line_naming_npms_reason(tmp_path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path), "npm_config_registry": "http://127.0.0.1:1/",
           "npm_config_fetch_retries": "0", "npm_config_cache": str(tmp_path / "npm-cache")}
    done = quotebench(env, "components", "install", "shell-quote")
    assert done.returncode == 1 and done.stderr == ""
    assert done.stdout.count("\n") == 1
    assert done.stdout.startswith("shell-quote@1.8.3: FAILED: npm install shell-quote@1.8.3 failed (exit 1): npm error "
                                  "code ECONNREFUSED: request to http://127.0.0.1:1/shell-quote failed, reason: ")
    assert "not retried" not in done.stdout  # an explicit install is the retry
