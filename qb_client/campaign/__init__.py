"""Generation and execution of replies: campaigns, the multi-turn arm, the native path, replay.

* :mod:`.oneshot`: a campaign (``quotebench run``): each reply generated once, then replayed on
  every transport; the layout of ``--out DIR`` and resume;
* :mod:`.chains`: the multi-turn arm (``run --turns K``, K > 1), one chain per cell;
* :mod:`.work`: what both arms share: the plan, progress, outcome, the keys that name each unit of work,
  the errors file, and how a stored line or a server's record is read back;
* :mod:`.loop`: the agent loop (several commands in one sandbox, and what the model sees between them);
* :mod:`.native`: the native contract's execution path, as an MCP client of ``qb_server``;
* :mod:`.replay`: fixed-reply replay of a reply store (``quotebench replay``);
* :mod:`.arms`: which design a campaign runs (native tool kind, turn budget, config variant);
* :mod:`.errors`: ``errors.jsonl`` keeps only what is still an error;
* :mod:`.limits`: the per-command wall clock of ``exec``, ``replay`` and ``run``;
* :mod:`.workers`: executions in worker processes (``--jobs`` > 1), so a campaign uses more than one core.

May import: ``tasks``, ``transports``, ``qb_server``; of ``qb_client``: :mod:`qb_client.console`,
:mod:`qb_client.replies` and :mod:`qb_client.adapters.providers`. Never the records or the report,
which read what it writes, nor the CLI, which drives it.
"""
