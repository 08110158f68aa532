"""``quotebench bench lint``: the lint's throughput, in commands per second per core, on each lab transport.

A harness calls the lint on every command before it sends it, so the lint must cost little next to the run it
guards: the goal is 20,000 commands per second on one core (docs/lint.md). The corpus is fixed: the suite's
reference solutions under the raw and disclosed contracts and the habits agent's commands under the same, and
the hostile corpus of tests/harness_corpus.py when the bench runs from a checkout that has it (an installed
package has no tests; the document says which parts were used). Each transport is timed over the whole corpus
several times in this one thread, by CPU time (``time.process_time``), so other processes on the machine do
not count; the best pass is the figure, the usual way to read a CPU-bound loop on a shared machine. Every call
is the whole ``lint``: the prediction, the hazards and the checked safe text.
"""

from __future__ import annotations

import ast
import time
from pathlib import Path
from typing import Any

LAB = ("raw", "nested", "nested-single", "ssh", "json-naive", "json-correct", "escaped", "tempscript")
GOAL_PER_S = 20_000.0
HOSTILE_FILE = Path(__file__).resolve().parents[2] / "tests" / "harness_corpus.py"


def hostile_corpus(path: Path = HOSTILE_FILE) -> list[str]:
    """The hostile corpus's commands, read as data (the literal ``HOSTILE`` list), never imported; [] when
    the file is not here."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except OSError:
        return []
    for node in tree.body:
        if isinstance(node, ast.AnnAssign | ast.Assign):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            if any(isinstance(t, ast.Name) and t.id == "HOSTILE" for t in targets) and node.value is not None:
                return [command for _, command in ast.literal_eval(node.value)]
    return []


def corpus() -> tuple[list[str], dict[str, int]]:
    """The commands (repeats kept: each is a call a harness would make) and how many came from each source."""
    from tasks.load import suite

    from ..adapters.agents.habits import habitual_command_for
    from ..replies.contracts import reference_reply

    reference: list[str] = []
    habits: list[str] = []
    for task in suite():
        for contract in ("raw", "disclosed"):
            reference.append(reference_reply(task, contract).command or "")
            habits.append(habitual_command_for(task, contract) or "")
    hostile = hostile_corpus()
    commands = [c for c in reference + habits + hostile if c]
    return commands, {"reference": len(reference), "habits": len(habits), "hostile": len(hostile)}


def throughput(transports: tuple[str, ...] | list[str] = LAB, rounds: int = 5) -> dict[str, Any]:
    """Commands per CPU second for each transport: the best of ``rounds`` passes over the corpus."""
    from transports.lint import lint

    commands, sources = corpus()
    rows: dict[str, dict[str, Any]] = {}
    for name in transports:
        for command in commands:  # the first pass warms the route's caches and is not counted
            lint(command, name)
        best = float("inf")
        for _ in range(rounds):
            start = time.process_time()
            for command in commands:
                lint(command, name)
            best = min(best, time.process_time() - start)
        per_s = len(commands) / best if best > 0 else float("inf")
        rows[name] = {"commands_per_s": per_s, "us_per_command": 1e6 / per_s, "within_goal": per_s >= GOAL_PER_S}
    return {"goal_per_s": GOAL_PER_S, "commands": len(commands), "sources": sources, "rounds": rounds,
            "transports": rows}
