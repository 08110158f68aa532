"""The courier's script for a harness run: what the scripted provider answers on each turn of one task.

Why this script
    A dry run must exercise everything a paid run does: several turns, the harness feeding each tool result
    back, a command that fails and a later one that repairs it, the end of the run, the store and the replay.
    So each task gets four turns, the same for every harness:

    0. ``ls``: a look around (exit 0; no dates in its output, so a replay's tool results are the same bytes);
    1. the task's reference solution behind ``cd ./qb-missing-dir &&``: a realistic slip (the wrong directory)
       that fails with exit 1 and changes nothing;
    2. the reference solution alone: the repair;
    3. no tool call: the end (a text end of turn; on Chat Completions mini-swe-agent's submit command, its way
       of ending, answered by :class:`qb_client.campaign.harness_upstream.ScriptUpstream`).

    The script never reads the tool results (so a run is deterministic) and never sees the verdict.
"""

from __future__ import annotations

from tasks.schema import Task

MISSING_DIR = "./qb-missing-dir"


def courier_script(task: Task) -> list[list[str]]:
    """One list of shell commands (one tool call each) per turn; an empty list ends the run."""
    return [["ls"], [f"cd {MISSING_DIR} && {task.solution}"], [task.solution], []]
