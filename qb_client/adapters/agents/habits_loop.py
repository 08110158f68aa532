"""A BASELINE for the multi-turn arm, not a model: the habits agent (:mod:`.habits`) that reads its
command's result and retries once.

Turn 1 is the habitual command under the contract, exactly as in the one-shot design. After it the agent
looks only at what any agent sees - the exit code, stderr, a timeout or a transport error, never the verdict
or the files - and:

* if the command exited 0 with nothing on stderr, it believes it is done and stops (``DONE``, or a native
  reply without a tool call). A quoting failure that exits 0 is therefore never noticed: the case the paper
  calls exit-zero-wrong;
* otherwise it retries once with the other of its two forms: the raw habit escaped for double quotes
  (:func:`.habits.escape_for_double`, the escaped form) where it sent the raw habit (``raw``, ``native``),
  and the raw habit where it sent an escaped one (``disclosed``, ``disclosed-single``), the guess of a
  person who sees a quoting error and assumes the other layer count. After the retry it stops, whatever
  happened.

It is deterministic and not tuned to any score. The retry runs in the same sandbox as the first command,
so what the first one already did (an appended line, a moved file) stays, as it would for a person.
"""

from __future__ import annotations

from collections.abc import Sequence

from tasks.schema import Task

from .habits import escape_for_double, habitual_command, habitual_command_for

RETRY_PROSE = "That failed; trying again with the quoting changed:"


def noticed(exit_code: int | None, stderr: str, timed_out: bool = False, error: bool = False) -> bool:
    """Whether the baseline sees a failure: a nonzero or missing exit code, any stderr, a timeout, an error."""
    return exit_code != 0 or bool(stderr.strip()) or timed_out or error


def retry_command(task: Task, contract: str) -> str:
    """The other form of the habitual command (see the module docstring)."""
    if contract in ("raw", "native"):
        return escape_for_double(habitual_command(task))
    return habitual_command(task)


def next_command(task: Task, contract: str, seen: Sequence[tuple[int | None, str, bool, bool]]) -> str | None:
    """The command for the next turn, or None to stop. ``seen``: for each earlier turn, the (exit code,
    stderr, timed out, error) of its action."""
    if not seen:
        return habitual_command_for(task, contract)
    if len(seen) == 1 and noticed(*seen[0]):
        return retry_command(task, contract)
    return None
