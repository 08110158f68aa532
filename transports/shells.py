"""Final shells: the program that finally parses R, on any terminal transport (``raw@dash``).

Why a dimension of its own
    ``subprocess.run(R, shell=True)``, Node's ``child_process.exec``, Dockerfile ``RUN`` and
    make recipes run ``/bin/sh -c R``: dash on Debian and Ubuntu, busybox ash on Alpine.
    ``ssh HOST "R"`` runs the login shell of HOST: zsh on macOS. Bashisms (``$'..'``,
    ``[[ ]]``, ``{a,b}``, arrays, ``<<<``, ``echo -e``, ``set -o pipefail``) mean other
    things there, or nothing. A transport's outer parse is one question; which shell
    finally runs the text is another, and each is measured on its own.

The real shells from Debian's packages are used (``.ci/run`` installs them). A shell
that is not installed is a one-line error naming its package.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from .sandbox import SYSTEM_PATH


class UnknownShellError(ValueError):
    """A final shell that is not known, or not installed here."""


@dataclass(frozen=True)
class Shell:
    name: str               # the suffix: raw@NAME
    words: tuple[str, ...]  # how a command line names it: ("busybox", "sh")
    package: str            # the Debian package that installs it

    @property
    def program(self) -> str:
        """The first word: the executable looked up on PATH."""
        return self.words[0]

    @property
    def text(self) -> str:
        """The words as pasted into an outer program (``busybox sh``)."""
        return " ".join(self.words)

    def argv(self, *args: str) -> list[str]:
        return [*self.words, *args]


SHELLS: dict[str, Shell] = {
    "bash": Shell("bash", ("bash",), "bash"),
    "dash": Shell("dash", ("dash",), "dash"),
    "zsh": Shell("zsh", ("zsh",), "zsh"),
    "busybox": Shell("busybox", ("busybox", "sh"), "busybox"),
}
DEFAULT = SHELLS["bash"]
SH = Shell("dash", ("sh",), "dash")
"""``/bin/sh`` as the routes that say ``sh`` reach it: dash on Debian (not a ``@`` suffix: use ``@dash``)."""


def get_shell(name: str) -> Shell:
    """The shell named ``name``; UnknownShellError (one line) if unknown or not installed."""
    shell = SHELLS.get(name)
    if shell is None:
        raise UnknownShellError(f"unknown final shell '{name}' (known: {', '.join(SHELLS)})")
    if shutil.which(shell.program, path=SYSTEM_PATH) is None:
        raise UnknownShellError(f"the final shell {name} is not installed (Debian package: {shell.package}; "
                                f"apt-get install {shell.package})")
    return shell
