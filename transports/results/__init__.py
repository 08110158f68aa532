"""Results: the record of one execution and the append-only JSONL store that keeps records and replies.

Owns ``Record`` (what was sent, what the final shell received, the verdict, the limits, the versions) and
the store (torn-line tolerant, link- and FIFO-safe reading of hostile files, a depth-limited JSON parser).
Both the server (``serve --record``) and the client (campaigns, replay, report) write and read through it,
so it sits below both. It may import ``tasks`` only: a record is data, never behaviour of a transport.
"""
