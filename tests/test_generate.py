"""Generated payload splits (`quotebench tasks generate`): determinism, identity, and the quality gates.

The property test runs over 120 seeds. Cheap properties (hazard classes, no public payload,
the double-quote boundary undoing the disclosed references, the share of raw references the
nested path damages) hold for every seed; real sandboxed execution covers a rotating subset of
tasks per seed (every task is executed under several seeds) and, for two seeds, the whole
`tasks check` (every reference on its path, every near miss rejected, and the nested failures
of the hazard tiers' raw references counted for real).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import anyio
import pytest

from tasks.gen_quote import disclose, sed_substitute, sq
from tasks.generate import GENERATOR_VERSION, OutputError, carrier, generate, public_carriers, write
from tasks.load import FAMILIES_DIR, FAMILY_ORDER, load_suite
from tasks.schema import Task
from tasks.suiteid import suite_id

SEEDS = [f"seed-{n}" for n in range(120)]
CLI = [sys.executable, "-m", "qb_client"]
ID = re.compile(r"gen-v1-[0-9a-f]{12}")


@pytest.fixture(scope="module")
def suites(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Task]]:
    """Every seed's suite, written and loaded as `--suite DIR` loads it (0.05 s per seed)."""
    root = tmp_path_factory.mktemp("suites")
    return {seed: load_suite(root / seed) for seed in SEEDS if write(seed, root / seed)}


# ---------------------------------------------------------------- determinism and identity


def test_same_seed_same_bytes_and_id(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    ida, idb, idc = write("k3ep-th1s-s3cret", a), write("k3ep-th1s-s3cret", b), write("another", c)
    assert ida == idb != idc and ID.fullmatch(ida)
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted([f"{f}.toml" for f in FAMILY_ORDER] + ["suite.json"])
    assert all((a / n).read_bytes() == (b / n).read_bytes() for n in names)
    assert suite_id(a) == ida and json.loads((a / "suite.json").read_text())["suite"] == ida
    assert all(t.suite == ida for t in load_suite(a))
    # the seed is the secret: it is in no file, and so in no record
    assert not any(b"k3ep-th1s-s3cret" in (a / n).read_bytes() for n in names)
    # any edit gives another id
    (a / "file-write.toml").write_text((a / "file-write.toml").read_text() + "\n")
    assert suite_id(a) != ida


def test_out_directory_never_overwrites_another_split(tmp_path: Path) -> None:
    out = tmp_path / "split"
    write("one", out)
    assert write("one", out)  # the same suite again: nothing changes
    with pytest.raises(OutputError, match="not empty and not this suite"):
        write("two", out)
    with pytest.raises(OutputError, match="does not exist"):
        write("one", tmp_path / "missing" / "split")


def test_same_operations_fixtures_and_validators_as_public() -> None:
    files = generate("layout")
    for family in FAMILY_ORDER:
        gen = tomllib.loads(files[f"{family}.toml"])
        pub = tomllib.loads((FAMILIES_DIR / f"{family}.toml").read_text())
        assert sorted(gen["tiers"]) == ["control", "h1", "h2", "h3"]
        for key in ("family", "operation", "instruction", "fixture", "checks"):
            assert gen.get(key) == pub.get(key), (family, key)
        for tier, spec in gen["tiers"].items():
            assert spec["payload"].keys() == pub["tiers"][tier]["payload"].keys(), (family, tier)
            assert spec["solution_disclosed"] == disclose(spec["solution"])


# ---------------------------------------------------------------- the quoting builders, against real bash and sed

TRICKY = ["", "it's", 'say "hi"', "$HOME `id` \\ \\\\ %s !x", "a\nb\n", "-n *.log [x]? ", "'\"'\"", "\t\\n$'x'"]


def test_sq_and_disclose_give_back_every_string_through_real_bash() -> None:
    for s in TRICKY:
        program = f"printf '%s' {sq(s)}"
        raw = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True).stdout
        nested = subprocess.run(["bash", "-c", f'bash -c "{disclose(program)}"'], capture_output=True, text=True,
                                check=True).stdout
        assert raw == nested == s


@pytest.mark.needs("busybox")
@pytest.mark.parametrize("sed", [["sed"], ["busybox", "sed"]])
def test_sed_substitute_is_literal_in_gnu_and_busybox_sed(sed: list[str]) -> None:
    pairs = [("C:\\logs\\*.log", "$HOME/logs/*.log"), ('"Q&A"', "'Q & A'"), ("- [x] a.b", "- [ ] ^$"),
             ("a|b/c#d,e", "\\1&\\n"), ("^start", "end$")]
    for old, new in pairs:
        text = f"x {old} y {old}\n{old[:-1]}\n"
        out = subprocess.run([*sed, sed_substitute(old, new)], input=text, capture_output=True, text=True, check=True)
        assert out.stdout == text.replace(old, new), (sed, old, new)


# ---------------------------------------------------------------- the property test: cheap properties, every seed

DQ_DAMAGE = re.compile(r'"|`|\$[A-Za-z_{(0-9@*#?$!-]|\\[\\$`"\n]')
"""What the outer parse of bash -c "R" changes: a double quote ends the string, $ and backticks expand,
a backslash before one of \\ $ ` " newline is removed."""


def has_class(tier: str, text: str) -> bool:
    if tier == "control":
        return not re.search(r"['\"$`\\%!]", text)
    if tier == "h1":
        return "'" in text and '"' in text
    if tier == "h2":
        return bool(re.search(r"[$`\\%!]", text))
    lines = text.replace("\0", "\n").split("\n")
    return bool(re.search(r"[*?\[]", text) or any(line.startswith("-") or line != line.rstrip() for line in lines)
                or "\n" in text.rstrip("\n"))


def test_every_seed_hazard_classes_and_no_public_payload(suites: dict[str, list[Task]]) -> None:
    assert len(suites) >= 100
    for seed, tasks in suites.items():
        assert len(tasks) == 56 and {t.family for t in tasks} == set(FAMILY_ORDER)
        for t in tasks:
            text = carrier(t.family, t.payload)
            assert has_class(t.tier, text), (seed, t.id, text)
            assert text not in public_carriers(t.family), (seed, t.id)
        hazard = [t for t in tasks if t.tier != "control"]
        damaged = sum(bool(DQ_DAMAGE.search(t.solution)) for t in hazard)
        assert damaged / len(hazard) >= 0.75, (seed, damaged)
        # h1 and h2 payloads always hold something the double-quote boundary changes
        assert all(DQ_DAMAGE.search(t.solution) for t in hazard if t.tier in ("h1", "h2")), seed


def test_every_seed_disclosed_references_survive_a_real_double_quote_paste(suites: dict[str, list[Task]]) -> None:
    """One real bash per seed: the outer parse of bash -c "D" gives back each raw reference exactly."""
    for seed, tasks in suites.items():
        program = "printf '%s\\0' " + " ".join(f'"{t.solution_disclosed}"' for t in tasks)
        out = subprocess.run(["bash", "-c", program], capture_output=True, check=True).stdout
        assert out.split(b"\0")[:-1] == [t.solution.encode() for t in tasks], seed


# ---------------------------------------------------------------- the property test: real execution


async def _run_all(jobs: list[tuple[Task, str, str]]) -> list[bool]:
    from transports.execute import execute

    results: list[bool] = [False] * len(jobs)
    limiter = anyio.CapacityLimiter(4)

    async def one(k: int, task: Task, transport: str, command: str) -> None:
        async with limiter:
            results[k] = (await execute(task, transport, command)).verdict.passed

    async with anyio.create_task_group() as tg:
        for k, job in enumerate(jobs):
            tg.start_soon(one, k, *job)
    return results


@pytest.mark.needs("bwrap")
def test_every_seed_references_pass_for_real_on_a_rotating_subset(suites: dict[str, list[Task]]) -> None:
    """Two tasks per seed, rotating so that every task runs under several seeds: the raw reference on
    raw and the disclosed one on nested pass; a hazard tier's raw reference on nested is counted."""
    jobs: list[tuple[Task, str, str]] = []
    for n, tasks in enumerate(suites.values()):
        for t in (tasks[(2 * n) % 56], tasks[(2 * n + 29) % 56]):
            jobs += [(t, "raw", t.solution), (t, "nested", t.solution_disclosed)]
    covered = {t.id for t, _, _ in jobs}
    assert len(covered) == 56
    passed = anyio.run(_run_all, jobs)
    failing = [(t.suite, t.id, tr) for (t, tr, _), ok in zip(jobs, passed) if not ok]
    assert not failing


@pytest.mark.needs("bwrap")
@pytest.mark.parametrize("seed", ["full-check-1", "full-check-2"])
def test_whole_check_and_real_nested_failures(tmp_path: Path, seed: str) -> None:
    from qb_client.ops.suite_check import check_suite

    write(seed, tmp_path / "s")
    tasks = load_suite(tmp_path / "s")
    results = anyio.run(check_suite, tasks)
    assert [r.task_id for r in results if not r.ok] == []
    assert sum(r.near_misses for r in results) > 200
    hazard = [t for t in tasks if t.tier != "control"]
    passed = anyio.run(_run_all, [(t, "nested", t.solution) for t in hazard])
    assert sum(not ok for ok in passed) / len(hazard) >= 0.75


# ---------------------------------------------------------------- the command line


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=cwd, timeout=300)


@pytest.mark.needs("bwrap")
def test_cli_generate_check_exec_on_a_private_split(tmp_path: Path) -> None:
    gen = _cli("tasks", "generate", "--seed", "cli-seed", "--out", str(tmp_path / "split"), "--json")
    assert gen.returncode == 0, gen.stderr
    sid = json.loads(gen.stdout)["suite"]
    assert ID.fullmatch(sid) and json.loads(gen.stdout)["generator_version"] == GENERATOR_VERSION
    again = _cli("tasks", "generate", "--seed", "other", "--out", str(tmp_path / "split"))
    assert again.returncode == 2 and again.stderr.count("\n") == 1 and "not this suite" in again.stderr
    check = _cli("tasks", "check", "--suite", str(tmp_path / "split"), "--tasks", "file-write/h2,sed-replace/h3", "--json")
    assert check.returncode == 0, check.stdout[-2000:]
    assert json.loads(check.stdout)["suite"] == sid and json.loads(check.stdout)["ok"] == 2
    shown = json.loads(_cli("tasks", "show", "grep-count/h2", "--suite", str(tmp_path / "split"), "--json").stdout)
    public = json.loads(_cli("tasks", "show", "grep-count/h2", "--json").stdout)
    assert shown["suite"] == sid and public["suite"] == "public" and shown["payload"] != public["payload"]
    rec = _cli("exec", "--suite", str(tmp_path / "split"), "--task", "grep-count/h2", "--transport", "nested",
               "--command", shown["solution_disclosed"], "--json")
    assert rec.returncode == 0 and json.loads(rec.stdout)["suite"] == sid
    assert json.loads(rec.stdout)["received"] == shown["solution"]
    bad = _cli("tasks", "list", "--suite", str(tmp_path / "nowhere"))
    assert bad.returncode == 2 and "--suite" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.needs("bwrap")
def test_report_shows_two_suites_side_by_side_never_pooled(tmp_path: Path) -> None:
    write("report-seed", tmp_path / "split")
    for name, suite in (("pub", "public"), ("gen", str(tmp_path / "split"))):
        run = _cli("run", "--model", "reference", "--contracts", "raw,disclosed", "--transports", "raw,nested",
                   "--tasks", "file-write/h1,env-pass/h2", "--suite", suite, "--out", str(tmp_path / name), "--json")
        assert run.returncode == 0, run.stderr[-2000:]
    rep = _cli("report", str(tmp_path / "pub" / "results.jsonl"), str(tmp_path / "gen" / "results.jsonl"), "--json")
    doc = json.loads(rep.stdout)
    assert sorted((c["suite"] == "public", c["userland"]) for c in doc["configs"]) == [(False, "gnu"), (True, "gnu")]
    assert all(c["cells"]["RR"]["n"] == 2 and c["damage"]["ci95"] is not None for c in doc["configs"])
    assert len({c["label"] for c in doc["configs"]}) == 2 and all("[" in c["label"] for c in doc["configs"])
    assert len(doc["strata"]) == 2 and doc["rank_agreement"]["kendall_tau_b"] is None
    # each file alone: one entry, the plain label, no strata key (the SPEC document)
    one = json.loads(_cli("report", str(tmp_path / "gen" / "results.jsonl"), "--json").stdout)
    assert set(one) == {"configs", "rank_agreement", "selection_regret"}
    assert one["configs"][0]["label"] == "reference:reference@unset" and ID.fullmatch(one["configs"][0]["suite"])
