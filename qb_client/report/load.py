"""Reading results JSONL files into records (plain dicts, as written by ``JsonlWriter``).

A file is read line by line so that an error names its line, by the rule of
:mod:`transports.results.store`: only an unterminated last line (no trailing newline)
that does not parse is taken for a write torn by a kill (a campaign still
running, or killed) and skipped with a warning; a resumed writer removes such a
line before it appends, so a torn line is never in the middle of a file. Any
other unparseable line, a line that is not an object, a record without a
required field, or a file with no records at all is refused with
:class:`ReportInputError`, whose message is one line naming the file, the line
and the field.

When the same execution (config label, contract, transport, task, draw) is
read more than once (the same file given twice, overlapping runs, a retried
provider error), one is kept: the last one without ``error`` if there is one,
else the last one. A warning says how many were dropped.

MCP server records (``config.provider == "mcp"``) are the exception: every
session of the server is draw 0 of its task, so two sessions (two agents, or
one ``_meta`` id reused after its session ended) would look like one
execution. Their key also holds the ``reply_id``, which is unique per call of
each session (``mcp-<session>-<uid>-<n>``), so separate sessions and calls are
all kept, and only a record read twice (the same file given twice) is dropped.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

from transports.results.store import StoreError, bad_line, is_torn, open_jsonl, parse_line, raw_lines, torn_note

from ..replies.config import config_label

# SPEC.md "Record": the required fields. ``params`` and ``checks`` are checked
# for presence only; the report reads the others and checks their types.
REQUIRED = (
    "run_id", "reply_id", "config", "contract", "transport", "task_id", "family", "tier", "draw",
    "reply", "command", "received", "damaged", "exit_code", "stdout", "stderr", "timed_out",
    "transport_error", "verdict", "usage", "timing", "versions",
)
CONFIG_FIELDS = ("provider", "model", "effort", "params")
HARNESS_FIELDS = ("harness", "harness_version", "wrapper", "harness_log")
"""Optional (a harness route's records): each a string or null. The report groups by ``harness`` and
``harness_version`` (set members, joined text), so a list there is refused as bad input before it can
raise a TypeError."""


class ReportInputError(ValueError):
    """Bad report input; the message is one line naming the file, the line and the field."""


Warn = Callable[[str], None]


def _stderr(message: str) -> None:
    print(f"quotebench report: warning: {message}", file=sys.stderr)


def _typename(v: Any) -> str:
    return "null" if v is None else type(v).__name__


def _is_reply(rec: dict[str, Any]) -> bool:
    """A reply-store line (what ``replay`` reads): a task and a command or reply, and nothing judged."""
    return "task_id" in rec and ("command" in rec or "reply" in rec) and "verdict" not in rec and "run_id" not in rec


def _check(rec: dict[str, Any]) -> tuple[str, str] | None:
    """The first problem with a record as (field, problem), or None."""
    for f in REQUIRED:
        if f not in rec:
            return f, "missing"
    cfg = rec["config"]
    if not isinstance(cfg, dict):
        return "config", f"expected an object, got {_typename(cfg)}"
    for f in CONFIG_FIELDS:
        if f not in cfg:
            return f"config.{f}", "missing"
    for f in ("provider", "model"):
        if not isinstance(cfg[f], str) or not cfg[f]:
            return f"config.{f}", f"expected a non-empty string, got {_typename(cfg[f])}"
    if cfg["effort"] is not None and not isinstance(cfg["effort"], str):
        return "config.effort", f"expected a string or null, got {_typename(cfg['effort'])}"
    for f in ("contract", "transport", "task_id", "family", "tier"):
        if not isinstance(rec[f], str) or not rec[f]:
            return f, f"expected a non-empty string, got {_typename(rec[f])}"
    if not isinstance(rec["draw"], int) or isinstance(rec["draw"], bool):
        return "draw", f"expected an integer, got {_typename(rec['draw'])}"
    if not isinstance(rec["damaged"], bool):
        return "damaged", f"expected true or false, got {_typename(rec['damaged'])}"
    ec = rec["exit_code"]
    if ec is not None and (not isinstance(ec, int) or isinstance(ec, bool)):
        return "exit_code", f"expected an integer or null, got {_typename(ec)}"
    if not isinstance(rec["timed_out"], bool):
        return "timed_out", f"expected true or false, got {_typename(rec['timed_out'])}"
    v = rec["verdict"]
    if not isinstance(v, dict):
        return "verdict", f"expected an object, got {_typename(v)}"
    if "passed" not in v:
        return "verdict.passed", "missing"
    if not isinstance(v["passed"], bool):
        return "verdict.passed", f"expected true or false, got {_typename(v['passed'])}"
    if "checks" not in v:
        return "verdict.checks", "missing"
    err = rec.get("error")
    if err is not None and not isinstance(err, str):
        return "error", f"expected a string or null, got {_typename(err)}"
    for f in HARNESS_FIELDS:  # optional; the harness groups hash and join them
        if rec.get(f) is not None and not isinstance(rec[f], str):
            return f, f"expected a string or null, got {_typename(rec[f])}"
    if rec.get("agent") is not None and not isinstance(rec["agent"], dict):
        return "agent", f"expected an object or null, got {_typename(rec['agent'])}"
    if rec.get("turns") is not None:  # the multi-turn arm's chain
        from .turns import check_turns

        return check_turns(rec["turns"])
    return None


def read_results(path: str | os.PathLike[str], warn: Warn = _stderr) -> list[dict[str, Any]]:
    """The records of one results file, validated; see the module docstring for the rules."""
    name = os.fspath(path)
    try:
        return _read_results(name, warn)
    except StoreError as e:  # not a regular file, over a cap
        raise ReportInputError(str(e)) from None


def _read_results(name: str, warn: Warn) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    with open_jsonl(name) as fh:
        for n, raw in raw_lines(fh, name):
            if not raw.strip():
                continue
            try:
                obj = parse_line(raw)
            except ValueError as e:
                if is_torn(raw):
                    warn(torn_note(name, n))
                    continue
                raise ReportInputError(bad_line(name, n, str(e))) from None
            if not isinstance(obj, dict):
                raise ReportInputError(f"{name}: line {n}: not a JSON object (got {_typename(obj)})")
            problem = _check(obj)
            if problem and _is_reply(obj):
                raise ReportInputError(f"{name}: line {n}: this is a reply store (replies, no verdicts), not a "
                                       f"results file: replay it first (quotebench replay {name} --transports ... "
                                       "--out results.jsonl), then report results.jsonl")
            if problem:
                field, what = problem
                raise ReportInputError(f"{name}: line {n}: field '{field}': {what}")
            records.append(obj)
    if not records:
        raise ReportInputError(f"{name}: no records (a results file holds one JSON record per line)")
    return records


def execution_key(rec: dict[str, Any]) -> tuple[Any, ...]:
    """What makes two records the same execution (see the module docstring; MCP records add their reply_id)."""
    key: tuple[Any, ...] = (config_label(rec["config"]), rec["contract"], rec["transport"], rec["task_id"],
                            rec["draw"], rec.get("suite", "public"), rec.get("userland", "gnu"))
    if rec["config"].get("provider") == "mcp":
        key += (rec["reply_id"],)
    return key


def load_records(paths: Iterable[str | os.PathLike[str]], warn: Warn | None = None) -> list[dict[str, Any]]:
    """Every record of every file, in reading order, one per execution (duplicates resolved)."""
    warn = warn or _stderr
    paths = list(paths)
    if not paths:
        raise ReportInputError("no results files given")
    kept: dict[tuple[Any, ...], dict[str, Any]] = {}
    params: dict[str, Any] = {}
    mixed: set[str] = set()
    dropped = session_ends = 0
    for p in paths:
        for rec in read_results(p, warn):
            if str(rec.get("error") or "").startswith("session-end"):
                session_ends += 1  # the MCP server's final-state line repeats its session's last call
                continue
            label = config_label(rec["config"])
            if params.setdefault(label, rec["config"]["params"]) != rec["config"]["params"]:
                mixed.add(label)
            key = execution_key(rec)
            old = kept.get(key)
            if old is not None:
                dropped += 1
                if rec.get("error") and not old.get("error"):
                    continue  # keep the earlier execution that did not hit a provider error
                del kept[key]  # re-insert so the order follows the record kept
            kept[key] = rec
    for label in sorted(mixed):
        warn(f"{label}: records with different generation params share this label; they are reported as one config")
    if session_ends:
        warn(f"{session_ends} MCP session-end record(s) skipped (each repeats the verdict of its session's last call)")
    if dropped:
        warn(f"{dropped} duplicate execution(s) (same config, contract, transport, task and draw) were "
             "dropped; the last one read without a provider error is used")
    return list(kept.values())
