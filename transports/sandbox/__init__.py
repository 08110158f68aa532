"""The sandbox room: running one command in isolation, under limits, traced by the kernel.

Modules
    ``box``        ``Sandbox``: the private root, its lifecycle, the launcher (limits, uid drop, bubblewrap)
                   and ``run()`` (see its docstring: lifecycle, limits, errors); ``execution``: what a run
                   hands back and the errors;
    ``limits``     ``Limits`` and the process-wide memory and disk defaults;
    ``isolation``  which bubblewrap, whether it starts here, the refusal without it, the system binds;
    ``hostuid``    no host root inside: the uid drop and what it needs (a runnable bwrap, reachable binds);
    ``cgroups``    the pids and memory groups per sandbox and per run; ``diskcap``: the tmpfs root;
    ``process``    one traced run: spawn, feed, read, the clock, the end (output holders), the kill;
    ``exectrace``  the ptrace tracer: every exec and fork of a run, as the kernel held it, from which the
                   transports take ``received``;
    ``userland``   the userlands (GNU, busybox, uutils) first on a command's PATH;
    ``leftovers``  what killed harness processes left behind; ``reaper``: removal off the caller's path;
    ``phases``     optional marks of where a record's time goes; ``floor``: the isolation alone, for comparison;
    ``pool``       sandboxes built ahead for one-command records; ``ahead``: a first launcher started ahead;
    ``gate``       that launcher's last stage, which execs the command it is handed, and what it may start in.

Imports: ``tasks`` only (fixtures, safe file reading). Nothing here knows a transport: what a run
produced is handed up as an ``Execution`` with its ``trace``.
"""

from .box import FILES_INSIDE, INSIDE_ROOT, Sandbox, shell_identities
from .execution import ArgumentTooLong, Bind, Execution, SandboxError
from .isolation import SYSTEM_PATH, Isolation, isolation_available, isolation_refusal
from .leftovers import LEFTOVER_PREFIXES, sweep_leftovers
from .limits import LimitHit, Limits, parse_size, set_default_limits
from .process import Stream
from .userland import default_userland, set_default_userland

__all__ = ["FILES_INSIDE", "INSIDE_ROOT", "LEFTOVER_PREFIXES", "SYSTEM_PATH", "ArgumentTooLong", "Bind", "Execution",
           "Isolation", "LimitHit", "Limits", "Sandbox", "SandboxError", "Stream", "default_userland",
           "isolation_available", "isolation_refusal", "parse_size", "set_default_limits", "set_default_userland",
           "shell_identities", "sweep_leftovers"]
