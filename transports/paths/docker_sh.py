"""`docker-sh`: ``docker exec CTR sh -c "R"`` (and ``kubectl exec POD -- sh -c "R"``).

The route: an agent harness on the host builds the command line as text and hands it to
the host's shell, so R is pasted between double quotes and parsed by bash on the host;
the container's ``/bin/sh`` (dash on Debian and Ubuntu images) then runs what it received.
``kubectl exec POD -- sh -c "R"`` is the same boundary: the same host-side double-quote
parse, the same final ``sh``. Here the container is the sandbox and its ``sh`` is Debian's
dash, bound at ``/bin/sh``.

The fix, ``docker-sh-safe``: quote R for the host shell (``shlex.quote``), as
``docker exec CTR sh -c "$(printf %q ...)"`` or Python's ``shlex.join`` would.
"""

from __future__ import annotations

import shlex

from ..base import Delivery
from ..capture import InnerShell
from ..components import BASH
from ..sandbox import Sandbox
from ..shells import SH
from .route import Route


def _pasted(shell: str, command: str) -> str:
    return shell + ' -c "' + command + '"'


def _quoted(shell: str, command: str) -> str:
    return shell + " -c " + shlex.quote(command)


class DockerSh(Route):
    source = ("Docker CLI reference (docker container exec) and Kubernetes kubectl exec docs; "
              "the host shell's double-quote parse comes first")
    component = "bash (host shell) + dash as the container's /bin/sh"
    route_needs = (BASH,)  # the host shell; the container's sh is the final shell

    def __init__(self, safe: bool = False) -> None:
        super().__init__("docker-sh", safe, SH, fix="quoted with shlex.quote for the host shell, then sh -c (the fix)",
                         boundary='pasted unescaped into docker exec CTR sh -c "R": host bash parses the double '
                                  "quotes, then the container's sh (dash) runs it")
        self._inner = InnerShell(self.name, self.boundary, _quoted if safe else _pasted, SH)

    def command_line(self, command: str) -> str:
        """The host command line a harness builds for R, ``docker exec CTR sh -c "R"`` (the fix: R quoted).
        Here the sandbox is the container: host bash parses exactly the text after ``docker exec CTR ``,
        built by the same function :meth:`deliver` runs, so ``exec`` shows what ran (with its docker words)."""
        return "docker exec CTR " + self._inner.wrap(self._inner.shell.text, command)

    async def deliver(self, command: str, sandbox: Sandbox) -> Delivery:
        return await self._inner.deliver(command, sandbox)
