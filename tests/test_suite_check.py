"""The exactness proof of the whole suite: every reference solution passes on its path; the untouched
fixture and every near-miss state fail. This is what `quotebench tasks check` runs."""

from __future__ import annotations

import anyio

from qb_client.ops.suite_check import check_suite
from tasks.load import suite


def test_every_task_holds() -> None:
    results = anyio.run(check_suite, list(suite()))
    problems = [f"{r.task_id}: {p}" for r in results for p in r.problems]
    assert problems == []
    assert len(results) == 56 and all(r.ok for r in results)
    assert all(r.near_misses >= 3 for r in results)
