"""`python -m jobstream_cli …`: see `jobstream_cli.app` for the commands."""

import sys

from jobstream_cli.app import app, main

__all__ = ["app", "main"]

if __name__ == "__main__":
    sys.exit(main())
