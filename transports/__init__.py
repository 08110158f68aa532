"""How a command R reaches a shell: the sandbox, the transport protocol and its
implementations (one module each), the record, and the single execution path."""
