"""``python -m qb_client``: the same command line as ``quotebench``."""

from qb_client.cli import main

if __name__ == "__main__":
    main()
