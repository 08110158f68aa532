"""The ``ssh`` transport's room: delivering R as ``ssh host "R"`` through a real OpenSSH client (or the
asyncssh fallback) to a real SSH server.

Modules
    ``transport``  the transport itself (``Ssh``, ``outer_program``): what the local shell runs, and how
                   ``received`` is read from the remote end's exec trace;
    ``endpoints``  what a delivery connects through: the embedded server or a real sshd (``--ssh-target``),
                   the generated OpenSSH config, keys, and the shared master connection, made lazily and
                   torn down at exit;
    ``master``     the confined, policy-guarded OpenSSH ControlMaster;
    ``server``     the embedded asyncssh server: session channels only, each exec run in the sandbox its
                   token names;
    ``client``     the fallback client (asyncssh) for machines without OpenSSH;
    ``target``     parsing and holding ``--ssh-target``;
    ``bench``      the ssh cost benchmark.

Imports: ``tasks``, the transport protocol and the sandbox room (``transports.sandbox``); never the server
or the client packages.
"""

import warnings

# asyncssh names cryptography's DSA classes when it is imported, and cryptography 47 and later warns at each
# name. QuoteBench never makes or accepts a DSA key; unfiltered, those lines land on the stderr of every
# command that reaches the ssh transport, where they read as the command's own complaints.
warnings.filterwarnings("ignore", message="DSA is deprecated", module=r"asyncssh(\.|$)")

# after the filter, which must precede asyncssh's import
from .transport import HOST_ALIAS, Ssh, configure, endpoint, outer_program, shutdown  # noqa: E402

__all__ = ["HOST_ALIAS", "Ssh", "configure", "endpoint", "outer_program", "shutdown"]
