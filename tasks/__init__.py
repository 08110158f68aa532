"""The QuoteBench task suite: 14 operation families x 4 payload tiers, each with a
fixture, an instruction, an exact final-state validator and reference solutions.
This package is what is measured; it knows nothing of shells or transports.

May import: nothing of QuoteBench's other packages (``transports``, ``qb_server``, ``qb_client``
import it, never the other way)."""
