"""Harbor both ways (docs/harbor.md): ``quotebench export harbor`` gives task directories Harbor's own loader
accepts, whose tests run our validator on the final state; ``quotebench import-atif`` turns ATIF trajectories
(built here with Harbor's own pydantic models) into a reply store that ``quotebench replay`` reads.

Harbor 0.26.0 runs in its component venv of a Python >= 3.12 (``needs("harbor")``); the exported tests run
here without Docker: the fixture is unpacked into a temporary directory that stands for the container's
/app, and tests/test.sh runs there with this interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from qb_client.adapters.harbor import bridge
from qb_client.adapters.harbor.export import VALIDATOR_MODULES, dir_name
from tasks.load import get_task, suite
from tasks.validate import validate
from probes import cli

ROOT = Path(__file__).resolve().parents[1]



@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from qb_client.adapters.harbor.export import export

    out = tmp_path_factory.mktemp("harbor") / "dataset"
    export(list(suite()), out, "test")
    return out


# ---------------------------------------------------------------- export


@pytest.mark.needs("harbor")
def test_every_exported_task_loads_with_harbors_own_loader(exported: Path) -> None:
    """`harbor run -p DIR` takes all 56 (DatasetConfig), and Task() reads each as we wrote it."""
    broken = exported.parent / "broken"
    broken.mkdir()
    (broken / "task.toml").write_text('schema_version = "1.4"\n[task]\nname = "no-org"\n')
    answer = bridge.run("load-tasks", {"dataset": str(exported), "dirs": [str(broken)]})
    listed, (*loaded, bad) = answer["dataset"], answer["tasks"]
    tasks = {dir_name(t): t for t in suite()}
    assert len(tasks) == 56 and sorted(Path(p).name for p in listed) == sorted(tasks)
    assert [got["dir"] for got in loaded] == listed
    for got in loaded:
        task = tasks[Path(got["dir"]).name]
        assert got["ok"], got
        assert got["valid_dir"] and got["dockerfile"]
        assert got["name"] == f"quotebench/{dir_name(task)}"
        assert got["instruction"] == task.instruction  # byte for byte, after Harbor's own reading
        assert got["test_path"].endswith("/tests/test.sh") and got["solve_path"].endswith("/solution/solve.sh")
        assert got["metadata"]["quotebench_task_id"] == task.id
    assert not bad["ok"] and "org/name" in bad["error"] and "\n" not in bad["error"]


def test_the_validator_in_the_tests_is_ours_byte_for_byte(exported: Path) -> None:
    """The copies are our modules, and they are exactly what `import tasks.validate` loads."""
    probe = (f"import json, sys; sys.path.insert(0, {str(ROOT)!r}); import tasks.validate; "
             "print(json.dumps(sorted(m for m in sys.modules if m == 'tasks' or m.startswith('tasks.'))))")
    loaded = json.loads(subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True,
                                       check=True).stdout)
    assert sorted(m.removeprefix("tasks.") if m != "tasks" else "__init__" for m in loaded) == sorted(VALIDATOR_MODULES)
    for task in suite():
        copy = exported / dir_name(task) / "tests" / "validator" / "tasks"
        for m in VALIDATOR_MODULES:
            assert (copy / f"{m}.py").read_bytes() == (ROOT / "tasks" / f"{m}.py").read_bytes()
        assert json.loads((exported / dir_name(task) / "tests" / "task.json").read_text()) == \
            json.loads(task.model_dump_json())
        assert (exported / dir_name(task) / "solution" / "command").read_bytes() == task.solution.encode()


def _container(exported: Path, task_id: str, where: Path) -> tuple[Path, Path]:
    """The task's fixture.tar unpacked into ``where/app`` (the container's /app); the task directory."""
    tdir = exported / dir_name(get_task(task_id))
    app = where / "app"
    app.mkdir(parents=True)
    with tarfile.open(tdir / "environment" / "fixture.tar") as tar:
        tar.extractall(app, filter="tar")
    return app, tdir


def _verify(tdir: Path, app: Path, logs: Path) -> tuple[str, dict]:
    env = {**os.environ, "QB_WORKDIR": str(app), "QB_LOGS": str(logs), "QB_PYTHON": sys.executable}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(["bash", str(tdir / "tests" / "test.sh")], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return (logs / "reward.txt").read_text(), json.loads((logs / "verdict.json").read_text())


# the hardest tier of families that differ in how they are judged: bytes, git history, an argv and an environment
# recorded by a helper program, hostile file names, JSON, a wrapper program's record
JUDGED = [f"{f}/h3" for f in ("file-write", "git-commit", "argv-pass", "env-pass", "hostile-filenames", "json-edit",
                              "container-exec")]


def test_exported_tests_judge_the_final_state_with_our_validator(exported: Path, tmp_path: Path) -> None:
    """Reference solution -> reward 1; the untouched fixture and a one-byte-off state -> reward 0; and the
    verdict is the host validator's, check for check."""
    for i, task_id in enumerate(JUDGED):
        task = get_task(task_id)
        app, tdir = _container(exported, task_id, tmp_path / f"good{i}")
        subprocess.run(["bash", str(tdir / "solution" / "solve.sh")], env={**os.environ, "QB_WORKDIR": str(app)},
                       capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        reward, verdict = _verify(tdir, app, tmp_path / f"logs-good{i}")
        assert reward == "1\n", (task_id, verdict)
        assert verdict == json.loads(validate(task, app).model_dump_json())
        untouched, tdir = _container(exported, task_id, tmp_path / f"bad{i}")
        reward, verdict = _verify(tdir, untouched, tmp_path / f"logs-bad{i}")
        assert reward == "0\n" and not verdict["passed"], task_id
    app, tdir = _container(exported, "file-write/h2", tmp_path / "off")
    check = next(c for c in get_task("file-write/h2").checks if c.kind == "file-bytes")
    (app / check.path).write_bytes(check.text.encode()[:-1] + b"X")
    reward, verdict = _verify(tdir, app, tmp_path / "logs-off")
    assert reward == "0\n" and "first difference at byte" in json.dumps(verdict)


def test_a_hostile_final_state_cannot_reward_itself(exported: Path, tmp_path: Path) -> None:
    """The agent's commands own /app and may have written /logs: a planted `tasks` package and `pydantic.py` in
    the working directory (where test.sh runs), a stale reward of 1, and the right bytes behind a symlink still
    give reward 0, with the validator's own one-line refusal."""
    app, tdir = _container(exported, "file-write/control", tmp_path / "c")
    check = next(c for c in get_task("file-write/control").checks if c.kind == "file-bytes")
    outside = tmp_path / "outside.txt"
    outside.write_text(check.text)
    (app / check.path).symlink_to(outside)
    (app / "tasks").mkdir()
    (app / "tasks" / "__init__.py").write_text("")
    (app / "tasks" / "validate.py").write_text("def validate(task, root):\n    raise SystemExit('planted')\n")
    (app / "pydantic.py").write_text("raise SystemExit('planted')\n")
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "reward.txt").write_text("1\n")
    env = {**os.environ, "QB_WORKDIR": str(app), "QB_LOGS": str(logs), "QB_PYTHON": sys.executable}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(["bash", str(tdir / "tests" / "test.sh")], env=env, cwd=app, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and "planted" not in done.stdout + done.stderr, done.stderr
    assert (logs / "reward.txt").read_text() == "0\n"
    verdict = json.loads((logs / "verdict.json").read_text())
    assert any("symlink" in c["detail"] for c in verdict["checks"] if not c["ok"])


def test_export_refuses_a_non_empty_directory_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "keep").write_text("x")
    code, out, err = cli(capsys, monkeypatch, "export", "harbor", str(tmp_path / "d"))
    assert code == 2 and out == "" and err.count("\n") == 1 and "not empty" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"] and os.listdir(tmp_path / "d") == ["keep"]


# ---------------------------------------------------------------- import-atif

BUILD = r"""
import json, sys
from harbor.models.trajectories import Agent, Observation, ObservationResult, Step, ToolCall, Trajectory

spec = json.load(sys.stdin)
for path, t in spec.items():
    def steps(items):
        out = [Step(step_id=1, source="user", message=t["instruction"])]
        for k, (name, args) in enumerate(items):
            call = ToolCall(tool_call_id=f"c{k}", function_name=name, arguments=args)
            out.append(Step(step_id=len(out) + 1, source="agent", message="", model_name=t.get("model"),
                            tool_calls=[call], observation=Observation(results=[ObservationResult(
                                source_call_id=f"c{k}", content="ok")])))
        return out
    subs = [Trajectory(trajectory_id=f"sub{j}", agent=Agent(name=t["agent"], version=t["version"]),
                       steps=steps(s)) for j, s in enumerate(t.get("subagents", []))]
    traj = Trajectory(session_id="s", agent=Agent(name=t["agent"], version=t["version"], model_name=t.get("model")),
                      steps=steps(t["calls"]), subagent_trajectories=subs or None)
    open(path, "w").write(json.dumps(traj.to_json_dict()))
"""


def build_trajectories(spec: dict[str, dict]) -> None:
    """Write each trajectory with Harbor's own models (in its venv, or here where harbor is importable)."""
    python = sys.executable if bridge.in_process() else str(bridge.venv_python())
    subprocess.run([python, "-I", "-c", BUILD], input=json.dumps(spec), text=True, check=True, capture_output=True,
                   timeout=120)


R_CLAUDE = 'echo "hello world" > out.txt'
R_CODEX = "printf '%s\\n' 'hello world' > out.txt"
R_GEMINI = 'echo "a  b" \\\n  > out.txt'
R_MINI = "echo $'hello world' > out.txt"
R_OLD_CODEX = "echo hello world>out.txt"
R_SUB = 'echo "it\'s" > out.txt'


@pytest.mark.needs("harbor", "bwrap")
def test_import_atif_then_replay_through_raw(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    instruction = get_task("file-write/control").instruction
    spec = {
        str(tmp_path / "claude.json"): {"agent": "claude-code", "version": "2.1.197", "model": "claude-opus-4-8",
                                        "instruction": instruction,
                                        "calls": [["Read", {"file_path": "out.txt"}], ["Bash", {"command": R_CLAUDE}]],
                                        "subagents": [[["Bash", {"command": R_SUB}]]]},
        str(tmp_path / "codex.json"): {"agent": "codex", "version": "0.171.0", "model": "gpt-5",
                                       "instruction": "Preamble.\n\n" + instruction,
                                       "calls": [["exec_command", {"cmd": R_CODEX, "login": True}],
                                                 ["shell", {"command": ["bash", "-lc", R_OLD_CODEX]}],
                                                 ["shell", {"command": ["ls", "-la"]}]]},
        str(tmp_path / "gemini.json"): {"agent": "gemini-cli", "version": "0.61.0", "instruction": instruction,
                                        "calls": [["run_shell_command", {"command": R_GEMINI}]]},
        str(tmp_path / "mini.json"): {"agent": "mini-swe-agent", "version": "2.4.6", "model": "openai/x",
                                      "instruction": instruction, "calls": [["bash", {"command": R_MINI}]]},
        str(tmp_path / "terminus.json"): {"agent": "terminus-2", "version": "2", "instruction": instruction,
                                          "calls": [["bash_command", {"keystrokes": "ls\n", "duration": 1}]]},
    }
    build_trajectories(spec)
    store = tmp_path / "store.jsonl"
    code, _out, err = cli(capsys, monkeypatch, "import-atif", *spec, "--out", str(store))
    assert code == 0, err
    assert "imported 6 shell command(s) from 5 trajectory file(s)" in err
    assert "[shell, -c, command] list" in err  # ['ls', '-la'] is no shell command line: left out, said
    lines = [json.loads(x) for x in store.read_text().splitlines()]
    by_cmd = {x["command"]: x for x in lines}
    assert set(by_cmd) == {R_CLAUDE, R_SUB, R_CODEX, R_OLD_CODEX, R_GEMINI, R_MINI}
    claude = by_cmd[R_CLAUDE]
    assert claude["task_id"] == "file-write/control" and claude["contract"] == "native"
    assert claude["config"] == {"provider": "harbor/claude-code", "model": "claude-opus-4-8", "effort": "unset",
                                "params": {"agent_version": "2.1.197"}}
    assert claude["source"]["trajectory"] == str(tmp_path / "claude.json") and claude["source"]["step_index"] == 2
    assert claude["source"]["agent_version"] == "2.1.197" and claude["source"]["model"] == "claude-opus-4-8"
    assert by_cmd[R_SUB]["source"]["path"] == "$.subagent_trajectories.0"
    assert by_cmd[R_GEMINI]["config"]["model"] == "unknown" and by_cmd[R_GEMINI]["source"]["model"] is None
    assert json.loads(by_cmd[R_CODEX]["tool_calls"][0]["arguments"]) == {"cmd": R_CODEX, "login": True}
    assert sorted(x["draw"] for x in lines if x["config"]["provider"] == "harbor/claude-code") == [0, 1]
    # the same files again add nothing
    code, _out, err = cli(capsys, monkeypatch, "import-atif", *spec, "--out", str(store))
    assert code == 0 and "imported 0 shell command(s)" in err and "(6 were there already)" in err
    assert len(store.read_text().splitlines()) == 6
    # every imported command through raw: received is R, the verdict the validator's
    results = tmp_path / "results.jsonl"
    code, _out, err = cli(capsys, monkeypatch, "replay", str(store), "--transports", "raw", "--out", str(results))
    assert code == 0, err
    records = {r["command"]: r for r in map(json.loads, results.read_text().splitlines())}
    assert set(records) == set(by_cmd)
    assert all(r["received"] == r["command"] and not r["damaged"] for r in records.values())
    assert records[R_CLAUDE]["verdict"]["passed"] and records[R_CODEX]["verdict"]["passed"]
    assert records[R_MINI]["verdict"]["passed"] and not records[R_GEMINI]["verdict"]["passed"]


@pytest.mark.needs("harbor")
def test_import_atif_task_from_option_and_refusal_without(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A job directory of another benchmark: its trial's agent/trajectory.json is found; the task must be given."""
    job = tmp_path / "job"
    path = job / "trial-1" / "agent" / "trajectory.json"
    path.parent.mkdir(parents=True)
    (job / "trial-1" / "result.json").write_text("{}")
    build_trajectories({str(path): {"agent": "codex", "version": "1", "instruction": "Fix the build.",
                                    "calls": [["exec_command", {"cmd": "make"}]]}})
    store = tmp_path / "s.jsonl"
    code, _out, err = cli(capsys, monkeypatch, "import-atif", str(job), "--out", str(store))
    assert code == 2 and err.count("\n") == 1 and "give --task" in err and not store.exists()
    code, _out, err = cli(capsys, monkeypatch, "import-atif", str(job), "--out", str(store), "--task", "json-edit/h1")
    assert code == 0, err
    [line] = map(json.loads, store.read_text().splitlines())
    assert line["task_id"] == "json-edit/h1" and line["command"] == "make"
    assert line["source"]["trajectory"] == str(path)


# ---------------------------------------------------------------- hostile trajectories


def _refused(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, store: Path, *args: str) -> str:
    code, out, err = cli(capsys, monkeypatch, "import-atif", *args, "--out", str(store))
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert not store.exists()
    return err


def test_hostile_trajectory_files_are_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Refused before Harbor sees them: links, FIFOs, oversize, not UTF-8, not JSON, too deep; nothing written."""
    store = tmp_path / "store.jsonl"
    secret = tmp_path / "outside.json"
    secret.write_text("{}")
    (tmp_path / "link.json").symlink_to(secret)
    assert "symlink" in _refused(capsys, monkeypatch, store, str(tmp_path / "link.json"))
    os.mkfifo(tmp_path / "fifo.json")
    assert "FIFO" in _refused(capsys, monkeypatch, store, str(tmp_path / "fifo.json"))
    with open(tmp_path / "big.json", "wb") as fh:
        fh.truncate((64 << 20) + 1)
    assert "big.json" in _refused(capsys, monkeypatch, store, str(tmp_path / "big.json"))
    (tmp_path / "latin1.json").write_bytes(b'{"a": "\xe9"}')
    assert "not UTF-8" in _refused(capsys, monkeypatch, store, str(tmp_path / "latin1.json"))
    (tmp_path / "text.json").write_text("not json")
    assert "not JSON" in _refused(capsys, monkeypatch, store, str(tmp_path / "text.json"))
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    assert "nested deeper" in _refused(capsys, monkeypatch, store, str(tmp_path / "deep.json"))
    job = tmp_path / "job" / "trial" / "agent"
    job.mkdir(parents=True)
    (job / "trajectory.json").symlink_to(secret)
    assert "not a regular file" in _refused(capsys, monkeypatch, store, str(tmp_path / "job"))
    assert "no such file" in _refused(capsys, monkeypatch, store, str(tmp_path / "missing.json"))


@pytest.mark.needs("harbor")
def test_a_document_harbor_refuses_names_the_file_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "store.jsonl"
    good = tmp_path / "good.json"
    build_trajectories({str(good): {"agent": "codex", "version": "1", "instruction": "x",
                                    "calls": [["exec_command", {"cmd": "ls"}]]}})
    doc = json.loads(good.read_text())
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**doc, "agent": {"version": "1"}}))
    err = _refused(capsys, monkeypatch, store, str(good), str(bad), "--task", "file-write/control")
    assert str(bad) in err and "field 'agent.name'" in err
    doc["steps"][1]["source"] = "robot"
    bad.write_text(json.dumps(doc))
    err = _refused(capsys, monkeypatch, store, str(bad), "--task", "file-write/control")
    assert "field 'steps.1.source'" in err


def test_without_a_python_3_12_import_atif_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """No Harbor venv yet and no Python >= 3.12 on PATH or under pyenv: one line naming the need, exit 2."""
    monkeypatch.setenv("QB_HARBOR_VENV", "1")  # where harbor is importable here too
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    path = tmp_path / "t.json"
    path.write_text('{"schema_version": "ATIF-v1.8", "agent": {"name": "a", "version": "1"}, "steps": []}')
    err = _refused(capsys, monkeypatch, tmp_path / "s.jsonl", str(path), "--task", "file-write/control")
    assert "needs Python >= 3.12, and none was found" in err
    assert not (tmp_path / "cache" / "quotebench" / "venv" / "harbor@0.26.0").exists()


def test_export_of_a_generated_suite(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """--suite DIR as on every command: the generated tasks, their suite id in task.toml and task.json, and
    their reference solutions rewarded 1 by the exported tests (helper programs included)."""
    from tasks.load import select_suite

    code, _out, err = cli(capsys, monkeypatch, "tasks", "generate", "--seed", "harbor-1", "--out", str(tmp_path / "s"))
    assert code == 0, err
    try:
        code, _out, err = cli(capsys, monkeypatch, "export", "harbor", str(tmp_path / "x"), "--suite", str(tmp_path / "s"))
        assert code == 0 and "exported 56 tasks" in err, err
        generated = {t.id: t for t in suite()}
        for task_id in ("argv-pass/h3", "file-write/h3"):
            task = generated[task_id]
            assert task.suite.startswith("gen-")
            tdir = tmp_path / "x" / dir_name(task)
            assert f'quotebench_suite = "{task.suite}"' in (tdir / "task.toml").read_text()
            assert json.loads((tdir / "tests" / "task.json").read_text()) == json.loads(task.model_dump_json())
            app, _ = _container(tmp_path / "x", task_id, tmp_path / task_id.replace("/", "-"))
            subprocess.run(["bash", str(tdir / "solution" / "solve.sh")], env={**os.environ, "QB_WORKDIR": str(app)},
                           capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
            reward, verdict = _verify(tdir, app, tmp_path / f"logs-{task.family}")
            assert reward == "1\n", verdict
    finally:
        select_suite("public")
