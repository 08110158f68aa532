"""Fixed-reply replay of all 112 reference solutions: the properties the paper's identification rests on.

* escaped, tempscript and json-correct reproduce the raw outcome exactly (received == R, same verdict
  checks) for 112/112 replies;
* ssh (real OpenSSH client, embedded server) gives nested's verdict except where the outer parse split R
  into several words (OpenSSH joins them, bash -c makes the rest $0 $1 ...): there the received differ.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import anyio

from qb_client.campaign.replay import load_replies, replay
from tasks.load import suite


def test_all_reference_solutions_through_every_path(tmp_path: Path) -> None:
    store = tmp_path / "replies.jsonl"
    with store.open("w") as f:
        for t in suite():
            for contract, command in (("raw", t.solution), ("disclosed", t.solution_disclosed)):
                f.write(json.dumps({"task_id": t.id, "contract": contract, "command": command}) + "\n")
    out = tmp_path / "results.jsonl"
    transports = ["raw", "escaped", "tempscript", "json-correct", "nested", "ssh"]
    executed = anyio.run(lambda: replay(load_replies(store), transports, out))
    assert executed == 112 * len(transports)
    by: dict[str, dict[str, dict]] = collections.defaultdict(dict)
    for line in out.read_text().splitlines():
        r = json.loads(line)
        by[r["reply_id"]][r["transport"]] = r
    assert len(by) == 112
    for rid, d in by.items():
        raw = d["raw"]
        assert raw["received"] == raw["command"]
        for fix in ("escaped", "tempscript", "json-correct"):
            assert d[fix]["received"] == raw["command"], (raw["task_id"], fix)
            assert d[fix]["verdict"] == raw["verdict"], (raw["task_id"], fix)
        nested, ssh = d["nested"], d["ssh"]
        if nested["verdict"]["passed"] != ssh["verdict"]["passed"]:
            assert nested["received"] != ssh["received"], raw["task_id"]
    # the reference solutions are right on their own path
    assert all(d["raw"]["verdict"]["passed"] for d in by.values() if d["raw"]["contract"] == "raw")
    assert all(d["nested"]["verdict"]["passed"] for d in by.values() if d["raw"]["contract"] == "disclosed")
