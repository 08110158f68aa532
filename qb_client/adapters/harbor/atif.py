"""``quotebench import-atif TRAJECTORY... --out STORE``: the shell commands of ATIF trajectories (anyone's
Harbor runs) as a reply store, so the commands of real runs are replayed through every transport.

Parsing is Harbor's: each file goes through ``harbor.models.trajectories.Trajectory`` (:mod:`.worker`, via
:mod:`.bridge`), never a copy of the format here. What is ours is which calls are shell commands:

* a tool call whose function name is one of :data:`SHELL_TOOLS` (case-insensitive: Claude Code's ``Bash``,
  Codex's ``exec_command`` and ``shell``, Gemini CLI's ``run_shell_command``, mini-swe-agent's ``bash``,
  OpenHands' ``execute_bash``; ``--tool`` adds names), in a trajectory or in its embedded subagents;
* its command is the argument ``command`` or ``cmd`` (:data:`COMMAND_KEYS`): a string is R as is; a list
  ``[SHELL, -c|-lc, R]`` (Codex's older ``shell`` tool) gives R; any other list, or no string, is left out
  with a note. Terminus-2's ``bash_command`` carries tmux keystrokes, not a command, and is not read.

Each command becomes one reply line (contract ``native``, R in ``command``, the tool call in
``tool_calls``) whose ``source`` keeps its provenance: the trajectory file and its sha256, the trajectory
path inside it (``$`` or ``$.subagent_trajectories.N``), the step index and id, the tool call id, the agent's
name and version, the model if the trajectory names one. The task is ``--task``, else the suite task whose
instruction the trajectory's first user message holds (a run of ``quotebench export harbor``'s dataset);
with neither, the import is refused. The config is ``{provider: harbor/<agent>, model: <model>}``; each
command gets the next free ``draw`` of its (config, task), and its ``reply_id`` (``atif-`` + a hash of the
file's bytes, the path, step and call) makes a second import of the same file add nothing.

Hostile input: a named file must be a regular file (a FIFO or device is never opened) of at most
:data:`MAX_TRAJECTORY` bytes, UTF-8, JSON nested at most ``MAX_DEPTH`` levels; a named directory is walked
without following any link (at most :data:`MAX_ENTRIES` entries, :data:`MAX_WALK_DEPTH` levels) for
``trajectory.json`` files, and one that is a link or not a regular file is refused. Every file is read and
checked before anything is written; any refusal is one line naming the file (and the field), exit 2.

Every reply line written stays readable by the store's own readers (``read_jsonl``: at most ``MAX_LINE``,
16 MiB, a line): a call whose reply line, encoded exactly as ``JsonlWriter`` writes it, would be over
:data:`MAX_REPLY_LINE` (R is in it twice, in ``command`` and escaped again in ``tool_calls.arguments``) is left
out with a one-line note, like any other call that is not a shell command. A command that long cannot be one
program argument anyway (Linux takes at most 128 KiB per argument), so nothing replayable is lost, and one
hostile call cannot make the whole store unreadable to ``replay`` and to the next import.
"""

from __future__ import annotations

import hashlib
import json
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tasks.safefs import UnsafeRead, read_input, read_under, walk
from tasks.schema import Task
from transports.results.record import ConfigInfo
from transports.results.store import JsonlWriter, StoreError, loads, read_jsonl

from ...console import BadInput, one_line
from .bridge import run

SHELL_TOOLS = frozenset({"bash", "shell", "exec_command", "run_shell_command", "execute_bash"})
COMMAND_KEYS = ("command", "cmd")
SHELLS = frozenset({"bash", "sh", "zsh", "dash", "/bin/bash", "/bin/sh", "/usr/bin/bash", "/bin/zsh"})
SHELL_FLAGS = frozenset({"-c", "-lc", "-ic", "-lic"})
MAX_TRAJECTORY = 64 << 20
MAX_REPLY_LINE = 1 << 20
"""The longest reply line written (bytes, newline included): far under the readers' ``MAX_LINE`` (16 MiB),
far over any command a shell can be given as one argument (128 KiB)."""
MAX_ENTRIES = 100_000
MAX_WALK_DEPTH = 32
NAME = "trajectory.json"


@dataclass
class Document:
    path: str
    text: str
    sha256: str


@dataclass
class Imported:
    lines: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    already: int = 0
    files: int = 0


def _check_text(shown: str, data: bytes) -> Document:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"{shown}: not UTF-8 (byte {e.start}); not an ATIF trajectory") from None
    try:
        loads(text)
    except ValueError as e:
        raise BadInput(f"{shown}: not JSON ({one_line(str(e))})") from None
    return Document(shown, text, hashlib.sha256(data).hexdigest())


def read_documents(paths: list[Path]) -> list[Document]:
    """Every trajectory named, or found in a named directory, read and checked (see the module docstring)."""
    docs: list[Document] = []
    for path in paths:
        try:
            if path.is_dir() and not path.is_symlink():
                docs.extend(_from_directory(path))
                continue
            docs.append(_check_text(str(path), read_input(path, MAX_TRAJECTORY, follow=False)))
        except FileNotFoundError:
            raise BadInput(f"{path}: no such file") from None
        except UnsafeRead as e:
            raise BadInput(one_line(str(e))) from None
        except OSError as e:
            raise BadInput(f"{path}: cannot read: {e.strerror or e}") from None
    return docs


def _from_directory(root: Path) -> list[Document]:
    found: list[str] = []
    for e in walk(root, max_entries=MAX_ENTRIES, max_depth=MAX_WALK_DEPTH, what=str(root)):
        if e.name != NAME:
            continue
        if not stat.S_ISREG(e.st.st_mode):
            raise UnsafeRead(f"{root / e.rel}: is not a regular file (a link, a FIFO or a directory); not read")
        found.append(e.rel)
    if not found:
        raise BadInput(f"{root}: holds no {NAME}")
    return [_check_text(str(root / rel), read_under(root, rel, MAX_TRAJECTORY)) for rel in sorted(found)]


def command_of(arguments: dict[str, Any]) -> tuple[str | None, str | None]:
    """(R, None), or (None, why it is left out)."""
    for k in COMMAND_KEYS:
        if k not in arguments:
            continue
        v = arguments[k]
        if isinstance(v, str):
            return v, None
        if isinstance(v, list) and len(v) == 3 and all(isinstance(x, str) for x in v) \
                and v[0] in SHELLS and v[1] in SHELL_FLAGS:
            return v[2], None
        return None, f"argument '{k}' is not a string nor a [shell, -c, command] list"
    return None, f"no argument {' or '.join(repr(k) for k in COMMAND_KEYS)}"


def task_for(doc: dict[str, Any], tasks: list[Task], given: Task | None, shown: str) -> Task:
    if given is not None:
        return given
    message = doc.get("first_user_message") or ""
    holding = [t for t in tasks if t.instruction and t.instruction in message]
    if not holding:
        raise BadInput(f"{shown}: its first user message holds no instruction of the active suite; give --task "
                       "TASK_ID (the task whose fixture the commands are replayed on)")
    return max(holding, key=lambda t: len(t.instruction))


def _config(call: dict[str, Any]) -> ConfigInfo:
    return ConfigInfo(provider=f"harbor/{call['agent']}", model=call.get("model_name") or "unknown",
                      params={"agent_version": call["agent_version"]})


def reply_id(doc: Document, call: dict[str, Any]) -> str:
    key = f"{doc.sha256}\0{call['trajectory']}\0{call['step_index']}\0{call['call_index']}"
    return "atif-" + hashlib.sha256(key.encode()).hexdigest()[:24]


def line_bytes(line: dict[str, Any]) -> int:
    """The length of ``line`` as :class:`JsonlWriter` writes it (UTF-8; ASCII escapes when a lone surrogate
    cannot be encoded), so the cap is on the very bytes the readers will meet."""
    try:
        return len((json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8"))
    except UnicodeEncodeError:
        return len(json.dumps(line, ensure_ascii=True)) + 1


def _existing(out: Path) -> list[dict[str, Any]]:
    try:
        return [o for o in read_jsonl(out, warn=None) if isinstance(o, dict)] if out.exists() else []
    except StoreError as e:
        raise BadInput(str(e)) from None


def build(docs: list[Document], parsed: list[dict[str, Any]], tasks: list[Task], given: Task | None,
          tools: frozenset[str], out: Path) -> Imported:
    """The reply lines of every shell call, checked, draws assigned after what ``out`` holds; nothing written."""
    got = Imported(files=len(docs))
    stored = _existing(out)
    have = {o.get("reply_id") for o in stored}
    draws: dict[tuple[str, str, str], set[int]] = {}
    for o in stored:
        try:
            label = ConfigInfo.model_validate(o.get("config") or {}).label
        except ValueError:
            continue
        if isinstance(o.get("draw", 0), int):
            draws.setdefault((label, str(o.get("task_id")), str(o.get("contract", "raw"))), set()).add(o.get("draw", 0))
    skipped = 0
    for doc, p in zip(docs, parsed):
        if "error" in p:
            raise BadInput(f"{doc.path}: not an ATIF trajectory: {one_line(p['error'])}")
        task = task_for(p, tasks, given, doc.path)
        for call in p["calls"]:
            if call["function_name"].lower() not in tools:
                continue
            where = f"{doc.path}: {call['trajectory']} step {call['step_index']} tool call {call['call_index']}"
            command, why = command_of(call["arguments"])
            if command is None:
                got.notes.append(f"{where} ({call['function_name']}): {why}; left out")
                skipped += 1
                continue
            rid = reply_id(doc, call)
            if rid in have:
                got.already += 1
                continue
            config = _config(call)
            taken = draws.setdefault((config.label, task.id, "native"), set())
            draw = next(n for n in range(len(taken) + 1) if n not in taken)
            line = {
                "reply_id": rid, "task_id": task.id, "contract": "native", "draw": draw, "suite": task.suite,
                "config": config.model_dump(mode="json"), "command": command,
                "tool_calls": [{"name": call["function_name"], "id": call["tool_call_id"],
                                "arguments": json.dumps(call["arguments"], ensure_ascii=False)}],
                "source": {"harness": "harbor", "trajectory": doc.path, "trajectory_sha256": doc.sha256,
                           "path": call["trajectory"], "step_index": call["step_index"], "step_id": call["step_id"],
                           "call_index": call["call_index"], "tool_call_id": call["tool_call_id"],
                           "agent": call["agent"], "agent_version": call["agent_version"],
                           "model": call.get("model_name"), "schema_version": p.get("schema_version")},
            }
            size = line_bytes(line)
            if size > MAX_REPLY_LINE:
                got.notes.append(f"{where} ({call['function_name']}): its reply line would be {size} bytes, over "
                                 f"the {MAX_REPLY_LINE}-byte cap (a command of {len(command)} characters; no shell "
                                 "takes over 128 KiB as one argument); left out")
                skipped += 1
                continue
            have.add(rid)
            taken.add(draw)
            got.lines.append(line)
    return got


def import_atif(paths: list[Path], out: Path, tasks: list[Task], given: Task | None,
                extra_tools: list[str]) -> Imported:
    """Read, parse (Harbor's models), check everything; then append the new lines to ``out``."""
    docs = read_documents(paths)
    answer = run("parse-atif", {"documents": [{"name": d.path, "text": d.text} for d in docs]})
    parsed = answer.get("trajectories")
    if not isinstance(parsed, list) or len(parsed) != len(docs):
        raise BadInput("harbor: the worker's answer does not match the trajectories given")
    tools = SHELL_TOOLS | {t.lower() for t in extra_tools}
    got = build(docs, parsed, tasks, given, tools, out)
    if got.lines:
        with JsonlWriter(out) as w:
            for line in got.lines:
                w.write(line)
    return got


def summary(got: Imported, out: Path) -> str:
    text = f"imported {len(got.lines)} shell command(s) from {got.files} trajectory file(s) into {out}"
    if got.already:
        text += f" ({got.already} were there already)"
    return text + f"; next: quotebench replay {out} --transports raw,nested --out results.jsonl"

