"""``tasks check``: the suite's own exactness proof.

For every task: the reference ``solution`` passes on ``raw``, the
``solution_disclosed`` passes on ``nested``, the untouched fixture fails, and
every near-miss state (see :mod:`tasks.nearmiss`) fails. A benchmark whose
validators accept a near miss cannot tell a lost quote from a kept one.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from tasks.nearmiss import near_misses
from tasks.schema import Task
from tasks.validate import validate
from transports.registry import get
from transports.sandbox import Sandbox


@dataclass
class TaskCheck:
    task_id: str
    solution: bool = False
    solution_disclosed: bool = False
    fixture_rejected: bool = False
    near_misses: int = 0
    near_misses_rejected: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (self.solution and self.solution_disclosed and self.fixture_rejected
                and self.near_misses > 0 and self.near_misses == self.near_misses_rejected)

    def as_json(self) -> dict:
        return {"task_id": self.task_id, "ok": self.ok, "solution": self.solution,
                "solution_disclosed": self.solution_disclosed, "fixture_rejected": self.fixture_rejected,
                "near_misses": self.near_misses, "near_misses_rejected": self.near_misses_rejected,
                "problems": self.problems}


def _first_failure(verdict) -> str:
    bad = [c for c in verdict.checks if not c.ok]
    return bad[0].detail if bad else "passed"


async def check_task(task: Task) -> TaskCheck:
    result = TaskCheck(task.id)
    with Sandbox.create(task) as box:
        verdict = await anyio.to_thread.run_sync(validate, task, box.workdir)
        result.fixture_rejected = not verdict.passed
        if verdict.passed:
            result.problems.append("the untouched fixture passes")
    with Sandbox.create(task) as box:
        delivery = await get("nested").deliver(task.solution_disclosed, box)
        verdict = await anyio.to_thread.run_sync(validate, task, box.workdir)
        result.solution_disclosed = verdict.passed
        if not verdict.passed:
            result.problems.append(f"solution_disclosed fails on nested: {_first_failure(verdict)}")
    with Sandbox.create(task) as box:
        await get("raw").deliver(task.solution, box)
        verdict = await anyio.to_thread.run_sync(validate, task, box.workdir)
        result.solution = verdict.passed
        if not verdict.passed:
            result.problems.append(f"solution fails on raw: {_first_failure(verdict)}")
            return result
        await anyio.to_thread.run_sync(_check_near_misses, task, box.workdir, result)
    return result


def _check_near_misses(task: Task, solved: Path, result: TaskCheck) -> None:
    for description, apply in near_misses(task):
        result.near_misses += 1
        with tempfile.TemporaryDirectory(prefix="qb-nearmiss-") as tmp:
            state = Path(tmp) / "work"
            shutil.copytree(solved, state, symlinks=True)
            try:
                apply(state)
            except Exception as e:  # a mutation that cannot apply is a bug in the suite, reported not raised
                result.problems.append(f"near miss '{description}' could not be applied: {e}")
                continue
            if validate(task, state).passed:
                result.problems.append(f"near miss accepted: {description}")
            else:
                result.near_misses_rejected += 1


async def check_suite(tasks: list[Task], concurrency: int = 4, on_done=None) -> list[TaskCheck]:
    results: dict[str, TaskCheck] = {}
    limiter = anyio.CapacityLimiter(concurrency)

    async def one(t: Task) -> None:
        async with limiter:
            results[t.id] = await check_task(t)
        if on_done:
            on_done(results[t.id])

    async with anyio.create_task_group() as tg:
        for t in tasks:
            tg.start_soon(one, t)
    return [results[t.id] for t in tasks]
