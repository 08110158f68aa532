"""QuoteBench and Harbor (the Terminal-Bench 2 harness), both ways.

What this room owns
    * :mod:`.export`: the suite's tasks as a Harbor dataset (``quotebench export harbor DIR``), whose tests
      run our own validator (byte-identical copies of its modules, :mod:`.verify_entry` as the entry) on the
      container's final state;
    * :mod:`.atif`: ATIF trajectories of anyone's Harbor runs into a reply store of the commands each shell
      tool call carried (``quotebench import-atif``), for ``quotebench replay`` through every transport;
    * :mod:`.bridge` and :mod:`.worker`: Harbor's own code (its task loader, its ATIF pydantic models) run for
      us, in-process where ``harbor`` is importable, else in the ``harbor`` component's venv of a Python >=
      3.12 (Harbor 0.26.0 needs it; QuoteBench runs on 3.11). No copy of Harbor's formats lives here.

What it may import
    ``tasks``, ``transports`` (the ``harbor`` component, the results store) and :mod:`qb_client.console`.
    :mod:`.worker` and :mod:`.verify_entry` import nothing of ours at module level: one runs in Harbor's venv,
    the other inside the exported task's container. Nothing imports this room but :mod:`qb_client.cli`.
"""
