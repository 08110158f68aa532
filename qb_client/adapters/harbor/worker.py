"""Harbor's own code on our behalf: load task directories with Harbor's task loader, parse ATIF trajectories
with Harbor's pydantic models. A standalone script (the standard library and ``harbor``, nothing of ours).

Why a standalone script
    Harbor 0.26.0 needs Python >= 3.12 and QuoteBench runs on 3.11, so Harbor usually lives in a venv of
    another interpreter (:mod:`qb_client.adapters.harbor.bridge`), which runs this file as
    ``VENV/bin/python -I worker.py OP`` with a JSON request on stdin and one JSON document on stdout. Where
    ``harbor`` is importable in our own process (the ``harbor`` extra on Python >= 3.12), the bridge calls
    :func:`handle` directly: the same code either way.

What it returns
    Plain data only, never Harbor's objects: for a task, what Harbor read (its name, its instruction, its test
    script); for a trajectory, every tool call of every step (of embedded subagent trajectories too) with its
    step index, step id, tool call id, function name, arguments and the agent that made it. A document Harbor
    refuses is ``{"error": "field 'steps.0.source': ..."}``: one line naming the first field pydantic named.
    Nothing here decides which calls are shell commands: that is ours (:mod:`qb_client.adapters.harbor.atif`).
"""

from __future__ import annotations

import json
import sys
from typing import Any


def _first_error(e: Exception) -> str:
    """One line: the first field pydantic named and what it said, else the exception's own first line."""
    errors = getattr(e, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
            loc = ".".join(str(p) for p in first.get("loc", ()))
            return f"field '{loc}': {first.get('msg', '')}" if loc else str(first.get("msg", ""))
        except Exception:  # noqa: BLE001 - fall back to the text
            pass
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:300]}"


def load_tasks(request: dict[str, Any]) -> dict[str, Any]:
    """Each directory of ``request["dirs"]`` through ``harbor.models.task.task.Task`` (and ``is_valid_dir``);
    with ``request["dataset"]``, first the directories Harbor takes from that local dataset (:func:`dataset`),
    listed in the answer's ``dataset`` and loaded too (one worker start for both)."""
    from harbor.models.task.task import Task

    out = []
    listed = dataset({"dir": request["dataset"]})["tasks"] if request.get("dataset") else []
    for d in [*listed, *request.get("dirs", [])]:
        try:
            task = Task(d)
            test = task.paths.discovered_test_path_for(task.config.environment.os)
            out.append({"dir": d, "ok": True, "valid_dir": Task.is_valid_dir(d), "name": task.name,
                        "instruction": task.instruction, "test_path": str(test) if test else None,
                        "solve_path": str(task.paths.discovered_solve_path or "") or None,
                        "dockerfile": (task.paths.environment_dir / "Dockerfile").is_file(),
                        "agent_timeout_sec": task.config.agent.timeout_sec,
                        "verifier_timeout_sec": task.config.verifier.timeout_sec,
                        "metadata": task.config.metadata})
        except Exception as e:  # noqa: BLE001 - whatever Harbor refuses is reported, one line per task
            out.append({"dir": d, "ok": False, "error": _first_error(e)})
    return {"dataset": listed, "tasks": out}


def dataset(request: dict[str, Any]) -> dict[str, Any]:
    """The task directories ``harbor run -p DIR`` takes from a local dataset: ``DatasetConfig(path=DIR)``."""
    import asyncio

    from harbor.models.job.config import DatasetConfig

    configs = asyncio.run(DatasetConfig(path=request["dir"]).get_task_configs(disable_verification=False))
    return {"tasks": sorted(str(c.path) for c in configs)}


def _calls(trajectory: Any, where: str) -> list[dict[str, Any]]:
    agent = trajectory.agent
    found = []
    for index, step in enumerate(trajectory.steps):
        for k, call in enumerate(step.tool_calls or []):
            found.append({"trajectory": where, "step_index": index, "step_id": step.step_id, "call_index": k,
                          "source": step.source, "model_name": step.model_name or agent.model_name,
                          "tool_call_id": call.tool_call_id, "function_name": call.function_name,
                          "arguments": call.arguments, "agent": agent.name, "agent_version": agent.version})
    for j, sub in enumerate(trajectory.subagent_trajectories or []):
        found.extend(_calls(sub, f"{where}.subagent_trajectories.{j}"))
    return found


def parse_atif(request: dict[str, Any]) -> dict[str, Any]:
    """Each document of ``request["documents"]`` (``{"name", "text"}``) through
    ``harbor.models.trajectories.Trajectory.model_validate_json``."""
    from harbor.models.trajectories import Trajectory

    out = []
    for doc in request["documents"]:
        try:
            t = Trajectory.model_validate_json(doc["text"])
        except Exception as e:  # noqa: BLE001 - a ValidationError names the field
            out.append({"name": doc["name"], "error": _first_error(e)})
            continue
        first_user = next((st.message for st in t.steps if st.source == "user"), None)
        out.append({"name": doc["name"], "schema_version": t.schema_version, "session_id": t.session_id,
                    "first_user_message": first_user if isinstance(first_user, str) else None,
                    "agent": {"name": t.agent.name, "version": t.agent.version, "model_name": t.agent.model_name},
                    "steps": len(t.steps), "calls": _calls(t, "$")})
    return {"trajectories": out}


def version(request: dict[str, Any]) -> dict[str, Any]:
    from importlib.metadata import version as dist_version

    return {"harbor": dist_version("harbor"), "python": ".".join(map(str, sys.version_info[:3]))}


OPS = {"load-tasks": load_tasks, "dataset": dataset, "parse-atif": parse_atif, "version": version}


def handle(op: str, request: dict[str, Any]) -> dict[str, Any]:
    return OPS[op](request)


def main() -> int:
    if len(sys.argv) != 2 or sys.argv[1] not in OPS:
        print(f"usage: worker.py {'|'.join(OPS)} < request.json", file=sys.stderr)
        return 2
    try:
        request = json.load(sys.stdin)
        doc = handle(sys.argv[1], request)
    except Exception as e:  # noqa: BLE001 - one line for the bridge, never a traceback
        print(f"harbor worker: {_first_error(e)}", file=sys.stderr)
        return 1
    sys.stdout.write(json.dumps(doc, ensure_ascii=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
