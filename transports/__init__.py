"""How a command R reaches a shell, and what the shell received.

The rooms
    top level      the protocol (``base``: ``Transport.deliver(command, sandbox) -> Delivery``), the
                   registry of names (``registry``), the paper's lab transports, one module each
                   (``raw``, ``nested``, ``nested_single``, ``escaped``, ``json_embed``, ``tempscript``),
                   the final shells (``shells``), user templates (``template``), how ``received`` is
                   read from a run's exec trace (``capture``), the components each path needs
                   (``components``, ``needs``), and the one execution path from a task to its record
                   (``execute``: sandbox -> deliver -> validate -> record), and the worker process
                   that runs it for a campaign's other cores (``worker``);
    ``sandbox/``   running one command in isolation under limits, traced by the kernel;
    ``ssh/``       the ``ssh`` transport, its embedded server, master connection and client;
    ``paths/``     deployment paths: the routes agents' commands really take, each on its real
                   component, each with a ``-safe`` twin;
    ``results/``   the record of one execution and the append-only store (used by the server and the
                   client alike).

Imports flow one way: ``tasks`` <- ``transports`` <- ``qb_server`` <- ``qb_client``. Inside, the
sandbox room imports only ``tasks``; transports and paths use the sandbox through its package API.
Where to add a transport, a path or an agent harness: docs/architecture.md.
"""
