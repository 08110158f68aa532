"""QuoteBench inside Inspect AI (the optional extra ``quotebench[inspect]``).

Evaluation teams run their benchmarks in Inspect, with its providers, epochs,
limits and log viewer; this subpackage meets them there without a second copy
of anything that decides a result. The prompts and the extraction of R come
from :mod:`qb_client.replies.contracts`, execution and verdicts from the same replay
code as ``quotebench replay``, so a reply judged here and by our driver gets
the same record. One module per purpose:

* :mod:`.task`: the ``quotebench/quotebench`` task and its ``-T`` options;
* :mod:`.dataset`: one sample per task, the contract's messages as input;
* :mod:`.solver`: one generation, never a second turn;
* :mod:`.shell_tool`: the ``bash`` tool offered under the native contract;
* :mod:`.reply`: the reply, its tool calls and R, read from a model output;
* :mod:`.identity`: config, reply id and draw of a sample (shared with the import);
* :mod:`.scorer`: each reply replayed on every requested transport;
* :mod:`.importer`: Inspect logs into our reply store and records.

Nothing here is imported by the rest of QuoteBench (but for the CLI's
``import-inspect``, lazily): ``inspect_ai`` stays optional.

May import: ``tasks``, ``transports``, ``qb_server`` (the shell tool's text);
of ``qb_client``: :mod:`qb_client.console`, :mod:`qb_client.replies`,
:mod:`qb_client.campaign` (replay).
"""
