"""The ``quotebench/quotebench`` Inspect task.

``inspect eval quotebench/quotebench --model PROVIDER/MODEL -T contract=raw -T transports=raw,nested``

Options (``-T``): ``contract`` (``raw``, ``disclosed``, ``disclosed-single`` or
``native``), ``transports`` (comma-separated, as ``--transports``; the first is
the one the native tool runs through when a looping solver calls it),
and ``tasks`` (a glob, as ``--tasks``; every task of the suite by default).
Inspect's ``--epochs N`` gives N draws per task.

The registered name: Inspect names a task after the top-level package of the
module that defines it, and only when that package is installed from
site-packages, so the same ``@task`` would be ``qb_client/quotebench`` in a
wheel install and plain ``quotebench`` in an editable one. Neither is the
distribution's name, which is what the entry point (``quotebench``) is
looked up by. The task function is therefore registered under the full name
``quotebench/quotebench`` from a function whose module Inspect does not map to
a package (see :func:`_unpackaged`), the same in every kind of install.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from inspect_ai import Task, task

from transports.registry import parse_list

from ...replies.contracts import check_contract
from .dataset import dataset_for
from .scorer import verdicts
from .solver import one_step

NAME = "quotebench/quotebench"
F = TypeVar("F", bound=Callable[..., Any])


def joined(spec: str | list[str] | tuple[str, ...]) -> str:
    """A ``-T`` value as one comma-separated string: Inspect hands ``-T x=a,b`` over as the list [a, b]."""
    return spec if isinstance(spec, str) else ",".join(str(s) for s in spec)


def transport_list(spec: str | list[str] | tuple[str, ...]) -> list[str]:
    """``-T transports=raw,nested`` as validated names."""
    return parse_list(joined(spec))


def _unpackaged(fn: F) -> F:
    """``fn`` with a module name Inspect cannot resolve to an installed package, so that ``@task(name=NAME)``
    registers exactly ``NAME`` (Inspect prefixes the package name when it finds one)."""
    fn.__module__ = "quotebench_inspect_task"
    return fn


def build(contract: str = "raw", transports: str | list[str] = "raw,nested",
          tasks: str | list[str] | None = None) -> Task:
    check_contract(contract)
    names = transport_list(transports)
    return Task(
        dataset=dataset_for(contract, joined(tasks) if tasks is not None else None),
        solver=one_step(contract, names[0]),
        scorer=verdicts(contract, names),
        metadata={"quotebench": {"contract": contract, "transports": names}},
    )


@task(name=NAME)
@_unpackaged
def quotebench(contract: str = "raw", transports: str | list[str] = "raw,nested",
               tasks: str | list[str] | None = None) -> Task:
    """QuoteBench: each reply generated once, judged on every transport in ``transports``."""
    return build(contract, transports, tasks)
