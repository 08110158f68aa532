"""``template:<command line with {R}>``: a user's own path, run for real.

What is checked, with real components only (bash, dash, zsh, busybox, OpenSSH + the embedded server):
* ``template:sh -c "{R}"`` is ``nested@dash``, ``template:docker exec -i ctr sh -c "{R}"`` is ``docker-sh``
  and ``template:ssh -T host "{R}"`` is ``ssh``: the same received, verdict and damage on hostile commands;
* the stand-ins honour ``docker exec -e/-w`` and ``kubectl exec POD --``, refuse what they do not do, and
  leave ``$PATH``, ``BASH_ENV`` and the ``docker`` R sees alone; other outer shells (``@NAME``) work too;
* names: ``+`` and ``,`` inside a template, middleware in front, ``user@host`` is not a shell, the normal
  form; bad templates are one-line errors, exit 2 at the CLI; ``quotebench exec`` runs a template.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import anyio
import pytest

from tasks.load import get_task
from transports.execute import execute
from transports.registry import UnknownTransportError, get, parse_list, validate_name
from transports.sandbox import Limits

pytestmark = pytest.mark.needs("dash")

TASK = get_task("file-write/control")
LIMITS = Limits(timeout_s=8)
QB = [sys.executable, "-c", "from qb_client.cli import main; main()"]

HOSTILE = [
    'echo "hello world" > out.txt',
    "printf '%s\\n' 'Don'\\''t \"quote\" me' > motd.txt",
    "echo `echo backtick` $(echo subst) $HOME \\$5 > out.txt",
    "echo \\\\ a\\\\b \\\" \\` > out.txt",
    "echo !! !$ '!' \"!\" > out.txt",
    "line1\nline2\n\necho line4 > out.txt",
    'x"; echo y > out.txt; echo "',
    "echo 'unbalanced",
    "x='a\"b'; echo \"${x}\" > out.txt",
]


def records(names: tuple[str, ...], commands: list[str]) -> dict[str, list]:
    async def all_of() -> dict[str, list]:
        out: dict[str, list] = {n: [None] * len(commands) for n in names}
        limiter = anyio.CapacityLimiter(3)

        async def one(name: str, k: int, command: str) -> None:
            async with limiter:
                out[name][k] = await execute(TASK, name, command, limits=LIMITS)

        async with anyio.create_task_group() as tg:
            for name in names:
                for k, c in enumerate(commands):
                    tg.start_soon(one, name, k, c)
        return out
    return anyio.run(all_of)


def same(mine, theirs) -> None:
    for a, b in zip(mine, theirs):
        assert a.transport_error is None, (a.command, a.transport_error)
        assert (a.received, a.damaged, a.verdict.passed) == (b.received, b.damaged, b.verdict.passed), \
            (a.command, a.received, b.received, a.received_note, b.received_note)


# ---------------------------------------------------------------- equal to the paths it spells out


def test_sh_template_is_nested_on_dash() -> None:
    got = records(('template:sh -c "{R}"', "nested@dash"), HOSTILE)
    same(got['template:sh -c "{R}"'], got["nested@dash"])


def test_docker_exec_template_is_docker_sh() -> None:
    name = 'template:docker exec -i ctr sh -c "{R}"'
    got = records((name, "docker-sh"), HOSTILE)
    same(got[name], got["docker-sh"])


def test_kubectl_and_podman_templates_are_docker_sh_too() -> None:
    names = ('template:kubectl exec -it pod -c app -- sh -c "{R}"', 'template:podman exec ctr sh -c "{R}"')
    got = records((*names, "docker-sh"), HOSTILE[:4] + HOSTILE[6:7])
    for n in names:
        same(got[n], got["docker-sh"])


@pytest.mark.needs("openssh")
def test_ssh_template_is_ssh() -> None:
    name = 'template:ssh -T host "{R}"'
    got = records((name, "ssh"), HOSTILE)
    same(got[name], got["ssh"])


def test_the_outer_shell_can_be_named(require) -> None:
    require("zsh")
    require("busybox")
    for outer in ("dash", "zsh", "busybox"):
        name = f'template:docker exec -i ctr sh -c "{{R}}"@{outer}'
        got = records((name, "docker-sh"), HOSTILE[:2] + HOSTILE[6:7])
        same(got[name], got["docker-sh"])


# ---------------------------------------------------------------- what the stand-ins do and hide


def one(name: str, command: str):
    return anyio.run(lambda: execute(TASK, name, command, limits=LIMITS))


def test_docker_exec_options_are_honoured_and_not_damage() -> None:
    r = one("template:docker exec -e FOO=1 --env=BAR='x y' -w /tmp ctr sh -c \"{R}\"",
            'echo \\$FOO \\$BAR; pwd')
    assert r.stdout.text == "1 x y\n/tmp\n"
    assert r.received == "echo $FOO $BAR; pwd" and r.received_note is None


def test_r_sees_the_sandboxs_path_and_no_bash_env() -> None:
    r = one('template:docker exec -i ctr bash -c "{R}"', "echo \\$PATH; env | grep -c '^BASH_ENV=' || :; "
            "case \\$(type -p docker) in *qb-shim*) echo standin;; *) echo plain;; esac")
    assert r.stdout.text == "/usr/local/bin:/usr/bin:/bin\n0\nplain\n", r.stdout.text
    assert r.received_note is None


@pytest.mark.parametrize(("template", "code", "said"), [
    ('docker exec --rm ctr sh -c "{R}"', 125, "does not support the option '--rm'"),
    ('docker run ctr sh -c "{R}"', 125, "runs only 'docker exec'"),
    ('docker exec -w /nowhere ctr sh -c "{R}"', 126, "chdir to '/nowhere'"),
    ('docker exec ctr', 1, "requires at least 2 arguments"),
    ('kubectl exec pod sh -c "{R}"', 1, "Use exec [POD] -- [COMMAND]"),
])
def test_what_a_stand_in_does_not_do_is_refused_in_one_line(template: str, code: int, said: str) -> None:
    r = one("template:" + template + (" # {R}" if "{R}" not in template else ""), "echo hi")
    assert r.exit_code == code and said in r.stderr.text and r.stderr.text.count("\n") == 1, r.stderr.text
    assert r.received is None


def test_inside_the_container_the_tools_are_the_containers_own() -> None:
    """The stand-ins serve the outer shell's lookup only: CMD (here another kubectl) gets no stand-in."""
    r = one('template:docker exec -i ctr kubectl exec p -- sh -c "{R}"', "echo hi > out.txt")
    assert r.received is None and r.exit_code != 0 and "quotebench" not in r.stderr.text


# ---------------------------------------------------------------- names and errors


def test_names_keep_plus_commas_and_user_at_host() -> None:
    assert validate_name(' json-naive + template:sh -c "{R}"@bash ') == 'json-naive+template:sh -c "{R}"'
    assert validate_name('template:ssh -T me@host "{R}"') == 'template:ssh -T me@host "{R}"'
    assert validate_name('template:sh -c "{R} + 1"@dash') == 'template:sh -c "{R} + 1"@dash'
    assert parse_list('raw,template:sh -c "{R}" # a,b') == ["raw", 'template:sh -c "{R}" # a,b']
    assert get('template:docker exec c sh -c "{R}"').shell.name == "dash"  # type: ignore[attr-defined]
    r = one('json-naive+template:sh -c "{R}"', 'echo \\"hi\\" > out.txt')
    assert r.transport == 'json-naive+template:sh -c "{R}"' and r.received == "echo hi > out.txt"


@pytest.mark.parametrize(("name", "said"), [
    ("template:", "the template is empty"),
    ("template:   ", "the template is empty"),
    ('template:sh -c "R"', "has no {R}"),
    ('template:sh -c "{R}"@fish', "unknown outer shell '@fish'"),
    ('raw+template:sh -c "{R}"', "cannot wrap a template"),
    ('template:ssh h "{R}"@dash', "an ssh template runs under bash"),
])
def test_bad_templates_are_one_line_errors(name: str, said: str) -> None:
    with pytest.raises(UnknownTransportError) as e:
        validate_name(name)
    assert said in str(e.value) and "\n" not in str(e.value)
    done = subprocess.run([*QB, "exec", "--transport", name, "--command", "echo hi"], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "COLUMNS": "200"}, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and said in done.stderr and done.stderr.strip().count("\n") == 0, done.stderr


def test_quotebench_exec_runs_a_template() -> None:
    done = subprocess.run([*QB, "exec", "--task", "file-write/control", "--json", "--transport",
                           'template:docker exec -i ctr sh -c "{R}"', "--command", 'echo "a b" > out.txt'],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode in (0, 1), done.stderr
    rec = json.loads(done.stdout)
    assert rec["transport"] == 'template:docker exec -i ctr sh -c "{R}"'
    assert rec["received"] == "echo a" and rec["damaged"] is True


def test_exec_shows_the_outer_text() -> None:
    from qb_client.records.route import artifacts

    assert artifacts('template:docker exec c sh -c "{R}" # {R}', 'echo "x"') == \
        [("outer", 'docker exec c sh -c "echo "x"" # echo "x"')]
