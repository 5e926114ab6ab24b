"""The HTTP API as the CLI reaches it: the consumer SDK's `Client` (the CLI has no HTTP code of
its own) with a retry policy for someone waiting at a terminal, and the wait between polls.

Retries: a retryable answer (the envelope says so, or a gateway's 408/429/5xx) or a dropped
connection is tried 3 times in all, 0.25 s then 0.5 s apart (jittered), or as `Retry-After`
says up to 2 s: a local stack shedding load (503 + Retry-After) or a throttled deployment is
ridden out in about a second, while a dead target fails within one (a refused connection costs
< 1 s more than before). Each attempt waits at most 10 s for its answer (the API's functions
time out at 10 s), so a target that never answers ends the command in about 30 s, as the
single 30 s attempt of the CLI's former client did, instead of the SDK default's 4 attempts of 30 s.
"""

from __future__ import annotations

import time
from typing import Final

from jobstream_client import Client, RetryPolicy

RETRY: Final = RetryPolicy(attempts=3, base_delay_s=0.25, max_delay_s=2.0)
TIMEOUT_S: Final = 10.0
POLL_INTERVAL_S: Final = 1.0  # between two reads of a followed stream


def pause(seconds: float) -> None:
    """Every wait of the client: between polls and before retries (Ctrl-C lands here)."""
    time.sleep(seconds)


def connect(url: str, token: str) -> Client:
    """A client of the API at `url`; ValueError when `url` is not an http(s) URL."""
    return Client(url, token, timeout_s=TIMEOUT_S, retry=RETRY, sleep=pause)
