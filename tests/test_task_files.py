"""The suite as data: 56 well-formed tasks, and malformed files refused in one line."""

from __future__ import annotations

import collections
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tasks.load import FAMILY_ORDER, TaskFileError, load_family, load_suite
from tasks.render import block

GOOD = '''family = "demo"
operation = "write"
instruction = "Write {{path}}: {{content|block}}"
checks = [{ kind = "file-bytes", path = "{{path}}", text = "{{content}}" }]
[tiers.control]
payload = { path = "a.txt", content = "a\\n" }
solution = "echo a > a.txt"
solution_disclosed = "echo a > a.txt"
[tiers.h1]
payload = { path = "b.txt", content = "b\\n" }
solution = "echo b > b.txt"
solution_disclosed = "echo b > b.txt"
[tiers.h2]
payload = { path = "c.txt", content = "c\\n" }
solution = "echo c > c.txt"
solution_disclosed = "echo c > c.txt"
[tiers.h3]
payload = { path = "d.txt", content = "d\\n" }
solution = "echo d > d.txt"
solution_disclosed = "echo d > d.txt"
'''


def write(tmp_path: Path, text: str, name: str = "demo") -> Path:
    p = tmp_path / f"{name}.toml"
    p.write_text(text)
    return p


def test_the_suite_is_14_families_by_4_tiers() -> None:
    tasks = load_suite()
    assert len(tasks) == 56
    assert len({t.id for t in tasks}) == 56
    by_family = collections.Counter(t.family for t in tasks)
    assert sorted(by_family) == sorted(FAMILY_ORDER)
    assert set(by_family.values()) == {4}
    assert {t.tier for t in tasks} == {"control", "h1", "h2", "h3"}


def test_instructions_never_mention_quoting() -> None:
    for t in load_suite():
        lowered = t.instruction.lower()
        for word in ("quote", "quoting", "escape", "escaping"):
            assert word not in lowered, (t.id, word)


def test_a_good_file_loads(tmp_path: Path) -> None:
    tasks = load_family(write(tmp_path, GOOD))
    assert [t.id for t in tasks] == ["demo/control", "demo/h1", "demo/h2", "demo/h3"]
    assert tasks[0].checks[0].text == "a\n"
    assert '"a\\n"' in tasks[0].instruction


@pytest.mark.parametrize("mutate, expect", [
    (lambda s: s.replace('operation = "write"\n', ""), "operation: Field required"),
    (lambda s: s.replace("[tiers.h3]", "[tiers.h4]"), "tiers"),
    (lambda s: s.replace('kind = "file-bytes"', 'kind = "file-bites"'), "tiers.control: checks.0"),
    (lambda s: s.replace("{{content}}", "{{contents}}"), "payload has no field 'contents'"),
    (lambda s: s.replace("{{content|block}}", "{{content|bogus}}"), "unknown filter 'bogus'"),
    (lambda s: s.replace('family = "demo"', 'family = "other"'), "does not match the file name"),
    (lambda s: s.replace('solution = "echo a > a.txt"', 'solution = "  "'), "tiers.control.solution"),
    (lambda s: s + "\n[[[", "not valid TOML"),
    (lambda s: s.replace('checks = [', 'fixture = { files = [{ path = "/etc/x", text = "" }] }\nchecks = ['),
     "must be a relative path"),
    (lambda s: s.replace('checks = [', 'fixture = { files = [{ path = "t", source = "nope" }] }\nchecks = ['),
     "source 'nope'"),
    # every path a fixture names stays inside the working directory (finding: dirs = ["/tmp/x"] made host dirs)
    (lambda s: s.replace('checks = [', 'fixture = { dirs = ["/tmp/x"] }\nchecks = ['),
     "fixture.dirs.0: Value error, must be a relative path"),
    (lambda s: s.replace('checks = [', 'fixture = { dirs = ["a/../../x"] }\nchecks = ['),
     "fixture.dirs.0: Value error, must be a relative path"),
    (lambda s: s.replace('checks = [', 'fixture = { git = { path = "/tmp/repo" } }\nchecks = ['),
     "fixture.git.path: Value error, must be a relative path"),
    (lambda s: s.replace('checks = [', 'fixture = { git = { path = "../repo" } }\nchecks = ['),
     "fixture.git.path: Value error, must be a relative path"),
    (lambda s: s.replace('checks = [', 'fixture = { git = { staged = { "/tmp/x" = "" } } }\nchecks = ['),
     "fixture.git.staged./tmp/x.[key]: Value error, must be a relative path"),
    (lambda s: s.replace('checks = [', 'fixture = { git = { commits = [{ message = "m", files = { "../x" = "" } }] } }'
                                      '\nchecks = ['),
     "fixture.git.commits.0.files.../x.[key]: Value error, must be a relative path"),
    (lambda s: s.replace('checks = [', 'fixture = { git = { commits = [{ message = "m", '
                                      'files = { ".git/config" = "" } }] } }\nchecks = ['),
     "files..git/config.[key]: Value error, may not point into .git"),
    # and so does every path a check reads (near misses write to them)
    (lambda s: s.replace('path = "{{path}}"', 'path = "/etc/{{path}}"'),
     "checks.0.file-bytes.path: Value error, must be a relative path"),
    (lambda s: s.replace('checks = [', 'checks = [{ kind = "fixture-unchanged", new_paths = ["/x"] }, '),
     "checks.0.fixture-unchanged.new_paths.0: Value error, must be a relative path"),
    (lambda s: s.replace('checks = [', 'checks = [{ kind = "ran", record = "../.qb-remote" }, '),
     "checks.0.ran.record: Value error, must be a relative path"),
    # a git check compares with the fixture's repository, so there must be one where it looks
    (lambda s: s.replace('checks = [', 'checks = [{ kind = "git", count = 1, message = "m" }, '),
     "the fixture has none there"),
])
def test_malformed_files_are_refused_in_one_line(tmp_path: Path, mutate, expect: str) -> None:
    path = write(tmp_path, mutate(GOOD))
    with pytest.raises(TaskFileError) as e:
        load_family(path)
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    assert expect in message


def test_a_refused_fixture_path_creates_nothing(tmp_path: Path) -> None:
    target = tmp_path / "outside"
    path = write(tmp_path, GOOD.replace('checks = [', f'fixture = {{ dirs = ["{target}"] }}\nchecks = ['))
    with pytest.raises(TaskFileError):
        load_family(path)
    assert not target.exists()


def test_wrapper_families_require_the_wrapper_and_find_glob_the_whole_tree() -> None:
    for t in load_suite():
        kinds = {c.kind: c for c in t.checks}
        if t.family in ("remote-exec", "container-exec"):
            record = ".qb-remote" if t.family == "remote-exec" else ".qb-cexec"
            assert kinds["ran"].record == record, t.id
            top = next(c for c in t.checks if c.kind == "dir-listing" and c.path == ".")
            assert record in top.names, t.id
        if t.family == "find-glob":
            assert kinds["fixture-unchanged"].new_paths == ["found.txt"], t.id
        if t.family == "git-commit":
            git = kinds["git"]
            assert git.same_branch and git.on_fixture_head and git.exact_tree, t.id


def test_unreadable_utf8_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "demo.toml"
    p.write_bytes(GOOD.encode() + b"\xff")
    with pytest.raises(TaskFileError, match="cannot read"):
        load_family(p)


def test_block_rendering_pins_the_exact_value() -> None:
    """Each ending gets its own sentence, the JSON literal is exact, and the fence outgrows any backtick run."""
    assert block("a  ") == ('```text\na  \n```\nExactly, as a JSON string literal: "a  "\n'
                            "It ends with trailing whitespace and has no final newline.")
    assert block("a") == '```text\na\n```\nExactly, as a JSON string literal: "a"\nIt has no newline at the end.'
    assert block("x\n") == ('```text\nx\n```\nExactly, as a JSON string literal: "x\\n"\n'
                            "It ends with exactly one newline character.")
    assert block("x\n\n") == ('```text\nx\n\n```\nExactly, as a JSON string literal: "x\\n\\n"\n'
                               "It ends with an empty line (two newline characters at the end).")
    assert block("has ``` inside\n") == ('````text\nhas ``` inside\n````\n'
                                         'Exactly, as a JSON string literal: "has ``` inside\\n"\n'
                                         "It ends with exactly one newline character.")
    assert block("é\t") == '```text\né\t\n```\nExactly, as a JSON string literal: "é\\t"\n' \
        "It ends with trailing whitespace and has no final newline."


def test_a_forked_childs_exit_leaves_its_parents_git_fixture_cache(tmp_path: Path) -> None:
    """The repository template a git fixture is copied from is cached per process and removed at its exit: a
    forked child that exits must leave its parent's in place (removed while the parent copies it, the copy
    would be torn)."""
    code = textwrap.dedent(f"""
        import os, sys
        from pathlib import Path
        from tasks.fixture import materialize, template_repo
        from tasks.load import get_task
        task = get_task('git-commit/control')
        template = template_repo(task.fixture.git)
        child = os.fork()
        if child == 0:
            (Path({str(tmp_path)!r}) / 'b').mkdir()
            materialize(task.fixture, Path({str(tmp_path)!r}) / 'b')
            sys.exit(0)
        os.waitpid(child, 0)
        print(template.is_dir(), template_repo(task.fixture.git) == template)
        """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.split() == ["True", "True"], (done.stdout, done.stderr[-2000:])
