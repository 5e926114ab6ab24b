"""Reading a job's event stream: every page now, or polling until a terminal event."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Final

from jobstream_cli.client import ApiClient
from jobstream_cli.render import TERMINAL_EVENTS

POLL_INTERVAL_S: Final = 1.0

Waiting = Callable[[], AbstractContextManager[object]]


def pause(seconds: float) -> None:
    """The wait between two polls (Ctrl-C lands here)."""
    time.sleep(seconds)


def stream_events(
    client: ApiClient,
    job_id: str,
    on_event: Callable[[dict[str, Any], bool], None],
    *,
    follow: bool,
    waiting: Waiting = nullcontext,
    interval_s: float | None = None,
    sleep: Callable[[float], None] | None = None,
) -> bool:
    """Hand each event to `on_event(event, newest)` once, in order; True when a terminal event
    was seen. `newest` says the event was the newest of the stream when its page was read.

    Without `follow` it stops at the end of the stream; with it, it polls `?after=<last>` every
    interval (inside `waiting`, e.g. a spinner) until the job's terminal event arrives; `sleep`
    is the wait between polls (`pause` by default), which may raise to give up.
    """
    interval = POLL_INTERVAL_S if interval_s is None else interval_s
    after: str | None = None
    # The API replays from the start when `after` names no event it knows: dedupe by id.
    seen: set[str] = set()
    with waiting():
        while True:
            page = client.events(job_id, after)
            events: list[dict[str, Any]] = page.get("events") or []
            caught_up = not page.get("next_after")
            for position, event in enumerate(events, start=1):
                event_id = str(event.get("event_id"))
                if event_id in seen:
                    continue
                seen.add(event_id)
                on_event(event, caught_up and position == len(events))
                if event.get("type") in TERMINAL_EVENTS:
                    return True
            if events:
                after = str(events[-1].get("event_id"))
            if not caught_up:
                continue  # more is already there: no need to wait
            if not follow:
                return False
            (sleep or pause)(interval)
