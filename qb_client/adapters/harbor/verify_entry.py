"""The verifier of an exported Harbor task (copied to ``tests/qb_verify.py``): QuoteBench's own validator on
the final state of the working directory, the reward from its verdict.

It runs inside the task's container as ``python3 -I qb_verify.py WORKDIR LOGDIR``, next to
``validator/`` (byte-identical copies of our ``tasks`` modules: :mod:`qb_client.adapters.harbor.export`) and
``task.json`` (the task as our loader resolved it). It writes ``LOGDIR/verdict.json`` (every check, as a
QuoteBench record holds them), prints one line per check, and last ``LOGDIR/reward.txt``: ``1`` when
every check passed, else ``0``. Its own exit status is 0 whenever a verdict was reached: Harbor reads the
reward, and so a verdict never comes from an exit code here either.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: qb_verify.py WORKDIR LOGDIR", file=sys.stderr)
        return 2
    workdir, logs = Path(argv[1]), Path(argv[2])
    here = Path(__file__).resolve().parent
    sys.path.insert(0, str(here / "validator"))
    import tasks
    from tasks.schema import Task
    from tasks.validate import validate

    if Path(tasks.__file__).resolve().parent != here / "validator" / "tasks":
        print(f"qb_verify: the validator was imported from {tasks.__file__}, not from {here / 'validator'}",
              file=sys.stderr)
        return 1
    task = Task.model_validate_json((here / "task.json").read_bytes())
    verdict = validate(task, workdir)
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "verdict.json").write_text(verdict.model_dump_json(indent=1) + "\n")
    for c in verdict.checks:
        print(f"{'PASS' if c.ok else 'FAIL'} {c.check}: {c.detail}")
    print(f"{task.id}: {'passed' if verdict.passed else 'failed'}")
    (logs / "reward.txt").write_text("1\n" if verdict.passed else "0\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
