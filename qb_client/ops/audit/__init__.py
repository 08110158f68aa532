"""The harness audit (``quotebench harness audit NAME``): what a real agent harness does to every command,
measured by probe commands sent through its real route, never read from its documentation.

What this room owns
    The probes and the rc files planted in HOME (:mod:`.probes`), one probe run in a fresh sandbox of its own and
    what it left (:mod:`.run`), the runs of an audit, at once (:mod:`.measure`), the rows made from them
    (:mod:`.rows`, with the parsing in :mod:`.read`), the pydantic document (:mod:`.model`) and its rendering as a
    terminal table and as the Markdown of docs/harnesses.md (:mod:`.render`).

What it may import
    ``tasks`` and ``transports`` (the harness routes, ``raw``, the sandbox and the one execution path
    ``transports.execute.deliver``); :mod:`qb_client.console` for the terminal. The CLI
    (:mod:`qb_client.cli.harness`) imports it.

Why measured, and generic
    A harness's shell setup (its wrapper, rc files, functions that shadow ``grep``, its environment, what it tells
    the model) changes between releases without notice, and a document goes stale. Every row here comes from a
    run of the release itself: the kernel's exec trace for the final shell, the probe's own files for what R sees,
    the courier's log for what the model is told. Nothing is per harness: the route object says how to run it,
    which exec is its final shell and which shell that is, so a route added to
    ``transports.harnesses.HARNESSES`` can be audited as it is.
"""
