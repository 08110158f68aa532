"""A reply before anything runs: what the model is told, how R is read back, how replies are stored.

* :mod:`.contracts`: the four contracts (SPEC.md, "Contracts"), their prompt texts and
  ``PROMPT_VERSION``, the native shell tool, and the extraction of the command R from a reply;
* :mod:`.store`: the rules every reader of a reply store shares (``quotebench replay`` and
  ``run --model replay:FILE``);
* :mod:`.config`: the label that names a model configuration in stores, errors files and reports.

May import: ``tasks``, ``transports``. Nothing else of ``qb_client``: providers, campaigns, the
Inspect extension and the CLI all read these rules, so they sit below every other room.
"""
