"""`python -m jobstream_local`: the whole system on http://127.0.0.1:${JOBSTREAM_PORT:-3000}."""

from __future__ import annotations

import os
import signal
import sys
import threading
from types import FrameType

from jobstream.config.settings import ConfigurationError
from jobstream_local.settings import load_local_settings
from jobstream_local.stack import start

_STDIN = 0


def main() -> int:
    try:
        # The stack's own settings first: a bad port or interval stops it before anything starts.
        settings = load_local_settings(os.environ)
        stack = start(settings)
    except ConfigurationError as error:
        print(f"jobstream: {error}", file=sys.stderr)
        return 2
    stopping = threading.Event()

    def stop(_signum: int, _frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if settings.stop_with_stdin:
        threading.Thread(target=_stop_at_end_of_input, args=(stopping,), daemon=True).start()
    print(
        f"jobstream ready at {stack.base_url} - state is kept in memory only: "
        "stopping the stack loses every job and event",
        flush=True,
    )
    # The stack's own token (stack_token.py): valid for whatever registry it serves.
    token = stack.token.token
    print(
        f"  try: curl -H 'Authorization: Bearer {token or '<your token>'}' "
        f"{stack.base_url}/capabilities",
        flush=True,
    )
    if token is None:
        print(f"  no token for `jobstream --local`: {stack.token.missing_because}", flush=True)
    # Wake up regularly: a signal delivered to another thread only runs its Python handler
    # once the main thread executes bytecode again, and a bare wait() might never return.
    while not stopping.wait(0.2):
        pass
    print("jobstream stopping", flush=True)
    stack.stop()
    return 0


def _stop_at_end_of_input(stopping: threading.Event) -> None:
    # The pipe from whoever started us closes when it exits, killed or not. os.read, not
    # sys.stdin: a daemon thread blocked in the buffered reader holds its lock, and the
    # interpreter aborts at shutdown when it cannot take that lock.
    while os.read(_STDIN, 4096):
        pass
    stopping.set()


if __name__ == "__main__":
    sys.exit(main())
